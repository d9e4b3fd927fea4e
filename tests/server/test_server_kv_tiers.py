#!/usr/bin/env python3
"""llm-server with a disk KV tier serves a repeated long prompt after a restart.

  test_server_kv_tiers.py LLM_SERVER REPO_DIR

- A server started with --kv-disk-dir answers a long prompt (computing it),
  and stops (SIGTERM: the cached prefix goes to the directory).
- A new server on the same directory answers the same prompt with its
  prefix served from the disk tier: usage.prompt_tokens_details.cached_tokens
  covers it, /metrics counts the disk-tier hit tokens, and the completion
  is the same text as the first server's (greedy).
- Without the directory (the control) a new server computes it all.
- A bad size for --kv-host-bytes is refused with exit 2.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import server_proc

server_bin, repo = sys.argv[1:3]
model = os.path.join(repo, "models/stories260K-f32.gguf")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


prompt = " ".join("Once upon a time there was a little girl named Lily who liked to play %d." % i for i in range(12))


def complete(port):
    body = json.dumps({"prompt": prompt, "max_tokens": 8, "temperature": 0}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, data=body,
                                 headers={"Content-Type": "application/json"})
    r = json.loads(urllib.request.urlopen(req, timeout=120).read())
    usage = r["usage"]
    cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    return r["choices"][0]["text"], usage["prompt_tokens"], cached


def metric(port, name):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30).read().decode()
    for line in text.splitlines():
        if line.startswith("llmrt_" + name + " "):
            return float(line.split()[1])
    return None


tier = tempfile.mkdtemp(prefix="llmrt-kv-tier-")
base = ["-m", model, "-c", "1024", "-t", "1", "-np", "2", "--kv-disk-dir", tier, "--kv-disk-bytes", "64m"]
try:
    proc, port, _ = server_proc.start(server_bin, base, timeout=60)
    try:
        text1, n_prompt, cached1 = complete(port)
        check(n_prompt > 200, "the prompt is long: %d tokens" % n_prompt)
        check(cached1 == 0, "the first server computes it (cached %d)" % cached1)
        check(metric(port, "kv_tier_disk_on") == 1, "the disk tier is on")
    finally:
        check(server_proc.stop(proc), "the first server stops on SIGTERM")
    files = [f for f in os.listdir(tier) if f.endswith(".llmkv")]
    check(len(files) >= n_prompt // 16 - 1, "the prefix went to the directory: %d files" % len(files))

    proc, port, _ = server_proc.start(server_bin, base, timeout=60)
    try:
        text2, n_prompt2, cached2 = complete(port)
        check(cached2 >= (n_prompt2 - 1) // 16 * 16, "the restarted server serves the prefix from disk: cached %d of %d"
              % (cached2, n_prompt2))
        check(text2 == text1, "the same completion: %r vs %r" % (text2, text1))
        hits = metric(port, "kv_tier_disk_hit_tokens_total")
        check(hits is not None and hits >= cached2, "/metrics counts the disk hits: %s" % hits)
        check((metric(port, "kv_tier_bytes_up_total") or 0) > 0, "/metrics counts the bytes moved up")
    finally:
        server_proc.stop(proc)

    proc, port, _ = server_proc.start(server_bin, base[:-4], timeout=60)
    try:
        _, _, cached3 = complete(port)
        check(cached3 == 0, "the control: a server without the tier computes it (cached %d)" % cached3)
    finally:
        server_proc.stop(proc)

    p = subprocess.run([server_bin, "-m", model, "--port", "0", "--kv-host-bytes", "12q"], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 2 and "--kv-host-bytes" in p.stderr, "a bad size is refused: %d %r" % (p.returncode, p.stderr[:120]))
finally:
    shutil.rmtree(tier, ignore_errors=True)

if failures:
    sys.exit("%d failure(s)" % len(failures))
print("all ok")
