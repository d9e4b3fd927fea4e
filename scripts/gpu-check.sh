#!/usr/bin/env bash
# gpu-check.sh: everything a (rare) session with a real GPU should run, in
# one command, within ~25 minutes on an H100/H200 with 16 cores:
#
#   build    -DLLM_CUDA=ON for the device's architecture (sm_90 by default)
#   tests    every CUDA test (ctest label `cuda`, else test_cuda_*), and the
#            C API tests that name the CUDA backend
#   memcheck compute-sanitizer memcheck on the kernel tests (test_cuda_kernels,
#            test_cuda_quant's kernel cases)
#   racecheck compute-sanitizer racecheck on the same
#   bench    cuda-bench on synthesized Llama 3.1 8B shapes, BF16 and Q4_K_M
#            (llm-synth --type q4_k_m: llama.cpp's mix of Q4_K/Q6_K blocks),
#            and Llama 3.2 1B BF16: batch-1 decode as a share of the
#            device-to-device copy bandwidth measured in the same run, and
#            throughput at concurrency 1, 8, 64, 256; the kernel figures
#            ((c) attention, (e) quantized GEMV) once, with the 1B model.
#            Its parts can be run alone: synth, bench-8b, bench-8b-q4km, bench-1b
#
# and writes bench/results/<date>-<gpu>.md (date, device, commit, commands,
# step table, benchmark tables, test and sanitizer summaries). Each step's
# status is recorded; a failing step does not stop the others; the summary
# at the end lists them all, and the exit status is non-zero when any step
# failed or timed out. Steps share one time budget: a step never runs past
# it, and steps left without time are reported SKIPPED.
#
# Usage: scripts/gpu-check.sh [--only STEP,STEP..] [--build-dir DIR] [--arch 90]
#                             [--budget SECONDS] [--fresh] [--dry-run]
#
#   --only     run these steps (build,tests,memcheck,racecheck,bench, or
#              bench's parts synth,bench-8b,bench-8b-q4km,bench-1b); the
#              report still lists every step recorded so far, so a session
#              whose commands are limited to ~10 minutes can run the steps
#              in turn (build,tests / memcheck,racecheck / synth /
#              bench-8b / bench-8b-q4km / bench-1b) and get one
#              report. Steps need the build directory the build step left.
#   --fresh    forget the statuses recorded by earlier runs
#   --dry-run  print each step's command and run nothing on the GPU (the
#              report goes to the state directory, not bench/results)
#
# Environment: GPU_CHECK_JOBS (build parallelism, default nproc),
# GPU_CHECK_MODELS (where the synthesized models go, default
# <build-dir>/gpu-check/models; ~24 GB), OUT (when set, the report and logs
# are copied there too: the device runner brings that folder back).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1

COMMAND_LINE="scripts/gpu-check.sh${*:+ $*}"
BUILD=build-gpu
ARCH=90
BUDGET=1440          # seconds: 24 minutes, under the 25 a GPU session allows
ONLY="build,tests,memcheck,racecheck,bench"
DRY=0
FRESH=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) ONLY=${2:?--only needs a list}; shift 2 ;;
    --build-dir) BUILD=${2:?--build-dir needs a path}; shift 2 ;;
    --arch) ARCH=${2:?--arch needs a value}; shift 2 ;;
    --budget) BUDGET=${2:?--budget needs seconds}; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
for s in ${ONLY//,/ }; do
  case "$s" in build|tests|memcheck|racecheck|bench|synth|bench-8b|bench-8b-q4km|bench-1b) ;; *) echo "gpu-check: unknown step '$s'" >&2; exit 2 ;; esac
done

