#!/usr/bin/env bash
# Regenerates Sources/<Module>/Generated/*.pb.swift from Sources/<Module>/Schema/*.proto, for the
# session records (SessionFormat) and the shared-memory ring messages (HostCoordination).
# The generated code is committed: building swift-protobuf's plugin takes minutes, so a normal
# build never needs it. Needs protoc (Debian: protobuf-compiler); builds protoc-gen-swift from the
# same swift-protobuf version the package resolves (its checkout in .build/ when present), in
# .build-protoc/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_packages protoc:protobuf-compiler

plugin_dir=.build-protoc
version=$(sed -n 's/.*swift-protobuf", from: "\([0-9.]*\)".*/\1/p' Package.swift)
if [ ! -x "$plugin_dir/src/.build/release/protoc-gen-swift" ]; then
  echo "building protoc-gen-swift $version (a few minutes, once)" >&2
  rm -rf "$plugin_dir/src"
  # The package's own checkout when it has one (no network needed), else the tagged source.
  if [ -d .build/checkouts/swift-protobuf ]; then
    cp -a .build/checkouts/swift-protobuf "$plugin_dir/src"
  else
    git clone --quiet --branch "$version" https://github.com/apple/swift-protobuf "$plugin_dir/src"
  fi
  swift build -c release --package-path "$plugin_dir/src" --product protoc-gen-swift >&2
fi

# Session records stay inside SessionFormat; ring messages are used by the supervisor and the
# worker, so they are public.
for module_visibility in SessionFormat:Internal HostCoordination:Public; do
  module=${module_visibility%%:*}
  protoc \
    --plugin=protoc-gen-swift="$plugin_dir/src/.build/release/protoc-gen-swift" \
    --swift_out=Sources/$module/Generated \
    --swift_opt=Visibility=${module_visibility##*:} \
    -I Sources/$module/Schema \
    Sources/$module/Schema/*.proto
  echo "regenerated: $(ls Sources/$module/Generated)"
done
