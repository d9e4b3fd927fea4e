#!/usr/bin/env bash
# CI: builds the fuzz targets and runs each for SECONDS (default 60) from its
# committed seed corpus, two at a time; fails on any crash, leak, timeout or
# out-of-memory. Needs clang and its fuzzer runtime (Debian: clang,
# libclang-rt-dev), installed here when apt-get is available.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang++ >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get install -y -qq clang libclang-rt-dev >/dev/null
fi
FUZZ_OPT=${FUZZ_OPT:-"-O1 -gline-tables-only"} JOBS=${JOBS:-2} BUILD_DIR=${BUILD_DIR:-build-ci-fuzz} exec tests/fuzz/run.sh "${1:-60}"
