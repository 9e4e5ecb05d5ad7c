import Foundation
import HostControl

/// Control requests routed: the supervisor's own answered here, a window's handed to its
/// controller (`WindowController+Requests`).
extension Supervisor {
    func takeRequestID() -> UInt64 {
        defer { nextRequest += 1 }
        return nextRequest
    }

    // MARK: control socket

    /// Replies through the control server: queued, sent as the client reads, then closed.
    func answer(_ id: ClientID, _ reply: ControlReply) {
        control.answer(id, reply)
    }

    func handle(_ request: ControlRequest, from client: ClientID) {
        configuration.observation?.counted(request.verb)
        switch request {
        case .status:
            answer(client, .ok(statusReply()))
        case .stats(let histogram):
            answer(client, .ok(statsReply(withHistogram: histogram)))
        case .connect:
            if shutdownDeadline != nil {
                answer(client, .failure(.temporary, "shutting down"))
            } else if connectScene(waiter: client) == nil {
                answer(client, .failure(.temporary, "all \(configuration.capacity) window slots are in use"))
            }
        case .shutdown:
            answer(client, .ok(ShutdownReply(stopping: true)))
            beginShutdown()
        case .window(let id, let asked):
            handle(asked, window: id, from: client)
        case .setAside:
            listSetAside(for: client)
        case .adopt(let entry, let asNewWindow):
            adopt(entry, asNewWindow: asNewWindow, for: client)
        case .discard(let entry):
            discard(entry, for: client)
        case .closeWindow(let id):
            closeWindow(id, for: client)
        case .moveToWindow(let from, let tab, let to, let index):
            moves.begin(from: from, tab: tab, to: to, index: index, for: client, in: self)
        }
    }

    /// A request to one open window, routed by its UUID to its controller.
    func handle(_ request: WindowRequest, window id: UUID, from client: ClientID) {
        guard let window = openWindow(id) else {
            answer(client, .failure(.badData, "no open window \(id)"))
            return
        }
        assert(windows[window.slot] === window, "a window is held in its own slot")
        window.handle(request, from: client, in: self)
    }
}
