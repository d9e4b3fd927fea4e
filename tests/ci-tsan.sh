#!/usr/bin/env bash
# CI: a ThreadSanitizer build of only the engine and concurrency tests
# (C API contract, C-language API, golden generation, thread pool, API
# misuse, the CPU backend's lanes and their shared classifier chunks,
# constrained requests sharing matcher state, the KV pool committed as used,
# KV export/import pausing the engine beside a running request, the KV
# tiers), run with
# halt_on_error so any data race fails.
#   tests/ci-tsan.sh            (BUILD_DIR overrides the build folder)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-ci-tsan}
targets=(test_capi ctest_api test_golden test_thread_pool test_api_misuse test_cpu_backend test_constrain_api test_kv_type)
# -O1 -g1 keeps the instrumented build fast to compile and still quick to run
# (line tables are all the race reports need).
cmake -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DLLM_SANITIZE=thread -DLLM_CUDA=OFF -DLLM_UCX=OFF \
  -DLLM_BUILD_SAMPLES=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" test_kv_state test_kv_tiers
# Each GoogleTest test is a ctest entry named <binary>.<Suite>.<Test>.
regex="^($(IFS='|'; echo "${targets[*]}"))(\\.|\$)"
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}" \
  ctest --test-dir "$build" -R "$regex" --output-on-failure --timeout 300
# Of the KV-state tests, those where the engine thread and a caller meet
# (Engine::RunPaused); the rest are single-threaded and long under TSan.
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}" \
  ctest --test-dir "$build" --output-on-failure --timeout 300 \
  -R '^test_kv_state\.KvState\.(RoundTripStoriesF16|ImportBesideARunningRequest|FileHelpers|CallbackMisuseAndErrors)$'
# The KV tiers: the engine thread copies blocks down and back while callers
# read the statistics (all of test_kv_tiers: a few seconds under TSan).
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}" \
  ctest --test-dir "$build" --output-on-failure --timeout 300 -R '^test_kv_tiers\.'
echo "TSan suite passed"
