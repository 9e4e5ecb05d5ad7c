import Foundation
import SystemPackage

/// A private (0700, from `mkdtemp`) directory under /tmp, removed with all it holds after `body`.
public func withTemporaryDirectory(_ body: (FilePath) throws -> Void) throws {
    var template = Array("/tmp/windowhost-test-XXXXXX".utf8CString)
    guard mkdtemp(&template) != nil else { throw Errno(rawValue: errno) }
    let path = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
    defer { try? FileManager.default.removeItem(atPath: path.string) }
    try body(path)
}
