#!/usr/bin/env bash
# Remakes the seed corpus (Fuzz/Corpus/<target>/) from real session files: `windowhost demo`
# for snapshots and journals (damaged ones included), `windowhost run` driven over its control
# socket for windows.order, handed-out and for the requests and replies exactly as they cross the socket.
# Journals are cut after their last non-zero byte, plus a little of the zeroed tail the store
# preallocates. Hand-made inputs (odd windows.order files, requests no client sends) are in
# Fuzz/Corpus too and are kept. Usage: Fuzz/make-corpus.sh [WINDOWHOST]
set -euo pipefail
cd "$(dirname "$0")/.."
windowhost=${1:-$PWD/.build/debug/windowhost}
[ -x "$windowhost" ] || { echo "error: no $windowhost; build it first (swift build)" >&2; exit 1; }
corpus=$PWD/Fuzz/Corpus
work=$(mktemp -d "${TMPDIR:-/tmp}/windowhost-corpus-XXXXXX")
supervisor=
cleanup() {
  [ -n "$supervisor" ] && kill -9 "$supervisor" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Copies FILE into the corpus of each TARGET under NAME; a journal is cut after its content.
add() {
  local file=$1 name=$2; shift 2
  local target
  for target in "$@"; do
    mkdir -p "$corpus/$target"
    case $name in
      journal*) python3 - "$file" "$corpus/$target/$name" <<'EOF'
import sys
data = open(sys.argv[1], 'rb').read()
end = len(data.rstrip(b'\0'))
open(sys.argv[2], 'wb').write(data[:min(len(data), end + 32)])
EOF
        ;;
      *) cp "$file" "$corpus/$target/$name" ;;
    esac
  done
}

# The session store alone: seeded browsing (pins, openers, moves, replaces, incognito), saved,
# compacted, and a damaged snapshot set aside.
for seed in 1 2 3; do
  commands=$((seed * 30))
  "$windowhost" demo --root "$work/demo$seed" --seed "$seed" --commands "$commands" --save-delay 0 > /dev/null
  while IFS= read -r file; do
    browser=$(basename "$(dirname "$file")")
    [ "$browser" = damaged ] && browser=$(basename "$(dirname "$(dirname "$file")")")-damaged
    name=$(basename "$file")
    case $name in
      snapshot-*) add "$file" "snapshot-demo$seed-$browser-${name:9:16}" snapshot ;;
      journal-*) add "$file" "journal-demo$seed-$browser-${name:8:16}" journal ;;
    esac
  done < <(find "$work/demo$seed/windows" -type f | sort)
done
# Framing sees both kinds; a few of each are enough.
for file in "$corpus"/snapshot/snapshot-demo1-* "$corpus"/journal/journal-demo1-*; do add "$file" "$(basename "$file")" frame; done

# The supervisor: three scenes, tab traffic, a disconnect; every request and reply recorded.
"$windowhost" run --root "$work/host" --scenes 3 --save-delay 0 > "$work/ready" 2> "$work/host.log" &
supervisor=$!
for _ in $(seq 1 300); do grep -q '^ready ' "$work/ready" 2>/dev/null && break; sleep 0.1; done
python3 - "$work/host/ctl.sock" "$corpus" <<'EOF'
import json, os, socket, sys
path, corpus = sys.argv[1], sys.argv[2]
count = 0
def call(request):
    global count
    line = json.dumps(request, separators=(',', ':')).encode() + b'\n'
    s = socket.socket(socket.AF_UNIX); s.connect(path); s.sendall(line)
    reply = b''
    while not reply.endswith(b'\n'):
        chunk = s.recv(65536)
        if not chunk: break
        reply += chunk
    s.close()
    count += 1
    for target, data in (('control-request', line), ('control-reply', reply)):
        os.makedirs(f'{corpus}/{target}', exist_ok=True)
        open(f'{corpus}/{target}/real-{count:02}-{request["verb"]}', 'wb').write(data)
    return json.loads(reply)
windows = [w['uuid'] for w in call({'verb': 'status'})['result']['windows']]
first = windows[0]
tabs = []
for site in ('news', 'mail'):
    tabs.append(call({'verb': 'open', 'window': first, 'url': f'https://{site}.example/'})['result']['tab'])
call({'verb': 'open', 'window': first, 'url': 'https://private.example/', 'incognito': True, 'background': True})
call({'verb': 'open', 'window': first, 'url': 'https://child.example/', 'opener': tabs[0], 'index': 1})
call({'verb': 'navigate', 'window': first, 'tab': tabs[0], 'url': 'https://news.example/today'})
call({'verb': 'move', 'window': first, 'tab': tabs[1], 'index': 0})
call({'verb': 'replace', 'window': first, 'tab': tabs[1], 'url': 'https://prerendered.example/'})
call({'verb': 'activate', 'window': first, 'tab': tabs[0]})
call({'verb': 'save', 'window': first, 'wait': True})
call({'verb': 'wait-durable', 'window': first})
call({'verb': 'dump', 'window': first})
call({'verb': 'stats'})
call({'verb': 'close', 'window': first, 'tab': tabs[0]})
call({'verb': 'background', 'window': windows[1]})
call({'verb': 'disconnect', 'window': windows[2]})
call({'verb': 'kill', 'window': windows[1], 'signal': 'TERM', 'aim': True, 'wait': True})
call({'verb': 'connect'})
call({'verb': 'nonsense'})
EOF
mkdir -p "$corpus/windows-order"
cp "$work/host/windows.order" "$corpus/windows-order/real"
python3 - "$work/host/ctl.sock" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'{"verb":"shutdown"}\n'); s.recv(4096)
EOF
wait "$supervisor" || true
supervisor=
# handed-out as a clean stop leaves it (ceilings lowered to what was shown, lost seqs kept).
mkdir -p "$corpus/handed-out"
cp "$work/host/handed-out" "$corpus/handed-out/real"
echo "corpus: $(find "$corpus" -type f | wc -l) files, $(du -sh "$corpus" | cut -f1)"
