import ArgumentParser
import BrowserModel
import Foundation
import Glibc
import SessionStore
import Stress
import SystemPackage

/// `windowhost inspect ROOT [--window UUID] [--json]`: what is on disk, read only.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show the sessions saved under ROOT without changing anything.",
        usage:
            "windowhost inspect <root> [--window <window>] [--json] [--deep]\n       windowhost inspect <root> --set-aside <id> [--json] [--deep]",
        discussion: """
            Opens everything read only: a read-only copy of a root works. Exit codes: 0 all readable, 65 something is \
            corrupt or unreadable (file and byte offset named, every other window still shown; a tab id held twice \
            in a window is damage too), or ROOT is not a \
            directory, or ROOT/windows, ROOT/windows.order or ROOT/supervisor.lock is not what the host needs there \
            (a symlink, a FIFO, the wrong kind: named, never followed; `run` refuses such a root), or --window names \
            a window ROOT does not hold, 66 ROOT does not exist, 74 ROOT/windows cannot be listed. With \
            --set-aside ID it shows that entry of ROOT/set-aside/ the same way (65 also when there is no such entry).
            """)

    @Argument(help: "The host's state directory.")
    var root: String

    @Option(help: "Only this window.")
    var window: UUID?

    @Flag(help: "One JSON object on stdout.")
    var json = false

    @Flag(help: "Also read and check every stored history (a plain inspect reads the list metadata and journals only).")
    var deep = false

    @Option(
        name: .customLong("set-aside"),
        help: ArgumentHelp("Only this entry of ROOT/set-aside/ (ctl set-aside lists them).", valueName: "id"))
    var setAside: String?

    @Flag(
        help: ArgumentHelp(
            "With --set-aside: only its summary, one JSON object (what the supervisor lists).", visibility: .hidden))
    var summary = false

    func validate() throws {
        guard setAside == nil || window == nil else {
            throw ValidationError("--window and --set-aside name different things: give one")
        }
        guard !summary || setAside != nil else { throw ValidationError("--summary goes with --set-aside") }
    }

    func run() throws {
        // The root the user names is followed once (`stat`), as `run` does.
        var status = stat()
        guard stat(root, &status) == 0 else {
            StandardStreams.error("windowhost inspect: \(root) does not exist\n")
            throw ExitCode(.noInput)
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            StandardStreams.error("windowhost inspect: \(root) is not a directory\n")
            throw ExitCode(.badData)
        }
        let windows: [WindowInspection]
        let misplaced: [MisplacedEntry]
        do {
            let resolved = try PrivateFiles.resolvedPath(FilePath(root))
            if let setAside { return try inspect(setAside: setAside, root: resolved) }
            misplaced = RootLayout.misplacedEntries(root: resolved)
            windows = try SessionInspector.inspect(root: resolved, window: window, deep: deep)
        } catch let exit as ExitCode {
            throw exit
        } catch {
            StandardStreams.error("windowhost inspect: \(error)\n")
            throw ExitCode(.ioError)
        }
        if let window, windows.isEmpty {
            // An unknown window is an error, as `ctl dump --window` says it: not an empty root.
            StandardStreams.error(
                "windowhost inspect: no window \(window.uuidString) under \(root)/\(DiskLayout.windows)\n")
            throw ExitCode(.badData)
        }
        if json {
            struct Output: Encodable {
                let root: String
                /// Fixed entries of the root that are not what the host needs there.
                let misplaced: [MisplacedEntry]
                let windows: [WindowInspection]
            }
            let encoder = JSONEncoder()
            encoder.keyEncodingStrategy = .convertToSnakeCase
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            print(
                String(
                    decoding: try encoder.encode(Output(root: root, misplaced: misplaced, windows: windows)),
                    as: UTF8.self))
        } else {
            for entry in misplaced { print("MISPLACED \(entry)") }
            printText(windows)
        }
        if !misplaced.isEmpty || windows.contains(where: \.isDamaged) { throw ExitCode(.badData) }
    }

    /// One set-aside entry, read only, as a window is shown; 65 when there is none.
    private func inspect(setAside id: String, root resolved: FilePath) throws {
        guard let entry = try SetAsideShelf.entry(root: resolved, id: id) else {
            StandardStreams.error(
                "windowhost inspect: no set-aside entry '\(id)' under \(root)/\(DiskLayout.setAside)\n")
            throw ExitCode(.badData)
        }
        let window = SessionInspector.inspect(setAside: entry, root: resolved, deep: deep)
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if summary {
            print(String(decoding: try JSONEncoder().encode(SetAsideSummary(window)), as: UTF8.self))
        } else if json {
            struct Output: Encodable {
                let root: String
                let setAside: Entry
                let window: WindowInspection
                let summary: SetAsideSummary
            }
            struct Entry: Encodable {
                let id: String
                let uuid: String?
                let reason: String
                let at: String?
                let kind: String
            }
            let described = Entry(
                id: entry.id, uuid: entry.window?.uuidString, reason: entry.reason.rawValue,
                at: entry.at.map { ISO8601DateFormatter().string(from: $0) }, kind: "\(entry.kind)")
            print(
                String(
                    decoding: try encoder.encode(
                        Output(root: root, setAside: described, window: window, summary: SetAsideSummary(window))),
                    as: UTF8.self))
        } else {
            print(
                "set aside \(entry.id): window \(entry.window?.uuidString ?? "-"), \(entry.reason.rawValue), "
                    + "\(entry.at.map { ISO8601DateFormatter().string(from: $0) } ?? "time unrecorded"), a \(entry.kind)"
            )
            printText([window])
        }
        if window.isDamaged { throw ExitCode(.badData) }
    }

    private func printText(_ windows: [WindowInspection]) {
        if windows.isEmpty { print("no windows under \(root)") }
        for window in windows {
            print("window \(window.uuid)" + (window.directory == window.uuid ? "" : " (directory \(window.directory))"))
            for damage in window.damaged { print("  CORRUPT \(damage.file): \(damage.error)") }
            for browser in window.browsers {
                print(
                    "  \(browser.kind): \(browser.tabs.count) tabs, active \(browser.activeIndex.map(String.init) ?? "none"), "
                        + "durable seq \(browser.durableSeq), generation \(browser.generation), "
                        + "snapshot \(browser.snapshotBytes) B, journal \(browser.journalBytes) B")
                if !browser.files.isEmpty {
                    print(
                        "    files: "
                            + browser.files.map { "\($0.name) (format \($0.version))" }.joined(separator: ", "))
                }
                for (index, tab) in browser.tabs.enumerated() {
                    let marks = (index == browser.activeIndex ? "*" : " ") + (tab.pinned ? "p" : " ")
                    print(
                        "   \(marks) \(tab.id)\t\(tab.realizedAtSave ? "realized  " : "unrealized")\t\(tab.url)\t\(tab.title)"
                            + "\tlast active \(ControlCommand.isoTime(microseconds: tab.lastActiveTimeUs))")
                }
                if !browser.movesReceived.isEmpty {
                    print(
                        "    moves received: "
                            + browser.movesReceived.map { "\($0.move) made tab \($0.tab)" }.joined(separator: ", "))
                }
                if let torn = browser.tornTailAt {
                    print("  note: an unfinished last save at byte \(torn) is discarded on recovery")
                }
                for damage in browser.damaged {
                    print("  CORRUPT \(damage.file)\(damage.offset.map { " at byte \($0)" } ?? ""): \(damage.error)")
                }
            }
        }
    }
}

/// A window UUID on the command line; a malformed one is a usage error (exit 64).
// swift-format-ignore: AvoidRetroactiveConformances
// Neither module owns both sides; the executable is the only client of this conformance.
extension UUID: @retroactive ExpressibleByArgument {
    public init?(argument: String) { self.init(uuidString: argument) }
}
