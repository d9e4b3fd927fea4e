#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, -DLLM_FUZZ=ON) and runs each
# for SECONDS (default 60) on a copy of its seed corpus. Fails on any crash,
# leak, timeout (-timeout per input) or out-of-memory (-rss_limit_mb).
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]     e.g. tests/fuzz/run.sh 3600 gguf
#
# Environment: BUILD_DIR (default build-fuzz), JOBS (parallel fuzzers, default
# 1), FUZZ_ARGS (extra libFuzzer flags), FUZZ_OPT (default "-O1 -g"). New inputs found go to
# $BUILD_DIR/fuzz-corpus/<target>; crash files to $BUILD_DIR/fuzz-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
build=${BUILD_DIR:-build-fuzz}
jobs=${JOBS:-1}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf tokenizer wordpiece_unigram hf_json capi chat safetensors request_peek json_schema tool_calls reasoning grammar regex kv_reader kv_tier_file disagg_wire image remote_url server)

opt=${FUZZ_OPT:--O1 -g}
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLM_FUZZ=ON \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" \
  -DLLM_BUILD_TESTS=OFF -DLLM_BUILD_SAMPLES=OFF -DLLM_CUDA=OFF -DLLM_UCX=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}")

mkdir -p "$build/fuzz-artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_one() {
  local t=$1 corpus="$build/fuzz-corpus/$1" log="$build/fuzz-$1.log"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  local dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  echo "--- fuzz_$t: ${seconds}s"
  # -timeout: seconds per input; -rss_limit_mb / -malloc_limit_mb: memory;
  # -error_exitcode: any finding fails the run.
  if "$build/bin/fuzz_$t" "$corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=25 \
      -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-artifacts/$t-" ${FUZZ_ARGS:-} >"$log" 2>&1; then
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)" "$log" | tr '\n' ' '; echo
    echo "--- fuzz_$t: ok"
  else
    tail -n 60 "$log"
    echo "--- fuzz_$t: FAILED (log: $log, inputs: $build/fuzz-artifacts/$t-*)"
    return 1
  fi
}

status=0
pids=()
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ $status = 0 ] && echo "all fuzzers clean" || echo "fuzzing found problems"
exit $status
