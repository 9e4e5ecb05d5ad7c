/// What a window is asked through its command ring: the one vocabulary the supervisor sends
/// (from a control request), the worker applies, and the stress oracle models. The protobuf
/// `WorkerCommand` is only its encoding on the ring (`message(request:)`, `init(_:)`).

/// A command that may change a window's tabs, so takes the window's next seq when it does.
public enum TabCommand: Equatable, Sendable {
    /// `index`: where it goes in its Browser's list (nil: the end). `background`: not made active.
    case open(url: String, incognito: Bool, index: Int?, opener: Int64?, background: Bool)
    case navigate(tab: Int64, url: String)
    case close(tab: Int64)
    case activate(tab: Int64)
    case move(tab: Int64, index: Int)
    /// A prerendered tab of `url` takes the place of `tab`.
    case replace(tab: Int64, url: String)
    case closeAll(incognito: Bool)
    /// Pinning moves the tab to the end of the pinned tabs, unpinning to the start of the
    /// others; a tab already so changes nothing.
    case setPinned(tab: Int64, pinned: Bool)
    /// One entry back or forward in the tab's history (realizing it); with none that way,
    /// nothing changes.
    case go(tab: Int64, HistoryDirection)

    /// Whether it makes a tab, which takes a new tab id.
    public var createsTab: Bool {
        switch self {
        case .open, .replace: true
        case .navigate, .close, .activate, .move, .closeAll, .setPinned, .go: false
        }
    }
}

/// Which way `TabCommand.go` steps through a tab's history.
public enum HistoryDirection: Equatable, Sendable {
    case back, forward

    /// What the step adds to the current entry's index.
    public var offset: Int { self == .back ? -1 : 1 }
}

/// What happened to the window's scene.
public enum SceneChange: Equatable, Sendable {
    /// Saves at once, and after each change from then on (until `foreground`).
    case background
    case foreground
    /// Save if anything is unsaved, answer, exit 0.
    case disconnect
}

/// One command on a window's ring, answered by exactly one reply.
public enum WindowCommand: Equatable, Sendable {
    case tab(TabCommand)
    case scene(SceneChange)
    /// Save now.
    case save
    /// Both Browsers' tabs, the seqs and the digest.
    case dump
    /// A dump without URLs or titles: the seqs and tab ids the supervisor's floor probe reads,
    /// which a window past `Limits.maxWindowTextBytes` (whose dump is refused) answers too.
    case probe
    /// A step of a move between windows (`ctl move-to-window`).
    case move(MoveStep)
}

/// The id the supervisor draws for a move between windows: random, never 0, so a worker cannot
/// name a move it was not told of. The destination records it with the tab it makes.
public struct MoveID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    /// Nil for 0, which names no move (the records' "none").
    public init?(rawValue: UInt64) {
        guard rawValue != 0 else { return nil }
        self.rawValue = rawValue
    }

    public static func random() -> MoveID {
        var generator = SystemRandomNumberGenerator()
        return MoveID(rawValue: generator.next(upperBound: UInt64.max) + 1)!
    }

    public var description: String { String(rawValue, radix: 16) }
}

/// A window's part in a move of one tab to another window, as the supervisor drives it: the
/// source exports, the destination imports (the commit), the source drops. See
/// docs/recovery.md, "Moving a tab between windows".
public enum MoveStep: Equatable, Sendable {
    /// Source: the tab as it is (`WorkerReply.movedTab`); nothing changes.
    case export(tab: Int64)
    /// Destination: the tab made anew with an id of this window's, at `index` (nil: the end),
    /// its record carrying the move. Takes a seq; a window that holds the move already answers
    /// the tab it made.
    case `import`(MoveID, MovedTab, index: Int?)
    /// Source: the tab removed as gone to another window. Takes a seq when the tab is there;
    /// done without one when it is not (a restart's repeat).
    case drop(tab: Int64, MoveID)
    /// Destination: whether it holds the move (`CommandDone.tab`: the tab it made).
    case held(MoveID)

    /// The move this step belongs to, for the steps that name one.
    public var move: MoveID? {
        switch self {
        case .export: nil
        case .import(let move, _, _), .drop(_, let move), .held(let move): move
        }
    }
}

/// A ring message that is no `WindowCommand`: answered as bad data, never applied.
public struct UndecodableCommand: Error, Equatable, CustomStringConvertible {
    public let description: String
}

