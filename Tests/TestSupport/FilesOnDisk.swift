import Foundation
import SystemPackage

/// Every regular file under `root`, whole: what a search of the disk reads.
public func everyFile(under root: FilePath) -> [(path: String, bytes: [UInt8])] {
    let enumerator = FileManager.default.enumerator(atPath: root.string)
    var files: [(String, [UInt8])] = []
    while let name = enumerator?.nextObject() as? String {
        let path = root.string + "/" + name
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
            let data = FileManager.default.contents(atPath: path)
        else { continue }
        files.append((path, Array(data)))
    }
    return files
}

/// The files under `root` whose bytes hold `text` anywhere (a URL left in the clear, say).
public func filesHolding(_ text: String, under root: FilePath) -> [String] {
    let needle = Data(text.utf8)
    return everyFile(under: root).filter { Data($0.bytes).range(of: needle) != nil }.map(\.path)
}