JOBS=${GPU_CHECK_JOBS:-$(nproc)}
STATE="$BUILD/gpu-check"
MODELS=${GPU_CHECK_MODELS:-$STATE/models}
BIN="$BUILD/bin"
mkdir -p "$STATE/logs" || exit 1
[[ $FRESH -eq 1 ]] && rm -f "$STATE/steps.tsv" "$STATE"/*.json
touch "$STATE/steps.tsv"
START=$(date +%s)
DEADLINE=$((START + BUDGET))

wants() { [[ ",$ONLY," == *",$1,"* ]]; }
# A part of the bench: named alone, or through `bench`.
wants_bench() { wants bench || wants "$1"; }
now() { date +%s; }

# record NAME STATUS SECONDS COMMAND: one line per step in steps.tsv (the
# latest run of a step replaces its earlier line).
record() {
  local tmp="$STATE/steps.tsv.tmp" flat
  flat=$(printf '%s' "$4" | tr '\n\t' '  ' | tr -s ' ')  # one line per step
  awk -F'\t' -v n="$1" '$1 != n' "$STATE/steps.tsv" > "$tmp" && mv "$tmp" "$STATE/steps.tsv"
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$flat" >> "$STATE/steps.tsv"
  printf '== %-22s %-16s %5ss\n' "$1" "$2" "$3"
}

# step NAME CAP_SECONDS COMMAND: runs COMMAND (a bash string) with its output
# in logs/NAME.log, for at most min(CAP, time left in the budget).
step() {
  local name=$1 cap=$2 cmd=$3 left t0 rc status
  left=$((DEADLINE - $(now)))
  if [[ $DRY -eq 1 ]]; then
    echo "== $name (dry run): $cmd"
    record "$name" "DRY-RUN" 0 "$cmd"
    return 0
  fi
  if (( left < 30 )); then
    record "$name" "SKIPPED(time)" 0 "$cmd"
    return 1
  fi
  (( cap > left )) && cap=$left
  echo "== $name (at most ${cap}s): $cmd"
  t0=$(now)
  { echo "\$ $cmd"; echo; } > "$STATE/logs/$name.log"
  timeout --kill-after=20 "$cap" bash -c "$cmd" >> "$STATE/logs/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=PASS ;;
    124|137) status=TIMEOUT ;;
    *) status="FAIL(rc=$rc)" ;;
  esac
  record "$name" "$status" "$(( $(now) - t0 ))" "$cmd"
  [[ $rc -eq 0 ]]
}

status_of() { awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$STATE/steps.tsv"; }

# On a GPU a skipped CUDA test did not run: a passing step with skips says
# how many (GoogleTest lists each skipped test twice; counted once).
note_skips() {
  local n line
  [[ $DRY -eq 1 || "$(status_of "$1")" != PASS ]] && return 0
  n=$(grep -oE '^([0-9]+: )?\[  SKIPPED \] [A-Za-z0-9_]+\.[A-Za-z0-9_/]+' "$STATE/logs/$1.log" |
      sed 's/^[0-9]*: //' | sort -u | wc -l)
  (( n == 0 )) && return 0
  line=$(awk -F'\t' -v n="$1" '$1 == n' "$STATE/steps.tsv")
  record "$1" "PASS($n skipped)" "$(cut -f3 <<< "$line")" "$(cut -f4 <<< "$line")"
}

SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

# ---------------------------------------------------------------- build
if wants build; then
  step configure 180 "cmake -B '$BUILD' -DCMAKE_BUILD_TYPE=Release -DLLM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCH"
  # The CUDA tests (label `cuda` once the emulator branch defines it; else
  # every test_cuda_* test), the C API tests, the bench and the synthesizer.
  targets="test_capi cuda-bench llm-synth"
  if [[ $DRY -eq 0 && -f "$BUILD/CTestTestfile.cmake" ]]; then
    cuda_tests=$(ctest --test-dir "$BUILD" -N -L cuda 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: *//p')
    [[ -z "$cuda_tests" ]] && cuda_tests=$(ctest --test-dir "$BUILD" -N -R '^test_cuda_' | sed -n 's/^ *Test *#[0-9]*: *//p')
    targets="$targets $(echo "$cuda_tests" | tr '\n' ' ')"
  else
    targets="$targets test_cuda_kernels test_cuda_backend test_cuda_graphs test_cuda_quant"
  fi
  step build 600 "cmake --build '$BUILD' -j$JOBS --target $targets"
fi

# ---------------------------------------------------------------- tests
if wants tests; then
  # -V: every test's output in the log (GPU-side skips show there); a label
  # run once the emulator branch has labelled them, else by name.
  step cuda-tests 420 "if ctest --test-dir '$BUILD' -N -L cuda | grep -q 'Total Tests: [1-9]'; then
      ctest --test-dir '$BUILD' -L cuda -V --timeout 400;
    else ctest --test-dir '$BUILD' -R '^test_cuda_' -V --timeout 400; fi"
  note_skips cuda-tests
  step capi-cuda 120 "'$BIN/test_capi' --gtest_filter='*Gpu*:*Cuda*:*CUDA*'"
  # Also with graphs off: a graph bug and a backend bug then tell apart.
  step cuda-backend-nographs 240 "LLM_CUDA_GRAPHS=0 '$BIN/test_cuda_backend'"
  note_skips cuda-backend-nographs
fi

