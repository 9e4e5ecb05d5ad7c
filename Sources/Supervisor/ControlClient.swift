import Foundation
import Glibc
import SystemPackage

/// The client side of the control socket: one request, one reply, one connection.
public enum ControlClient {
    /// Sends `request` and waits for the reply, at most `timeout` seconds if given (a reply
    /// that does not come is `.temporary`). A socket nobody answers at gives `.unavailable`.
    public static func call(_ request: ControlRequest, socket path: FilePath, timeout: Int? = nil) -> ControlReply {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(.unavailable, "socket: \(Errno(rawValue: errno))") }
        defer { close(fd) }
        if let timeout {
            var limit = timeval(tv_sec: timeout, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        }
        guard var address = UnixSocketAddress.make(path) else { return .failure(.usage, "socket path too long: \(path)") }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            return .failure(.unavailable, "no supervisor at \(path): \(Errno(rawValue: errno))")
        }
        guard var line = try? JSONEncoder().encode(request) else { return .failure(.usage, "unencodable request") }
        line.append(UInt8(ascii: "\n"))
        var sent = 0
        while sent < line.count {
            let count = line[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return .failure(.unavailable, "the supervisor hung up: \(Errno(rawValue: errno))") }
            sent += count
        }
        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = recv(fd, &chunk, chunk.count, 0)
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                return .failure(.temporary, "no reply from the supervisor in \(timeout ?? 0) s")
            }
            guard count > 0 else { break }
            reply += chunk[..<count]
            if reply.last == UInt8(ascii: "\n") { break }
        }
        guard !reply.isEmpty else { return .failure(.unavailable, "the supervisor closed the connection without a reply") }
        do {
            return try JSONDecoder().decode(ControlReply.self, from: Data(reply))
        } catch {
            return .failure(.software, "unreadable reply: \(error)")
        }
    }
}

/// `sockaddr_un` for a path, or nil when the path does not fit.
public enum UnixSocketAddress {
    public static func make(_ path: FilePath) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.string.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }
}
