import BrowserModel

/// What a store's directory holds, read from its listing.
struct StoreListing {
    var snapshots: [UInt64] = []
    var journals: Set<UInt64> = []
    /// Names this layout does not expect: left alone (a store deletes only what it wrote).
    var temporaries: [String] = []

    init(entries: [String]) {
        for name in entries {
            if let generation = DiskLayout.generation(of: name, prefix: DiskLayout.snapshotPrefix) {
                snapshots.append(generation)
            } else if let generation = DiskLayout.generation(of: name, prefix: DiskLayout.journalPrefix) {
                journals.insert(generation)
            } else if name.hasSuffix(DiskLayout.temporarySuffix),
                DiskLayout.generation(
                    of: String(name.dropLast(DiskLayout.temporarySuffix.count)), prefix: DiskLayout.snapshotPrefix)
                    != nil
            {
                temporaries.append(name)
            }
        }
        snapshots.sort(by: >)
    }
}
