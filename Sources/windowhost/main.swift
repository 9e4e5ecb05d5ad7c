import WindowhostCLI

// The shipped command: the command line with no faults installed.
Windowhost.start(Windowhost.self)
