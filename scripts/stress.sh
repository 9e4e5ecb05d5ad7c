#!/usr/bin/env bash
# A long stress campaign against a release build: seeded browsing on every scene while workers
# (and now and then the supervisor) are killed with SIGKILL and snapshots are damaged; every
# recovery is judged by the oracle. Prints the summary; writes the JSON report to
# stress-results/. Exit 1 if anything acknowledged was lost, or a window came back torn.
#
#   scripts/stress.sh [MINUTES] [SCENES] [KILLS_PER_SECOND] [SEED]   (default: 10 8 5 random)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_swift
ensure_packages /usr/include/liburing.h:liburing-dev

minutes=${1:-10}
scenes=${2:-8}
rate=${3:-5}
seed=${4:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}

swift build -c release --product windowhost >&2
mkdir -p stress-results
report=stress-results/stress-$(date -u +%Y%m%dT%H%M%SZ)-seed$seed.json
.build/release/windowhost stress --duration $((minutes * 60)) --scenes "$scenes" --kill-rate "$rate" \
    --seed "$seed" --json "$report"
echo "report: $report"
