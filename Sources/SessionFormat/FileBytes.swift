import SystemPackage

/// A file read in place with pread: what restore uses, so a tab's history is read from disk
/// only when the tab is realized. The descriptor is owned, and closed with this object.
public final class FileBytes: ByteSource {
    private let fd: FileDescriptor
    public let size: Int
    public let path: FilePath

    public init(path: FilePath) throws(SessionFormatError) {
        self.path = path
        do {
            fd = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec])
        } catch {
            throw .readFailed(offset: 0, reason: "\(path): \(error)")
        }
        do {
            size = Int(try fd.seek(offset: 0, from: .end))
        } catch {
            try? fd.close()
            throw .readFailed(offset: 0, reason: "\(path): \(error)")
        }
    }

    deinit { try? fd.close() }

    public func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8] {
        try checkRange(offset: offset, count: count)
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let read: Int
            do {
                read = try bytes.withUnsafeMutableBytes { buffer in
                    try fd.read(
                        fromAbsoluteOffset: Int64(offset + done),
                        into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]))
                }
            } catch {
                throw .readFailed(offset: offset + done, reason: "\(error)")
            }
            // The file shrank under us: what is missing is missing.
            guard read > 0 else { throw .truncated(offset: offset + done, needed: count - done, available: 0) }
            assert(read <= count - done, "a read fills at most what is left")
            done += read
        }
        assert(done == count, "exactly the bytes asked for")
        return bytes
    }
}
