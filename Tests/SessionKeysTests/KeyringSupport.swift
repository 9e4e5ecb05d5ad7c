import Foundation
import Glibc
import SessionKeys
import SystemPackage
import TestSupport
import Testing

/// A name no other test (or earlier run) uses: a random root identity and window.
func uniqueName(window: UUID = UUID()) -> WindowKeyName {
    WindowKeyName(rootDevice: .random(in: 1 ... .max), rootInode: .random(in: 1 ... .max), window: window)
}

/// Revokes `name`'s key whatever happened in the test.
func cleanUp(_ name: WindowKeyName) {
    do { try KernelKeyring().revoke(name) } catch { Issue.record("cleanup of \(name) failed: \(error)") }
}

/// Lowercase hex, as the other process prints a payload.
func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

/// The line of /proc/keys for the key described `name`, if the kernel shows one.
///
/// Read whole with `read(2)` until it returns 0: Foundation's readers stop after the first read
/// that returns less than 4 KiB, as every read of a /proc file does, and saw only the first 4
/// KiB of the table (a CI run failed so once the table held 147 keys).
func procKeysLine(_ name: WindowKeyName) throws -> String? {
    guard let table = procText("/proc/keys") else { throw Errno(rawValue: errno) }
    return table.split(separator: "\n").map(String.init).first {
        $0.hasSuffix(" \(name.description): \(KernelKeyring.keyBytes)")
    }
}

/// What another process finds under `name` in the user keyring through raw syscalls (ctypes):
/// the payload's hex, or `none <errno>` when the search fails.
func readFromAnotherProcess(_ name: WindowKeyName) throws -> String {
    let script = """
        import ctypes, os, sys
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        keyctl = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
        L = ctypes.c_long
        serial = libc.syscall(L(keyctl), L(10), L(-4), ctypes.c_char_p(b"user"), ctypes.c_char_p(sys.argv[1].encode()), L(0))
        if serial < 0:
            print("none", ctypes.get_errno())
            sys.exit(0)
        buffer = ctypes.create_string_buffer(64)
        length = libc.syscall(L(keyctl), L(11), L(serial), buffer, L(64))
        if length < 0:
            print("unreadable", ctypes.get_errno())
            sys.exit(0)
        print(buffer.raw[:length].hex())
        """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", "-c", script, name.description]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Runs `body(i)` for each `i` in `0..<count`, each on a thread of its own, and waits for all:
/// a seccomp filter installed on one binds that thread only, and concurrent calls really overlap.
func onDedicatedThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    final class Work {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }
    var threads: [pthread_t] = []
    for index in 0..<count {
        var thread = pthread_t()
        let work = Unmanaged.passRetained(Work { body(index) }).toOpaque()
        let created = pthread_create(
            &thread, nil,
            { argument in
                Unmanaged<Work>.fromOpaque(argument!).takeRetainedValue().run()
                return nil
            }, work)
        #expect(created == 0)
        if created == 0 { threads.append(thread) }
    }
    for thread in threads { pthread_join(thread, nil) }
}
