#!/usr/bin/env bash
# Installs what is missing, builds, and shows the host at work in a temporary root, driven only
# through `windowhost run` and `windowhost ctl`, as any script would:
#   three scenes, each its own worker process; tabs opened and navigated; a scene sent to the
#   background (it saves at once); a worker killed with SIGKILL and back with its UUID and tabs;
#   a scene disconnected and reconnected; save latency from shared memory; shutdown.
# `windowhost demo` (the session store alone) and `windowhost inspect` are there to explore more.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_swift
ensure_packages /usr/include/liburing.h:liburing-dev

swift build -c release --product windowhost >&2
windowhost=$PWD/.build/release/windowhost
root=$(mktemp -d "${TMPDIR:-/tmp}/windowhost-demo-XXXXXX")
supervisor=
cleanup() {
  [ -n "$supervisor" ] && kill -9 "$supervisor" 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT

say() { printf '\n== %s\n' "$*"; }
ctl() { "$windowhost" ctl --socket "$root/host/ctl.sock" "$@"; }

say "windowhost run: a supervisor and three scenes (logs in $root/host.log)"
"$windowhost" run --root "$root/host" --scenes 3 --save-delay 250 > "$root/ready" 2> "$root/host.log" &
supervisor=$!
for _ in $(seq 1 300); do grep -q '^ready ' "$root/ready" 2>/dev/null && break; sleep 0.1; done
cat "$root/ready"
ctl status
mapfile -t windows < <(ctl status --json | python3 -c 'import json,sys; [print(w["uuid"]) for w in json.load(sys.stdin)["windows"]]')
first=${windows[0]}; second=${windows[1]}; third=${windows[2]}

say "tab traffic through ctl"
for window in "${windows[@]}"; do
  for site in news mail docs maps; do
    tab=$(ctl open --window "$window" --url "https://$site.example/")
    ctl navigate --window "$window" --tab "$tab" --url "https://$site.example/today" > /dev/null
  done
done
private=$(ctl open --window "$first" --incognito --url "https://private.example/")
ctl move --window "$first" --tab 1 --index 3 > /dev/null
ctl replace --window "$first" --tab 2 --url "https://prerendered.example/" > /dev/null
ctl activate --window "$first" --tab "$private" > /dev/null
ctl dump --window "$first"

say "background: the scene saves at once (case 1)"
ctl background --window "$second"
ctl wait-durable --window "$second"

say "kill -9 a worker: it comes back with the same UUID and its last durable state"
ctl wait-durable --window "$first"
before=$(ctl dump --window "$first" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["digest"], d["durable_seq"])')
ctl kill --window "$first"
after=$(ctl dump --window "$first" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["digest"], d["durable_seq"])')
echo "digest and durable seq before the kill: $before; after: $after"
[ "$before" = "$after" ] || { echo "error: the window came back different" >&2; exit 1; }

say "disconnect a scene (it saves, its worker exits 0), then connect one: the window reopens"
ctl disconnect --window "$third"
ctl status
reopened=$(ctl connect)
echo "connected: $reopened (was $third)"
ctl dump --window "$reopened" | head -3

say "save latency, request to durable, read from shared memory"
ctl stats

say "shutdown: every window saves, everything exits 0"
ctl shutdown
wait "$supervisor" && echo "supervisor exited 0"
supervisor=
"$windowhost" inspect "$root/host" | head -12
