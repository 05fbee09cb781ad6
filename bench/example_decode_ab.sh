#!/usr/bin/env bash
# ExampleDecoder of git revision REV (default HEAD~1) against the work tree's,
# on one small tf.train.Example (bench/example_decode.cc), alternating runs.
#   bash bench/example_decode_ab.sh [REV]
# Needs the C++ test build (bash scripts/run.sh test, or cmake --build build/tests).
set -euo pipefail
cd "$(dirname "$0")/.."
rev="${1:-HEAD~1}"
b=build/tests
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
git show "$rev:src/io/example_decoder.cc" >"$out/old_decoder.cc"
extra_old=()
git cat-file -e "$rev:src/io/proto_wire.cc" 2>/dev/null && { git show "$rev:src/io/proto_wire.cc" >"$out/old_wire.cc"; extra_old=("$out/old_wire.cc"); }
build() {  # name, decoder source, extra sources...
  local name="$1"; shift
  g++ -O3 -std=c++20 -w -DNAME="\"$name\"" -Iinclude -Isrc -I"$b/proto" bench/example_decode.cc "$@" \
    "$b/proto/example.pb.cc" "$b/libstoker.a" -lprotobuf-lite -lisal -lpthread -o "$out/$name"
}
build "$rev" "$out/old_decoder.cc" "${extra_old[@]}"
build worktree src/io/example_decoder.cc src/io/proto_wire.cc
for _ in 1 2; do "$out/$rev"; "$out/worktree"; done