extension WindowCommand {
    /// The ring message carrying it, numbered `request` for its reply.
    public func message(request: UInt64) -> WorkerCommand {
        var message = WorkerCommand()
        message.request = request
        switch self {
        case .tab(.open(let url, let incognito, let index, let opener, let background)):
            var open = OpenTab()
            open.url = url
            open.incognito = incognito
            // The supervisor refuses an index outside 0...Limits.maxTabsPerBrowser first; one
            // clamped stays outside every list, so the worker refuses it too.
            if let index { open.index = Int32(clamping: index) }
            if let opener { open.opener = opener }
            open.inBackground = background
            message.open = open
        case .tab(.navigate(let tab, let url)):
            var navigate = NavigateTab()
            (navigate.tab, navigate.url) = (tab, url)
            message.navigate = navigate
        case .tab(.close(let tab)):
            var close = CloseTab()
            close.tab = tab
            message.close = close
        case .tab(.activate(let tab)):
            var activate = ActivateTab()
            activate.tab = tab
            message.activate = activate
        case .tab(.move(let tab, let index)):
            var move = MoveTab()
            (move.tab, move.index) = (tab, Int32(clamping: index))
            message.move = move
        case .tab(.replace(let tab, let url)):
            var replace = ReplaceTab()
            (replace.tab, replace.url) = (tab, url)
            message.replace = replace
        case .tab(.closeAll(let incognito)):
            var closeAll = CloseAll()
            closeAll.incognito = incognito
            message.closeAll = closeAll
        case .tab(.setPinned(let tab, let pinned)):
            var pin = PinTab()
            (pin.tab, pin.pinned) = (tab, pinned)
            message.pin = pin
        case .tab(.go(let tab, let direction)):
            var step = HistoryStep()
            (step.tab, step.direction) = (tab, direction == .back ? .back : .forward)
            message.step = step
        case .scene(let change):
            var event = SceneEvent()
            event.kind =
                switch change {
                case .background: .background
                case .foreground: .foreground
                case .disconnect: .disconnect
                }
            message.scene = event
        case .save:
            message.save = SaveNow()
        case .dump:
            message.dump = Dump()
        case .probe:
            var dump = Dump()
            dump.withoutText = true
            message.dump = dump
        case .move(let step):
            step.put(in: &message)
        }
        return message
    }

    /// The command a ring message carries (its `request` is the reply's to repeat).
    public init(_ message: WorkerCommand) throws(UndecodableCommand) {
        switch message.action {
        case .open(let open):
            self = .tab(
                .open(
                    url: open.url, incognito: open.incognito, index: open.hasIndex ? Int(open.index) : nil,
                    opener: open.hasOpener ? open.opener : nil, background: open.inBackground))
        case .navigate(let navigate): self = .tab(.navigate(tab: navigate.tab, url: navigate.url))
        case .close(let close): self = .tab(.close(tab: close.tab))
        case .activate(let activate): self = .tab(.activate(tab: activate.tab))
        case .move(let move): self = .tab(.move(tab: move.tab, index: Int(move.index)))
        case .replace(let replace): self = .tab(.replace(tab: replace.tab, url: replace.url))
        case .closeAll(let closeAll): self = .tab(.closeAll(incognito: closeAll.incognito))
        case .pin(let pin): self = .tab(.setPinned(tab: pin.tab, pinned: pin.pinned))
        case .step(let step):
            switch step.direction {
            case .back: self = .tab(.go(tab: step.tab, .back))
            case .forward: self = .tab(.go(tab: step.tab, .forward))
            case .UNRECOGNIZED(let direction):
                throw UndecodableCommand(description: "a history step of unknown direction \(direction)")
            }
        case .scene(let event):
            switch event.kind {
            case .background: self = .scene(.background)
            case .foreground: self = .scene(.foreground)
            case .disconnect: self = .scene(.disconnect)
            case .UNRECOGNIZED(let kind): throw UndecodableCommand(description: "a scene event of unknown kind \(kind)")
            }
        case .save: self = .save
        case .dump(let dump): self = dump.withoutText ? .probe : .dump
        case .exportTab(let export): self = .move(.export(tab: export.tab))
        case .importTab(let transfer):
            guard let move = MoveID(rawValue: transfer.move) else {
                throw UndecodableCommand(description: "a tab's import with no move id")
            }
            self = .move(.import(move, transfer.tab, index: transfer.hasIndex ? Int(transfer.index) : nil))
        case .dropMovedTab(let drop):
            guard let move = MoveID(rawValue: drop.move) else {
                throw UndecodableCommand(description: "a moved tab's drop with no move id")
            }
            self = .move(.drop(tab: drop.tab, move))
        case .moveHeld(let held):
            guard let move = MoveID(rawValue: held.move) else {
                throw UndecodableCommand(description: "a move's question with no move id")
            }
            self = .move(.held(move))
        case .none: throw UndecodableCommand(description: "a command with no action")
        }
    }
}

extension MoveStep {
    fileprivate func put(in message: inout WorkerCommand) {
        switch self {
        case .export(let tab):
            var export = ExportTab()
            export.tab = tab
            message.exportTab = export
        case .import(let move, let tab, let index):
            var transfer = ImportTab()
            (transfer.move, transfer.tab) = (move.rawValue, tab)
            if let index { transfer.index = Int32(clamping: index) }
            message.importTab = transfer
        case .drop(let tab, let move):
            var drop = DropMovedTab()
            (drop.tab, drop.move) = (tab, move.rawValue)
            message.dropMovedTab = drop
        case .held(let move):
            var held = MoveHeld()
            held.move = move.rawValue
            message.moveHeld = held
        }
    }
}
