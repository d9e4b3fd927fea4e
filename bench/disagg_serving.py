#!/usr/bin/env python3
"""TTFT and TPOT of a long/short prompt mix: colocated against disaggregated.

  disagg_serving.py BUILD_BIN MODEL [--requests N] [--rounds K] [--rate R]

Colocated: one llm-server with 2 threads. Disaggregated: a prefill server
(--kv-role prefill) and a decode server (--kv-role decode) with 1 thread
each, behind llm-disagg-proxy: the same total thread count. The traffic:
N streaming completions (a quarter with a ~900-token prompt, the rest
~40 tokens; 32 tokens out each, greedy), arriving as a Poisson process of
rate R per second, through the openai client. TTFT is the time to the first
streamed text, TPOT the mean gap between later chunks. The two setups run
K times each, alternating; each percentile is the median over rounds.
UCX_TLS=tcp (loopback).
"""
import argparse
import concurrent.futures
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "server"))
import server_proc  # noqa: E402
import openai  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("model")
ap.add_argument("--requests", type=int, default=32)
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--rate", type=float, default=2.0)
a = ap.parse_args()
os.environ["UCX_TLS"] = "tcp"
server_bin, proxy_bin = os.path.join(a.bin, "llm-server"), os.path.join(a.bin, "llm-disagg-proxy")
common = ["-m", a.model, "-c", "2048", "-np", "8"]

random.seed(7)
words = "the a little cat dog ran jumped over under happy sad big small tree house river".split()
traffic = []
for i in range(a.requests):
    n = 600 if i % 4 == 0 else 28  # words: ~900 and ~40 tokens
    traffic.append(" ".join(random.choice(words) for _ in range(n)) + " %d" % i)
gaps = [random.expovariate(a.rate) for _ in traffic]


def start_proxy(pp, dp):
    p = subprocess.Popen([proxy_bin, "--port", "0", "--prefill", "http://127.0.0.1:%d" % pp,
                          "--decode", "http://127.0.0.1:%d" % dp], stdout=subprocess.PIPE, text=True)
    return p, int(p.stdout.readline().split("listening on http://")[1].split()[0].rsplit(":", 1)[1])


def run(port):
    client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="x", max_retries=0, timeout=600)

    def one(prompt):
        t0 = time.perf_counter()
        times = []
        for c in client.completions.create(model="m", prompt=prompt, max_tokens=32, temperature=0, stream=True):
            if c.choices and c.choices[0].text:
                times.append(time.perf_counter())
        ttft = times[0] - t0
        tpot = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else 0.0
        return ttft, tpot, len(prompt) > 1000

    with concurrent.futures.ThreadPoolExecutor(len(traffic)) as ex:
        futs = []
        for p, g in zip(traffic, gaps):
            futs.append(ex.submit(one, p))
            time.sleep(g)
        return [f.result() for f in futs]


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] * 1e3


def summary(res):
    out = {}
    for name, sel in (("all", lambda r: True), ("long", lambda r: r[2]), ("short", lambda r: not r[2])):
        rs = [r for r in res if sel(r)]
        for q in (0.5, 0.9, 0.99):
            out["%s ttft p%d" % (name, q * 100)] = pct([r[0] for r in rs], q)
            out["%s tpot p%d" % (name, q * 100)] = pct([r[1] for r in rs], q)
    return out


results = {"colocated": [], "disaggregated": []}
for rnd in range(a.rounds):
    for setup in (("colocated", "disaggregated") if rnd % 2 == 0 else ("disaggregated", "colocated")):
        procs = []
        try:
            if setup == "colocated":
                p, port, _ = server_proc.start(server_bin, common + ["-t", "2"], stderr=subprocess.DEVNULL)
                procs.append(p)
            else:
                p1, pp, _ = server_proc.start(server_bin, common + ["-t", "1", "--kv-role", "prefill"],
                                              stderr=subprocess.DEVNULL)
                p2, dp, _ = server_proc.start(server_bin, common + ["-t", "1", "--kv-role", "decode"],
                                              stderr=subprocess.DEVNULL)
                p3, port = start_proxy(pp, dp)
                procs += [p1, p2, p3]
            results[setup].append(summary(run(port)))
            print("round %d %s done" % (rnd, setup), file=sys.stderr, flush=True)
        finally:
            for p in procs:
                p.terminate()
                p.wait(30)

keys = list(results["colocated"][0].keys())
print("| metric (ms) | colocated (2 threads) | disaggregated (1 + 1 threads) | ratio |")
print("| --- | --- | --- | --- |")
for k in keys:
    c = statistics.median(r[k] for r in results["colocated"])
    d = statistics.median(r[k] for r in results["disaggregated"])
    print("| %s | %.1f | %.1f | %.2f |" % (k, c, d, d / c if c else float("nan")))
