/// The root's files the supervisor keeps: `windows.order` through its `OrderFile`, and
/// `handed-out` through its `HandedOutBook`, written again with backoff when the disk refuses.
extension Supervisor {
    /// Writes the registry's order to `windows.order` (`OrderFile.save`).
    func saveOrder() { orderFile.save(registry.order) }

    /// Writes `window`'s entry of `handed-out` (`HandedOutBook.record`).
    func recordHandedOut(_ window: Window, covering needed: HandedOutCeiling = .zero) -> String? {
        handedOut.record(window.id, lost: window.seqs.lost, covering: needed)
    }
}
