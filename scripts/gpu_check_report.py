#!/usr/bin/env python3
"""gpu-check's report: STATE (scripts/gpu-check.sh's state folder) to three
files in RESULTS, each written aside and renamed, so the folder always holds a
whole report of the steps done so far:

  gpu-check.md           the report to commit as bench/results/<date>-<gpu>.md
  gpu-check.json         the same as data (steps, test groups, benchmark rows)
  gpu-check-logs.tar.gz  every log (a log over 4 MiB as its last 4 MiB) and
                         cuda-bench's JSON files

Usage: gpu_check_report.py STATE RESULTS
"""
import io
import json
import os
import re
import sys
import tarfile
import time

LOG_LIMIT = 4 << 20
GROUP_COLS = ["group", "graphs", "status", "seconds", "passed", "failed", "skipped", "failed_tests", "culprits", "note"]
STEP_COLS = ["step", "status", "seconds", "note"]


def read(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def tsv(path, cols):
    rows = []
    for line in read(path).splitlines():
        if not line.strip():
            continue
        cells = line.split("\t")
        cells += [""] * (len(cols) - len(cells))
        rows.append(dict(zip(cols, cells)))
    return rows


def stamp(state):
    out, files = {}, []
    for line in read(os.path.join(state, "STAMP")).splitlines():
        key, _, value = line.partition(": ")
        if key == "file":
            files.append(value)
        elif key:
            out[key] = value
    if files:
        out["files"] = files
    return out


def write_atomic(path, data):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def bench_rows(state):
    benches = {}
    for name in sorted(os.listdir(state)):
        if name.startswith("bench-") and name.endswith(".json"):
            try:
                with open(os.path.join(state, name)) as f:
                    benches[name[:-5]] = json.load(f)
            except (OSError, ValueError) as e:  # cut short mid-write: cuda-bench renames, so rare
                benches[name[:-5]] = {"error": str(e), "results": []}
    return benches


def find(rows, prefix):
    for r in rows:
        if r.get("name", "").startswith(prefix):
            return r.get("value")
    return None


def fmt(v, suffix=""):
    return "-" if v is None else f"{v:.4g}{suffix}"


def markdown(doc):
    st = doc["stamp"]
    md = io.StringIO()
    w = lambda s="": md.write(s + "\n")
    device = doc["device"]
    w(f"# GPU check, {doc['date']}: {device.split(',')[0]}")
    w()
    w(f"- commit: `{st.get('commit', 'unknown')}` ({st.get('subject', '')})")
    w(f"- pack: built {st.get('built', '?')}; {st.get('flags', '?')}")
    w(f"- toolchain: {st.get('toolchain', '?')}")
    w(f"- device: {device}")
    w(f"- command: `{doc['command']}`; budget {doc['budget_s']} s, {doc['elapsed_s']} s used so far"
      + ("" if doc["finished"] else " (**not finished**: this report was written after the last step listed)"))
    w(f"- keep it as `bench/results/{doc['date']}-{doc['gpu_slug']}.md`; logs in `gpu-check-logs.tar.gz`")
    w()
    w("## Steps")
    w()
    w("| step | status | seconds | note |")
    w("| --- | --- | ---: | --- |")
    for s in doc["steps"]:
        w(f"| {s['step']} | {s['status']} | {s['seconds']} | {s['note'].replace('|', '/')} |")
    w()
    w("## CUDA test groups")
    w()
    w("One group per test file (`cuda-tests --gtest_filter=`, `groups.tsv` in the pack), each under its own cap;")
    w("a group that crashed or hung went on without that test (culprits); failed tests reran alone with")
    w("`LLM_CUDA_DEBUG=1` (`logs/<group>.debug.log`). Skips are expected only for the tests of the PyPI models")
    w("(SmolLM2, Gemma 3), which do not travel to the device; the names are in the group's log.")
    w()
    w("| group | graphs | status | seconds | passed | failed | skipped | failed tests | crashed / hung | note |")
    w("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |")
    ran = {(g["group"], g["graphs"]) for g in doc["groups"]}
    for g in doc["groups"]:
        w(f"| {g['group']} | {g['graphs']} | {g['status']} | {g['seconds']} | {g['passed']} | {g['failed']} | "
          f"{g['skipped']} | {g['failed_tests']} | {g['culprits']} | {g['note']} |")
    for name in doc["expected_groups"]:
        if (name, "on") not in ran:
            w(f"| {name} | on | NOT RUN | | | | | | | the run ended before it |")
    w()
    w("## Benchmarks")
    w()
    w("Batch-1 decode: bytes of weights (as held on the device) + KV read per token / time per token, as a")
    w("share of the device-to-device copy bandwidth of the same run (goal >= 75%); generated tokens/s at")
    w("each concurrency (512-token prompts, 128 generated).")
    w()
    w("| model | D2D copy GB/s | decode tok/s | GB read / token | share of D2D copy | tok/s @1 | @8 | @64 | @256 |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    steps = {s["step"]: s for s in doc["steps"]}
    for key, label in (("bench-8b-q4km", "Llama 3.1 8B Q4_K_M"),
                       ("bench-moe-q4km", "Qwen3-30B-A3B shape Q4_K_M (MoE, experts on the device)"),
                       ("bench-moe-host-cpu", "the same, experts in host memory, run by the CPU"),
                       ("bench-moe-host-cache", "the same, experts in host memory, copied into the device cache"),
                       ("bench-8b-bf16", "Llama 3.1 8B BF16")):
        rows = doc["bench"].get(key, {}).get("results", [])
        if not rows:
            st = steps.get(key, {})
            w(f"| {label} | {st.get('status', 'not run')}: {st.get('note', '')} | | | | | | | |")
            continue
        cells = [fmt(find(rows, "device-to-device")), fmt(find(rows, "batch-1 decode tokens/s")),
                 fmt(find(rows, "bytes read per token")), fmt(find(rows, "share of D2D copy"), " %")]
        cells += [fmt(find(rows, f"concurrency {c}:")) for c in (1, 8, 64, 256)]
        w(f"| {label} | " + " | ".join(cells) + " |")
    for key in ("bench-8b-q4km", "bench-moe-q4km", "bench-moe-host-cpu", "bench-moe-host-cache", "bench-8b-bf16",
                "bench-kernels"):
        st = steps.get(key)
        w()
        w(f"### {key}")
        w()
        if st is None:
            w("not run (the run ended before it)")
            continue
        w(f"{st['status']}: {st['note']}")
        rows = doc["bench"].get(key, {}).get("results", [])
        if rows:
            w()
            w("| section | figure | value | unit | note |")
            w("| --- | --- | ---: | --- | --- |")
            for r in rows:
                w(f"| {r.get('section')} | {r.get('name')} | {r.get('value', 0):.4g} | {r.get('unit')} | {r.get('note', '')} |")
    w()
    w("## compute-sanitizer")
    w()
    for tool in ("memcheck", "racecheck"):
        st = steps.get(tool)
        w(f"- {tool}: " + (f"{st['status']}: {st['note']}" if st else "not run (the run ended before it)"))
    return md.getvalue()


def logs_archive(state):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        paths = []
        logs = os.path.join(state, "logs")
        if os.path.isdir(logs):
            paths += [os.path.join("logs", n) for n in sorted(os.listdir(logs))]
        paths += [n for n in sorted(os.listdir(state)) if n.endswith(".json") or n.endswith(".tsv") or n == "STAMP"]
        for rel in paths:
            full = os.path.join(state, rel)
            if not os.path.isfile(full):
                continue
            size = os.path.getsize(full)
            with open(full, "rb") as f:
                if size > LOG_LIMIT:
                    f.seek(size - LOG_LIMIT)
                data = f.read(LOG_LIMIT)
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def main():
    state, results = sys.argv[1], sys.argv[2]
    os.makedirs(results, exist_ok=True)
    steps = tsv(os.path.join(state, "steps.tsv"), STEP_COLS)
    groups = tsv(os.path.join(state, "groups.tsv"), GROUP_COLS)
    for g in groups:
        for k in ("seconds", "passed", "failed", "skipped"):
            g[k] = int(g[k]) if g[k].isdigit() else g[k]
    start = int(read(os.path.join(state, "start"), "0").strip() or 0)
    device = read(os.path.join(state, "device"), "unknown").strip() or "unknown"
    name = device.split(",")[0]
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-") or "unknown-gpu"
    if "emulator" in name:
        slug = "emulator"
    expected = [line.split("\t")[0] for line in read(os.path.join(state, "all-groups.tsv")).splitlines() if line]
    doc = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "written": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "device": device,
        "gpu_slug": slug,
        "commit": stamp(state).get("commit", "unknown"),
        "stamp": stamp(state),
        "command": read(os.path.join(state, "command")).strip(),
        "budget_s": int(read(os.path.join(state, "budget"), "0").strip() or 0),
        "elapsed_s": int(time.time()) - start if start else 0,
        "finished": any(s["step"] == "total" for s in steps),
        "steps": steps,
        "expected_groups": expected,
        "groups": groups,
        "bench": bench_rows(state),
    }
    write_atomic(os.path.join(results, "gpu-check.json"), (json.dumps(doc, indent=1) + "\n").encode())
    write_atomic(os.path.join(results, "gpu-check.md"), markdown(doc).encode())
    write_atomic(os.path.join(results, "gpu-check-logs.tar.gz"), logs_archive(state))


if __name__ == "__main__":
    main()
