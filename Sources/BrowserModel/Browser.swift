import SystemPackage

import struct Foundation.UUID

/// Regular tabs or off-the-record (incognito) ones.
public enum BrowserKind: String, Sendable, CaseIterable {
    case regular
    case incognito
}

/// One window's tabs of one profile (the seed's Browser): owns its WebStateList.
public final class Browser {
    public let windowID: UUID
    public unowned let profile: Profile
    public let webStateList: WebStateList

    init(windowID: UUID, profile: Profile, delegate: any WebStateListDelegate) {
        self.windowID = windowID
        self.profile = profile
        self.webStateList = WebStateList(delegate: delegate)
    }

    public var kind: BrowserKind { profile.kind }

    /// Where this Browser's session lives: `<root>/windows/<UUID>/<regular|incognito>`.
    public var sessionDirectory: FilePath { profile.sessionDirectory(for: windowID) }
}

/// The Browsers of one profile, one per window (the seed's BrowserList). Owns the delegate that
/// every one of its lists shares.
public final class BrowserList {
    public private(set) var browsers: [Browser] = []
    private let delegate = TabHelperAttacher()
    private unowned let profile: Profile

    init(profile: Profile) { self.profile = profile }

    /// The profile's Browser for `windowID`, created on first use.
    public func browser(for windowID: UUID) -> Browser {
        if let existing = browsers.first(where: { $0.windowID == windowID }) { return existing }
        let browser = Browser(windowID: windowID, profile: profile, delegate: delegate)
        browsers.append(browser)
        return browser
    }

    /// Closes every tab of the window's Browser and forgets it.
    public func removeBrowser(for windowID: UUID) {
        guard let index = browsers.firstIndex(where: { $0.windowID == windowID }) else { return }
        browsers.remove(at: index).webStateList.closeAll()
    }
}

/// A user's browsing profile (the seed's ChromeBrowserState): a state directory, a BrowserList,
/// and an off-the-record sibling that is created on demand and destroyed, with its tabs, when
/// its last tab closes.
public final class Profile {
    public let stateDirectory: FilePath
    public let kind: BrowserKind
    public private(set) lazy var browserList = BrowserList(profile: self)
    /// Tab identifiers are unique across the profile and its off-the-record sibling.
    private let identifiers: IdentifierSource
    private var offTheRecord: Profile?
    private weak var original: Profile?

    /// The regular profile rooted at `stateDirectory`.
    public convenience init(stateDirectory: FilePath) {
        self.init(stateDirectory: stateDirectory, kind: .regular, identifiers: IdentifierSource(), original: nil)
    }

    private init(stateDirectory: FilePath, kind: BrowserKind, identifiers: IdentifierSource, original: Profile?) {
        self.stateDirectory = stateDirectory
        self.kind = kind
        self.identifiers = identifiers
        self.original = original
    }

    public var isOffTheRecord: Bool { kind == .incognito }

    /// The off-the-record profile, created on first use. From it, the original.
    public var offTheRecordProfile: Profile {
        if isOffTheRecord { return self }
        if let offTheRecord { return offTheRecord }
        let created = Profile(
            stateDirectory: stateDirectory, kind: .incognito, identifiers: identifiers, original: self)
        offTheRecord = created
        return created
    }

    public var hasOffTheRecordProfile: Bool { offTheRecord != nil }

    /// The regular profile this one belongs to (itself when regular).
    public var originalProfile: Profile { original ?? self }

    /// Closes every off-the-record tab and forgets the off-the-record profile.
    public func destroyOffTheRecordProfile() {
        guard let offTheRecord else { return }
        for browser in offTheRecord.browserList.browsers {
            offTheRecord.browserList.removeBrowser(for: browser.windowID)
        }
        self.offTheRecord = nil
    }

    /// Where a window's session of this profile lives.
    public func sessionDirectory(for windowID: UUID) -> FilePath {
        DiskLayout.browserDirectory(root: stateDirectory, id: windowID, kind: kind)
    }

    /// A new tab identifier, never handed out before in this profile family. Check
    /// `webStateIDsExhausted` first when identifiers were restored from files.
    public func makeWebStateID() -> WebStateID { identifiers.generator.next() }

    /// Whether the profile family handed out (or restored) the highest identifier there is.
    public var webStateIDsExhausted: Bool { identifiers.generator.isExhausted }

    /// Keeps restored identifiers from being handed out again.
    public func reserveWebStateID(_ id: WebStateID) { identifiers.generator.reserve(id) }

    /// Whether a tab list of this profile family other than `list` holds a tab `id`:
    /// identifiers are unique across the family (a window's regular and incognito tabs are
    /// addressed by id alone), so a restore that would bring a second one in is damage.
    public func holdsWebState(_ id: WebStateID, outside list: WebStateList) -> Bool {
        listsOfFamily(outside: list).contains { $0.index(of: id) != nil }
    }

    /// The first tab (in the other lists' order) that a tab list of this profile family other
    /// than `list` holds with one of `ids`, if any: `holdsWebState` for a whole restore, in one
    /// pass over the other lists' tabs against the restore's own identifiers (nothing is built
    /// for the other lists, and the restored tabs are not looked at again).
    public func firstWebStateHeld(among ids: UniqueWebStateIDs, outside list: WebStateList) -> WebStateID? {
        guard !ids.isEmpty else { return nil }
        for other in listsOfFamily(outside: list) {
            if let held = other.webStates.first(where: { ids.contains($0.id) }) { return held.id }
        }
        return nil
    }

    private func listsOfFamily(outside list: WebStateList) -> [WebStateList] {
        let family = [originalProfile] + (originalProfile.offTheRecord.map { [$0] } ?? [])
        return family.flatMap { $0.browserList.browsers.map(\.webStateList).filter { $0 !== list } }
    }
}

/// Shared by a profile and its off-the-record sibling.
private final class IdentifierSource {
    var generator = WebStateIDGenerator()
}
