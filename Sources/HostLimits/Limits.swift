/// The bounds every number that crosses a trust boundary (a file on disk, shared memory, a
/// control request) is checked against. One definition: the writer refuses to produce what the
/// reader would refuse, and the reader checks the same constant. Each bound is documented in
/// docs/storage-format.md and docs/security.md.
public enum Limits {
    /// The highest command sequence number a window may reach. 2⁵³ − 1 is the largest integer a
    /// JSON number (an IEEE double) holds exactly, so a seq survives `ctl --json` and a script's
    /// arithmetic unchanged; at a million commands a second it lasts 285 years. A seq above it
    /// on disk or in shared memory is damage, and every `seq + 1` below it cannot overflow.
    public static let maxCommandSeq: UInt64 = (1 << 53) - 1

    /// The most save latency samples one window's shared-memory histogram is read as holding:
    /// a million saves a second for 8.9 years. A worker writes its buckets in shared memory, so
    /// the supervisor reads them clamped to this, and summing every window's (at most 64) stays
    /// far from overflowing.
    public static let maxLatencySamples: UInt64 = 1 << 48

    /// The highest tab identifier: exact in JSON (a `ctl dump` prints it as a number), like
    /// seqs. An identifier above it read from disk is damage; a profile whose identifiers
    /// reached it opens no more tabs.
    public static let maxWebStateID: Int64 = (1 << 53) - 1

    /// Whether `seq` is one a window can have reached.
    @inlinable
    public static func isValidCommandSeq(_ seq: UInt64) -> Bool { seq <= maxCommandSeq }

    /// The most saves one window has in flight at once (`StoreOptions.savesInFlight`): each
    /// journal then has at most this many appends written and not yet acknowledged, past its
    /// last acknowledged save. Recovery leaves out, of the saves past the other Browser's seq, at
    /// most the last this many that name it: the bound is part of the format. 16 is where the
    /// device stops rewarding depth much (fio, 512 B O_DIRECT dsync writes on this virtio disk:
    /// 7,600/s at depth 1, 19,000 at 4, 50,000 at 16, 100,000 at 64) while a window's saves in
    /// flight still carry few commands each. Raising it keeps old sessions readable: a session
    /// written at a lower bound has fewer saves past a hole than the new one allows.
    public static let maxSavesInFlight = 16

    /// The most commands a worker applies from its ring before it turns its save loop (reaps
    /// what completed, starts a save): a backlog applied whole first left the saves in flight
    /// unreaped and the next unstarted for as long as applying it took.
    public static let maxCommandsPerTurn = 32

    // MARK: the ring

    /// Buffers one ring registers with the kernel (`UringEngine`'s pool): one per save the
    /// regular Browser can have in flight. The incognito Browser's saves in the same groups,
    /// and anything past the pool, are copied instead, as where registration is refused.
    public static let ringRegisteredBuffers = maxSavesInFlight

    /// The size of each registered buffer: a small save (one 512 B block, a few at 4 KiB
    /// blocks) fits, a large one (tens of KB) is copied. The kernel counts registered memory
    /// against `RLIMIT_MEMLOCK` per user (for a process without `CAP_IPC_LOCK`), over every
    /// window's ring: 16 × 4 KiB = 64 KiB a window keeps 64 windows at 4 MiB, half a default
    /// limit of 8 MiB.
    public static let ringRegisteredBufferBytes = 4 << 10

    /// Entries of a window's ring (`UringEngine`): each chain keeps one entry in flight, so
    /// both Browsers' saves at the bound (2 × 16) and a compaction's and a spare journal's
    /// chains use under 40; four times that leaves room for a turn's whole batch.
    public static let ringEntries: UInt32 = 256

    // MARK: session files

    /// The longest payload one framed record may carry. The reader allocates at most this much
    /// for a record whatever its length field says, and the writer refuses (a typed error) to
    /// frame more. Every record the model can produce fits: a tab's history and the insert
    /// record carrying it are bounded below, and the list metadata is split over as many
    /// records as it needs.
    public static let maxRecordPayloadBytes = 64 << 20

    /// The longest URL a tab may hold, in UTF-8 bytes: Chrome's `kMaxURLChars` (2 MiB,
    /// content/common/content_constants.cc). A navigation or a new tab with a longer URL is
    /// refused, not stored truncated.
    public static let maxURLBytes = 2 << 20

    /// The longest page title a tab may hold, in UTF-8 bytes: Chrome's `kMaxTitleChars` (4 KiB).
    public static let maxTitleBytes = 4 << 10

    /// Entries one tab's history keeps: a navigation past it drops the oldest entry. Chrome for
    /// iOS restores at most `kMaxSessionSize` = 75 items (ios/web/navigation/
    /// wk_navigation_util.mm); Chrome's content layer keeps `kMaxSessionHistoryEntries` = 50.
    public static let maxNavigationEntries = 75

