import HostLimits
import Testing

@testable import Supervisor

/// The rule for text entering the host (`ForbiddenCharacter`), and the control socket's check
/// for JSON escapes that are no text at all.
@Suite struct TextRuleTests {
    @Test func aURLHoldsNoControlCharacterAndATitleNoNUL() {
        #expect(ForbiddenCharacter.inURL("https://a.example/ä?q=1#x") == nil)
        #expect(
            ForbiddenCharacter.inURL("https://a.example/\u{0}x") == ForbiddenCharacter.inURL("https://a.example/\u{0}x")
        )
        for scalar: UInt32 in [0x00, 0x01, 0x09, 0x0A, 0x0D, 0x1F, 0x7F] {
            let url = "https://ä.example/" + String(Character(Unicode.Scalar(scalar)!)) + "tail"
            let forbidden = ForbiddenCharacter.inURL(url)
            #expect(forbidden?.scalar == scalar && forbidden?.offset == "https://ä.example/".utf8.count, "U+\(scalar)")
        }
        #expect(
            ForbiddenCharacter.inURL("https://a.example/\u{80}\u{A0} ") == nil,
            "C1 controls and spaces are percent-encoded by browsers, not refused")
        #expect(ForbiddenCharacter.inTitle("A\tpage\ntitle") == nil)
        #expect(ForbiddenCharacter.inTitle("A\u{0}title")?.offset == 1)
        #expect("\(ForbiddenCharacter.inURL("a\u{1}")!)".contains("U+0001"))
    }

    @Test func aLoneSurrogateEscapeIsFoundAndAPairOrAnEscapedBackslashIsNot() {
        func offset(_ json: String) -> Int? { ControlServer.loneSurrogateEscape(in: Array(json.utf8)) }
        #expect(offset(#"{"url":"\ud800"}"#) == 8)
        #expect(offset(#"{"url":"a\udc00b"}"#) == 9, "a low half first")
        #expect(offset(#"{"url":"\ud800\u0041"}"#) == 8, "a high half and no low half after it")
        #expect(offset(#"{"url":"\uD83D"#) == 8, "cut off")
        #expect(offset(#"{"url":"\ud83d\ude00 \u00e9 \u0000"}"#) == nil, "a pair, a BMP escape, NUL (the URL rule's)")
        #expect(offset(#"{"url":"\\ud800"}"#) == nil, "an escaped backslash, then text")
        #expect(offset(#"{"url":"\"\ud800"}"#) == 10)
        #expect(offset(#"{"\ud800":1}"#) == 2, "in a key too")
        #expect(offset(#"{"verb":"open"} \ud800"#) == nil, "outside strings is the decoder's to refuse")
        #expect(offset(#"{"url":"\uZZZZ"}"#) == nil, "malformed otherwise: the decoder's")
    }
}
