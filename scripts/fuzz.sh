#!/usr/bin/env bash
# Builds the coverage-guided fuzzers (Fuzz/: libFuzzer through the toolchain's -sanitize=fuzzer,
# with AddressSanitizer) and runs each target for its share of SECONDS (default 300) on a copy
# of its committed corpus (Fuzz/Corpus/<target>/, which never changes here). An input must end in
# a typed error or a valid state: a crash, a trap, a finding (a broken promise, see
# Fuzz/Sources/FuzzInputs), a hang past -timeout, an allocation above -malloc_limit_mb (the
# format's record limit plus slack, asked of the targets themselves) or RSS above -rss_limit_mb
# fails the run, which names the input. Prints per target: runs, coverage (cov/ft), new corpus
# units, time. Usage: scripts/fuzz.sh [--debug] [SECONDS]. --debug builds the targets unoptimized:
# the build takes about 3 min instead of 5 on 2 cores and each input runs slower, which suits a
# brief run (scripts/test.sh), where the build is most of the time; long runs keep the default.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_swift
ensure_packages /usr/include/liburing.h:liburing-dev

configuration=release
if [ "${1:-}" = --debug ]; then configuration=debug; shift; fi
seconds=${1:-300}
[ $# -le 1 ] && [[ $seconds =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || { echo "usage: scripts/fuzz.sh [--debug] [SECONDS]" >&2; exit 64; }

# libFuzzer ships with the Swift toolchain's clang runtime; a distribution's clang would not match.
toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")
if ! compgen -G "$toolchain/lib/clang/*/lib/linux/libclang_rt.fuzzer-$(uname -m).a" >/dev/null; then
  echo "error: the Swift toolchain at $toolchain has no libFuzzer runtime (lib/clang/*/lib/linux/libclang_rt.fuzzer-$(uname -m).a); install a swift.org toolchain" >&2
  exit 69
fi

scratch=Fuzz/.build-fuzz-$configuration
log=$(mktemp)
trap 'rm -f "$log"' EXIT
started=$(date +%s)
# lld: each target's main replaces libFuzzer's (gold refuses the two). -enable-testing: FuzzInputs
# reaches internal declarations of Supervisor (SupervisorFiles) through @testable import.
if ! swift build --package-path Fuzz --scratch-path "$scratch" -c "$configuration" \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld -Xswiftc -enable-testing >"$log" 2>&1; then
  cat "$log" >&2
  echo "error: the fuzzers did not build" >&2
  exit 1
fi
if grep -E "^$PWD/(Sources|Fuzz/Sources)/.*warning:" "$log" >&2; then
  echo "error: the fuzz build printed warnings" >&2
  exit 1
fi
echo "fuzzers built in $(($(date +%s) - started)) s"
bin=$(swift build --package-path Fuzz --scratch-path "$scratch" -c "$configuration" --show-bin-path \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld -Xswiftc -enable-testing)

targets=()
for directory in Fuzz/Sources/Targets/*/; do targets+=("$(basename "$directory")"); done
share=$((seconds / ${#targets[@]}))
[ "$share" -gt 0 ] || share=1
# The largest allocation a valid input needs, as the format defines it (FuzzTarget.allocationLimitMiB).
malloc_limit_mb=$("$bin/fuzz-frame" -runs=0 2>&1 | sed -n 's/.*the format allows \([0-9]*\) MiB.*/\1/p')
[ -n "$malloc_limit_mb" ] || { echo "error: fuzz-frame did not say its allocation limit" >&2; exit 1; }
echo "each target ${share} s; per input: -timeout=10 s, -malloc_limit_mb=$malloc_limit_mb, -rss_limit_mb=2048"

# A trap is reported by ASan and libFuzzer, not by Swift's backtracer (the two collide). Leaks are
# not checked: Foundation's String(contentsOfFile:) leaks 4 KiB reading an empty file.
export SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
run=$scratch/run
rm -rf "$run"
failures=()
printf '%-16s %10s %7s %7s %5s %6s  %s\n' target runs cov ft new time result
for target in "${targets[@]}"; do
  mkdir -p "$run/$target/corpus" "$run/$target/artifacts"
  cp Fuzz/Corpus/"$target"/* "$run/$target/corpus/"
  before=$(find "$run/$target/corpus" -type f | wc -l)
  output=$run/$target/output
  started=$(date +%s)
  status=0
  # -max_total_time bounds the fuzzing; `timeout` bounds a process that stops answering at all.
  timeout --signal=KILL $((share + 120)) "$bin/fuzz-$target" "$run/$target/corpus" \
    -max_total_time="$share" -timeout=10 -malloc_limit_mb="$malloc_limit_mb" -rss_limit_mb=2048 \
    -max_len=16384 -print_final_stats=1 -artifact_prefix="$run/$target/artifacts/" >"$output" 2>&1 || status=$?
  elapsed=$(($(date +%s) - started))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$output" | tail -1)
  coverage=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$output" | tail -1 || true)
  cov=$(awk '{print $2}' <<<"$coverage")
  ft=$(awk '{print $4}' <<<"$coverage")
  new=$(($(find "$run/$target/corpus" -type f | wc -l) - before))
  result=ok
  if [ "$status" -ne 0 ]; then
    artifact=$(find "$run/$target/artifacts" -type f | head -1)
    result="FAILED (exit $status): ${artifact:-no input saved, see $output}"
    failures+=("$target: ${artifact:-$output}")
  fi
  printf '%-16s %10s %7s %7s %5s %5ss  %s\n' "$target" "${runs:-?}" "${cov:-?}" "${ft:-?}" "$new" "$elapsed" "$result"
done

if [ ${#failures[@]} -gt 0 ]; then
  for failure in "${failures[@]}"; do
    target=${failure%%:*}
    echo "--- fuzz-$target ($run/$target/output):" >&2
    grep -E "ERROR|Fatal error|SUMMARY|#[0-9]+ 0x" "$run/$target/output" | head -20 >&2
  done
  echo "error: the fuzzers failed on:" >&2
  printf '  %s\n' "${failures[@]}" >&2
  echo "reproduce: $bin/fuzz-TARGET INPUT; minimise: add -minimize_crash=1 -runs=10000" >&2
  exit 1
fi
