import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import HostCoordination
import HostLimits
import IOUring
import Logging
import Platform
import SessionStore
import SystemPackage

/// Who a worker is: its slot, the generation the supervisor spawned it as, and its window.
public struct WorkerIdentity: Sendable {
    public var slot: Int
    public var generation: UInt32
    public var windowID: UUID
    public var supervisorPID: Int32

    public init(slot: Int, generation: UInt32, windowID: UUID, supervisorPID: Int32) {
        self.slot = slot
        self.generation = generation
        self.windowID = windowID
        self.supervisorPID = supervisorPID
    }
}

/// The worker's single-threaded event loop: commands from the ring, the delayed-save timer,
/// io_uring completions and the heartbeat, waited for together with poll(2).
public final class WorkerLoop {
    /// How often the loop turns at least: the heartbeat the watchdog reads.
    public static let heartbeatNanoseconds: UInt64 = 100_000_000
    private let identity: WorkerIdentity
    private let slot: WindowSlot
    private let window: SceneWindow
    private let commands: Doorbell
    private let supervisor: Doorbell
    private var logger: Logger
    /// Digests of the window at the seq each save in flight covers, published when durable.
    private var digestsInFlight: [UInt64: UInt64] = [:]
    private var lastSavingSeq: UInt64?
    /// Runs with the window's id once something was restored, before the worker says it is
    /// ready: a test build of the command aborts there, as a session that crashes every restore.
    private let afterRestore: (UUID) -> Void

    public init(
        identity: WorkerIdentity, memory: SlotMemory, commands: Doorbell, supervisor: Doorbell, root: FilePath,
        engine: any IOEngine, options: StoreOptions, saveDelayMilliseconds: UInt64, floor: WorkerFloor = .none,
        foreground: Bool = true,
        logger: Logger, afterRestore: @escaping (UUID) -> Void = { _ in }
    ) throws(WorkerFailure) {
        guard memory.index == identity.slot, memory.supervisorPID == identity.supervisorPID else {
            throw WorkerFailure(
                .refused,
                "the memory given is slot \(memory.index) of supervisor \(memory.supervisorPID), "
                    + "not slot \(identity.slot) of \(identity.supervisorPID)")
        }
        let slot = memory.slot
        guard slot.generation == identity.generation, slot.windowID == identity.windowID else {
            throw WorkerFailure(
                .refused, "slot \(identity.slot) holds generation \(slot.generation) of \(slot.windowID)")
        }
        self.identity = identity
        self.slot = slot
        self.commands = commands
        self.supervisor = supervisor
        self.logger = logger
        self.afterRestore = afterRestore
        self.logger[metadataKey: "window"] = "\(identity.windowID)"
        let store = WindowStore(
            root: root, windowID: identity.windowID, engine: engine, options: options,
            saveDelayMilliseconds: saveDelayMilliseconds)
        window = SceneWindow(store: store, floor: floor, foreground: foreground)
        store.onSaveLatency = { microseconds in slot.recordSave(microseconds: microseconds) }
    }

    /// Restores the window, says it is ready, and serves until disconnected or orphaned.
    public func run() -> WorkerExit {
        let store = window.store
        let restored: UInt64
        do {
            let recovery = try store.recover()
            restored = recovery.seq
            for damaged in recovery.regular.damaged + recovery.incognito.damaged { log(damaged) }
            logger.info(
                "restored",
                metadata: [
                    "seq": "\(recovery.seq)", "numbering_above": "\(window.nextSeqBase)",
                    "tabs": "\(store.regular.webStateList.count)+\(store.incognito.webStateList.count)",
                ])
        } catch {
            if case .io(let failure) = error, failure.isResourceShortage {
                logger.error(
                    "restore ran short of the worker's own resources; the files are left as they were",
                    metadata: ["error": "\(error)"])
                return .restoreShortOfResources
            }
            if case .io(let failure) = error, failure.isStorageUnavailable {
                logger.error(
                    "restore could not reach the storage; the files are left as they were",
                    metadata: ["error": "\(error)"])
                return .restoreStorageUnavailable
            }
            if case .keyring = error {
                // The keyring failed (not refused): nothing is wrong with the session, whose
                // sealed files wait for their key; the restore is tried again after a backoff.
                logger.error(
                    "restore could not read the incognito key; the files are left as they were",
                    metadata: ["error": "\(error)"])
                return .restoreShortOfResources
            }
            logger.error("restore failed", metadata: ["error": "\(error)"])
            return .restoreFailed
        }
        if restored > 0 { afterRestore(identity.windowID) }
        // Restored tabs are all unrealized; a foreground scene now shows its active tabs.
        window.displayActiveTabs()
        publish()
        slot.heartbeat = monotonicNanoseconds()
        slot.readyGeneration = identity.generation
        supervisor.ring()
        // What the restore made and dropped (a journal's decoded records: a 10,000-tab window's
        // are ~15 MiB) lies under the tabs made after it, where glibc's free never returns pages;
        // given back here, once the window is ready, so its memory is what it holds.
        _ = wh_malloc_trim()
        while true {
            guard getppid() == identity.supervisorPID else { return .orphaned }
            commands.clear()
            let drained = drainCommands()
            if drained == .disconnected { return .disconnected }
            turnSaveLoop()
            slot.heartbeat = monotonicNanoseconds()
            // Commands left in the ring (a turn's worth taken) go on at once: the doorbell
            // that rang for them was cleared.
            if drained == .empty { wait() }
        }
    }

