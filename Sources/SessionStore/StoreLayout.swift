import BrowserModel

/// The files of one Browser's session directory, by the name SessionStore has always used for
/// them: `DiskLayout` owns them with the rest of the on-disk layout.
typealias StoreLayout = DiskLayout

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
                StoreLayout.generation(
                    of: String(name.dropLast(StoreLayout.temporarySuffix.count)), prefix: StoreLayout.snapshotPrefix)
                    != nil
            {
                temporaries.append(name)
            }
        }
        snapshots.sort(by: >)
    }
}
