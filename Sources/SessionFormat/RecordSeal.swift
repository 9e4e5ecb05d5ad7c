import BrowserModel
import Crypto
import Foundation
import HostLimits

/// AES-256-GCM (swift-crypto) over the records of one file: how an incognito session is kept
/// at rest.
///
/// A sealed payload is `nonce (12) · ciphertext · tag (16)`. The nonce is drawn at random for
/// every record, never derived from where the record goes: a journal writes the same offset
/// again after a save taken back, with other bytes, and a derived nonce would then repeat under
/// one key. 96 random bits stay clear of a repeat for far more records than a window writes.
///
/// The authenticated data binds a record to its place: the window, the Browser, the file's
/// kind and generation (`RecordSeal.File`), the record's kind and its offset in the file. A
/// record copied into another file, to another place in its file, or presented as another kind
/// does not open, and neither does one with a flipped bit; each is damage, handled like a
/// checksum mismatch (`SessionFormatError.unopenable`). The frame's CRC still covers the
/// sealed bytes, so a torn write is told from a forged one as before.
public struct RecordSeal: Sendable {
    /// What sealing adds to a payload.
    public static let overhead = 12 + 16

    private let key: SymmetricKey
    private let file: [UInt8]

    /// A window's key: exactly 32 bytes (`SessionKeys`), checked once.
    public struct Key: Sendable {
        let key: SymmetricKey

        public init(_ bytes: [UInt8]) throws(SessionFormatError) {
            guard bytes.count == 32 else {
                throw .unopenable(offset: 0, reason: "a key of \(bytes.count) bytes, not 32")
            }
            key = SymmetricKey(data: bytes)
        }
    }

    /// Which file a record belongs to: its part of the authenticated data.
    public struct File: Sendable, Equatable {
        public let window: UUID
        public let browser: BrowserKind
        public let kind: SessionFileKind
        public let generation: UInt64

        public init(window: UUID, browser: BrowserKind, kind: SessionFileKind, generation: UInt64) {
            self.window = window
            self.browser = browser
            self.kind = kind
            self.generation = generation
        }

        var bytes: [UInt8] {
            var bytes = Array("windowhost-sealed-record-1".utf8)
            withUnsafeBytes(of: window.uuid) { bytes += $0 }
            bytes.append(browser == .regular ? 1 : 2)
            bytes += kind.magic
            bytes.appendLittleEndian(generation)
            return bytes
        }
    }

    public init(key: Key, file: File) {
        self.key = key.key
        self.file = file.bytes
    }

    private func authenticated(_ kind: RecordKind, at offset: Int) -> [UInt8] {
        var data = file
        data.append(kind.rawValue)
        data.appendLittleEndian(UInt64(offset))
        return data
    }

    /// `payload` sealed for a record of `kind` framed at `offset` in the file.
    func seal(_ payload: [UInt8], kind: RecordKind, at offset: Int) throws(SessionFormatError) -> [UInt8] {
        do {
            let box = try AES.GCM.seal(
                payload, using: key, nonce: AES.GCM.Nonce(), authenticating: authenticated(kind, at: offset))
            let sealed = Array(box.nonce) + Array(box.ciphertext) + Array(box.tag)
            assert(sealed.count == payload.count + Self.overhead, "sealing adds its fixed overhead")
            return sealed
        } catch {
            throw .unopenable(offset: offset, reason: "sealing failed: \(error)")
        }
    }

    /// The payload of the record of `kind` at `offset`, authenticated; throws `.unopenable`
    /// for any change, move or other key.
    func open(_ sealed: [UInt8], kind: RecordKind, at offset: Int) throws(SessionFormatError) -> [UInt8] {
        guard sealed.count >= Self.overhead else {
            throw .unopenable(
                offset: offset, reason: "\(sealed.count) bytes, shorter than a sealed record's \(Self.overhead)")
        }
        do {
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: sealed[0..<12]), ciphertext: sealed[12..<(sealed.count - 16)],
                tag: sealed[(sealed.count - 16)...])
            return Array(try AES.GCM.open(box, using: key, authenticating: authenticated(kind, at: offset)))
        } catch {
            throw .unopenable(
                offset: offset, reason: "it does not authenticate (damaged, moved, or sealed with another key)")
        }
    }
}

extension RecordKind {
    /// Kinds that hold tab contents, sealed in a sealed file. Commits (seqs and Browser bits)
    /// and padding (zeros) stay in the clear: recovery finds commits by their fixed length.
    var isSealed: Bool {
        switch self {
        case .listMetadata, .navigation, .mutation, .listMetadataContinuation, .listIndex, .strings: true
        case .commit, .padding: false
        }
    }
}
