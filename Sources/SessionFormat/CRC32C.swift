import CLinuxShims

/// CRC-32C (Castagnoli), the checksum of every frame: the polynomial iSCSI, ext4 and LevelDB
/// use, stronger than CRC-32 on short records. The SSE4.2 `crc32` instruction where the CPU has
/// it (through the C shim: Swift cannot name the intrinsic); software slicing-by-8 elsewhere.
/// Both give the same checksum; `Benchmarks/` measures each.
public enum CRC32C {
    /// Reflected polynomial 0x1EDC6F41.
    private static let polynomial: UInt32 = 0x82F6_3B78

    private static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ polynomial : crc >> 1 }
            tables[0][byte] = crc
        }
        for byte in 0..<256 {
            for slice in 1..<8 {
                let previous = tables[slice - 1][byte]
                tables[slice][byte] = (previous >> 8) ^ tables[0][Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    /// Whether this CPU computes the checksum in hardware (SSE4.2).
    public static let hasHardware = wh_cpu_has_sse42() != 0

    /// The checksum of `bytes`, continuing from `crc` (the checksum of what came before).
    public static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        hasHardware ? hardwareChecksum(bytes, continuing: crc) : tableChecksum(bytes, continuing: crc)
    }

    /// `checksum` with the SSE4.2 instruction; only where `hasHardware`.
    public static func hardwareChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        precondition(hasHardware, "the CRC-32C instruction needs SSE4.2")
        guard let base = bytes.baseAddress else { return crc }
        return ~wh_crc32c_sse42(~crc, base, bytes.count)
    }

    /// `checksum` in software, eight bytes per step through eight tables.
    public static func tableChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        var crc = ~crc
        var index = 0
        let count = bytes.count
        tables.withUnsafeBufferPointer { t in
            let t0 = t[0]
            let t1 = t[1]
            let t2 = t[2]
            let t3 = t[3]
            let t4 = t[4]
            let t5 = t[5]
            let t6 = t[6]
            let t7 = t[7]
            while count - index >= 8 {
                let low = crc ^ bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self).littleEndian
                let high = bytes.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self).littleEndian
                crc =
                    t7[Int(low & 0xFF)] ^ t6[Int((low >> 8) & 0xFF)] ^ t5[Int((low >> 16) & 0xFF)]
                    ^ t4[Int(low >> 24)] ^ t3[Int(high & 0xFF)] ^ t2[Int((high >> 8) & 0xFF)]
                    ^ t1[Int((high >> 16) & 0xFF)] ^ t0[Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = (crc >> 8) ^ t0[Int((crc ^ UInt32(bytes[index])) & 0xFF)]
                index += 1
            }
        }
        return ~crc
    }

    public static func checksum<Bytes: Collection<UInt8>>(_ bytes: Bytes, continuing crc: UInt32 = 0) -> UInt32 {
        if let result = bytes.withContiguousStorageIfAvailable({
            checksum(UnsafeRawBufferPointer($0), continuing: crc)
        }) {
            return result
        }
        return Array(bytes).withUnsafeBytes { checksum($0, continuing: crc) }
    }
}