    /// How a turn's draining of the command ring ended.
    private enum Drained { case empty, turnFull, disconnected }

    /// Applies the commands in the ring, at most `Limits.maxCommandsPerTurn`: the save loop
    /// turns between (a backlog applied whole first left completed saves unreaped and the next
    /// save unstarted for as long as it took).
    private func drainCommands() -> Drained {
        for _ in 0..<Limits.maxCommandsPerTurn {
            let bytes: [UInt8]
            do {
                guard let next = try slot.commandRing.receive() else { return .empty }
                bytes = next
            } catch {
                logger.critical("command ring corrupt", metadata: ["error": "\(error)"])
                abort()
            }
            guard let command = try? WorkerCommand(serializedBytes: bytes) else {
                logger.error("undecodable command of \(bytes.count) bytes ignored")
                continue
            }
            if (try? WindowCommand(command)) == .scene(.disconnect) {
                var reply = WorkerReply()
                reply.request = command.request
                // The teardown's own result says whether the worker may end: a failed save
                // keeps it serving, its tabs applied and staged.
                let teardown = Result { () throws(StoreError) in try window.store.teardown() }
                noteSaveStarted()
                reportSaveEvents()
                publishTabsAndApplied()
                switch teardown {
                case .success:
                    var done = CommandDone()
                    done.appliedSeq = window.store.appliedSeq
                    reply.done = done
                case .failure(let error):
                    var failure = CommandFailure()
                    failure.kind = .io
                    failure.message = "\(error)"
                    reply.failure = failure
                }
                send(reply)
                if case .success = teardown { return .disconnected }
                continue
            }
            let reply = window.handle(command)
            noteSaveStarted()
            reportSaveEvents()
            // Published before the reply: a client that has its answer sees the window as the
            // command left it (`ctl open` then `ctl status` counts the new tab).
            publishTabsAndApplied()
            send(reply)
        }
        return .turnFull
    }

    /// One turn of the store's loop: the timer, a due retry, completions, a new save if one
    /// is due; then what it did (`reportSaveEvents`).
    private func turnSaveLoop() {
        do {
            try window.store.turn()
        } catch {
            slot.recordSaveFailure()
            logger.error("save loop failed", metadata: ["error": "\(error)"])
        }
        noteSaveStarted()
        reportSaveEvents()
    }

