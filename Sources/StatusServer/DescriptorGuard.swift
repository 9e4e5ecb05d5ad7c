import Foundation
import Glibc
import HostControl
import NIOCore

/// The supervisor's descriptors come before HTTP clients': a connection accepted when fewer
/// than `DescriptorBudget.reserve` descriptors would be left free is closed at once. The
/// reserve is what the supervisor may still need: room to start a worker for every window
/// slot not yet open, and for control clients. So no number of HTTP clients, under any
/// descriptor limit (one lowered with `prlimit` while the host runs included), keeps a window
/// from starting or a worker from being started again.
struct DescriptorBudget: Sendable {
    let observation: HostObservation
    /// Windows that may be open at once (`run --capacity`).
    let capacity: Int

    /// Descriptors one window's worker costs the supervisor (its pidfd and its slot's memfd),
    /// with room for the transient ones of a spawn.
    static let perWindow = 4
    /// For control clients and everything else the loop opens now and then.
    static let forControl = 24

    var reserve: Int {
        let open = observation.status()?.windows.count ?? 0
        return max(0, capacity - open) * Self.perWindow + Self.forControl
    }

    /// Whether a descriptor more for HTTP leaves the reserve free.
    func allowsAnotherConnection() -> Bool {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return false }
        guard let inUse = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count else {
            return false
        }
        let soft = Int(clamping: limit.rlim_cur)
        return soft - inUse >= reserve
    }
}

/// First in every HTTP connection's pipeline: closes it when it would eat into the reserve.
final class DescriptorGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let budget: DescriptorBudget

    init(budget: DescriptorBudget) { self.budget = budget }

    func handlerAdded(context: ChannelHandlerContext) {
        if !budget.allowsAnotherConnection() { context.close(promise: nil) }
    }
}
