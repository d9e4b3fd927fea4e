#!/usr/bin/env bash
# gpu-check.sh: the one command a lent GPU machine runs (kernels/README.md),
# around the pack that scripts/gpu-pack.sh built ahead on the CPU machine.
# Within one budget (--budget, default 480 s: one device call of 15 minutes
# with the machine's start), in order of worth:
#
#   pack       unpack gpu-pack/pack.tar.xz; check its binaries start (else,
#              with --build-on-device, build them here with the pack's GoogleTest)
#   synth      the 8B-shape models (Llama 3.1 8B, Q4_K_M then BF16) and the
#              MoE model (Qwen3-30B-A3B's shape, Q4_K_M: 128 experts, top 8),
#              in the background on all cores but two, while the tests run
#   tests      every CUDA test group (groups.tsv: one per test file) with CUDA
#              graphs on, then again with graphs off where graphs matter, each
#              group under its own time cap: a crash or hang costs that group
#              only (the group resumes without the test that crashed or hung);
#              failed tests rerun alone with LLM_CUDA_DEBUG=1
#   bench      cuda-bench on the 8B Q4_K_M and BF16 models (batch-1 decode as a
#              share of the device-to-device copy bandwidth measured in the same
#              run; throughput at concurrency 1, 8, 64, 256), on the MoE model
#              (batch-1 decode with the experts on the device, its bandwidth
#              share counting the k experts a token reads; TTFT), then the
#              kernel figures (--kernels-only; inputs made on the device)
#   sanitizers compute-sanitizer memcheck, then racecheck, on the kernel tests,
#              as time allows
#
# After every step it rewrites, in the result folder ($OUT, else --out), the
# report (gpu-check.md, gpu-check.json) and the logs (gpu-check-logs.tar.gz):
# three files, so a run killed at any point still returns what it did. The
# report names the commit from the pack's STAMP (the device has no .git).
# Exit status: 0 when every step that ran passed, 1 otherwise.
#
# Usage: scripts/gpu-check.sh [--budget 480] [--pack gpu-pack] [--out DIR]
#            [--only tests,bench,sanitizers] [--sample N] [--extra-groups FILE]
#            [--work DIR] [--models DIR] [--build-on-device] [--cap-scale X]
#
#   --sample N        run at most N tests of each group (CI's rehearsal on the
#                     emulator, where the full CUDA suite has its own CI step)
#   --extra-groups F  more groups (same columns as groups.tsv; a binary path
#                     relative to the repository root): CI plants a failure, a
#                     crash and a hang this way (tests/gpu-check/)
#   --cap-scale X     multiply every group's cap (slow machines)
#   --build-on-device build the binaries from this tree (CMake, nvcc and the
#                     pack's GoogleTest) instead of using the pack's; also done
#                     when the pack's binaries do not start
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
COMMAND_LINE="scripts/gpu-check.sh${*:+ $*}"
BUDGET=480
PACK=gpu-pack
RESULTS=${OUT:-}
ONLY="tests,bench,sanitizers"
SAMPLE=0
EXTRA_GROUPS=""
WORK=${TMPDIR:-/tmp}/gpu-check
MODELS=""
BUILD_ON_DEVICE=0
CAP_SCALE=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --budget) BUDGET=${2:?}; shift 2 ;;
    --pack) PACK=${2:?}; shift 2 ;;
    --out) RESULTS=${2:?}; shift 2 ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --sample) SAMPLE=${2:?}; shift 2 ;;
    --extra-groups) EXTRA_GROUPS=${2:?}; shift 2 ;;
    --work) WORK=${2:?}; shift 2 ;;
    --models) MODELS=${2:?}; shift 2 ;;
    --build-on-device) BUILD_ON_DEVICE=1; shift ;;
    --cap-scale) CAP_SCALE=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,45p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[[ -z "$RESULTS" ]] && RESULTS=$ROOT/gpu-check-out
