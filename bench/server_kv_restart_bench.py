#!/usr/bin/env python3
"""A restarted llm-server with a disk KV tier against a cold one (issue 30):
TTFT of a repeated ~4k-token prompt.

Each round, with a prompt of its own (so no round finds another's blocks):
  cold      a server without tiers answers the prompt (computes it all)
  first     a server with --kv-disk-dir (an empty directory) answers it
            (computes it), then stops on SIGTERM: its cached blocks go to
            the directory
  restarted a new server on the same directory answers it again: the
            prefix comes from the disk tier
TTFT is measured by the client: from sending a streaming /v1/completions
request to the first chunk that carries text. The restarted server's
cached-token count comes from the stream's usage (include_usage) and its
disk-tier hits from /metrics.

  python3 bench/server_kv_restart_bench.py --server build/bin/llm-server \\
      --model models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf --tokens 4000 --threads 2 --rounds 3

The acceptance figure (issue 30): restarted TTFT at most 1/5 of cold. Not
part of CI (tests/server/test_server_kv_tiers.py checks the cached-token
count after a restart with a short prompt there).
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
import server_proc  # noqa: E402


def post(port, path, body, timeout=600):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def n_tokens(port, text):
    r = json.loads(post(port, "/tokenize", {"content": text}).read())
    return len(r["tokens"])


def prompt_text(port, target, variant):
    """A prose prompt of about `target` tokens (this model's tokenizer)."""
    unit = ("Note %d.%d: the archive keeps letters from the harbour office, ledgers of the grain trade and a "
            "map of the old river course, each catalogued by year and shelf. ")
    parts, i = [], 0
    while True:
        parts.append(unit % (variant, i))
        i += 1
        if i % 50 == 0 and n_tokens(port, "".join(parts)) >= target:
            break
    while n_tokens(port, "".join(parts)) > target and len(parts) > 1:
        parts.pop()
    return "".join(parts)


def ttft(port, text):
    """Client-side TTFT (ms) of a streamed greedy completion, and the usage it reports."""
    t0 = time.perf_counter()
    r = post(port, "/v1/completions", {"prompt": text, "max_tokens": 4, "temperature": 0, "stream": True,
                                       "stream_options": {"include_usage": True}})
    first, usage = None, {}
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if first is None and ev.get("choices") and ev["choices"][0].get("text"):
            first = (time.perf_counter() - t0) * 1e3
        if ev.get("usage"):
            usage = ev["usage"]
    return first, usage


def metric(port, name):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30).read().decode()
    for line in text.splitlines():
        if line.startswith("llmrt_" + name + " "):
            return float(line.split()[1])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="build/bin/llm-server")
    ap.add_argument("--model", default="models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()

    common = ["-m", args.model, "-c", str(args.tokens + 512), "-t", str(args.threads), "-np", "1"]
    rows = []
    for rnd in range(args.rounds):
        tier = tempfile.mkdtemp(prefix="llmrt-kv-restart-", dir=args.dir)
        with_tier = common + ["--kv-disk-dir", tier, "--kv-disk-bytes", "4g"]
        try:
            proc, port, _ = server_proc.start(args.server, common)
            try:
                text = prompt_text(port, args.tokens, rnd)
                cold, cold_usage = ttft(port, text)
            finally:
                server_proc.stop(proc)
            proc, port, _ = server_proc.start(args.server, with_tier)
            try:
                first, _ = ttft(port, text)
            finally:
                stopped = server_proc.stop(proc, timeout=120)
            files = len([f for f in os.listdir(tier) if f.endswith(".llmkv")])
            t0 = time.perf_counter()
            proc, port, _ = server_proc.start(args.server, with_tier)
            start_s = time.perf_counter() - t0
            try:
                again, usage = ttft(port, text)
                hits = metric(port, "kv_tier_disk_hit_tokens_total")
            finally:
                server_proc.stop(proc)
        finally:
            shutil.rmtree(tier, ignore_errors=True)
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens")
        row = {"prompt_tokens": cold_usage.get("prompt_tokens"), "cold": cold, "first": first, "restarted": again,
               "cached": cached, "disk_hits": hits, "files": files, "stopped": stopped, "start_s": start_s}
        print("round %d: %s" % (rnd, json.dumps(row)), file=sys.stderr, flush=True)
        rows.append(row)

    med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
    print("model %s, %s-token prompt, %d threads, %d round(s), medians\n" %
          (os.path.basename(args.model), rows[0]["prompt_tokens"], args.threads, args.rounds))
    print("| server | TTFT ms | vs cold | cached tokens |")
    print("| --- | --- | --- | --- |")
    print("| cold (no tier) | %.1f | 1.000 | 0 |" % med("cold"))
    print("| with --kv-disk-dir, first start (computes) | %.1f | %.3f | 0 |" % (med("first"), med("first") / med("cold")))
    print("| restarted on the same directory | %.1f | %.3f | %s |" %
          (med("restarted"), med("restarted") / med("cold"), rows[-1]["cached"]))
    print("\nper round restarted/cold: %s; tier files written at stop: %s; restarted server start (scan) %.2f s" %
          (", ".join("%.3f" % (r["restarted"] / r["cold"]) for r in rows), [r["files"] for r in rows],
           med("start_s")))


if __name__ == "__main__":
    main()
