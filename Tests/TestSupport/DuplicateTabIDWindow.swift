import BrowserModel
import Foundation
import IOUring
import SessionStore
import SystemPackage

/// A fixture asked for something it cannot build (an id no tab may have).
public struct FixtureError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A tab of one committed page, with the id given: what a crafted file holds.
public func onePageTab(_ id: Int64, _ url: String) throws(FixtureError) -> WebState {
    guard let webStateID = WebStateID(rawValue: id) else { throw FixtureError("no tab may have id \(id)") }
    var history = NavigationHistory()
    history.commit(NavigationItem(url: url, timestamp: .zero))
    return WebState(id: webStateID, creationTime: .zero, history: history)
}

/// A window whose two Browsers hold one tab id: regular tab 5 and incognito tab 7 saved, then
/// incognito tab 5, written through a store as a crafted file would be (the model checks one
/// list at a time). With `compactAfterRecords`, two more saves (incognito tab 8, regular tab
/// 9) and a settle compact both Browsers, so both snapshots hold tab 5. One fixture for
/// recovery's tests and `inspect`'s, so both judge the same damage.
public func writeWindowWithATabIDInBothBrowsers(_ root: FilePath, windowID: UUID, compactAfterRecords: Int?) throws {
    let options = compactAfterRecords.map { StoreOptions(compactAfterRecords: $0) } ?? StoreOptions()
    let store = WindowStore(
        root: root, windowID: windowID, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
    _ = try store.recover()
    try store.apply(seq: 1) { try store.regular.webStateList.insert(try onePageTab(5, "https://regular.example/")) }
    try store.apply(seq: 2) { try store.incognito.webStateList.insert(try onePageTab(7, "https://private.example/")) }
    try store.waitUntilDurable(2)
    try store.apply(seq: 3) { try store.incognito.webStateList.insert(try onePageTab(5, "https://twin.example/")) }
    try store.waitUntilDurable(3)
    if compactAfterRecords != nil {
        try store.apply(seq: 4) { try store.incognito.webStateList.insert(try onePageTab(8, "https://more.example/")) }
        try store.apply(seq: 5) { try store.regular.webStateList.insert(try onePageTab(9, "https://more.example/")) }
        try store.waitUntilDurable(5)
        try store.settle()
    }
}
