/// `handed-out` as the open windows' controllers fill it: each window's ceilings and lost
/// seqs, written again after a failure, and lowered at a stop.
extension HandedOutBook {
    /// Every window's entry written again, in slot order, its ceilings over everything shown;
    /// stops at the first that fails again (its backoff is set).
    func writeAgain(_ windows: [WindowController]) {
        for window in windows.sorted(by: { $0.slot < $1.slot }) {
            let failuresBefore = retry?.failures ?? 0
            _ = record(window.id, lost: window.seqs.lost, covering: window.shownCeiling)
            if let retry, retry.failures > failuresBefore { return }
        }
        retried()
    }

    /// At a stop: each open window's ceiling lowered to what was shown (`lowerToShown`).
    func lowerToShown(of windows: [WindowController]) {
        lowerToShown(
            Dictionary(
                uniqueKeysWithValues: windows.map {
                    ($0.id, HandedOutWindow(ceiling: $0.shownCeiling, lost: $0.seqs.lost))
                }
            ))
    }
}
