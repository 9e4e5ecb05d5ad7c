#!/usr/bin/env bash
# Installs what is missing, builds, and runs the demo: seeded browsing in one window's regular
# and incognito Browsers, saved as snapshot + journal, restored lazily, checked against the live
# lists, and a damaged journal read safely. Extra arguments go to `windowhost demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_swift
ensure_packages /usr/include/liburing.h:liburing-dev

swift build -c release --product windowhost >&2
.build/release/windowhost demo "$@"
