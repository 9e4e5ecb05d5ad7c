#!/usr/bin/env bash
# Installs what is missing, builds, and shows the session store at work:
# 1. `windowhost demo`: seeded browsing in one window's regular and incognito Browsers, saved
#    after the seed's policy, restored lazily and checked against the live window, and a damaged
#    snapshot recovered from the generation before (extra arguments go to it);
# 2. a process saving every command is killed with SIGKILL mid-run; `windowhost inspect` shows
#    what is on disk, and a new process recovers it and goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_swift
ensure_packages /usr/include/liburing.h:liburing-dev

swift build -c release --product windowhost >&2
windowhost=.build/release/windowhost
"$windowhost" demo "$@"

root=$(mktemp -d "${TMPDIR:-/tmp}/windowhost-kill-XXXXXX")
trap 'rm -rf "$root"' EXIT
echo
echo "kill -9 while saving: a process applies seeded commands and saves each durably"
"$windowhost" save-loop --root "$root" --seed 7 --compact-after 64 > "$root/acks" 2>/dev/null &
child=$!
sleep 0.4
kill -9 "$child"
wait "$child" 2>/dev/null || true
acknowledged=$(grep '^durable ' "$root/acks" | tail -1 | cut -d' ' -f2)
echo "  killed after command ${acknowledged:-0} was acknowledged durable"
"$windowhost" inspect "$root" | head -4 | sed 's/^/  /'
"$windowhost" save-loop --root "$root" --seed 7 --compact-after 64 --until $(( ${acknowledged:-0} + 5 )) 2>/dev/null \
    | grep -E '^(recovered|durable)' | sed -n '1p;$p' | sed 's/^/  new process: /'