[[ -z "$MODELS" ]] && MODELS=$WORK/models
for s in ${ONLY//,/ }; do
  case "$s" in tests|bench|sanitizers) ;; *) echo "gpu-check: unknown step '$s'" >&2; exit 2 ;; esac
done
wants() { [[ ",$ONLY," == *",$1,"* ]]; }

START=$(date +%s)
now() { date +%s; }
# Phases end at fixed shares of the budget, so the tests cannot eat the
# benchmarks' time nor the benchmarks the sanitizers'; 15 s stay for the
# last report.
END=$((START + BUDGET - 15))
TESTS_END=$((START + BUDGET * 30 / 100))       # graphs on
NOGRAPHS_END=$((START + BUDGET * 42 / 100))    # graphs off
BENCH_END=$((START + BUDGET * 85 / 100))
left() { echo $(( $1 - $(now) )); }

STATE=$WORK/state
LOGS=$STATE/logs
rm -rf "$STATE" && mkdir -p "$LOGS" "$RESULTS" "$MODELS" || exit 1
: > "$STATE/steps.tsv"    # name, status, seconds, note
: > "$STATE/groups.tsv"   # group, graphs, status, seconds, passed, failed, skipped, failed tests, culprits, note
echo "$COMMAND_LINE" > "$STATE/command"
echo "$BUDGET" > "$STATE/budget"
echo "$START" > "$STATE/start"

record() {  # record NAME STATUS SECONDS NOTE
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | tr '\t\n' '  ')" >> "$STATE/steps.tsv"
  printf 'gpu-check: %-22s %-24s %5ss  %s\n' "$1" "$2" "$3" "$4"
}

# The report (markdown, JSON) and the logs (tar.gz) into the result folder,
# each written aside and renamed (scripts/gpu_check_report.py): whatever
# kills the run, the folder holds a whole report of what was done.
report() {
  python3 "$ROOT/scripts/gpu_check_report.py" "$STATE" "$RESULTS" || echo "gpu-check: the report failed" >&2
}

# ------------------------------------------------------------------ pack
PACK_DIR=$WORK/pack
BIN=$PACK_DIR/bin
t0=$(now)
rm -rf "$PACK_DIR" && mkdir -p "$PACK_DIR"
if [[ ! -f "$PACK/pack.tar.xz" ]]; then
  record pack "MISSING" 0 "no $PACK/pack.tar.xz: build it with scripts/gpu-pack.sh and carry it"
  [[ $BUILD_ON_DEVICE -eq 1 ]] || { report; exit 1; }
