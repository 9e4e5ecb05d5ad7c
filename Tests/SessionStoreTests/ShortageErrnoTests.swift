import BrowserModel
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// EAGAIN is a shortage (what `fork`/`clone`, `io_uring_setup`, `memfd_create` and some
/// allocations return when short; an open `O_NONBLOCK` meets it at a lease): it comes back by
/// itself and says nothing of the file. Before, only EMFILE, ENFILE and ENOMEM were, so a restore
/// that met EAGAIN opening a snapshot set an acknowledged snapshot aside as damage.
@Suite struct ShortageErrnoTests {
    @Test func shortagesAreTheKernelsWantOfDescriptorsMemoryOrProcessesOnly() {
        for errno in [Errno.tooManyOpenFiles, .tooManyOpenFilesInSystem, .noMemory, .resourceTemporarilyUnavailable] {
            #expect(errno.isResourceShortage, "\(errno)")
            #expect(IOEngineError("open", path: "/x", errno: errno).isResourceShortage, "\(errno)")
            #expect(IOUringError(setupErrno: errno).isResourceShortage, "\(errno)")
        }
        #expect(Errno.wouldBlock == .resourceTemporarilyUnavailable, "one errno on Linux")
        for errno in [
            Errno.ioError, .permissionDenied, .noSuchFileOrDirectory, .noSpace, .notPermitted, .isDirectory,
            .tooManySymbolicLinkLevels, .resourceBusy,
        ] {
            #expect(!errno.isResourceShortage, "\(errno)")
            #expect(!IOEngineError("open", path: "/x", errno: errno).isResourceShortage, "\(errno)")
        }
        #expect(!IOUringError.unavailable(.notPermitted).isResourceShortage, "io_uring refused is no shortage")
        #expect(
            !IOUringError.submitFailed(.resourceTemporarilyUnavailable).isResourceShortage,
            "only setup: a full ring is retried where it is")
    }

    /// Storage that does not answer is the file system's failure as a whole, never the
    /// session's: a restore that meets one is retried, and the window never set aside for it.
    /// What a path's own entry answers (a missing file, a symlink, a directory) is not.
    @Test func storageUnavailableIsTheFileSystemsFailureNotAnEntrys() {
        let unavailable: [Errno] = [
            .ioError, .socketNotConnected, .staleNFSFileHandle, .noSpace, .diskQuotaExceeded, .readOnlyFileSystem,
            .timedOut,
        ]
        for errno in unavailable + [Errno(rawValue: 117), Errno(rawValue: 121), Errno(rawValue: 123)] {
            #expect(errno.isStorageUnavailable && !errno.isResourceShortage, "\(errno)")
            #expect(IOEngineError("read", path: "/x", errno: errno).isStorageUnavailable, "\(errno)")
        }
        let entries: [Errno] = [
            .permissionDenied, .noSuchFileOrDirectory, .isDirectory, .notDirectory, .tooManySymbolicLinkLevels,
            .fileTooLarge, .invalidArgument,
            .noSuchAddressOrDevice, .operationNotSupportedByDevice,
        ]
        for errno in entries + [.tooManyOpenFiles, .noMemory] {
            #expect(!errno.isStorageUnavailable, "\(errno)")
        }
    }

    /// The restore meets EAGAIN opening the window's only snapshot: it throws, touching no file,
    /// instead of setting the snapshot aside; once the call succeeds, every save comes back.
    @Test func aRestoreThatMeetsEAGAINThrowsAndSetsNothingAside() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(engine, options: StoreOptions(compactAfterRecords: 2))
        for seq in 1...3 as ClosedRange<UInt64> {
            try store.apply(seq: seq) {
                let tab = WebState(id: store.regular.profile.makeWebStateID(), creationTime: .zero)
                try tab.commitNavigation(to: NavigationItem(url: "https://tab\(seq).example/", timestamp: .zero))
                try store.regular.webStateList.insert(tab)
            }
            try store.waitUntilDurable(seq)
        }
        try store.settle()
        let directory = simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
            BrowserKind.regular.rawValue)
        let snapshots = try #require(try engine.directoryEntries(directory)).filter {
            $0.hasPrefix(DiskLayout.snapshotPrefix)
        }.sorted()
        let newest = try #require(snapshots.last)
        func files() throws -> [String: [UInt8]] {
            var files: [String: [UInt8]] = [:]
            for name in try engine.directoryEntries(directory) ?? [] {
                files[name] = engine.contents(of: directory.appending(name))
            }
            return files
        }
        let before = try files()

        engine.failingOpens[directory.appending(newest).string] = .resourceTemporarilyUnavailable
        #expect(
            throws: StoreError.io(
                IOEngineError("open", path: directory.appending(newest).string, errno: .resourceTemporarilyUnavailable))
        ) {
            try simulatedWindow(engine)
        }
        #expect(try files() == before, "nothing set aside, nothing rewritten")

        engine.failingOpens = [:]
        let (restored, recovery) = try simulatedWindow(engine)
        #expect(recovery.seq == 3 && recovery.regular.damaged.isEmpty, "\(recovery)")
        #expect(restored.regular.webStateList.webStates.map(\.url) == (1...3).map { "https://tab\($0).example/" })
    }
}
