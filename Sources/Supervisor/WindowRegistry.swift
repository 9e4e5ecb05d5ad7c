import Foundation

/// Which window UUID a new scene gets, after Firefox for iOS's `WindowManager`:
/// - a new scene *reserves* a UUID: the first window on disk that is neither open nor reserved,
///   in the saved order, else a new UUID; a reserved or open UUID is never handed out again;
/// - a window takes its place in the order when it is reserved, not when its scene finishes
///   configuring: a saved window keeps its saved place, a new one goes after the windows open or
///   reserved before it, so windows stay in order however their restores finish;
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
    /// A window reserved under a new UUID is named once it is open.
    public var order: [UUID] { places.filter { open.contains($0) || onDisk.contains($0) } }
    public private(set) var reserved: Set<UUID> = []
    public private(set) var open: Set<UUID> = []
    /// Every window's place: the active ones (open or reserved) first, in the order they were
    /// reserved, then the closed ones. A window's place moves only when it becomes active under a
    /// UUID not placed yet, or stops being active.
    private var places: [UUID]
    /// Windows whose sessions exist on disk: only those reopen.
    private var onDisk: Set<UUID>
    /// Windows closed for good this run (`retire`): never handed out again.
    private var retired: Set<UUID> = []

    /// `onDisk`: the windows found under `windows/`; `savedOrder`: `windows.order` as read.
    /// Windows on disk that the order does not name follow the ones it does, sorted.
    public init(onDisk: [UUID], savedOrder: [UUID]) {
        let present = Set(onDisk).subtracting(Self.sentinels)
        var seen: Set<UUID> = []
        places = savedOrder.filter { present.contains($0) && seen.insert($0).inserted }
        places += present.subtracting(seen).sorted { $0.uuidString < $1.uuidString }
        self.onDisk = present
    }

    /// A UUID for a new scene, reserved until `configured` or `release`.
    public mutating func reserve(makeUUID: () -> UUID = UUID.init) -> UUID {
        if let saved = places.first(where: { !isActive($0) }) {
            assert(
                places.firstIndex(of: saved) == activeCount && onDisk.contains(saved),
                "the first closed window follows the active ones")
            reserved.insert(saved)
            return saved
        }
        return reserveNew(makeUUID: makeUUID)
    }

    /// Whether `id` is a window this registry has (open, reserved, or known on disk) or a
    /// sentinel: no other session may take it.
    public func isKnown(_ id: UUID) -> Bool {
        Self.sentinels.contains(id) || isActive(id) || places.contains(id) || onDisk.contains(id)
            || retired.contains(id)
    }

    /// Reserves `id` itself, for a session that comes back under its own UUID (an adopted
    /// set-aside entry). Only an unknown UUID is reserved: nil for a known one.
    public mutating func reserve(returning id: UUID) -> UUID? {
        guard !isKnown(id) else { return nil }
        place(id)
        return id
    }

    /// A UUID no window has had, reserved: never one on disk.
    public mutating func reserveNew(makeUUID: () -> UUID = UUID.init) -> UUID {
        var fresh = makeUUID()
        while isKnown(fresh) { fresh = makeUUID() }
        place(fresh)
        return fresh
    }

    /// The scene finished configuring: its window is open, in the place it took when reserved.
    public mutating func configured(_ id: UUID) {
        guard reserved.remove(id) != nil else { return }
        open.insert(id)
        assert(places.firstIndex(of: id).map { $0 < activeCount } == true, "an open window is among the active ones")
    }

    /// The scene went away before it was configured: the UUID may be handed out again, first.
    public mutating func release(_ id: UUID) {
        guard reserved.remove(id) != nil else { return }
        deactivate(id, kept: onDisk.contains(id))
    }

    /// The window closed. It moves just after the open ones; if nothing of it is on disk it
    /// is forgotten.
    public mutating func close(_ id: UUID, hasSession: Bool) {
        guard open.remove(id) != nil else { return }
        if hasSession { onDisk.insert(id) } else { onDisk.remove(id) }
        deactivate(id, kept: hasSession)
    }

    /// The window's session now exists on disk (its first save).
    public mutating func saved(_ id: UUID) { onDisk.insert(id) }

    /// The closed windows, most recently closed first.
    public var closed: [UUID] { Array(places.drop(while: isActive)) }

    /// Whether `id` is a closed window, on disk: one `close-window` may delete.
    public func isClosed(_ id: UUID) -> Bool { !isActive(id) && places.contains(id) }

    /// Window `id`, closed (or open with nothing on disk, now gone), is deleted for good: it
    /// leaves the order and its UUID is never handed out again.
    public mutating func retire(_ id: UUID) {
        assert(!isActive(id), "only a closed window is deleted")
        places.removeAll { $0 == id }
        onDisk.remove(id)
        retired.insert(id)
    }

    /// A new UUID reserved, placed after the windows active before it.
    private mutating func place(_ id: UUID) {
        assert(!places.contains(id) && !isActive(id))
        places.insert(id, at: activeCount)
        reserved.insert(id)
    }

    /// `id` is no longer active: it becomes the first closed window, or is forgotten.
    private mutating func deactivate(_ id: UUID, kept: Bool) {
        places.removeAll { $0 == id }
        if kept { places.insert(id, at: activeCount) }
    }

    private func isActive(_ id: UUID) -> Bool { open.contains(id) || reserved.contains(id) }
    private var activeCount: Int { places.prefix(while: isActive).count }
}