else
  # (python's lzma where tar has no xz)
  tar -C "$PACK_DIR" -xJf "$PACK/pack.tar.xz" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$PACK/pack.tar.xz" "$PACK_DIR" ||
    { record pack "FAIL" $(( $(now) - t0 )) "cannot unpack $PACK/pack.tar.xz"; report; exit 1; }
  chmod +x "$PACK_DIR"/bin/* 2>/dev/null
  cp "$PACK_DIR/STAMP" "$STATE/STAMP"
fi
MODE=$(sed -n 's/^mode: //p' "$STATE/STAMP" 2>/dev/null)
MODE=${GPU_CHECK_MODE:-${MODE:-gpu}}   # GPU_CHECK_MODE=gpu: the GPU path on an emulator pack (tests of this script)
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $d ]] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
# Tests read models/ and tests/data from this tree; contexts created with
# AUTO stay on the CPU as under ctest (the CUDA tests name their backend).
export LLM_SOURCE_DIR=$ROOT LLM_BACKEND=cpu
if [[ $MODE == gpu ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$STATE/device" 2>/dev/null ||
    echo "unknown (nvidia-smi failed)" > "$STATE/device"
else
  echo "llmrt CUDA emulator on the CPU ($(nproc) cores): a rehearsal, no GPU" > "$STATE/device"
fi

starts() { "$BIN/cuda-tests" --gtest_list_tests > "$LOGS/pack-list.log" 2>&1; }
if [[ $BUILD_ON_DEVICE -eq 0 && -x "$BIN/cuda-tests" ]] && starts; then
  record pack PASS $(( $(now) - t0 )) "$(sed -n 's/^commit: //p' "$STATE/STAMP"); $(grep -c '^  ' "$LOGS/pack-list.log") tests in $(wc -l < "$PACK_DIR/groups.tsv") groups"
else
  # The fallback: build here (cmake, nvcc; GoogleTest from the pack).
  why="pack binaries do not start: $(tail -n 2 "$LOGS/pack-list.log" 2>/dev/null | tr '\n' ' ')"
  [[ $BUILD_ON_DEVICE -eq 1 ]] && why="--build-on-device"
  record pack "FALLBACK" $(( $(now) - t0 )) "$why; building on the device"
  report
  t0=$(now)
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '.')
  gtest_prefix=""; [[ -d "$PACK_DIR/gtest" ]] && gtest_prefix=$PACK_DIR/gtest
  bdir=${GPU_CHECK_BUILD_DIR:-$WORK/build}   # (an existing build folder: tests of this script)
  # at most 240 s (16 cores: the kernels' nvcc is the long pole); the time it
  # takes comes out of the benchmarks' and sanitizers' share, not the tests'
  timeout --kill-after=10 240 bash -c "
    cmake -B '$bdir' -DCMAKE_BUILD_TYPE=Release -DLLM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=${arch:-90} \
      -DLLM_USE_MIMALLOC=OFF -DLLM_BUILD_SAMPLES=ON ${gtest_prefix:+-DCMAKE_PREFIX_PATH='$gtest_prefix'} &&
    cmake --build '$bdir' -j$(nproc) --target cuda-tests cuda-bench llm-synth" > "$LOGS/build.log" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    record build "FAIL(rc=$rc)" $(( $(now) - t0 )) "see logs/build.log"; report; exit 1
  fi
  mkdir -p "$BIN" && cp "$bdir/bin/cuda-tests" "$bdir/bin/cuda-bench" "$bdir/bin/llm-synth" "$BIN/"
  if [[ ! -f "$PACK_DIR/groups.tsv" ]]; then  # one group of everything
    printf 'all\tcuda-tests\t*\n' > "$PACK_DIR/groups.tsv"
  fi
  [[ -f "$STATE/STAMP" ]] || echo "commit: unknown (built on the device from the carried tree)" > "$STATE/STAMP"
  record build PASS $(( $(now) - t0 )) "built on the device (sm_${arch:-90})"
  shift_s=$(( $(now) - t0 ))
  TESTS_END=$(( TESTS_END + shift_s )); NOGRAPHS_END=$(( NOGRAPHS_END + shift_s ))
  (( NOGRAPHS_END > BENCH_END )) && NOGRAPHS_END=$BENCH_END
  (( TESTS_END > NOGRAPHS_END )) && TESTS_END=$NOGRAPHS_END
fi
report

# ------------------------------------------------------------------ synth (background)
SHAPE=llama-3.1-8b
[[ $MODE != gpu ]] && SHAPE=tiny   # the rehearsal: the same step on a tiny shape
SHAPE=${GPU_CHECK_SHAPE:-$SHAPE}   # (tests of this script)
L8Q=$MODELS/$SHAPE-q4_k_m.gguf
L8=$MODELS/$SHAPE-bf16.gguf
MOE_SHAPE=qwen3-30b-a3b
[[ $SHAPE == tiny ]] && MOE_SHAPE=tiny-qwen3moe-k   # the rehearsals' tiny models
MOE_SHAPE=${GPU_CHECK_MOE_SHAPE:-$MOE_SHAPE}
MOEQ=$MODELS/$MOE_SHAPE-q4_k_m.gguf
SYNTH_PID=""
if wants bench; then
  threads=$(( $(nproc) > 4 ? $(nproc) - 2 : 2 ))
  # Q4_K_M first: smaller, and the first model the benchmarks need; then the
  # MoE model (~16 GiB), then the 8B BF16 (the benchmark dropped first when
  # time runs short). A model left by an earlier run is reused (llm-synth's
  # output is deterministic).
  (
    for spec in "q4_k_m:$SHAPE:$L8Q" "q4_k_m:$MOE_SHAPE:$MOEQ" "bf16:$SHAPE:$L8"; do
      type=${spec%%:*}; rest=${spec#*:}; shape=${rest%%:*}; f=${rest#*:}
      [[ -s $f ]] && continue
      s=$(date +%s)
      nice -n 5 "$BIN/llm-synth" --shape "$shape" --type "$type" --threads "$threads" --out "$f.tmp" && mv -f "$f.tmp" "$f" ||
        { echo "synth $shape $type failed"; exit 1; }
      echo "synth $shape $type: $(( $(date +%s) - s )) s, $(stat -c %s "$f") bytes"
    done
  ) > "$LOGS/synth.log" 2>&1 &
  SYNTH_PID=$!
  record synth STARTED 0 "llm-synth --shape $SHAPE (q4_k_m, bf16) and --shape $MOE_SHAPE (q4_k_m) in the background, $threads threads"
fi

# ------------------------------------------------------------------ tests
# group NAME's cap on a GPU (seconds), before --cap-scale; unknown groups 60
group_cap() {
  local c
  case "$1" in
    kernels) c=60 ;; backend) c=60 ;; graphs) c=45 ;; capi) c=45 ;;
    families) c=40 ;; quant) c=60 ;; offload) c=40 ;; fake-hang) c=6 ;; fake-*) c=10 ;; *) c=60 ;;
  esac
  awk -v c="$c" -v s="$CAP_SCALE" 'BEGIN { printf "%d", c * s + 0.5 }'
}
# graphs off is worth a second run where the backend replays graphs: not the
# kernel tests (no graphs) nor the graph tests (they expect captures)
graphs_matter() { case "$1" in kernels|graphs|fake-*) return 1 ;; *) return 0 ;; esac; }

ALL_GROUPS=$STATE/all-groups.tsv
# name, binary, filter, sampled (--sample applies to the pack's groups, not to extra ones)
awk -F'\t' -v b="$BIN" 'NF >= 3 { print $1 "\t" b "/cuda-tests\t" $3 "\t1" }' "$PACK_DIR/groups.tsv" > "$ALL_GROUPS"
if [[ -n "$EXTRA_GROUPS" ]]; then
  awk -F'\t' -v r="$ROOT" 'NF >= 3 && $1 !~ /^#/ { p = ($2 ~ /^\//) ? $2 : r "/" $2; print $1 "\t" p "\t" $3 "\t0" }' "$EXTRA_GROUPS" >> "$ALL_GROUPS"
fi

# tests_in BIN FILTER: the test names a filter selects, one per line
tests_in() {
  "$1" --gtest_list_tests "--gtest_filter=$2" 2>/dev/null | awk '
    /^[^ ]/ { suite = $1; next }
    /^  / { print suite $1 }'
}

# run_group NAME BIN FILTER GRAPHS(on|off): runs the group under its cap and
# one line into groups.tsv. A crash or hang names the test that was running
# (the last "[ RUN ]" without an end); the group then goes on without it,
# within the same cap. Failed and crashed tests rerun alone with
# LLM_CUDA_DEBUG=1 (logs/NAME.debug.log).
run_group() {
  local name=$1 bin=$2 filter=$3 graphs=$4 phase_end=$5 sampled_group=$6
  local tag=$name; [[ $graphs == off ]] && tag=$name-nographs
  local log=$LOGS/$tag.log cap t0 rc status="" excluded="" culprits="" note="" f passed=0 failed=0 skipped=0 failed_names="" grace=0
  cap=$(group_cap "$name")
  t0=$(now)
  local hard_end=$(( t0 + cap ))
  (( hard_end > phase_end )) && hard_end=$phase_end
  if (( hard_end - t0 < 5 )); then
    printf '%s\t%s\tSKIPPED(time)\t0\t0\t0\t0\t\t\tno time left in the phase\n' "$name" "$graphs" >> "$STATE/groups.tsv"
    return
  fi
  if (( SAMPLE > 0 && sampled_group == 1 )); then  # the first SAMPLE tests of the group
    local sampled n_all
    n_all=$(tests_in "$bin" "$filter" | wc -l)
    sampled=$(tests_in "$bin" "$filter" | head -n "$SAMPLE" | paste -sd: -)
    if [[ -n "$sampled" ]]; then filter=$sampled; note="sampled $(tests_in "$bin" "$filter" | wc -l) of $n_all tests"; fi
  fi
  : > "$log"
  local attempt
  for attempt in 1 2 3 4; do
    local run_filter=$filter
    [[ -n "$excluded" ]] && run_filter="$filter-$excluded"
    local budget=$(( hard_end - $(now) ))
    if (( budget < 2 )); then note="${note:+$note; }no time to resume"; break; fi
    echo "=== $tag: --gtest_filter=$run_filter (cap ${budget}s, graphs $graphs)" >> "$log"
    local before=$(wc -l < "$log")
    if [[ $graphs == off ]]; then
      LLM_CUDA_GRAPHS=0 timeout --kill-after=3 "$budget" "$bin" "--gtest_filter=$run_filter" --gtest_color=no >> "$log" 2>&1
    else
      timeout --kill-after=3 "$budget" "$bin" "--gtest_filter=$run_filter" --gtest_color=no >> "$log" 2>&1
    fi
    rc=$?
    echo "=== exit status $rc" >> "$log"
    local part
    part=$(tail -n +"$((before + 1))" "$log")
    passed=$(( passed + $(grep -cE '^\[       OK \] .* \([0-9]+ ms\)' <<< "$part") ))
    skipped=$(( skipped + $(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)' <<< "$part") ))
    f=$(grep -E '^\[  FAILED  \] .* \([0-9]+ ms\)' <<< "$part" | sed -E 's/^\[  FAILED  \] ([^ ]+).*/\1/')
    if [[ -n "$f" ]]; then
      failed=$(( failed + $(wc -l <<< "$f") ))
      failed_names="$failed_names${failed_names:+ }$(paste -sd' ' - <<< "$f")"
    fi
    local this=""
    case $rc in
      0) this=PASS ;;
      124|137) this=TIMEOUT ;;
      1) this=FAIL ;;
      *) if (( rc > 128 )); then this="CRASH(signal $((rc - 128)))"; else this="ERROR(rc=$rc)"; fi ;;
    esac
    # a FAIL with no failed test is an error outside a test (e.g. a bad filter)
    [[ $this == FAIL && -z "$f" ]] && this="ERROR(rc=1)"
    # worst status wins: PASS < FAIL < ERROR < CRASH/TIMEOUT
    case "$status" in
      "" | PASS) status=$this ;;
      FAIL) [[ $this != PASS ]] && status=$this ;;
      *) ;;
    esac
    if [[ $this == TIMEOUT || $this == CRASH* ]]; then
      local culprit
      culprit=$(awk '/^\[ RUN      \] / { t = $4 } /^\[       OK \] |^\[  FAILED  \] .*\(|^\[  SKIPPED \] .*\(/ { t = "" } END { print t }' <<< "$part")
      if [[ -z "$culprit" ]]; then note="${note:+$note; }no test running at the $this"; break; fi
      culprits="$culprits${culprits:+ }$culprit"
      excluded="$excluded${excluded:+:}$culprit"
      [[ $this == TIMEOUT ]] && note="${note:+$note; }$culprit hung" || note="${note:+$note; }$culprit crashed"
      # a hang spent the cap: the rest of the group gets half a cap more, once
      if [[ $this == TIMEOUT && $grace -eq 0 ]]; then
        grace=1
        local more=$(( $(now) + cap / 2 ))
        (( more > phase_end )) && more=$phase_end
        (( more > hard_end )) && hard_end=$more
      fi
      continue   # resume the group without it
    fi
    break
  done
  # on a GPU a skipped CUDA test did not run: say so beside PASS
  [[ $status == PASS && $skipped -gt 0 ]] && status="PASS($skipped skipped)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$graphs" "$status" $(( $(now) - t0 )) \
    "$passed" "$failed" "$skipped" "$failed_names" "$culprits" "$note" >> "$STATE/groups.tsv"
  # failed and crashed tests alone, with the backend's debug checks (hangs
  # are not rerun: a second hang would cost a second cap)
  local t debug_tests=""
  for t in $failed_names; do debug_tests="$debug_tests $t"; done
  [[ $status == CRASH* ]] && for t in $culprits; do grep -q "^\[ RUN      \] $t\$" "$log" && ! grep -q "$t hung" <<< "$note" && debug_tests="$debug_tests $t"; done
  local n=0
  for t in $debug_tests; do
    (( n++ >= 3 )) && break
    local b=$(( phase_end - $(now) )); (( b > 30 )) && b=30
    (( b < 3 )) && break
    echo "=== $t alone, LLM_CUDA_DEBUG=1 graphs $graphs (cap ${b}s)" >> "$LOGS/$tag.debug.log"
    if [[ $graphs == off ]]; then
      LLM_CUDA_DEBUG=1 LLM_CUDA_GRAPHS=0 timeout --kill-after=3 "$b" "$bin" "--gtest_filter=$t" --gtest_color=no >> "$LOGS/$tag.debug.log" 2>&1
    else
      LLM_CUDA_DEBUG=1 timeout --kill-after=3 "$b" "$bin" "--gtest_filter=$t" --gtest_color=no >> "$LOGS/$tag.debug.log" 2>&1
    fi
    echo "=== exit status $?" >> "$LOGS/$tag.debug.log"
  done
}

