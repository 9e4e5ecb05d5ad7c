import BrowserModel
import Glibc
import IOUring
import Platform
import SystemPackage
import TestSupport
import Testing

/// `NoFollow.isAt`, the check every durable write passes before it is acknowledged: the open
/// file is the entry its path names, reached without following a symlink. Both ways of
/// resolving the path (the kernel's `openat2`, and the walk where there is none) answer alike.
@Suite struct IsAtTests {
    @Test func openat2WorksOnThisKernel() {
        #expect(
            NoFollow.kernelResolvesWithoutSymlinks, "Linux 5.6 and later resolve a path without symlinks in one call")
    }

    @Test(arguments: [true, false])
    func aFileIsAtItsPathUntilItOrADirectoryAboveItMoves(inKernel: Bool) throws {
        try withTemporaryDirectory { base in
            let session = base.appending("window").appending(BrowserKind.regular.rawValue)
            #expect(mkdir(base.appending("window").string, 0o700) == 0 && mkdir(session.string, 0o700) == 0)
            let path = session.appending("journal-1")
            let file = try FileDescriptor.open(
                path, .readWrite, options: [.create, .exclusiveCreate], permissions: [.ownerReadWrite])
            defer { try? file.close() }
            let isAt = { (path: FilePath) throws(Errno) -> Bool in try NoFollow.isAt(file, path, inKernel: inKernel) }

            #expect(try isAt(path))
            #expect(try !isAt(session.appending("journal-2")), "nothing has that name")

            // A symlink on the way to the very same file.
            #expect(symlink(base.appending("window").string, base.appending("link").string) == 0)
            #expect(try !isAt(base.appending("link").appending(BrowserKind.regular.rawValue).appending("journal-1")))

            // The window directory moved out and a symlink to it in its place (the swap a
            // hostile user makes): the path still reaches the file, through a symlink.
            #expect(rename(base.appending("window").string, base.appending("moved").string) == 0)
            #expect(symlink(base.appending("moved").string, base.appending("window").string) == 0)
            #expect(try !isAt(path))
            #expect(
                unlink(base.appending("window").string) == 0
                    && rename(base.appending("moved").string, base.appending("window").string) == 0)
            #expect(try isAt(path), "back in place")

            // The file itself moved, and a symlink to it, then another file, under its name.
            #expect(rename(path.string, session.appending("aside").string) == 0)
            #expect(symlink(session.appending("aside").string, path.string) == 0)
            #expect(try !isAt(path))
            #expect(unlink(path.string) == 0)
            let other = try FileDescriptor.open(
                path, .readWrite, options: [.create, .exclusiveCreate], permissions: [.ownerReadWrite])
            try other.close()
            #expect(try !isAt(path))
        }
    }
}
