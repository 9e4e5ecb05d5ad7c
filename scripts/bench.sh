#!/usr/bin/env bash
# The full benchmark against a release build: floor, uring, sync and rewrite side by side with
# 1, 2, 4, 8 and 16 windows saving at once, small and large saves; restore of a 10,000-tab
# window; round trips through shared memory, a socket and ctl; fio as the outside referee (Debian's
# fio, installed when missing). Prints the table and writes
# bench-results/bench-UTC.json and .html. Then the package-benchmark suites, checked against
# the static thresholds in Benchmarks/Thresholds (exit non-zero on a regression), unless
# SKIP_PACKAGE_BENCHMARKS=1. Files go to BENCH_DIR (default: the state directory's parent):
# give it a real disk, never tmpfs.
#
#   scripts/bench.sh [--quick] [other windowhost bench options]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_swift
ensure_packages /usr/include/liburing.h:liburing-dev /usr/bin/fio:fio

swift build -c release --product windowhost >&2
mkdir -p bench-results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
dir_flags=()
[ -n "${BENCH_DIR:-}" ] && dir_flags=(--dir "$BENCH_DIR")
.build/release/windowhost bench "${dir_flags[@]}" --json "bench-results/bench-$stamp.json" \
    --html "bench-results/bench-$stamp.html" "$@"
echo "reports: bench-results/bench-$stamp.json bench-results/bench-$stamp.html"
if [ "${SKIP_PACKAGE_BENCHMARKS:-0}" != 1 ]; then
  WINDOWHOST_BENCH_DIR=${BENCH_DIR:-/var/tmp} swift package --package-path Benchmarks benchmark \
      thresholds check --path Benchmarks/Thresholds
fi
