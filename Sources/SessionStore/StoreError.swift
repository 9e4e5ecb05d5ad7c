import BrowserModel
import IOUring
import SessionFormat
import SystemPackage

/// Why a store could not do what was asked. Damaged files are not errors: recovery sets them
/// aside and reports them (`RecoveryReport`); these are failures of the storage itself.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The storage refused an operation (`ENOSPC`, `EIO`, …). Nothing acknowledged is lost: the
    /// Browser's records stay staged and it is tried again by itself after a backoff
    /// (`SavePolicy.retryDelayMilliseconds`), or at once on an explicit request.
    case io(IOEngineError)
    /// A new snapshot needs an unrealized tab's history, and the file it is stored in no longer
    /// reads. The save is not made; the journal keeps growing instead.
    case unreadableHistory(String, SessionFormatError)
    /// A new snapshot did not read back whole after its compaction: kept on disk with every
    /// older generation, and the next save writes another.
    case readBackFailed(String, SessionFormatError)
    /// A record could not be sealed for an incognito file (the cipher refused): nothing of the
    /// save is written.
    case sealing(String, SessionFormatError)
    /// The incognito key could not be had (`IncognitoKeyError.failed`): the save is not made.
    case keyring(IncognitoKeyError)

    public var description: String {
        switch self {
        case .io(let error): "storage error: \(error)"
        case .unreadableHistory(let directory, let error):
            "cannot compact \(directory): a stored history does not read: \(error)"
        case .readBackFailed(let path, let error): "new snapshot \(path) does not read back: \(error)"
        case .sealing(let directory, let error): "cannot seal a record for \(directory): \(error)"
        case .keyring(let error): "no incognito key: \(error)"
        }
    }

    /// The errno behind an I/O failure.
    public var errno: Errno? {
        if case .io(let error) = self { return error.errno }
        return nil
    }
}

/// A file recovery did not use, and why.
public struct DamagedFile: Sendable, Equatable, CustomStringConvertible {
    public let path: String
    /// Where it was moved (under the store's `damaged/`, else renamed in place when
    /// `setAsideFailure` says why not), or nil when it stayed where it was.
    public let setAsideAt: String?
    public let error: SessionFormatError
    /// Why it could not be moved to `damaged/` when recovery tried: it was then renamed in
    /// place (`setAsideAt` beside `path`) or, failing that too, stays under its name (nil).
    /// Either way the store never removes it.
    public var setAsideFailure: String? = nil

    public var description: String {
        let outcome =
            switch (setAsideAt, setAsideFailure) {
            case (let moved?, nil): " (set aside as \(moved))"
            case (let renamed?, let failure?):
                " (cannot move it to damaged/: \(failure); renamed in place to \(renamed), never deleted)"
            case (nil, let failure?): " (cannot set it aside: \(failure); left in place, never deleted)"
            case (nil, nil): ""
            }
        return "\(path): \(error)" + outcome
    }
}

/// What recovering one Browser's session found and did.
public struct RecoveryReport: Sendable, Equatable {
    public let kind: String
    /// The snapshot generation restored from, 0 when none.
    public let generation: UInt64
    /// Snapshots and journals that failed their checks and were set aside, newest first.
    public let damaged: [DamagedFile]
    /// A journal's torn last write, cut at this offset (the end of its last commit).
    public let tornTailAt: Int?
    /// Journal records applied on top of the snapshot.
    public let replayedRecords: Int
    /// The newest seq of the last saves left out because the other Browser did not have them (a torn group, or saves made while it lagged).
    public let droppedIncompleteSave: UInt64?
    /// The last command sequence number the restored state covers.
    public let seq: UInt64
    /// Tabs whose history read in no generation: each kept as the page its metadata names, a
    /// one-entry history, with every journal record replayed (two damaged generations in a row).
    public let degradedTabs: [WebStateID]
    /// Rewriting the directory after damage failed: the state in memory is whole, the next save
    /// tries again.
    public internal(set) var repairError: StoreError?

    /// True when something newer than what was restored failed its checks.
    public var fellBack: Bool { !damaged.isEmpty }
}
