/// The root's files the supervisor keeps: `windows.order` through its `OrderFile`, and
/// `handed-out` through its `HandedOutBook`, written again with backoff when the disk refuses.
extension Supervisor {
    /// Writes the registry's order to `windows.order` (`OrderFile.save`).
    func saveOrder() { orderFile.save(registry.order) }

    /// Writes `window`'s entry of `handed-out` (`HandedOutBook.record`).
    func recordHandedOut(_ window: Window, covering needed: HandedOutCeiling = .zero) -> String? {
        handedOut.record(window.id, lost: window.seqs.lost, covering: needed)
    }

    /// Every window's entry written again, its ceilings over everything shown.
    func retryHandedOut() {
        for window in windows.values.sorted(by: { $0.slot < $1.slot }) {
            let failuresBefore = handedOut.retry?.failures ?? 0
            _ = recordHandedOut(window, covering: window.shownCeiling)
            // Failed again: the backoff is set.
            if let retry = handedOut.retry, retry.failures > failuresBefore { return }
        }
        handedOut.retried()
    }

    /// At a stop: each open window's ceiling lowered to what was shown (`HandedOutBook.lowerToShown`).
    func lowerHandedOutToShown() {
        handedOut.lowerToShown(
            Dictionary(
                uniqueKeysWithValues: windows.values.map {
                    ($0.id, HandedOutWindow(ceiling: $0.shownCeiling, lost: $0.seqs.lost))
                }))
    }
}
