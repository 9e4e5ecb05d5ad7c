import BrowserModel
import Foundation
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// `windows.order` that is there and does not read (EIO, EMFILE) is an error, never "no
/// order": the supervisor would write its windows back in name order and lose the saved one.
/// Before, `savedOrder` returned [] for every failure.
@Suite struct OrderReadFailureTests {
    @Test(arguments: [Errno.ioError, .tooManyOpenFiles])
    func anOrderFileThatDoesNotReadIsThrown(errno: Errno) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let path = simulatedRoot.appending(DiskLayout.order)
        let saved = [UUID(), UUID()]
        let file = try engine.open(path, .create)
        try engine.perform([
            .write(file, Array(saved.map { $0.uuidString + "\n" }.joined().utf8), offset: 0, durable: true)
        ])
        engine.close(file)
        #expect(try RootLayout.savedOrder(root: simulatedRoot, engine: engine) == saved)

        engine.failingOpens[path.string] = errno
        #expect(throws: IOEngineError("open", path: path.string, errno: errno)) {
            try RootLayout.savedOrder(root: simulatedRoot, engine: engine)
        }
        #expect(throws: StoreError.io(IOEngineError("open", path: path.string, errno: errno))) {
            try SessionInspector.inspect(root: simulatedRoot, engine: engine)
        }
    }

    @Test func aMissingOrderFileIsNoOrder() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        #expect(try RootLayout.savedOrder(root: simulatedRoot, engine: engine) == [])
    }
}