    /// URL and title bytes one tab's history may hold in all: past it the oldest entries go, as
    /// past `maxNavigationEntries`. 75 entries of 2 MiB URLs would not fit one record; this
    /// budget leaves room in `maxRecordPayloadBytes` for the per-entry framing (at most 32 bytes
    /// each, 2.4 KB for 75) and, in a journal's insert record, the tab's metadata (one more URL
    /// and title), reserved twice over, plus 64 KiB for the enclosing messages.
    public static let maxHistoryTextBytes = maxRecordPayloadBytes - 2 * (maxURLBytes + maxTitleBytes) - (64 << 10)

    /// The most tabs one Browser (a window's regular or incognito list) holds. Chrome has no
    /// hard cap, but its session restore is practical to a few thousand tabs, and tab-hoarding
    /// reports rarely pass 10,000 in all windows together: 16,384 is past what any window holds
    /// by hand. It bounds what a snapshot's metadata decodes into: a 64 MiB record of empty
    /// items would otherwise decode into tens of millions of structs (gigabytes); at this bound
    /// it is a few MB. The list refuses an insertion past it (`ctl open` exits 65), the reader
    /// counts items on the wire before decoding, and replaying an insert past it is damage.
    public static let maxTabsPerBrowser = 16_384

    /// The URL and title bytes one window may show: its tabs' current entries, in both its
    /// Browsers (what a dump carries besides numbers). 16 MiB holds 16,384 tabs of 1 KiB each
    /// (a full Browser of long URLs), or 258 tabs of the longest URL `ctl` takes; past a few
    /// thousand tabs of everyday URLs (under 200 bytes with their titles) no window comes near
    /// it. Without it a window could hold 2 GiB of URLs through `ctl` alone (16,384 tabs of
    /// `maxControlURLBytes` in each Browser), which no reply could carry back: a dump at it is
    /// at most `maxWorkerReplyBytes` from the worker and `maxControlReplyBytes` as JSON, both
    /// bounded. A command that would take a window past it (`open`, `navigate`, `replace`,
    /// `back`/`forward` to a longer entry) is refused (65) before it takes a seq; a window
    /// restored past it (a crafted file) keeps every tab, and its dump says why it cannot be
    /// shown and points to `windowhost inspect`.
    public static let maxWindowTextBytes = 16 << 20

    // MARK: control plane

    /// The longest control request (one JSON line) the supervisor reads: the capacity of a
    /// window's command ring (`SlotLayout.commandRingCapacity`, 64 KiB), which carries every
    /// command to its worker as one message. Growing it grows each of the 64 slots' shared
    /// memory; a longer request is refused (64, like any malformed request) before it takes a seq.
    public static let maxControlRequestBytes = 64 << 10

    /// The longest URL `ctl open`, `navigate` and `replace` take, in UTF-8 bytes: a request's
    /// bound less 512 bytes for its other fields (verb, window UUID, flags, numbers: under 200
    /// as JSON) and the command's framing in the ring (under 64). Smaller than `maxURLBytes`,
    /// which a tab holds (a session written by other means may carry longer ones); a longer URL
    /// is refused (65) before it takes a seq, by `ctl` itself and by the supervisor. A URL whose
    /// characters JSON escapes can still make the request too long: that is refused (64).
    public static let maxControlURLBytes = maxControlRequestBytes - 512

    /// The largest tab a move between windows carries (`ctl move-to-window`), its stored
    /// history's bytes: the tab travels to its new window as one command on that window's ring,
    /// so a request's bound less 1 KiB for the command's other fields. A larger tab is refused
    /// (65) and stays where it is.
    public static let maxMovedTabBytes = maxControlRequestBytes - (1 << 10)

    /// The moves between windows a Browser remembers having received (the last ones), in its
    /// journal and snapshot: the supervisor asks about a move cut short by a restart, and each
    /// window takes part in one move at a time, so the last few always hold the one asked about.
    public static let movesRemembered = 8

    /// What one tab adds to a dump besides its URL and title, at most: as protobuf, its other
    /// fields with their tags and lengths (77 bytes at most); as JSON, its keys, numbers and
    /// punctuation (under 200 bytes). A bound for both.
    public static let maxDumpBytesPerTab = 256

    /// The longest reply a worker sends: the dump of a window at `maxWindowTextBytes` with both
    /// Browsers full, plus 64 KiB for the enclosing messages. Larger than the reply ring, so it
    /// travels in parts; the supervisor refuses a reply declared longer (the worker misbehaves)
    /// and holds at most this much per window while assembling one.
    public static let maxWorkerReplyBytes = maxWindowTextBytes + 2 * maxTabsPerBrowser * maxDumpBytesPerTab + (64 << 10)

