#!/usr/bin/env bash
# Two long stress campaigns against a release build: seeded browsing on every scene while
# workers (and now and then the supervisor) are killed with SIGKILL and snapshots are damaged;
# every recovery is judged by the oracle; tabs move between windows, half the kills aimed at a
# move, and every move is judged on both windows (duplicated, lost in move). Then the same with power cuts: workers write through
# the powercut engine, so each kill also loses every write not yet synced. Prints both
# summaries; writes the JSON and HTML reports (a timeline of kills, damage and recoveries, the
# distributions, the verdicts: docs/observability.md) to stress-results/. Exit 1 if anything acknowledged was
# lost, or a window came back torn, in either.
#
#   scripts/stress.sh [--hostile] [MINUTES] [SCENES] [KILLS_PER_SECOND] [SEED]   (default: 10 8 5 random)
#
# --hostile adds a third campaign: the same kills while the disk now and then fills and frees,
# and symlinks (to a canary outside the root), FIFOs and directories appear where the host
# reads and writes. It mounts a 64 MiB tmpfs for its root, so it needs root; without root it
# is refused (windowhost stress --hostile --root DIR runs it on a filesystem of at most 512 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_swift
ensure_packages /usr/include/liburing.h:liburing-dev

hostile=0
if [ "${1:-}" = --hostile ]; then
  hostile=1
  shift
fi
minutes=${1:-10}
scenes=${2:-8}
rate=${3:-5}
seed=${4:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}

swift build -c release --product windowhost >&2
mkdir -p stress-results
status=0
modes=(kill power-cut)
[ "$hostile" = 1 ] && modes+=(hostile)
for mode in "${modes[@]}"; do
  report=stress-results/stress-$(date -u +%Y%m%dT%H%M%SZ)-$mode-seed$seed
  flags=()
  [ "$mode" = power-cut ] && flags=(--power-cut)
  [ "$mode" = hostile ] && flags=(--hostile)
  echo "== $mode: $minutes minutes, $scenes scenes, $rate kills/s, seed $seed"
  .build/release/windowhost stress --duration $((minutes * 60)) --scenes "$scenes" --kill-rate "$rate" \
      --seed "$seed" --json "$report.json" --html "$report.html" "${flags[@]}" || status=1
  echo "reports: $report.json $report.html"
done
exit $status
