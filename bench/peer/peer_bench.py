#!/usr/bin/env python3
"""llmrt vs llama.cpp, side by side, on synthesized Llama-3.2 shapes.

Builds llama.cpp from the llama-cpp-python sdist (build_llamacpp.sh, into
bench/peer/.cache/), synthesizes each shape in F16 with llm-synth, quantizes
it with that llama.cpp's llama-quantize, then runs the two sides alternately
(llmrt first in even rounds, llama.cpp first in odd ones: a shared VM's load
moves between minutes, and alternating spreads it over both) and prints one
table of medians with the ratio llmrt / llama.cpp:

  tg        batch-1 decode, tok/s      bench_forward -n N       llama-bench -n N -p 0
  pp128     prefill of 128 tokens      bench_forward -p 128     llama-bench -p 128 -n 0
  tg@D      decode at depth D          bench_forward -d D -k T  llama-bench -d D -n N -p 0 -ctk T -ctv T -fa 1
            (T: each of --cache-types, f16 by default)
  rss@C     peak resident memory, MB   /usr/bin/time -v llm-run -c C   vs llama-completion -c C
            (C = "default": each tool's default, the model's trained context)

plus, per model and thread count, llmrt's decode in GB/s of weight bytes
(as stored in the file) and the streaming-read bandwidth bench_forward
measured in the same run.

Example (quick): bench/peer/peer_bench.py --shapes llama-3.2-1b --types q4_0 --rounds 1 --tests tg,pp
Full (issue 22): bench/peer/peer_bench.py --rounds 5
Not part of CI: it downloads from PyPI and takes hours on a 2-core VM.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
QTYPES = {"q4_0": "Q4_0", "q4_k_m": "Q4_K_M", "q8_0": "Q8_0", "q4_1": "Q4_1", "q5_k_m": "Q5_K_M", "q6_k": "Q6_K",
          # issue 32's low-bit types; the IQ2 ones need --imatrix (llama-quantize refuses them without one)
          "iq4_xs": "IQ4_XS", "q3_k_m": "Q3_K_M", "q2_k": "Q2_K", "iq3_xxs": "IQ3_XXS", "iq2_xs": "IQ2_XS"}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, env=None):
    log(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r.stdout, r.stderr


def models(args, llama_bin):
    os.makedirs(args.work, exist_ok=True)
    out = []
    for shape in args.shapes:
        f16 = os.path.join(args.work, f"{shape}-f16.gguf")
        need = [t for t in args.types if not os.path.exists(os.path.join(args.work, f"{shape}-{t}.gguf"))]
        if need and not os.path.exists(f16):
            run([os.path.join(args.build, "bin", "llm-synth"), "--shape", shape, "--type", "f16", "--out", f16,
                 "--threads", "2"])
        for t in args.types:
            q = os.path.join(args.work, f"{shape}-{t}.gguf")
            if not os.path.exists(q):
                if llama_bin:
                    im = ["--imatrix", args.imatrix] if args.imatrix else []
                    run([os.path.join(llama_bin, "llama-quantize")] + im + [f16, q + ".tmp", QTYPES[t], "2"])
                else:
                    if args.imatrix:
                        raise RuntimeError("--imatrix needs the llama.cpp tools (--llama tools)")
                    import llama_cpp
                    p = llama_cpp.llama_model_quantize_default_params()
                    p.ftype = {"q4_0": 2, "q4_1": 3, "q8_0": 7, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18}[t]
                    p.nthread = 2
                    if llama_cpp.llama_model_quantize(f16.encode(), (q + ".tmp").encode(), p) != 0:
                        raise RuntimeError(f"quantizing {f16} to {t} failed")
                os.rename(q + ".tmp", q)
            out.append((shape, t, q))
        if not args.keep_f16 and os.path.exists(f16):
            os.remove(f16)
    return out


def ours_bench(args, model, threads, depth, cache="f16"):
    cmd = [os.path.join(args.build, "bin", "bench_forward"), "-m", model, "-t", str(threads), "-n", str(args.n_gen),
           "-p", "128" if depth == 0 else "8", "-r", "1", "-d", str(depth), "-w", "512" if depth == 0 else "0",
           "-k", cache]
    o, _ = run(cmd)
    r = {"tg": float(re.search(r"^decode\s+\d+ tokens\s+([\d.]+) tok/s", o, re.M).group(1))}
    if depth == 0:
        r["pp128"] = float(re.search(r"^prefill\s+\d+ tokens\s+([\d.]+) tok/s", o, re.M).group(1))
        m = re.search(r"decode streams ([\d.]+) GB/s.*streaming read ([\d.]+) GB/s", o)
        if m:
            r["gbs"], r["stream"] = float(m.group(1)), float(m.group(2))
    return r


def llama_bench(args, llama_bin, model, threads, depth, tests, cache="f16"):
    r = {}
    if args.llama == "python":
        cmd = [sys.executable, os.path.join(HERE, "llamacpp_py_bench.py"), "-m", model, "-t", str(threads), "-r", "1"]
    else:
        cmd = [os.path.join(llama_bin, "llama-bench"), "-m", model, "-t", str(threads), "-r", "1", "-o", "json"]
        if args.no_repack:
            cmd += ["--repack", "0"]
    if depth:
        cmd += ["-p", "0", "-n", str(args.n_gen), "-d", str(depth)]
        if args.llama != "python":
            # llama.cpp keeps a quantized V only with flash attention: on for
            # every cache type, so the types differ in their cache alone.
            cmd += ["-ctk", cache, "-ctv", cache, "-fa", "1"]
    else:
        cmd += ["-p", "128" if "pp" in tests else "0", "-n", str(args.n_gen) if "tg" in tests else "0"]
    o, _ = run(cmd)
    for rec in json.loads(o):
        key = "tg" if rec["n_gen"] > 0 else "pp128"
        r[key] = float(rec["avg_ts"])
    return r, None


def peak_rss_mb(cmd, env=None):
    _, err = run(["/usr/bin/time", "-v"] + cmd, env=env)
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1)) / 1024


def rss(args, llama_bin, model, ctx):
    ours = [os.path.join(args.build, "bin", "llm-run"), "-m", model, "-t", "2", "-n", "8", "-p", "Hello",
            "--ignore-eos"]
    if args.llama == "python":
        theirs = [sys.executable, os.path.join(HERE, "llamacpp_py_bench.py"), "-m", model, "-t", "2", "-n", "8",
                  "-p", "8"]
    else:
        theirs = [os.path.join(llama_bin, "llama-completion"), "-m", model, "-t", "2", "-n", "8", "-p", "Hello",
                  "-no-cnv", "--ignore-eos"]
    # llama.cpp's -c 0 is "the model's context"; llm-run's default (no -c) is the same.
    if ctx == "default":
        theirs += ["-c", "0"]  # llamacpp_py_bench.py: the same meaning
    else:
        ours += ["-c", str(ctx)]
        theirs += ["-c", str(ctx)]
    theirs_mb = peak_rss_mb(theirs)
    if args.llama == "python":
        # The interpreter and the binding's own pages, which llama-completion would not have.
        theirs_mb -= peak_rss_mb([sys.executable, "-c", "import llama_cpp; llama_cpp.llama_backend_init()"])
    return peak_rss_mb(ours), theirs_mb


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="llama-3.2-1b,llama-3.2-3b")
    ap.add_argument("--types", default="q4_0,q4_k_m,q8_0", help="of " + ",".join(QTYPES))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tests", default="tg,pp,depth,rss", help="of tg,pp,depth,rss")
    ap.add_argument("--depth", type=int, default=4096)
    ap.add_argument("--n-gen", type=int, default=32, help="decode tokens per run")
    ap.add_argument("--cache-types", default="f16",
                    help="KV cache types for the depth test, of f16,q8_0,q4_0 (llmrt -k T; llama-bench -ctk T -ctv T "
                         "-fa 1)")
    ap.add_argument("--rss-ctx", default="4096,default")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="llmrt Release build dir")
    ap.add_argument("--work", default=os.path.join(HERE, ".cache", "models"))
    ap.add_argument("--llama-version", default="0.3.36", help="llama-cpp-python sdist version")
    ap.add_argument("--keep-f16", action="store_true")
    ap.add_argument("--no-repack", action="store_true",
                    help="llama-bench --repack 0: on a CPU reporting AMX_INT8 whose AMX matmul crashes llama.cpp "
                         "(this VM), without its repacked weights (AMX and its AVX2/AVX-512 repacking alike)")
    ap.add_argument("--imatrix", help="importance matrix for llama-quantize (llama-imatrix's output; the IQ2 types "
                                      "need one)")
    ap.add_argument("--json", help="also write the raw samples here")
    ap.add_argument("--llama", choices=["auto", "tools", "python"], default="auto",
                    help="llama.cpp side: its tools (llama-bench, llama-completion), or the same llama.cpp through "
                         "the installed llama-cpp-python (llamacpp_py_bench.py); auto: the tools if built")
    args = ap.parse_args()
    for lst in ("shapes", "types", "threads", "tests", "rss_ctx", "cache_types"):
        setattr(args, lst, [x for x in getattr(args, lst).split(",") if x])
    bad = [t for t in args.types if t not in QTYPES]
    if bad:
        ap.error(f"unknown type {bad}")

    if args.llama == "auto":
        built = os.path.join(HERE, ".cache", f"llama.cpp-{args.llama_version}-build", "bin")
        args.llama = "tools" if all(os.access(os.path.join(built, t), os.X_OK) for t in
                                    ("llama-bench", "llama-quantize", "llama-completion")) else "python"
    if args.llama == "tools":
        llama_bin = subprocess.run([os.path.join(HERE, "build_llamacpp.sh"), args.llama_version], check=True,
                                   capture_output=True, text=True).stdout.strip().splitlines()[-1]
        ver = subprocess.run([os.path.join(llama_bin, "llama-bench"), "--version"], capture_output=True, text=True)
        version = (ver.stdout + ver.stderr).strip().splitlines()
    else:
        import llama_cpp  # the quantization below then goes through it too
        llama_bin = None
        version = [f"llama-cpp-python {llama_cpp.__version__} binding (libllama of the same sdist)"]
    log(f"llama.cpp: {version[0] if version else '?'} (llama-cpp-python {args.llama_version})")
    tests = set(args.tests)

    samples = {}  # (shape, type, threads, metric) -> {"ours": [...], "llama": [...]}

    def add(key, side, v):
        samples.setdefault(key, {"ours": [], "llama": []})[side].append(v)

    for shape, qt, path in models(args, llama_bin):
        for t in [int(x) for x in args.threads]:
            for rnd in range(args.rounds):
                order = ["ours", "llama"] if rnd % 2 == 0 else ["llama", "ours"]
                for side in order:
                    if tests & {"tg", "pp"}:
                        r = ours_bench(args, path, t, 0) if side == "ours" else \
                            llama_bench(args, llama_bin, path, t, 0, tests)[0]
                        for k, v in r.items():
                            if (k == "tg" and "tg" in tests) or (k == "pp128" and "pp" in tests) or k in ("gbs",
                                                                                                           "stream"):
                                add((shape, qt, t, k), side, v)
                    if "depth" in tests:
                        for ct in args.cache_types:
                            r = ours_bench(args, path, t, args.depth, ct) if side == "ours" else \
                                llama_bench(args, llama_bin, path, t, args.depth, tests, ct)[0]
                            m = f"tg@{args.depth}" + ("" if ct == "f16" else f" kv {ct}")
                            add((shape, qt, t, m), side, r["tg"])
        if "rss" in tests:
            for ctx in args.rss_ctx:
                for rnd in range(max(1, min(args.rounds, 2))):  # peak RSS barely moves between runs
                    o, l = rss(args, llama_bin, path, ctx)
                    add((shape, qt, 0, f"rss@{ctx} MB"), "ours", o)
                    add((shape, qt, 0, f"rss@{ctx} MB"), "llama", l)

    print(f"llama.cpp {version[0] if version else '?'} (llama-cpp-python {args.llama_version}); "
          f"medians of {args.rounds} alternating rounds")
    print("| shape | type | threads | metric | llmrt | llama.cpp | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (shape, qt, t, m), s in samples.items():
        if m in ("gbs", "stream"):
            continue
        o = statistics.median(s["ours"]) if s["ours"] else float("nan")
        l = statistics.median(s["llama"]) if s["llama"] else float("nan")
        ratio = (l / o if m.startswith("rss") else o / l) if l and o else float("nan")
        # RSS: the ratio is llama.cpp / llmrt, so > 1 is llmrt ahead in every row.
        print(f"| {shape} | {qt} | {t or '-'} | {m} | {o:.1f} | {l:.1f} | {ratio:.2f} |")
    bw = [(k, s) for k, s in samples.items() if k[3] == "gbs"]
    if bw:
        # share: decode GB/s over the streaming read of the same bench_forward
        # run, median over the runs (this VM's bandwidth moves between runs
        # by up to 2x, so a ratio of the two medians mixes runs).
        print("\n| shape | type | threads | llmrt decode GB/s (file bytes x tok/s) | streaming read GB/s | "
              "share (median of per-run ratios) |")
        print("| --- | --- | --- | --- | --- | --- |")
        for (shape, qt, t, _), s in bw:
            g = statistics.median(s["ours"])
            runs = samples[(shape, qt, t, "stream")]["ours"]
            st = statistics.median(runs)
            share = statistics.median(a / b for a, b in zip(s["ours"], runs))
            print(f"| {shape} | {qt} | {t} | {g:.2f} | {st:.2f} | {100 * share:.0f}% |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"|".join(map(str, k)): v for k, v in samples.items()}, f, indent=1)


if __name__ == "__main__":
    main()
