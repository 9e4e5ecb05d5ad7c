// swift-tools-version: 6.1
import PackageDescription

// Every dependency is one the machine carries, chosen for one job: argument parsing for the
// CLI, errors and paths as typed values (swift-system), session records and the messages of the
// shared-memory rings (swift-protobuf), save latency histograms (hdrhistogram-swift), atomics
// over shared memory (swift-atomics), logs (swift-log). Workers are spawned with posix_spawn
// through the C shim, not swift-subprocess: see docs/architecture.md. `run --http` serves
// what the supervisor publishes over HTTP (Hummingbird) in Prometheus's format (swift-metrics'
// API, swift-prometheus's registry): see docs/observability.md. Incognito records are sealed
// with AES-256-GCM (swift-crypto) under keys kept in the kernel keyring (`SessionKeys`, through
// the C shim): see docs/security.md.
let package = Package(
    name: "windowhost",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "windowhost", targets: ["windowhost"]),
        .library(name: "HostLimits", targets: ["HostLimits"]),
        .library(name: "BrowserModel", targets: ["BrowserModel"]),
        .library(name: "SessionFormat", targets: ["SessionFormat"]),
        .library(name: "Platform", targets: ["Platform"]),
        .library(name: "IOUring", targets: ["IOUring"]),
        .library(name: "SessionStore", targets: ["SessionStore"]),
        .library(name: "HostCoordination", targets: ["HostCoordination"]),
        .library(name: "SceneWorker", targets: ["SceneWorker"]),
        .library(name: "HostControl", targets: ["HostControl"]),
        .library(name: "Supervisor", targets: ["Supervisor"]),
        .library(name: "Stress", targets: ["Stress"]),
        .library(name: "Bench", targets: ["Bench"]),
        .library(name: "StatusServer", targets: ["StatusServer"]),
        .library(name: "SessionKeys", targets: ["SessionKeys"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // C for what Swift cannot import: liburing's macros and inline helpers, variadic syscall/prctl.
        .target(
            name: "CLinuxShims",
            linkerSettings: [.linkedLibrary("uring")]
        ),
        // What every process of the host asks of Linux the same way: the one monotonic clock,
        // `NoFollow` (paths walked without following a symlink), `spawnProcess` (posix_spawn with
        // descriptors placed) and the one retry-on-interrupt loop.
        .target(
            name: "Platform",
            dependencies: ["CLinuxShims", .product(name: "SystemPackage", package: "swift-system")]
        ),
        .target(
            name: "IOUring",
            dependencies: [
                "CLinuxShims",
                "HostLimits",
                "Platform",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The bounds on every number read from disk, shared memory or a client: one definition.
        .target(name: "HostLimits"),
        .target(
            name: "BrowserModel",
            dependencies: ["HostLimits", .product(name: "SystemPackage", package: "swift-system")]
        ),
        .target(
            name: "SessionFormat",
            dependencies: [
                "BrowserModel", "HostLimits", "CLinuxShims",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            exclude: ["Schema"]
        ),
        .target(
            name: "SessionStore",
            dependencies: [
                "BrowserModel", "HostLimits",
                "SessionFormat", "SessionKeys",
                "IOUring", "Platform",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "HostCoordination",
            dependencies: [
                "CLinuxShims", "HostLimits",
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            exclude: ["Schema"]
        ),
        .target(
            name: "SceneWorker",
            dependencies: [
                "BrowserModel", "SessionStore", "IOUring", "HostCoordination", "HostLimits", "CLinuxShims", "Platform",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // What the supervisor and its clients (ctl, stress, bench, the status server) share: the
        // control protocol, its client and replies, and what the supervisor publishes for
        // observers (`HostObservation`).
        .target(
            name: "HostControl",
            dependencies: [
                "BrowserModel", "HostCoordination", "HostLimits", "IOUring", "Platform", "SessionStore",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "Supervisor",
            dependencies: [
                "BrowserModel", "HostControl", "HostCoordination", "HostLimits", "CLinuxShims", "IOUring", "Platform",
                "SessionFormat", "SessionStore",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "Stress",
            dependencies: [
                "BrowserModel", "CLinuxShims", "HostControl", "HostCoordination", "HostLimits", "IOUring",
                "Platform",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "Bench",
            dependencies: [
                "BrowserModel", "SessionFormat", "SessionStore", "IOUring", "HostControl", "HostCoordination",
                "HostLimits", "Platform", "Stress",
                "CLinuxShims",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // `run --http`: /metrics, /api/status and the live dashboard, on their own event loop,
        // reading only shared memory and what the supervisor's loop publishes.
        .target(
            name: "StatusServer",
            dependencies: [
                "HostControl", "HostCoordination", "HostLimits",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Incognito windows' keys in the kernel's user keyring (add_key/keyctl through the shim):
        // see docs/keyring.md.
        .target(
            name: "SessionKeys",
            dependencies: ["CLinuxShims", "HostLimits", .product(name: "SystemPackage", package: "swift-system")]
        ),
        // The command line as a library: the shipped `windowhost` runs it as it is; the test build
        // (`windowhost-faults`) runs it with faults installed and `save-loop` added.
        .target(
            name: "WindowhostCLI",
            dependencies: [
                "BrowserModel",
                "CLinuxShims",
                "HostControl",
                "HostLimits",
                "Platform",
                "SessionFormat",
                "SessionKeys",
                "IOUring",
                "SessionStore",
                "HostCoordination",
                "SceneWorker",
                "Supervisor",
                "Stress",
                "Bench",
                "StatusServer",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .executableTarget(name: "windowhost", dependencies: ["WindowhostCLI"]),
        // The command line with the fault switches tests set (saves acknowledged before the sync,
        // a worker that aborts while restoring) and `save-loop`, which crash tests kill. Built for
        // the tests from Tests/; no product ships it.
        .executableTarget(
            name: "windowhost-faults",
            dependencies: [
                "WindowhostCLI", "BrowserModel", "IOUring", "Platform", "SessionStore", "Stress",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "Tests/WindowhostFaults"
        ),
        // What test targets share: the simulated disk (FaultEngine) and fixtures more than one
        // target builds. Only test targets depend on it; no product ships it.
        .target(
            name: "TestSupport",
            dependencies: [
                "BrowserModel", "IOUring", "Platform", "SessionStore", "SessionKeys",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "Tests/TestSupport"
        ),
        // What only tests ask of the kernel (seccomp filters refusing io_uring or the keyring as a
        // sandbox would, a plain memfd, pidfd_getfd): kept out of the shipped shim.
        .target(name: "CTestShims", path: "Tests/CTestShims"),
        .testTarget(name: "CLinuxShimsTests", dependencies: ["CLinuxShims"]),
        .testTarget(name: "HostLimitsTests", dependencies: ["HostLimits"]),
        .testTarget(
            name: "SessionKeysTests",
            dependencies: [
                "SessionKeys", "CLinuxShims", "CTestShims", "HostLimits", "TestSupport",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // Runs the built command as a user would; depends on it so it is built first.
        .testTarget(
            name: "windowhostTests",
            dependencies: [
                "windowhost", "windowhost-faults", "WindowhostCLI", "Bench", "HostControl", "SessionStore",
                "SessionFormat", "SessionKeys", "BrowserModel", "IOUring", "Supervisor", "HostCoordination",
                "HostLimits", "Platform", "Stress", "TestSupport", "CLinuxShims", "CTestShims",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            // The script that drives headless Chromium, and the preload that kills a file
            // system under a host (compiled by the test that uses it), run from their paths.
            exclude: ["Browser", "DeadFileSystem"]
        ),
        .testTarget(
            name: "IOUringTests",
            dependencies: [
                "IOUring", "BrowserModel", "CLinuxShims", "CTestShims", "Platform", "TestSupport",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .testTarget(name: "BrowserModelTests", dependencies: ["BrowserModel", "Stress", "HostLimits"]),
        .testTarget(
            name: "StatusServerTests",
            dependencies: ["StatusServer", "HostControl", "Supervisor", "HostCoordination", "TestSupport"]
        ),
        .testTarget(
            name: "StressTests",
            dependencies: [
                "Stress", "BrowserModel", "HostControl", "HostCoordination", "HostLimits", "Supervisor", "TestSupport",
            ]),
        .testTarget(
            name: "BenchTests",
            dependencies: [
                "Bench", "BrowserModel", "IOUring", "SessionFormat", "SessionStore", "HostLimits", "Platform",
                "TestSupport",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            // fio's JSON output captured on this machine, read from its path (#filePath).
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "HostCoordinationTests",
            dependencies: [
                "HostCoordination", "CLinuxShims", "CTestShims", .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .testTarget(
            name: "SceneWorkerTests",
            dependencies: ["SceneWorker", "HostCoordination", "SessionStore", "BrowserModel", "IOUring", "TestSupport"]
        ),
        .testTarget(
            name: "SupervisorTests",
            dependencies: [
                "Supervisor", "BrowserModel", "HostControl", "HostCoordination", "HostLimits", "IOUring", "Platform",
                "SessionStore", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .testTarget(
            name: "SessionFormatTests",
            dependencies: [
                "SessionFormat", "BrowserModel", "HostLimits",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // The fuzzers' committed inputs, replayed without libFuzzer through the fuzzers' own code
        // (FuzzInputs/ is a symlink to Fuzz/Sources/FuzzInputs; Fuzz/ builds the fuzzers).
        .testTarget(
            name: "FuzzCorpusTests",
            dependencies: [
                "HostLimits", "SessionFormat", "BrowserModel", "HostControl", "Supervisor",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .testTarget(
            name: "SessionStoreTests",
            dependencies: [
                "SessionStore", "SessionFormat", "SessionKeys", "BrowserModel", "IOUring", "HostLimits", "CLinuxShims",
                "CTestShims", "Platform", "TestSupport",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            // Session files read from their path (#filePath), not bundled.
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
