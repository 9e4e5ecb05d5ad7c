// swift-tools-version: 6.1
import PackageDescription

// The coverage-guided fuzzers: libFuzzer through the toolchain (`-sanitize=fuzzer`), one
// executable per kind of untrusted input, each a thin main and `LLVMFuzzerTestOneInput` around
// `FuzzInputs`, which the root package's FuzzCorpusTests also compile (through a symlink) to
// replay the committed corpus without libFuzzer. Built and run by scripts/fuzz.sh; a separate
// package so the root package's build never sees the sanitizer flags.
let targets = ["frame", "snapshot", "journal", "windows-order", "handed-out", "control-request", "control-reply"]

let package = Package(
    name: "windowhost-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "windowhost", path: ".."),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        .target(
            name: "FuzzInputs",
            dependencies: [
                .product(name: "HostLimits", package: "windowhost"),
                .product(name: "SessionFormat", package: "windowhost"),
                .product(name: "BrowserModel", package: "windowhost"),
                .product(name: "HostControl", package: "windowhost"),
                .product(name: "Supervisor", package: "windowhost"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(name: "CFuzzDriver"),
    ]
        + targets.map { name in
            .executableTarget(
                name: "fuzz-\(name)", dependencies: ["FuzzInputs", "CFuzzDriver"], path: "Sources/Targets/\(name)")
        },
    swiftLanguageModes: [.v6]
)