    /// Drains the store's outbox: the loop is its only consumer, after each command and each
    /// turn, so what a command's save did is reported as it happened, not rebuilt later. Every
    /// failure is counted in the slot; each episode is logged once, at its start and its end.
    private func reportSaveEvents() {
        var failingChanged = false
        for event in window.store.takeEvents() {
            switch event {
            case .durable(let seq):
                publish(durable: seq)
            case .failed(let failure):
                slot.recordSaveFailure()
                failingChanged = true
                if failure.attempt == 1 {
                    logger.error(
                        "saves are failing; retried by themselves with backoff",
                        metadata: ["browser": "\(failure.browser.rawValue)", "error": "\(failure.error)"])
                }
            case .recovered(let browser, let attempts):
                failingChanged = true
                logger.notice(
                    "saves work again", metadata: ["browser": "\(browser.rawValue)", "failed_attempts": "\(attempts)"])
            case .compactionFailed(let error):
                slot.recordCompactionFailure()
                if !compactionFailing {
                    logger.warning("compaction failed; saves go on in the journal", metadata: ["error": "\(error)"])
                }
                compactionFailing = true
            case .compactionRecovered(let browser):
                if compactionFailing {
                    logger.notice("compaction works again", metadata: ["browser": "\(browser.rawValue)"])
                }
                compactionFailing = false
            case .deletedIncognito:
                logger.info("incognito session deleted and its key revoked: its last tab closed")
            case .discardedIncognito(let reason):
                logger.warning(
                    "the incognito session on disk can never be read: deleted", metadata: ["reason": "\(reason)"])
            case .incognitoInMemoryOnly(let reason):
                logger.warning(
                    "incognito tabs are kept in memory only, never saved: no key can be had",
                    metadata: ["reason": "\(reason)"])
                stats.incognitoStorage = IncognitoStorage.memoryOnly.rawValue
                failingChanged = true
            case .incognitoKeyNotRevoked(let reason):
                logger.error(
                    "the deleted incognito session's key could not be revoked", metadata: ["reason": "\(reason)"])
            case .damagedFallback(_, let damaged):
                log(damaged)
            case .degradedTab(let browser, let tab, let reason):
                logger.error(
                    "a tab's history read nowhere: it keeps its current page only",
                    metadata: ["browser": "\(browser.rawValue)", "tab": "\(tab)", "error": "\(reason)"])
            }
        }
        if failingChanged {
            // A durable waiter at the supervisor fails (or may succeed) now, not at the next look.
            publishTabsAndApplied()
            supervisor.ring()
        }
    }

    /// Says what happened to a damaged file: moved into damaged/, renamed in place, or left
    /// where it is.
    private func log(_ damaged: DamagedFile) {
        let outcome =
            switch (damaged.setAsideAt, damaged.setAsideFailure) {
            case (_?, nil): "set aside a damaged file"
            case (_?, _?): "could not move a damaged file to damaged/; renamed it in place"
            case (nil, _?): "could not set aside a damaged file; left it in place"
            case (nil, nil): "found a damaged file; left it in place"
            }
        logger.warning("\(outcome)", metadata: ["file": "\(damaged)"])
    }

    /// Publishes whether journal writes go direct, and says once on stderr when they are
    /// buffered, with why (tmpfs, or a file system that refuses `O_DIRECT`).
    private func noteJournalWrites() {
        switch window.store.journalWrites {
        case nil:
            stats.journalWrites = JournalWrites.unknown.rawValue
        case .success?:
            stats.journalWrites = JournalWrites.direct.rawValue
        case .failure(let refusal)?:
            stats.journalWrites = JournalWrites.buffered.rawValue
            if !saidJournalWritesBuffered {
                saidJournalWritesBuffered = true
                FileHandle.standardError.write(Data("windowhost: journal writes buffered: \(refusal)\n".utf8))
            }
        }
    }

    private var saidJournalWritesBuffered = false

    /// Whether the last compaction failed: its warning is logged once until one succeeds.
    private var compactionFailing = false

    /// A save that just started covers the window as it is now: its digest is kept until the
    /// save is durable.
    private func noteSaveStarted() {
        let saving = window.store.savingSeq
        slot.savingSeq = saving ?? 0
        if let saving, saving != lastSavingSeq { digestsInFlight[saving] = window.digest }
        lastSavingSeq = saving
    }

    private var stats = WorkerStats()

    private func publish(durable seq: UInt64) {
        let store = window.store
        if let digest = digestsInFlight.removeValue(forKey: seq) {
            stats.digest = digest
        } else if seq == store.appliedSeq {
            stats.digest = window.digest
        }
        digestsInFlight = digestsInFlight.filter { $0.key > seq }
        precondition(
            seq >= stats.durableSeq && seq <= store.appliedSeq,
            "the durable seq published only rises, and never past what was applied")
        stats.durableSeq = seq
        publishTabsAndApplied()
        supervisor.ring()
    }

