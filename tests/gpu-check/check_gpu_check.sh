#!/usr/bin/env bash
# The test of scripts/gpu-check.sh itself, run by .ci/run on the emulator
# pack (scripts/gpu-pack.sh --emulate): the device command's steps, caps,
# report and file count, exercised on every commit.
#
#   1. a run killed early (SIGKILL after a few seconds) still leaves a whole
#      report of the steps it did in the result folder;
#   2. a full run at a small budget, each real group sampled (--sample) and
#      three planted groups (fake-groups.tsv: a failure, a crash, a hang),
#      exits 1, writes at most 8 files (exactly its three), and its report
#      names the pack's commit, lists every CUDA test group (passed on the
#      emulator), each planted fault with the test that caused it (the crashed
#      and hung groups resumed without it), and the benchmarks skipped with
#      the reason.
#
#   3. the GPU path's benchmark step, run on the emulator pack
#      (GPU_CHECK_MODE=gpu, tiny models, --only bench, a 40 s budget): the
#      8B Q4_K_M step runs under its cap (passing or cut short) and the
#      report's table holds the figures cuda-bench wrote before the cut.
#
# Usage: tests/gpu-check/check_gpu_check.sh [PACK_DIR] [SAMPLE]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
PACK=${1:-gpu-pack-emu}
SAMPLE=${2:-1}
out=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-test.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail() { echo "check_gpu_check: FAIL: $*" >&2; exit 1; }

# 1. killed early
timeout -s KILL 5 scripts/gpu-check.sh --pack "$PACK" --out "$out/killed" --work "$out/work-killed" \
  --sample "$SAMPLE" --only tests > "$out/killed.log" 2>&1
[[ -s "$out/killed/gpu-check.md" && -s "$out/killed/gpu-check.json" && -s "$out/killed/gpu-check-logs.tar.gz" ]] ||
  { cat "$out/killed.log"; fail "a run killed after 5 s left no whole report"; }
grep -q '^| pack | PASS' "$out/killed/gpu-check.md" || fail "the killed run's report lacks the pack step"
echo "check_gpu_check: a run killed at 5 s left its report ($(ls "$out/killed" | paste -sd' ' -))"

# 2. the full rehearsal
t0=$(date +%s)
scripts/gpu-check.sh --pack "$PACK" --out "$out/full" --work "$out/work" --budget "${GPU_CHECK_TEST_BUDGET:-1000}" \
  --sample "$SAMPLE" --cap-scale "${GPU_CHECK_TEST_CAP_SCALE:-1}" \
  --extra-groups tests/gpu-check/fake-groups.tsv > "$out/full.log" 2>&1
rc=$?
cat "$out/full.log"
echo "check_gpu_check: the rehearsal took $(( $(date +%s) - t0 )) s, exit status $rc"
[[ $rc -eq 1 ]] || fail "exit status $rc with planted faults (want 1)"
python3 - "$out/full" "$PACK" <<'PY' || exit 1
import json, os, sys
out, pack = sys.argv[1], sys.argv[2]
files = sorted(os.listdir(out))
errors = []
def check(cond, msg):
    if not cond:
        errors.append(msg)
check(len(files) <= 8, f"{len(files)} files in the result folder (at most 8)")
check(files == ["gpu-check-logs.tar.gz", "gpu-check.json", "gpu-check.md"], f"result files {files}")
doc = json.load(open(os.path.join(out, "gpu-check.json")))
md = open(os.path.join(out, "gpu-check.md")).read()
stamp_commit = [l.split(": ", 1)[1].strip() for l in open(os.path.join(pack, "STAMP")) if l.startswith("commit: ")][0]
check(doc["commit"] == stamp_commit and stamp_commit != "unknown", f"commit {doc['commit']!r} (stamp {stamp_commit!r})")
check(stamp_commit.split()[0] in md, "the markdown report does not name the commit")
check(doc["finished"], "the report is not marked finished")
groups = {(g["group"], g["graphs"]): g for g in doc["groups"]}
real = [l.split("\t")[0] for l in open(os.path.join(out, "..", "work", "pack", "groups.tsv")) if l.strip()]
check(len(real) >= 7, f"only {len(real)} CUDA test groups in the pack")
for name in real:
    g = groups.get((name, "on"))
    check(g is not None and g["status"] == "PASS" and g["passed"] > 0, f"group {name}: {g}")
    check(f"| {name} | on | PASS |" in md, f"group {name} missing from the markdown")
