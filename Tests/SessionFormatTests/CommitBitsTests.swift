import BrowserModel
import SessionFormat
import Testing

/// A Browser's commit bit, in journals and in shared memory's failing Browsers, read back by
/// the one inverse (`BrowserKind.having`): what the supervisor names in its messages.
@Suite struct CommitBitsTests {
    @Test func theBitsNameTheirKindsAndOnlyThose() {
        #expect(BrowserKind.allCases.map(\.commitBit) == [1, 2])
        #expect(BrowserKind.having(commitBits: 0) == [])
        #expect(BrowserKind.having(commitBits: 1) == [.regular])
        #expect(BrowserKind.having(commitBits: 2) == [.incognito])
        #expect(BrowserKind.having(commitBits: 3) == [.regular, .incognito])
        // Bits no kind has, as a compromised worker may publish, name nothing more.
        #expect(BrowserKind.having(commitBits: ~0) == [.regular, .incognito])
        #expect(BrowserKind.having(commitBits: 4) == [])
    }
}
