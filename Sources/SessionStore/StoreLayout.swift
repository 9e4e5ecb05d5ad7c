import SystemPackage

/// The files of one Browser's session directory. Generations count up from 1: snapshot N holds
/// the list as journal N-1 left it, and journal N the saves after it. The newest two
/// generations are kept, so a damaged newest snapshot falls back to the one before plus both
/// journals without losing a save.
///
///     snapshot-<N as 16 hex digits>       journal-<N>       snapshot-<N>.tmp (while compacting)
///     damaged/<name>-<unix seconds>       files set aside by recovery, never deleted
///     <name>.damaged-<unix seconds>       one that could not go into damaged/: renamed in place
enum StoreLayout {
    static let snapshotPrefix = "snapshot-"
    static let journalPrefix = "journal-"
    static let temporarySuffix = ".tmp"
    static let damagedDirectory = "damaged"
    /// Between a damaged file's name and the time when it could not be moved to `damaged/` and
    /// was renamed in place: no listing reads such a name as a generation, so none removes it.
    static let damagedInPlaceInfix = ".damaged-"
    /// Present while a session is being deleted (created durably first, removed last): a
    /// directory holding it is no session, whatever else a crash left in it.
    static let deletionMarker = "deleting"

    static func snapshotName(_ generation: UInt64) -> String { snapshotPrefix + hex(generation) }
    static func journalName(_ generation: UInt64) -> String { journalPrefix + hex(generation) }

    /// The generation a file name carries, for names this layout writes; nil for any other.
    static func generation(of name: String, prefix: String) -> UInt64? {
        guard name.hasPrefix(prefix), name.count == prefix.count + 16 else { return nil }
        return UInt64(name.dropFirst(prefix.count), radix: 16)
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}

/// What a store's directory holds, read from its listing.
struct StoreListing {
    var snapshots: [UInt64] = []
    var journals: Set<UInt64> = []
    /// Names this layout does not expect: left alone (a store deletes only what it wrote).
    var temporaries: [String] = []

    init(entries: [String]) {
        for name in entries {
            if let generation = StoreLayout.generation(of: name, prefix: StoreLayout.snapshotPrefix) {
                snapshots.append(generation)
            } else if let generation = StoreLayout.generation(of: name, prefix: StoreLayout.journalPrefix) {
                journals.insert(generation)
            } else if name.hasSuffix(StoreLayout.temporarySuffix),
                StoreLayout.generation(of: String(name.dropLast(StoreLayout.temporarySuffix.count)), prefix: StoreLayout.snapshotPrefix) != nil
            {
                temporaries.append(name)
            }
        }
        snapshots.sort(by: >)
    }
}
