#!/usr/bin/env bash
# CI: builds the fuzz targets and runs each for SECONDS (default 60) from its
# committed seed corpus, two at a time; fails on any crash, leak, timeout or
# out-of-memory. Needs clang and its fuzzer runtime (Debian: clang,
# libclang-rt-dev), installed here when apt-get is available.
#   tests/fuzz/ci.sh [SECONDS]
# FUZZ_CHANGED=FILE (the paths changed since .ci/base, as
# scripts/ci_select.py --write-changed lists them; a line '*': everything):
# every fuzzer runs FUZZ_SMOKE seconds (default 2), then those whose own
# files or included files changed (their depfiles in this build) SECONDS.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang++ >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get install -y -qq clang libclang-rt-dev >/dev/null
fi
export FUZZ_OPT=${FUZZ_OPT:-"-O1 -gline-tables-only"} JOBS=${JOBS:-2} BUILD_DIR=${BUILD_DIR:-build-ci-fuzz}
seconds=${1:-60}
if [ -z "${FUZZ_CHANGED:-}" ] || grep -qx '\*' "$FUZZ_CHANGED"; then
  exec tests/fuzz/run.sh "$seconds"
fi
tests/fuzz/run.sh "${FUZZ_SMOKE:-2}"
long=$(python3 scripts/ci_select.py --fuzz-long "$BUILD_DIR" --changed "$FUZZ_CHANGED")
if [ -n "$long" ]; then
  tests/fuzz/run.sh "$seconds" $long
else
  echo "no fuzzer's code changed: smoke runs only"
fi