    /// The longest reply line the control socket carries, and `ctl` reads: the JSON of the
    /// largest dump, whose text grows at most six times (a control character, which a title
    /// may hold, is `\u001f`), each tab's keys and numbers, plus 8 MiB for everything else, which
    /// also covers the largest `status` (64 windows, 1,024 set-aside entries of paths under
    /// 4 KiB, the windows' order). The supervisor never sends a longer one.
    public static let maxControlReplyBytes =
        6 * maxWindowTextBytes + 2 * maxTabsPerBrowser * maxDumpBytesPerTab + (8 << 20)

    /// The largest journal a store writes or reads. Compaction starts at 1 MiB by default, so
    /// only a run of failed compactions (or one save of a huge window) gets near it; an append
    /// that would pass it fails with EFBIG and the next save compacts. A larger journal file is
    /// damage, set aside without being read, and its zero tail is scanned in bounded chunks.
    public static let maxJournalBytes = 1 << 30

    /// The largest `windows.order` read: a UUID line is 37 bytes, so 1 MiB orders 28,000
    /// windows. A larger file is never read (it would cost its size in memory and time at
    /// every start); the windows are then ordered by name, and the next save rewrites it.
    public static let maxWindowsOrderBytes = 1 << 20

    /// The largest `handed-out` read: a window's line is at most 76 bytes, so 1 MiB holds the
    /// ceilings of 13,000 windows. A larger file is damage: set aside, never read into memory.
    public static let maxHandedOutBytes = 1 << 20

    /// The most window keys a session directory's key record holds (`SessionKeyRecord`): the
    /// key its window sealed it with when it was set aside, and one per adoption of it undone
    /// since. A record that is full takes no more: that adoption fails and the entry stays.
    public static let maxKeysPerSessionRecord = 8

    /// The most windows open at once: `run --capacity`, the shared region's slots, a
    /// campaign's `--scenes`, a bench case's `--windows`. Each window is a worker process and a
    /// slot of about 1.1 MB of shared memory (mostly untouched reply ring).
    public static let maxOpenWindows = 64

    /// The most closed windows `run --keep-closed` may keep on disk (whose order fits in
    /// `maxWindowsOrderBytes` many times over).
    public static let maxKeptClosedWindows = 4096

    /// Whether a URL / a title is within its bound (UTF-8 bytes). The bound is the stored one:
    /// what text entering the host may hold besides is `ForbiddenCharacter`'s.
    @inlinable
    public static func isValidURL(_ url: String) -> Bool { url.utf8.count <= maxURLBytes }
    @inlinable
    public static func isValidTitle(_ title: String) -> Bool { title.utf8.count <= maxTitleBytes }
}

/// A character text entering the host may not hold, where it is. The rule, one for every way
/// in (`ctl` arguments, the control socket's JSON, a command the worker decodes):
/// - a URL holds no C0 control (U+0000–U+001F) and no DEL (U+007F): the URL Standard strips
///   them from a URL's ends and removes tabs and newlines inside, so a browser never commits a
///   URL that holds one; NUL also ends the text for every C interface;
/// - a title holds no NUL; other characters are the page's text;
/// - text is Unicode scalars: invalid UTF-8 and a lone surrogate (a JSON `\ud800` with no low
///   half) are refused before any of this (`InvalidUTF8Tests`, `TextRuleTests`).
/// Each refusal exits 65 (bad data): nothing is applied and no seq is taken. Text read back
/// from a session file is held only to its length bounds (`Limits.isValidURL`), so a session
/// written before this rule still restores whole.
public struct ForbiddenCharacter: Error, Equatable, Sendable, CustomStringConvertible {
    /// "URL" or "title".
    public let field: String
    public let scalar: UInt32
    /// Where it starts, in UTF-8 bytes.
    public let offset: Int

    /// The first character `url` may not hold.
    public static func inURL(_ url: String) -> ForbiddenCharacter? {
        first(in: url, field: "URL") { $0.value < 0x20 || $0.value == 0x7F }
    }

    /// The first character `title` may not hold.
    public static func inTitle(_ title: String) -> ForbiddenCharacter? {
        first(in: title, field: "title") { $0.value == 0 }
    }

    private static func first(in text: String, field: String, _ forbidden: (Unicode.Scalar) -> Bool)
        -> ForbiddenCharacter?
    {
        var offset = 0
        for scalar in text.unicodeScalars {
            if forbidden(scalar) { return ForbiddenCharacter(field: field, scalar: scalar.value, offset: offset) }
            offset += UTF8.width(scalar)
        }
        return nil
    }

    public var description: String {
        let code = String(scalar, radix: 16, uppercase: true)
        return
            "\(field) holds U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code) (a control character) at byte \(offset): refused, nothing was done"
    }
}
