import Foundation
import HostControl
import HostCoordination

extension SharedRegion {
    /// The slot of a window the published status names, if it still holds that window: the
    /// status is up to `Supervisor.publishNanoseconds` old, and a slot freed since may hold
    /// another window, whose counters are not this one's.
    func slot(holding window: WindowStatus) -> WindowSlot? {
        guard window.slot >= 0, window.slot < slotCount else { return nil }
        let slot = slot(window.slot)
        return slot.windowID.uuidString == window.uuid ? slot : nil
    }
}