group_summary() {  # the groups.tsv lines of one graphs mode as a step note
  awk -F'\t' -v g="$1" '$2 == g { n++; if ($3 !~ /^PASS/) bad = bad " " $1 ":" $3 } END { printf "%d groups%s", n, bad ? ";" bad : ", all pass" }' "$STATE/groups.tsv"
}
group_status() {  # FAIL when a group failed, crashed, hung or erred (not when skipped for time)
  awk -F'\t' -v g="$1" '$2 == g && $3 ~ /^(FAIL|CRASH|TIMEOUT|ERROR)/ { bad = 1 } END { print bad ? "FAIL" : "PASS" }' "$STATE/groups.tsv"
}

if wants tests; then
  t0=$(now)
  while IFS=$'\t' read -r name bin filter sampled; do
    run_group "$name" "$bin" "$filter" on "$TESTS_END" "$sampled"
    report
  done < "$ALL_GROUPS"
  record tests "$(group_status on)" $(( $(now) - t0 )) "graphs on: $(group_summary on)"
  report
  t0=$(now)
  while IFS=$'\t' read -r name bin filter sampled; do
    graphs_matter "$name" || continue
    run_group "$name" "$bin" "$filter" off "$NOGRAPHS_END" "$sampled"
    report
  done < "$ALL_GROUPS"
  record tests-nographs "$(group_status off)" $(( $(now) - t0 )) "LLM_CUDA_GRAPHS=0: $(group_summary off)"
  report
