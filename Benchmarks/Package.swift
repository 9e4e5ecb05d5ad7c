// swift-tools-version: 6.1
import PackageDescription

import struct Foundation.URL

// SwiftPM names a path dependency after its directory, which is whatever the clone is called.
let windowhost = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent.lowercased()

// Benchmarks live in a package of their own so that building and testing windowhost never
// builds package-benchmark. Run: swift package --package-path Benchmarks benchmark
let package = Package(
    name: "windowhost-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        .executableTarget(
            name: "SessionFormatBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "BrowserModel", package: windowhost),
                .product(name: "SessionFormat", package: windowhost),
            ],
            path: "Benchmarks/SessionFormatBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "StoreBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Bench", package: windowhost),
                .product(name: "BrowserModel", package: windowhost),
                .product(name: "SessionFormat", package: windowhost),
                .product(name: "SessionStore", package: windowhost),
                .product(name: "IOUring", package: windowhost),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "Benchmarks/StoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
