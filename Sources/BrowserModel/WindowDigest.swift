/// A 64-bit digest of what a window shows: for each Browser (regular, then incognito) the tab
/// count, active index and pinned count, then each tab's id, opener, URL and title. Read from
/// metadata, so computing it realizes no tab. Shared memory carries the digest at the durable
/// seq; anything that models the window the same way (the stress oracle, a test) computes the
/// same value from its own data.
public struct WindowDigest: Sendable {
    /// What the digest covers of one tab.
    public struct Tab: Hashable, Sendable {
        public var id: Int64
        public var openerID: Int64?
        public var url: String
        public var title: String

        public init(id: Int64, openerID: Int64?, url: String, title: String) {
            self.id = id
            self.openerID = openerID
            self.url = url
            self.title = title
        }
    }

    /// What the digest covers of one Browser's list.
    public struct List: Hashable, Sendable {
        public var tabs: [Tab]
        public var activeIndex: Int?
        public var pinnedCount: Int

        public init(tabs: [Tab], activeIndex: Int?, pinnedCount: Int) {
            self.tabs = tabs
            self.activeIndex = activeIndex
            self.pinnedCount = pinnedCount
        }

        public init(_ list: WebStateList) {
            tabs = list.webStates.enumerated().map { index, webState in
                Tab(
                    id: webState.id.rawValue, openerID: (try? list.opener(at: index))?.openerID.rawValue,
                    url: webState.url, title: webState.title)
            }
            activeIndex = list.activeIndex
            pinnedCount = list.pinnedCount
        }
    }

    /// FNV-1a over a length-prefixed encoding: no two different windows share an encoding.
    public static func digest(regular: List, incognito: List) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        func mix(_ value: UInt64) {
            for shift in stride(from: 0, to: 64, by: 8) {
                hash = (hash ^ (value >> UInt64(shift) & 0xFF)) &* 0x100_0000_01B3
            }
        }
        func mix(_ text: String) {
            mix(UInt64(text.utf8.count))
            for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        }
        for list in [regular, incognito] {
            mix(UInt64(list.tabs.count))
            mix(list.activeIndex.map { UInt64($0) + 1 } ?? 0)
            mix(UInt64(list.pinnedCount))
            for tab in list.tabs {
                mix(UInt64(bitPattern: tab.id))
                mix(tab.openerID.map { UInt64(bitPattern: $0) &+ 1 } ?? 0)
                mix(tab.url)
                mix(tab.title)
            }
        }
        return hash
    }
}
