import Foundation
import Logging

/// `windows.order` as the supervisor writes it. A failed write (a full disk) is tried again by
/// the loop with backoff (`retry`) until one lands, with no order change needed; the episode is
/// logged once, at its start and its end.
final class OrderFile {
    private let files: SupervisorFiles
    private let logger: Logger
    /// When a failed write is tried again, and how many attempts failed in a row: nil while the
    /// file on disk is the last order written.
    private(set) var retry: WriteRetry?

    init(files: SupervisorFiles, logger: Logger) {
        self.files = files
        self.logger = logger
    }

    func save(_ order: [UUID]) {
        assert(Set(order).count == order.count, "a window is named once in the order")
        do {
            try files.saveOrder(order)
            if let retry {
                logger.notice("windows.order written again", metadata: ["failed_attempts": "\(retry.failures)"])
                self.retry = nil
            }
        } catch {
            if retry == nil {
                logger.error("cannot write windows.order; retried with backoff until it lands: \(error)")
            }
            retry = WriteRetry(after: retry)
        }
    }
}
