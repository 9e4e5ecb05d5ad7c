#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_swift
# gdb: HostileWorkerTests makes a worker fork through it, as a compromised one would.
# chromium and promtool (prometheus): HTTPStatusProcessTests loads the dashboard in a real
# browser and checks /metrics with Prometheus's own parser. bindfs: DeadFileSystemProcessTests
# puts a root on a real FUSE file system and kills its daemon. fio: FioRunTests runs the bench's
# outside referee for real.
ensure_packages /usr/include/liburing.h:liburing-dev /usr/bin/gdb:gdb /usr/bin/python3:python3 \
  /usr/bin/chromium:chromium /usr/bin/promtool:prometheus /usr/bin/bindfs:bindfs /usr/bin/fio:fio

# The tree is formatted as .swift-format says (the toolchain's own formatter); lint finds what
# `swift format format -i -r --parallel Package.swift Sources Tests Benchmarks Fuzz` would change.
if ! swift format lint --strict -r --parallel Package.swift Sources Tests Benchmarks Fuzz; then
  echo "error: the tree is not formatted; run: swift format format -i -r --parallel Package.swift Sources Tests Benchmarks Fuzz" >&2
  exit 1
fi

# Our own code builds without a warning (dependencies' warnings are theirs). A warning is only
# printed when its file compiles, which on a clean clone is every file.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! swift build --build-tests >"$log" 2>&1; then
  cat "$log" >&2
  echo "error: the build failed" >&2
  exit 1
fi
if grep -E "^$PWD/(Sources|Tests)/.*warning:" "$log" >&2; then
  echo "error: the build printed warnings in Sources/ or Tests/" >&2
  exit 1
fi
# A run ends as it started: nothing named windowhost-* left in the temporary directory and no
# windowhost: key left in the user keyring (revoked keys linger until the kernel collects them).
leftovers() {
  ls -1d "${TMPDIR:-/tmp}"/windowhost-* 2>/dev/null || true
  awk '$2 !~ /[RD]/ && $9 ~ /^windowhost:/ { print "key " $9 }' /proc/keys 2>/dev/null || true
}
before=$(leftovers | sort)
swift test --skip-build
left=$(comm -13 <(echo "$before") <(leftovers | sort))
if [ -n "$left" ]; then
  echo "$left" >&2
  echo "error: the tests left the files or keys above behind" >&2
  exit 1
fi

# The fuzzers, briefly: every target on its committed corpus, then 48 s of fuzzing in all (the
# build of the sanitized fuzz package comes first, unoptimized since it is most of this step's
# time; scripts/fuzz.sh SECONDS builds optimized and runs longer).
scripts/fuzz.sh --debug 48