# ---------------------------------------------------------------- sanitizers
# Every kernel test but the 200000-row frequency test, whose launches add
# statistics, not code paths, and which an instrumented run would spend
# minutes on (the other sampling tests run the same kernel).
SAN_FILTER="'--gtest_filter=-*SampleFrequencies*'"
# The quantized kernels' cases (not the model-level ones: same kernels, minutes more).
SAN_QUANT="'$BIN/test_cuda_quant' '--gtest_filter=CudaQuant.*'"
if wants memcheck; then
  step memcheck 330 "'$SANITIZER' --tool memcheck --error-exitcode 86 --print-limit 50 '$BIN/test_cuda_kernels' $SAN_FILTER &&
    '$SANITIZER' --tool memcheck --error-exitcode 86 --print-limit 50 $SAN_QUANT"
fi
if wants racecheck; then
  step racecheck 330 "'$SANITIZER' --tool racecheck --racecheck-report hazard --error-exitcode 86 --print-limit 50 '$BIN/test_cuda_kernels' $SAN_FILTER &&
    '$SANITIZER' --tool racecheck --racecheck-report hazard --error-exitcode 86 --print-limit 50 $SAN_QUANT"
fi

# ---------------------------------------------------------------- bench
mkdir -p "$MODELS"
L1="$MODELS/llama-3.2-1b.gguf"
L8="$MODELS/llama-3.1-8b.gguf"
L8Q="$MODELS/llama-3.1-8b-q4_k_m.gguf"
if wants_bench synth; then
  # The three models in one step (8B: ~16 GB BF16, ~4.9 GB Q4_K_M); a model
  # an earlier run left is reused (llm-synth's output is deterministic).
  step synth 480 "for s in llama-3.2-1b:bf16:'$L1' llama-3.1-8b:bf16:'$L8' llama-3.1-8b:q4_k_m:'$L8Q'; do
      shape=\${s%%:*}; rest=\${s#*:}; type=\${rest%%:*}; f=\${rest#*:};
      if [[ ! -s \$f ]]; then '$BIN/llm-synth' --shape \$shape --type \$type --out \$f.tmp --threads $JOBS && mv -f \$f.tmp \$f || exit 1; fi;
    done"
fi
# The 8B figures first: they are what issue 21 asks for (decode as a share
# of the copy bandwidth, throughput at concurrency 64 and 256 beside 1).
if wants_bench bench-8b; then
  step bench-8b 420 "'$BIN/cuda-bench' --model '$L8' --no-kernels --json '$STATE/bench-8b.json'"
fi
if wants_bench bench-8b-q4km; then
  step bench-8b-q4km 420 "'$BIN/cuda-bench' --model '$L8Q' --no-kernels --json '$STATE/bench-8b-q4km.json'"
fi
if wants_bench bench-1b; then
  step bench-1b 360 "'$BIN/cuda-bench' --model '$L1' --json '$STATE/bench-1b.json'"
fi

# ---------------------------------------------------------------- report
gpu_line=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
[[ -z "$gpu_line" ]] && gpu_line="unknown (no nvidia-smi)"
gpu_name=${gpu_line%%,*}
gpu_slug=$(echo "$gpu_name" | tr '[:upper:]' '[:lower:]' | sed -e 's/nvidia//' -e 's/[^a-z0-9]\+/-/g' -e 's/^-//' -e 's/-$//')
[[ -z "$gpu_slug" ]] && gpu_slug=unknown-gpu
day=$(date -u +%F)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
nvcc_version=$( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | sed -n 's/.*release \([0-9.]*\).*/\1/p')
if [[ $DRY -eq 1 ]]; then
  report="$STATE/report-dry-run.md"
else
  mkdir -p bench/results
  report="bench/results/$day-$gpu_slug.md"
fi

# The JSON of cuda-bench as a markdown table.
bench_table() {
  python3 - "$1" <<'PY'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:  # a run that died before writing its JSON
    print(f"(no results: {e})")
    sys.exit(0)
print("| section | figure | value | unit | note |")
print("| --- | --- | ---: | --- | --- |")
for r in doc.get("results", []):
    v = r["value"]
    print(f"| {r['section']} | {r['name']} | {v:.4g} | {r['unit']} | {r.get('note', '')} |")
PY
}

# One row per model (LABEL:JSON): the decode share and the throughputs.
glance_table() {
  python3 - "$@" <<'PY'
import json, sys
print("| model | decode tok/s | GB read / token | share of D2D copy | tok/s @1 | @8 | @64 | @256 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for arg in sys.argv[1:]:
    label, path = arg.split(":", 1)
    try:
        rows = json.load(open(path)).get("results", [])
    except Exception:
        print(f"| {label} | (no results) | | | | | | |")
        continue
    def find(pred):
        for r in rows:
            if pred(r["name"]):
                return f"{r['value']:.4g}"
        return "-"
    cells = [find(lambda n: n.startswith("batch-1 decode tokens/s")),
             find(lambda n: n.startswith("bytes read per token")),
             find(lambda n: n.startswith("share of D2D copy")) + " %"]
    for c in (1, 8, 64, 256):
        cells.append(find(lambda n, c=c: n.startswith(f"concurrency {c}:")))
    print(f"| {label} | " + " | ".join(cells) + " |")
PY
}

# Lines of a log worth quoting in the report (test totals, sanitizer summaries).
summary_lines() {
  echo "\`$1\` ($(status_of "$1")):"
  echo
  if [[ -f "$STATE/logs/$1.log" ]]; then
    grep -E "$2" "$STATE/logs/$1.log" | tail -n "${3:-12}" | sed 's/^/    /'
  else
    echo "    (no log)"
  fi
  echo
}

{
  echo "# GPU check, $day: $gpu_name"
  echo
  echo "- date: $(date -u '+%F %T') UTC"
  echo "- device: $gpu_line (nvidia-smi: name, memory, driver)"
  echo "- CUDA toolkit: ${nvcc_version:-unknown}; build: -DLLM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCH, Release"
  echo "- commit: $commit"
  echo "- host: $(nproc) cores"
  echo "- command: \`$COMMAND_LINE\` (steps of this run: $ONLY; budget ${BUDGET}s)"
  echo "- logs: \`$STATE/logs/\`"
  echo
  echo "## Steps"
  echo
  echo "| step | status | seconds | command |"
  echo "| --- | --- | ---: | --- |"
  while IFS=$'\t' read -r n st sec cmd; do
    [[ -z "$n" ]] && continue
    echo "| $n | $st | $sec | \`${cmd//|/\\|}\` |"
  done < "$STATE/steps.tsv"
  echo
  echo "## Tests"
  echo
  # totals, every failed case, and how many skipped (the names are in the log)
  summary_lines cuda-tests '(tests passed|tests failed|\[  FAILED  \] [A-Z]|\[  SKIPPED \] [0-9]|\[  PASSED  \]|Total Test time)' 40
  summary_lines capi-cuda '(\[  PASSED  \]|\[  FAILED  \] [A-Z]|\[  SKIPPED \] [0-9])'
  summary_lines cuda-backend-nographs '(\[  PASSED  \]|\[  FAILED  \] [A-Z]|\[  SKIPPED \] [0-9])' 20
  echo
  echo "## compute-sanitizer"
  echo
  summary_lines memcheck '(ERROR SUMMARY|\[  PASSED  \]|\[  FAILED  \])'
  summary_lines racecheck '(RACECHECK SUMMARY|ERROR SUMMARY|\[  PASSED  \]|\[  FAILED  \])'
  echo
  echo "## Decode and throughput at a glance"
  echo
  echo "Batch-1 decode: bytes of weights (as held on the device) + KV read per token / time per token, as a share of"
  echo "the device-to-device copy bandwidth of the same run (goal >= 75%). Generated tokens/s at each concurrency."
  echo
  glance_table "8B BF16:$STATE/bench-8b.json" "8B Q4_K_M:$STATE/bench-8b-q4km.json" "1B BF16:$STATE/bench-1b.json"
  for b in 8b 8b-q4km 1b; do
    echo
    echo "## cuda-bench, synthesized Llama ${b^^} shape"
    echo
    # cuda-bench rewrites its JSON after every figure: a run cut short still shows what it measured.
    echo "Step status: $(status_of "bench-$b")"
    echo
    if [[ -f "$STATE/bench-$b.json" ]]; then bench_table "$STATE/bench-$b.json"; else echo "(no figures)"; fi
  done
} > "$report"

if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  cp "$report" "$OUT/" && cp -r "$STATE/logs" "$OUT/gpu-check-logs" && cp "$STATE"/*.json "$OUT/" 2>/dev/null
fi

echo
echo "==================== gpu-check summary ($(( $(now) - START ))s)"
column -t -s $'\t' < <(cut -f1-3 "$STATE/steps.tsv") 2>/dev/null || cut -f1-3 "$STATE/steps.tsv"
echo "report: $report"
if grep -qE $'\t(FAIL|TIMEOUT)' "$STATE/steps.tsv"; then exit 1; fi
exit 0
