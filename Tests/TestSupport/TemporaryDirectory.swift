import Foundation
import SessionKeys
import SystemPackage

/// A private (0700, from `mkdtemp`) directory under /tmp, removed with all it holds after `body`,
/// and with the keys of every root in it (`removeTestRoot`), so a test leaves none behind.
public func withTemporaryDirectory(_ body: (FilePath) throws -> Void) throws {
    var template = Array("/tmp/windowhost-test-XXXXXX".utf8CString)
    guard mkdtemp(&template) != nil else { throw Errno(rawValue: errno) }
    let path = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
    defer { removeTestRoot(path.string) }
    try body(path)
}

/// Deletes `path` and everything under it, first revoking the keys of the roots it may be or
/// hold: itself and the directories two levels down (a root's keys are named by its device and
/// inode, so they would outlive its files in the user keyring). Symlinks are not followed.
public func removeTestRoot(_ path: String) {
    var directories = [path]
    if let walker = FileManager.default.enumerator(atPath: path) {
        for case let name as String in walker
        where walker.fileAttributes?[.type] as? FileAttributeType == .typeDirectory {
            directories.append(path + "/" + name)
            if walker.level >= 2 { walker.skipDescendants() }
        }
    }
    for directory in directories { _ = try? KernelKeyring().revokeEveryKey(ofRootAt: directory) }
    try? FileManager.default.removeItem(atPath: path)
}