fi

# ------------------------------------------------------------------ bench
# bench NAME CAP ARGS...: cuda-bench writes its JSON after every figure, so
# a run cut short keeps what it measured.
bench() {
  local name=$1 cap=$2; shift 2
  local t0 rc b
  b=$(left "$BENCH_END"); (( cap > b )) && cap=$b
  if (( cap < 10 )); then record "$name" "SKIPPED(time)" 0 "no time left for the benchmarks"; return; fi
  t0=$(now)
  timeout --kill-after=5 "$cap" "$BIN/cuda-bench" "$@" --json "$STATE/$name.json" > "$LOGS/$name.log" 2>&1
  rc=$?
  case $rc in
    0) record "$name" PASS $(( $(now) - t0 )) "cuda-bench $*" ;;
    124|137) record "$name" TIMEOUT $(( $(now) - t0 )) "cuda-bench $* (cap ${cap}s; the figures so far are kept)" ;;
    *) record "$name" "FAIL(rc=$rc)" $(( $(now) - t0 )) "cuda-bench $*: $(tail -n 1 "$LOGS/$name.log")" ;;
  esac
}

# wait_model FILE: until the background synthesis wrote FILE (or ended, or
# the bench phase is over)
wait_model() {
  while [[ ! -s $1 ]]; do
    [[ -n "$SYNTH_PID" ]] && kill -0 "$SYNTH_PID" 2>/dev/null || return 1
    (( $(left "$BENCH_END") > 20 )) || return 1
    sleep 2
  done
}

