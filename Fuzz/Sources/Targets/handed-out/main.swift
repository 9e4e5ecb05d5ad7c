import CFuzzDriver
import FuzzInputs
import Glibc

// libFuzzer's entry point. SwiftPM links this module's main in place of libFuzzer's, so main
// checks the flags and hands the run to libFuzzer's driver.
@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzTarget.handedOut.fuzz(UnsafeBufferPointer(start: data, count: size))
    return 0
}

FuzzTarget.handedOut.checkFlags(CommandLine.arguments)
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { testOneInput($0, $1) })
