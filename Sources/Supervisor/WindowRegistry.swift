import Foundation

/// Which window UUID a new scene gets, after Firefox for iOS's `WindowManager`:
/// - a new scene *reserves* a UUID: the first window on disk that is neither open nor reserved,
///   in the saved order, else a new UUID; a reserved or open UUID is never handed out again;
/// - a reservation whose scene goes away before it is configured is released;
/// - a closed window moves just after the open ones, so the most recently closed reopens first;
/// - the sentinel UUIDs are never given to a window.
/// Pure state: the supervisor persists `order` (`windows.order`) after every change.
public struct WindowRegistry: Sendable {
    /// Events that belong to no window carry this one (Firefox's `.unavailable`).
    public static let unavailable = UUID(uuidString: "E1E1E1E1-E1E1-E1E1-E1E1-CD68A019860B")!
    public static let unitTestDefault = UUID(uuidString: "D9D9D9D9-D9D9-D9D9-D9D9-CD68A019860B")!
    public static let uiTestDefault = UUID(uuidString: "44BA0B7D-097A-484D-8358-91A6E374451D")!
    public static let sentinels: Set<UUID> = [unavailable, unitTestDefault, uiTestDefault]

    /// Every window known: the open ones first, then the closed ones, most recently closed first.
    public private(set) var order: [UUID]
    public private(set) var reserved: Set<UUID> = []
    public private(set) var open: Set<UUID> = []
    /// Windows whose sessions exist on disk: only those reopen.
    private var onDisk: Set<UUID>

    /// `onDisk`: the windows found under `windows/`; `savedOrder`: `windows.order` as read.
    /// Windows on disk that the order does not name follow the ones it does, sorted.
    public init(onDisk: [UUID], savedOrder: [UUID]) {
        let present = Set(onDisk).subtracting(Self.sentinels)
        var seen: Set<UUID> = []
        order = savedOrder.filter { present.contains($0) && seen.insert($0).inserted }
        order += present.subtracting(seen).sorted { $0.uuidString < $1.uuidString }
        self.onDisk = present
    }

    /// A UUID for a new scene, reserved until `configured` or `release`.
    public mutating func reserve(makeUUID: () -> UUID = UUID.init) -> UUID {
        if let saved = order.first(where: { onDisk.contains($0) && !open.contains($0) && !reserved.contains($0) }) {
            reserved.insert(saved)
            return saved
        }
        return reserveNew(makeUUID: makeUUID)
    }

    /// Whether `id` is a window this registry has (open, reserved, or known on disk) or a
    /// sentinel: no other session may take it.
    public func isKnown(_ id: UUID) -> Bool {
        Self.sentinels.contains(id) || open.contains(id) || reserved.contains(id) || order.contains(id) || onDisk.contains(id)
    }

    /// Reserves `id` itself, for a session that comes back under its own UUID (an adopted
    /// set-aside entry). Only an unknown UUID is reserved: nil for a known one.
    public mutating func reserve(returning id: UUID) -> UUID? {
        guard !isKnown(id) else { return nil }
        reserved.insert(id)
        return id
    }

    /// A UUID no window has had, reserved: never one on disk.
    public mutating func reserveNew(makeUUID: () -> UUID = UUID.init) -> UUID {
        var fresh = makeUUID()
        while Self.sentinels.contains(fresh) || order.contains(fresh) || reserved.contains(fresh) { fresh = makeUUID() }
        reserved.insert(fresh)
        return fresh
    }

    /// The scene finished configuring: its window is open, last among the open ones.
    public mutating func configured(_ id: UUID) {
        guard reserved.remove(id) != nil else { return }
        open.insert(id)
        order.removeAll { $0 == id }
        order.insert(id, at: openCount)
    }

    /// The scene went away before it was configured: the UUID may be handed out again.
    public mutating func release(_ id: UUID) {
        reserved.remove(id)
    }

    /// The window closed. It moves just after the open ones; if nothing of it is on disk it
    /// is forgotten.
    public mutating func close(_ id: UUID, hasSession: Bool) {
        guard open.remove(id) != nil else { return }
        order.removeAll { $0 == id }
        if hasSession {
            onDisk.insert(id)
            order.insert(id, at: openCount)
        } else {
            onDisk.remove(id)
        }
    }

    /// The window's session now exists on disk (its first save).
    public mutating func saved(_ id: UUID) { onDisk.insert(id) }

    private var openCount: Int { order.prefix { open.contains($0) }.count }
}