if wants bench; then
  if [[ $MODE != gpu ]]; then
    # The rehearsal waits for the tiny models (the synth step's mechanics),
    # then skips: the figures mean nothing on the emulator.
    t0=$(now)
    if wait_model "$L8"; then
      record synth PASS $(( $(now) - t0 )) "$(grep '^synth' "$LOGS/synth.log" | paste -sd';' -)"
    else
      record synth FAIL $(( $(now) - t0 )) "$(tail -n 2 "$LOGS/synth.log" | paste -sd';' -)"
    fi
    for b in bench-8b-q4km bench-moe-q4km bench-moe-host-cpu bench-moe-host-cache bench-8b-bf16 bench-kernels; do
      record "$b" "SKIPPED(emulator)" 0 "an emulator build: the figures need a GPU"
    done
    report
  else
    t0=$(now)
    if wait_model "$L8Q"; then
      record synth-q4km PASS $(( $(now) - t0 )) "waited $(( $(now) - t0 ))s; $(grep q4_k_m "$LOGS/synth.log" | paste -sd';' -)"
      report
      bench bench-8b-q4km 150 --model "$L8Q" --no-kernels
    else
      record synth-q4km FAIL $(( $(now) - t0 )) "$(tail -n 2 "$LOGS/synth.log" | paste -sd';' -)"
    fi
    report
    # The MoE model: batch-1 decode with every expert on the device, and
    # TTFT (the experts' grouped GEMM); no throughput run (it would load the
    # 16 GiB a second time).
    t0=$(now)
    if wait_model "$MOEQ"; then
      record synth-moe PASS $(( $(now) - t0 )) "waited $(( $(now) - t0 ))s; $(grep "$MOE_SHAPE" "$LOGS/synth.log" | paste -sd';' -)"
      report
      bench bench-moe-q4km 100 --model "$MOEQ" --no-kernels --no-throughput
      report
      # The same model with every layer's experts in host memory (issue 35):
      # run by the CPU, then copied into a device cache of one layer's
      # experts (with the affinity prefetch). Decode only, short.
      bench bench-moe-host-cpu 60 --model "$MOEQ" --no-kernels --no-throughput --no-ttft --prompt 64 --steps 32 \
        --n-cpu-moe -1 --moe-policy cpu
      report
      bench bench-moe-host-cache 60 --model "$MOEQ" --no-kernels --no-throughput --no-ttft --prompt 64 --steps 32 \
        --n-cpu-moe -1 --moe-policy copy
    else
      record synth-moe "SKIPPED(time)" $(( $(now) - t0 )) "not synthesized in time: $(tail -n 1 "$LOGS/synth.log")"
    fi
    report
    t0=$(now)
    if wait_model "$L8"; then
      record synth-bf16 PASS $(( $(now) - t0 )) "waited $(( $(now) - t0 ))s; $(grep bf16 "$LOGS/synth.log" | paste -sd';' -)"
      report
      bench bench-8b-bf16 150 --model "$L8" --no-kernels
    else
      record synth-bf16 "SKIPPED(time)" $(( $(now) - t0 )) "not synthesized in time: $(tail -n 1 "$LOGS/synth.log")"
    fi
    report
    bench bench-kernels 60 --kernels-only
    report
  fi
