#!/usr/bin/env bash
# Regenerates Sources/SessionFormat/Generated/*.pb.swift from Sources/SessionFormat/Schema/*.proto.
# The generated code is committed: building swift-protobuf's plugin takes minutes, so a normal
# build never needs it. Needs protoc (Debian: protobuf-compiler); builds protoc-gen-swift from the
# same swift-protobuf version the package resolves, in .build-protoc/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_packages protoc:protobuf-compiler

plugin_dir=.build-protoc
version=$(sed -n 's/.*swift-protobuf", from: "\([0-9.]*\)".*/\1/p' Package.swift)
if [ ! -x "$plugin_dir/src/.build/release/protoc-gen-swift" ]; then
  echo "building protoc-gen-swift $version (a few minutes, once)" >&2
  rm -rf "$plugin_dir/src"
  git clone --quiet --branch "$version" https://github.com/apple/swift-protobuf "$plugin_dir/src"
  swift build -c release --package-path "$plugin_dir/src" --product protoc-gen-swift >&2
fi

protoc \
  --plugin=protoc-gen-swift="$plugin_dir/src/.build/release/protoc-gen-swift" \
  --swift_out=Sources/SessionFormat/Generated \
  --swift_opt=Visibility=Internal \
  -I Sources/SessionFormat/Schema \
  Sources/SessionFormat/Schema/*.proto
echo "regenerated: $(ls Sources/SessionFormat/Generated)"
