import Foundation
import Testing

/// Every committed fuzz input (Fuzz/Corpus/<target>/ and the crash reproducers in
/// Fuzz/Crashes/<target>/) through the fuzzers' own one-input code, without libFuzzer, so that
/// `swift test` alone keeps checking them. `FuzzInputs/` is a symlink to
/// Fuzz/Sources/FuzzInputs: one copy of that code, compiled here and into the fuzzers.
@Suite struct CorpusReplayTests {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fuzz").standardizedFileURL

    static func inputs(_ target: FuzzTarget, in directory: String) -> [URL] {
        let folder = fuzz.appendingPathComponent(directory).appendingPathComponent(target.rawValue)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.sorted().map { folder.appendingPathComponent($0) }
    }

    @Test(arguments: FuzzTarget.allCases)
    func everyCorpusInputEndsInATypedErrorOrAValidState(target: FuzzTarget) throws {
        let corpus = Self.inputs(target, in: "Corpus")
        #expect(!corpus.isEmpty, "no corpus for \(target.rawValue) under \(Self.fuzz.path)")
        for input in corpus + Self.inputs(target, in: "Crashes") {
            // A crash here kills the test process: the last line names the input.
            print("replaying \(input.path)")
            #expect(throws: Never.self, "\(input.lastPathComponent)") {
                try target.run(Array(try Data(contentsOf: input)))
            }
        }
    }
}