for name in ("backend", "capi", "families", "quant", "offload"):
    g = groups.get((name, "off"))
    check(g is not None and g["status"] == "PASS", f"group {name} with graphs off: {g}")
g = groups.get(("fake-failure", "on"), {})
check(g.get("status") == "FAIL" and g.get("failed_tests") == "Fake.Fails" and g.get("passed") == 1, f"planted failure: {g}")
g = groups.get(("fake-crash", "on"), {})
check(g.get("status", "").startswith("CRASH(signal 11)") and g.get("culprits") == "FakeCrash.Crashes"
      and g.get("passed") == 1, f"planted crash (resumed: AfterCrash passes): {g}")
g = groups.get(("fake-hang", "on"), {})
check(g.get("status") == "TIMEOUT" and g.get("culprits") == "FakeHang.Hangs" and g.get("passed") == 1,
      f"planted hang (resumed: AfterHang passes): {g}")
check(g.get("seconds", 99) <= 3 * 6 * 3 // 2 + 3, f"the hang cost {g.get('seconds')} s, more than its cap and a half")
steps = {s["step"]: s for s in doc["steps"]}
for b in ("bench-8b-q4km", "bench-moe-q4km", "bench-moe-host-cpu", "bench-moe-host-cache", "bench-8b-bf16",
          "bench-kernels"):
    check(steps.get(b, {}).get("status") == "SKIPPED(emulator)" and "need a GPU" in steps[b]["note"], f"{b}: {steps.get(b)}")
    check(f"### {b}" in md, f"{b} missing from the markdown")
check(steps.get("synth", {}).get("status") == "PASS", f"synth: {steps.get('synth')}")
for t in ("memcheck", "racecheck"):
    check(steps.get(t, {}).get("status", "").startswith("SKIPPED"), f"{t}: {steps.get(t)}")
if errors:
    print("check_gpu_check: FAIL:\n  " + "\n  ".join(errors), file=sys.stderr)
    sys.exit(1)
print(f"check_gpu_check: report OK: {len(real)} CUDA test groups passed (sampled), the planted failure, crash "
      f"and hang each shown with their test, benchmarks skipped on the emulator, commit {stamp_commit.split()[0][:12]}, "
      f"{len(files)} files")
PY

# 3. the benchmark step's mechanics (on a GPU they are the figures)
GPU_CHECK_MODE=gpu GPU_CHECK_SHAPE=tiny scripts/gpu-check.sh --pack "$PACK" --out "$out/bench" --work "$out/work-bench" \
  --budget 40 --only bench > "$out/bench.log" 2>&1
python3 - "$out/bench" <<'PY' || { cat "$out/bench.log"; exit 1; }
import json, os, sys
doc = json.load(open(os.path.join(sys.argv[1], "gpu-check.json")))
steps = {s["step"]: s for s in doc["steps"]}
st = steps.get("bench-8b-q4km", {}).get("status")
rows = doc["bench"].get("bench-8b-q4km", {}).get("results", [])
md = open(os.path.join(sys.argv[1], "gpu-check.md")).read()
ok = st in ("PASS", "TIMEOUT") and any(r["name"].startswith("device-to-device") for r in rows) \
     and "| Llama 3.1 8B Q4_K_M | " in md and "device-to-device cudaMemcpy" in md
if not ok:
    print(f"check_gpu_check: FAIL: the bench step: {steps.get('bench-8b-q4km')}, {len(rows)} figures", file=sys.stderr)
    sys.exit(1)
print(f"check_gpu_check: the bench step ran on the emulator ({st}, {len(rows)} figures in the report)")
PY
echo "check_gpu_check: PASS"
