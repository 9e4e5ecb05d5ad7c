import IOUring
import Platform
import SystemPackage

/// The power-cut engine with a deliberate bug: a durable write is submitted as a plain one, so
/// it completes at once while its bytes wait in memory for the file's next sync. A save is
/// acknowledged before it is durable, and a kill (a power cut) loses it: what the stress
/// oracle must catch. Everything else goes to the engine it wraps as it is.
final class AcknowledgingBeforeSyncEngine: IOEngine {
    private let engine: any IOEngine

    init(_ engine: any IOEngine) { self.engine = engine }

    var name: String { engine.name }

    func submit(_ chain: [IOOperation]) -> IOTicket {
        engine.submit(
            chain.map { operation in
                guard case .write(let file, let bytes, let offset, durable: true) = operation else { return operation }
                return .write(file, bytes, offset: offset, durable: false)
            })
    }

    func flush() throws(IOEngineError) { try engine.flush() }
    func flushAndWait() throws(IOEngineError) { try engine.flushAndWait() }
    func reap(waiting: Bool) throws(IOEngineError) -> [IOCompletion] { try engine.reap(waiting: waiting) }
    func returnToReap(_ completions: [IOCompletion]) { engine.returnToReap(completions) }
    var hasCompletionsToReap: Bool { engine.hasCompletionsToReap }
    var inFlight: Int { engine.inFlight }
    var completionDescriptor: Int32? { engine.completionDescriptor }
    var refusals: [String] { engine.refusals }

    func open(_ path: FilePath, _ mode: OpenMode) throws(IOEngineError) -> EngineFile { try engine.open(path, mode) }
    func openDirectory(_ path: FilePath) throws(IOEngineError) -> EngineFile { try engine.openDirectory(path) }
    func close(_ file: EngineFile) { engine.close(file) }
    func enableDirectWrites(_ file: EngineFile) -> Result<DirectIO.Alignment, DirectIO.Refusal> {
        engine.enableDirectWrites(file)
    }
    func size(of file: EngineFile) throws(IOEngineError) -> Int { try engine.size(of: file) }
    func read(_ file: EngineFile, offset: Int, count: Int) throws(IOEngineError) -> [UInt8] {
        try engine.read(file, offset: offset, count: count)
    }

    func kind(_ path: FilePath) throws(IOEngineError) -> EntryKind? { try engine.kind(path) }
    func makeDirectory(_ path: FilePath) throws(IOEngineError) { try engine.makeDirectory(path) }
    func rename(_ source: FilePath, to destination: FilePath) throws(IOEngineError) {
        try engine.rename(source, to: destination)
    }
    func removeFile(_ path: FilePath) throws(IOEngineError) { try engine.removeFile(path) }
    func removeDirectory(_ path: FilePath) throws(IOEngineError) { try engine.removeDirectory(path) }
    func listDirectory(_ path: FilePath) throws(IOEngineError) -> [(name: FilePath.Component, kind: EntryKind)]? {
        try engine.listDirectory(path)
    }
    func directoryEntries(_ path: FilePath) throws(IOEngineError) -> [String]? { try engine.directoryEntries(path) }
    func removeTree(_ path: FilePath) throws(IOEngineError) { try engine.removeTree(path) }
    func isAt(_ file: EngineFile, _ path: FilePath) throws(IOEngineError) -> Bool { try engine.isAt(file, path) }
}
