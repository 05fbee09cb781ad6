#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for N
# seconds (default 20) from the checked-in corpus (tests/fuzz/corpus).  New
# inputs go to a scratch copy; a crash fails the run and its input is kept
# in build/fuzz/crashes/ (add it to the corpus once fixed).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
CXX_CLANG="$(command -v clang++-14 || command -v clang++ || true)"
if [ -z "$CXX_CLANG" ]; then
  echo "fuzz.sh: no clang++ (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi
cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER="$CXX_CLANG" -DSTOKER_BUILD_FUZZERS=ON \
  -DSTOKER_BUILD_PYTHON=OFF -DSTOKER_BUILD_TESTS=OFF -DSTOKER_BUILD_BENCH=OFF >/dev/null
cmake --build build/fuzz --target stoker_fuzz_tfrecord stoker_fuzz_tar stoker_fuzz_image
mkdir -p build/fuzz/crashes
for target in tfrecord tar image; do
  scratch="$(mktemp -d)"
  cp tests/fuzz/corpus/"$target"/* "$scratch"/
  if ! build/fuzz/stoker_fuzz_"$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
       -artifact_prefix=build/fuzz/crashes/"$target"- -print_final_stats=1 "$scratch" >build/fuzz/"$target".log 2>&1; then
    tail -40 build/fuzz/"$target".log
    echo "fuzz.sh: the $target reader failed under the fuzzer (input in build/fuzz/crashes/)" >&2
    rm -rf "$scratch"
    exit 1
  fi
  grep -E "^stat::number_of_executed_units" build/fuzz/"$target".log | sed "s/^/$target: /"
  rm -rf "$scratch"
done
