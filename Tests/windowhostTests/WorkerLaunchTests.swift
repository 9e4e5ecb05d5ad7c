import Foundation
import HostCoordination
import SystemPackage
import Testing

@testable import WindowhostCLI

/// The launch contract is spelled once: what the supervisor puts on a worker's command line
/// (`WorkerLaunch.arguments`) is what `windowhost worker` parses back, field for field. Before,
/// the supervisor built the arguments by hand beside the options the worker declared.
@Suite struct WorkerLaunchTests {
    static let launches = [
        WorkerLaunch(
            slot: 0, generation: 1, window: UUID(), root: "/tmp/root", saveDelayMilliseconds: 0, io: "sync",
            supervisorPID: 1,
            seqFloor: 0, tabFloor: 0, compactAfterRecords: nil),
        WorkerLaunch(
            slot: 15, generation: .max, window: UUID(), root: "/a root/with spaces", saveDelayMilliseconds: 2500,
            io: "uring",
            supervisorPID: .max, seqFloor: (1 << 53) - 1, tabFloor: (1 << 53) - 1, compactAfterRecords: 2),
        WorkerLaunch(
            slot: 3, generation: 7, window: UUID(), root: "relative", saveDelayMilliseconds: 10, io: nil,
            supervisorPID: 4242,
            seqFloor: 12, tabFloor: 9, compactAfterRecords: 4096, inBackground: true),
    ]

    @Test(arguments: launches) func theWorkerParsesBackWhatTheSupervisorLaunches(_ launch: WorkerLaunch) throws {
        let arguments = launch.arguments(executable: "/usr/bin/windowhost")
        #expect(arguments.prefix(2) == ["/usr/bin/windowhost", WorkerLaunch.subcommand])
        let command = try WorkerProcessCommand.parse(Array(arguments.dropFirst(2)))
        #expect(command.launch == launch)
    }

    /// `spawnProcess` hands `inherit[i]` over as 3 + i: the numbers run from 3 without a gap.
    @Test func theInheritedDescriptorsRunFromThree() {
        #expect(WorkerLaunch.Descriptor.allCases.map(\.rawValue) == [3, 4, 5, 6])
    }
}

/// A spare's command line is the shared part of a worker's: what `windowhost spare` parses back.
@Suite struct SpareLaunchTests {
    @Test(arguments: WorkerLaunchTests.launches) func theSpareParsesBackWhatEveryWorkerShares(_ launch: WorkerLaunch)
        throws
    {
        let arguments = launch.spare.arguments(executable: "/usr/bin/windowhost")
        #expect(arguments.prefix(2) == ["/usr/bin/windowhost", SpareLaunch.subcommand])
        let command = try SpareWorkerCommand.parse(Array(arguments.dropFirst(2)))
        #expect(command.shared.launch == launch.spare)
        #expect(WorkerLaunch(command.shared.launch, assignment: launch.assignment) == launch)
    }
}
