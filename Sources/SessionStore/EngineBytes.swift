import IOUring
import SessionFormat
import SystemPackage

/// A stored file read through the engine that wrote it, so the fault engine's simulated disk
/// is read the same way a real one is. Keeps the file open while anything reads it: a snapshot
/// that compaction removed stays readable for the unrealized tabs restored from it.
final class EngineBytes: ByteSource {
    private let engine: any IOEngine
    private let file: EngineFile
    let path: FilePath
    let size: Int

    init(_ engine: any IOEngine, path: FilePath) throws(IOEngineError) {
        self.engine = engine
        self.path = path
        file = try engine.open(path, .read)
        do {
            size = try engine.size(of: file)
        } catch {
            engine.close(file)
            throw error
        }
    }

    deinit { engine.close(file) }

    func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8] {
        try checkRange(offset: offset, count: count)
        do {
            return try engine.read(file, offset: offset, count: count)
        } catch {
            throw .readFailed(offset: offset, reason: "\(error)")
        }
    }
}