fi
[[ -n "$SYNTH_PID" ]] && kill "$SYNTH_PID" 2>/dev/null

# ------------------------------------------------------------------ sanitizers
# The kernel tests (not the 200000-row frequency test: statistics, not code
# paths, and minutes under the tools) and the quantized kernels' cases.
SAN_FILTER="$(awk -F'\t' '$1 == "kernels" { print $3 }' "$PACK_DIR/groups.tsv"):CudaQuant.*-*SampleFrequencies*"
if wants sanitizers; then
  SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    if [[ $MODE != gpu ]]; then
      record "$tool" "SKIPPED(emulator)" 0 "compute-sanitizer needs a GPU (on the emulator, CI's ASan build and race detector do this)"
      continue
    fi
    if [[ ! -x "$SANITIZER" ]]; then record "$tool" "SKIPPED(missing)" 0 "no compute-sanitizer"; continue; fi
    cap=$(left "$END")
    if (( cap < 20 )); then record "$tool" "SKIPPED(time)" 0 "no time left"; continue; fi
    # memcheck first: give racecheck the rest only if memcheck leaves it
    [[ $tool == memcheck ]] && (( cap > 20 )) && cap=$(( cap * 55 / 100 > 20 ? cap * 55 / 100 : 20 ))
    args=(--tool "$tool" --error-exitcode 86 --print-limit 50)
    [[ $tool == racecheck ]] && args+=(--racecheck-report hazard)
    t0=$(now)
    timeout --kill-after=5 "$cap" "$SANITIZER" "${args[@]}" "$BIN/cuda-tests" "--gtest_filter=$SAN_FILTER" --gtest_color=no > "$LOGS/$tool.log" 2>&1
    rc=$?
    summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|\[  PASSED  \]|\[  FAILED  \] [0-9]' "$LOGS/$tool.log" | tail -n 3 | paste -sd';' -)
    case $rc in
      0) record "$tool" PASS $(( $(now) - t0 )) "$summary" ;;
      86) record "$tool" "FAIL(errors)" $(( $(now) - t0 )) "$summary" ;;
      124|137) record "$tool" TIMEOUT $(( $(now) - t0 )) "cut at ${cap}s (time ran short): ${summary:-no summary}; the log has what it checked" ;;
      *) if grep -q 'Device not supported\|not supported on this' "$LOGS/$tool.log"; then
           record "$tool" "UNAVAILABLE" $(( $(now) - t0 )) "compute-sanitizer cannot use this device: $(grep -m1 -i 'not supported' "$LOGS/$tool.log")"
         else
           record "$tool" "FAIL(rc=$rc)" $(( $(now) - t0 )) "${summary:-$(tail -n 1 "$LOGS/$tool.log")}"
         fi ;;
    esac
    report
  done
fi

# steps left out by --only, named in the report
wants tests || record tests "SKIPPED(--only)" 0 "not asked for"
wants bench || for b in bench-8b-q4km bench-moe-q4km bench-moe-host-cpu bench-moe-host-cache bench-8b-bf16 bench-kernels; do record "$b" "SKIPPED(--only)" 0 "not asked for"; done
wants sanitizers || for b in memcheck racecheck; do record "$b" "SKIPPED(--only)" 0 "not asked for"; done

# ------------------------------------------------------------------ end
record total DONE $(( $(now) - START )) "budget ${BUDGET}s"
report
echo
echo "gpu-check: report in $RESULTS (gpu-check.md, gpu-check.json, gpu-check-logs.tar.gz)"
if grep -qE $'\t(FAIL|TIMEOUT|CRASH|ERROR|MISSING)' "$STATE/steps.tsv"; then exit 1; fi
exit 0
