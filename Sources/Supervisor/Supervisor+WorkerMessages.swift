import HostCoordination

/// The loop's half of what workers publish: each window serviced in turn (its own half is
/// `WindowController+Publications`), the checks of what a worker may publish, and the
/// registry's part when a window is first configured and when it goes.
extension Supervisor {
    /// Everything workers published since the last look: readiness, replies, durable seqs.
    func serviceWorkers() {
        repliesLeft = false
        for slot in windows.keys.sorted() {
            if windows[slot]?.service(in: self) == true { repliesLeft = true }
        }
    }

    /// A window's first restore: it is open in the registry and `windows.order`, and counts
    /// toward the initial scenes `run` waits for.
    func configured(_ window: Window) {
        assert(window.configured && windows[window.slot] === window, "an open window is configured once")
        registry.configured(window.id)
        saveOrder()
        if initialScenesPending > 0 { initialScenesPending -= 1 }
    }

    /// The window went: an adoption ends with it (complete if it restored and its disconnect
    /// saved), its slot is freed, and its UUID closed or released in the registry.
    func release(_ window: Window, cleanExit: Bool, description: String) {
        if window.adoption != nil {
            if cleanExit, window.workerRestored {
                completeAdoption(window)
            } else {
                abandonAdoption(window, why: "the window went (\(description)) before it had restored and saved")
            }
        }
        precondition(windows[window.slot] === window, "a window frees its own slot only")
        precondition(window.lifecycle.state == .gone, "a slot is freed only once its window's lifecycle is gone")
        precondition(!window.isLive, "a slot is freed only once its worker is gone")
        windows[window.slot] = nil
        keptUnsavedByWindowsGone += window.keptUnsaved.map { (window.id, $0) }
        let view = region.slot(window.slot)
        view.state = .free
        view.pid = 0
        if window.configured {
            registry.close(window.id, hasSession: files.hasSession(window.id))
            if registry.isClosed(window.id) { closedThisRun.insert(window.id) }
        } else {
            registry.release(window.id)
        }
        saveOrder()
        if let client = window.closingForGood { finishCloseForGood(window.id, client: client) }
        evictClosedWindows()
        logger.info("scene disconnected", metadata: ["window": "\(window.id)", "how": "\(description)"])
    }
}
