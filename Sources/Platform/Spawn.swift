import CLinuxShims
import Glibc
import SystemPackage

/// Starts `arguments[0]` with `arguments` and this process's environment through posix_spawn
/// (the shim's `wh_spawn`): `inherit[i]` becomes descriptor 3 + i in the child (a worker's:
/// `WorkerLaunch.Descriptor`, through `WorkerProcess.spawn`), every other
/// descriptor above 2 is closed, and the signal mask and dispositions are reset. With
/// `ownProcessGroup`, the child is only its parent's to signal: a Ctrl-C to the terminal's
/// group reaches the parent, which stops its children in order. The pid, or the errno
/// posix_spawn gave.
public func spawnProcess(_ arguments: [String], inheriting inherit: [Int32] = [], ownProcessGroup: Bool = false)
    -> Result<pid_t, Errno>
{
    precondition(!arguments.isEmpty, "the executable is arguments[0]")
    var pid: pid_t = 0
    let pointers = arguments.map { strdup($0) } + [nil]
    defer { for pointer in pointers { free(pointer) } }
    let result = pointers.withUnsafeBufferPointer { argv in
        inherit.withUnsafeBufferPointer {
            wh_spawn(
                arguments[0], argv.baseAddress!, environ, $0.baseAddress, Int32($0.count), ownProcessGroup ? 1 : 0, &pid
            )
        }
    }
    return result == 0 ? .success(pid) : .failure(Errno(rawValue: result))
}