    private func publish() {
        assert(window.store.durableSeq >= stats.durableSeq, "the durable seq published only rises")
        stats.durableSeq = window.store.durableSeq
        stats.digest = window.digest
        publishTabsAndApplied()
    }

    private func publishTabsAndApplied() {
        let store = window.store
        precondition(
            store.appliedSeq >= stats.appliedSeq && stats.durableSeq <= store.appliedSeq,
            "the applied seq published only rises, and durable stays at or below it")
        stats.appliedSeq = store.appliedSeq
        stats.failingErrno = store.failure.map { UInt64(clamping: $0.errno?.rawValue ?? EIO) } ?? 0
        stats.failingBrowsers = UInt64(store.failingBrowserBits)
        noteJournalWrites()
        stats.regularTabs = UInt64(store.regular.webStateList.count)
        stats.incognitoTabs = UInt64(store.incognito.webStateList.count)
        stats.memoryOnlySince = store.memoryOnlySince ?? 0
        slot.publish(stats)
    }

    /// Sends a reply, in parts when it is longer than one ring message (`ReplyParts`), waiting
    /// for room while the supervisor is behind. One past `Limits.maxWorkerReplyBytes`, which the
    /// window's bounds keep any reply within, is answered as a failure saying so.
    private func send(_ reply: WorkerReply) {
        let ring = slot.replyRing
        var messages = ReplyParts.messages(reply, maximumMessage: ring.maximumMessage)
        if messages == nil {
            var failure = CommandFailure()
            failure.kind = .badData
            failure.message =
                "the reply is longer than the \(Limits.maxWorkerReplyBytes) bytes a worker sends (Limits.maxWorkerReplyBytes)"
            var refused = WorkerReply()
            refused.request = reply.request
            refused.failure = failure
            messages = ReplyParts.messages(refused, maximumMessage: ring.maximumMessage)
        }
        for message in messages ?? [] {
            send(message: message, on: ring)
        }
    }

    /// One message, once the ring has room. The wait is on the supervisor, not this worker: the
    /// heartbeat goes on (a dump of a big window is read a part per turn of its loop), and a
    /// supervisor gone ends the worker.
    private func send(message: [UInt8], on ring: MessageRing) {
        while true {
            do {
                try ring.send(message)
                break
            } catch .tooLarge(let size) {
                preconditionFailure("a ring message of \(size) bytes: `ReplyParts` splits every reply to fit")
            } catch {
                supervisor.ring()
                guard getppid() == identity.supervisorPID else { exit(WorkerExit.orphaned.status) }
                slot.heartbeat = monotonicNanoseconds()
                usleep(200)
            }
        }
        supervisor.ring()
    }

    /// Sleeps until a command, a completion, the save timer or the next heartbeat.
    private func wait() {
        let now = monotonicNanoseconds()
        var timeout = Self.heartbeatNanoseconds
        if let deadline = window.store.nextDeadline { timeout = min(timeout, deadline > now ? deadline - now : 0) }
        // Completions a blocking call took and gave back wake no descriptor: reaped at once.
        if window.store.engine.hasCompletionsToReap { return }
        var descriptors = [pollfd(fd: commands.descriptor.rawValue, events: Int16(POLLIN), revents: 0)]
        if window.store.writesInFlight {
            // Blocking engines complete during flush; only a ring has writes to wait for.
            guard let ring = window.store.engine.completionDescriptor else { return }
            descriptors.append(pollfd(fd: ring, events: Int16(POLLIN), revents: 0))
        }
        let milliseconds = Int32((timeout + 999_999) / 1_000_000)
        if poll(&descriptors, nfds_t(descriptors.count), milliseconds) < 0, case let error = errno, error != EINTR {
            // Out of kernel memory (ENOMEM): the loop still sleeps its turn, so it does not spin
            // while the failure lasts, and commands wait at most the heartbeat.
            logger.warning("poll failed", metadata: ["error": "\(Errno(rawValue: error))"])
            usleep(useconds_t(milliseconds) * 1000)
        }
    }
}

/// Why a worker could not start.
public struct WorkerFailure: Error, CustomStringConvertible {
    public let exit: WorkerExit
    public let reason: String

    public init(_ exit: WorkerExit, _ reason: String) {
        self.exit = exit
        self.reason = reason
    }

    public var description: String { reason }
}
