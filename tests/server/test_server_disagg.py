#!/usr/bin/env python3
"""Prefill/decode disaggregation through llm-server and llm-disagg-proxy.

  test_server_disagg.py LLM_SERVER LLM_DISAGG_PROXY REPO_DIR [MODEL]
                        [--threads N] [--repeat N] [--timeout S] [--lease-ms N]

--threads: each server's threads (1); --repeat: how many times each
prompt's sentence is repeated (3); --timeout: seconds a request may take
(120; a large model's 64 concurrent requests need more); --lease-ms: the
prefill servers' --kv-lease-ms (their default, 30 s, when 0: a decode
server slower than that to reach a queued request's pull falls back, by
design, and the transfer checks below would fail). ctest runs it on
stories260K; the acceptance runs on SmolLM2 and the 1B shape are
bench/disagg_acceptance.sh (bench/results/2026-11-27-disagg-acceptance.md).

A prefill server (--kv-role prefill), a decode server (--kv-role decode) and
the proxy in front of them, over loopback (UCX_TLS=tcp), against one plain
server with the same model (stories260K by default; SmolLM2 when given):
- through the official openai client pointed at the proxy, greedy
  completions and chat completions, streamed and not, equal the plain
  server's; so do OpenAI Responses (openai) and Anthropic Messages
  (anthropic, when installed); 64 concurrent requests too; the decode server's /metrics counts
  the transfers (bytes, tokens, seconds) and no fallback;
- a prefill answer's kv_transfer_params whose producer is killed (SIGKILL)
  before the decode server pulls: the decode server computes the prompt,
  the same answer, its fallback counter moves;
- a producer killed (SIGKILL) mid-transfer: its server (LLM_KV_SERVE_STALL_MS)
  has sent half of the run the decode server is pulling and holds the rest;
  the decode server sees the connection drop, computes the prompt, the same
  answer, long before the pull's step timeout; a producer that stalls
  without dying: the step timeout ends the pull, the same answer;
- two prefill and three decode servers behind one proxy, one of each down:
  every request split and decoded, both live decode servers used;
- a prefill server that is down: the proxy sends the request to the decode
  server as it came; the same answer;
- a decode server that is down: the proxy answers 502 decode_unavailable at
  once (the openai client raises), nothing hangs;
- malformed kv_transfer_params, or a role the server lacks: 400;
- afterwards both pools are idle (no KV block held) and no lease is left.
Exits 77 (skipped) without the openai package or when llm-server was built
without UCX.
"""
import argparse
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import server_proc

ap = argparse.ArgumentParser()
ap.add_argument("server_bin")
ap.add_argument("proxy_bin")
ap.add_argument("repo")
ap.add_argument("model", nargs="?")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--timeout", type=float, default=120)
ap.add_argument("--lease-ms", type=int, default=0)
args = ap.parse_args()
server_bin, proxy_bin, repo = args.server_bin, args.proxy_bin, args.repo
model = args.model or os.path.join(repo, "models/stories260K-f32.gguf")
T = args.timeout
LEASE_MS = args.lease_ms
try:
    import openai
except ImportError:
    print("SKIP: the openai package is not installed (python3 -m pip install openai)")
    sys.exit(77)
os.environ["UCX_TLS"] = "tcp"

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def metrics(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.split()[:2]
            out[name] = float(value)
    return out


def post(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=T).read())


base = ["-m", model, "-c", "512", "-t", str(args.threads), "-np", "8"]
procs = []


def start(args, stderr=subprocess.PIPE):
    if "prefill" in args and LEASE_MS > 0:
        args = args + ["--kv-lease-ms", str(LEASE_MS)]
    try:
        p, port, err = server_proc.start(server_bin, base + args, stderr=stderr)
    except SystemExit as e:
        if "--kv-role" in args:
            print("SKIP: llm-server cannot take a KV role (built without UCX?): %s" % e)
            sys.exit(77)
        raise
    procs.append(p)
    return p, port, err


def start_proxy(prefill_ports, decode_ports):
    cmd = [proxy_bin, "--port", "0", "--timeout", str(int(T))]
    for flag, ports in (("--prefill", prefill_ports), ("--decode", decode_ports)):
        for port in ports if isinstance(ports, list) else [ports]:
            cmd += [flag, "http://127.0.0.1:%d" % port]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    line = p.stdout.readline()
    procs.append(p)
    return p, int(line.split("listening on http://")[1].split()[0].rsplit(":", 1)[1])


prompts = ["Once upon a time there was a little girl named Lily who liked to play %d." % i * args.repeat for i in range(8)]
try:
    single, single_port, _ = start([])
    prefill, prefill_port, prefill_err = start(["--kv-role", "prefill"])
    decode, decode_port, decode_err = start(["--kv-role", "decode"])
    prox, proxy_port = start_proxy(prefill_port, decode_port)
    one = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % single_port, api_key="x", max_retries=0)
    dis = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % proxy_port, api_key="x", max_retries=0, timeout=T)

    def completion(client, prompt, stream=False):
        if not stream:
            return client.completions.create(model="m", prompt=prompt, max_tokens=24, temperature=0).choices[0].text
        return "".join(c.choices[0].text for c in client.completions.create(
            model="m", prompt=prompt, max_tokens=24, temperature=0, stream=True) if c.choices)

    def chat(client, prompt, stream=False):
        msgs = [{"role": "user", "content": prompt}]
        if not stream:
            return client.chat.completions.create(model="m", messages=msgs, max_tokens=24,
                                                  temperature=0).choices[0].message.content
        return "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="m", messages=msgs, max_tokens=24, temperature=0, stream=True) if c.choices)

    print("     one server's greedy completion of prompt 0: %r" % completion(one, prompts[0])[:80])
    for i, p in enumerate(prompts[:3]):
        want = completion(one, p)
        check(len(want) > 0 and len(chat(one, p)) > 0, "prompt %d: the single server's answers are not empty" % i)
        check(completion(dis, p) == want, "completion %d through the proxy equals one server's" % i)
        check(completion(dis, p, True) == want, "streamed completion %d equals one server's" % i)
        want_chat = chat(one, p)
        check(chat(dis, p) == want_chat, "chat %d through the proxy equals one server's" % i)
        check(chat(dis, p, True) == want_chat, "streamed chat %d equals one server's" % i)
    m = metrics(decode_port)
    check(m.get("llmrt_kv_transfers_total", 0) >= 12, "the decode server pulled every prompt's KV (%s)" %
          m.get("llmrt_kv_transfers_total"))
    check(m.get("llmrt_kv_transfer_fallbacks_total", -1) == 0, "no fallback")
    check(m.get("llmrt_kv_transfer_bytes_total", 0) > 0 and m.get("llmrt_kv_transfer_tokens_total", 0) > 0 and
          m.get("llmrt_kv_transfer_seconds_total", 0) > 0, "bytes, tokens and seconds counted")

    # Anthropic's Messages API and OpenAI's Responses API through the proxy,
    # each with its official client, streamed and not: split and pulled too.
    greedy = {"temperature": 0}  # (anthropic 2.x takes it only as an extra field)

    def message(client, prompt, stream=False):
        msgs = [{"role": "user", "content": prompt}]
        if not stream:
            r = client.messages.create(model="m", max_tokens=24, messages=msgs, extra_body=greedy)
            return "".join(b.text for b in r.content if b.type == "text")
        with client.messages.stream(model="m", max_tokens=24, messages=msgs, extra_body=greedy) as s:
            return "".join(s.text_stream)

    def response(client, prompt, stream=False):
        if not stream:
            return client.responses.create(model="m", input=prompt, max_output_tokens=24, extra_body=greedy).output_text
        return "".join(e.delta for e in client.responses.create(model="m", input=prompt, max_output_tokens=24,
                                                                extra_body=greedy, stream=True)
                       if e.type == "response.output_text.delta")

    apis = [("Responses (openai)", response, one, dis)]
    try:
        import anthropic
        apis.insert(0, ("Messages (anthropic)", message,
                        anthropic.Anthropic(base_url="http://127.0.0.1:%d" % single_port, api_key="x", max_retries=0),
                        anthropic.Anthropic(base_url="http://127.0.0.1:%d" % proxy_port, api_key="x", max_retries=0,
                                            timeout=T)))
    except ImportError:
        print("     (the anthropic package is not installed: /v1/messages not checked)")
    pulled = m.get("llmrt_kv_transfers_total", 0)
    for name, fn, ref, via in apis:
        want = fn(ref, prompts[1])
        check(len(want) > 0 and fn(via, prompts[1]) == want and fn(via, prompts[1], True) == want,
              "%s through the proxy, streamed and not, equals one server's" % name)
    m = metrics(decode_port)
    check(m.get("llmrt_kv_transfers_total", 0) == pulled + 2 * len(apis) and
          m.get("llmrt_kv_transfer_fallbacks_total", -1) == 0,
          "their KV arrived by transfer, no fallback (%s -> %s pulls)" % (pulled, m.get("llmrt_kv_transfers_total")))

    # 64 concurrent requests, mixed streaming.
    many = [prompts[i % len(prompts)] + " %d" % i for i in range(64)]
    want = [completion(one, p) for p in many]
    with concurrent.futures.ThreadPoolExecutor(64) as ex:
        got = list(ex.map(lambda ip: completion(dis, ip[1], ip[0] % 2 == 1), enumerate(many)))
    check(got == want, "64 concurrent requests (half streamed) equal one server's")
    m = metrics(decode_port)
    check(m.get("llmrt_kv_transfers_total", 0) >= 12 + 64 and m.get("llmrt_kv_transfer_fallbacks_total", -1) == 0,
          "the 64 arrived by transfer, no fallback (%s pulls)" % m.get("llmrt_kv_transfers_total"))

    # Several prefill and decode servers behind one proxy, one of each kind
    # down (a closed port) and listed first: every request is split and
    # decoded, the live decode servers share them.
    decode2, decode2_port, _ = start(["--kv-role", "decode"])
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        closed_port = sk.getsockname()[1]
    multi_port = start_proxy([closed_port, prefill_port], [closed_port, decode_port, decode2_port])[1]
    multi = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % multi_port, api_key="x", max_retries=0, timeout=T)
    pulls = lambda: [metrics(p).get("llmrt_kv_transfers_total", 0) for p in (decode_port, decode2_port)]
    before = pulls()
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda ip: completion(multi, ip[1], ip[0] % 2 == 1), enumerate(many[:16])))
    check(got == want[:16], "two prefill and three decode servers (one of each down): the same answers")
    after = pulls()
    check(after[0] > before[0] and after[1] > before[1] and sum(after) - sum(before) == 16,
          "both live decode servers pulled, 16 transfers in all (%s -> %s)" % (before, after))
    m = metrics(multi_port)
    check(m.get("llmrt_proxy_split_total") == 16 and m.get("llmrt_proxy_prefill_failures_total") == 0 and
          m.get("llmrt_proxy_decode_failures_total") == 0, "the proxy split every request, no failure counted")

    # Bad kv_transfer_params: 400s naming the parameter, the servers serving on.
    def status_of(port, body):
        try:
            post(port, "/v1/completions", body)
            return 200, ""
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    for port, params, why in (
            (decode_port, {"do_remote_decode": True}, "a decode-only server asked to produce"),
            (decode_port, {"do_remote_prefill": True}, "do_remote_prefill without a descriptor"),
            (decode_port, {"do_remote_prefill": True, "llmrt_descriptor": "llmkv1 nonsense"}, "a malformed descriptor"),
            (prefill_port, {"do_remote_decode": "yes"}, "a flag that is not a boolean"),
            (prefill_port, [1], "params that are not an object")):
        code, text = status_of(port, {"prompt": "x", "max_tokens": 2, "kv_transfer_params": params})
        check(code == 400 and ("kv_transfer" in text or "kv_produce" in text), "400 for %s (%d)" % (why, code))
    code, _ = status_of(prefill_port, {"prompt": ["a", "b"], "max_tokens": 2,
                                       "kv_transfer_params": {"do_remote_decode": True}})
    check(code == 400, "400 for a transfer of two prompts")

    # A producer killed after its prefill answer, before the decode pulls.
    killed, killed_port, _ = start(["--kv-role", "prefill"])
    body = {"prompt": prompts[5], "max_tokens": 24, "temperature": 0}
    pre = post(killed_port, "/v1/completions", dict(body, max_tokens=1, kv_transfer_params={"do_remote_decode": True}))
    params = pre.get("kv_transfer_params") or {}
    check(params.get("do_remote_prefill") is True and params.get("llmrt_descriptor", "").startswith("llmkv1 "),
          "a prefill answer carries kv_transfer_params with a descriptor")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    before = metrics(decode_port).get("llmrt_kv_transfer_fallbacks_total", 0)
    t0 = time.time()
    got = post(decode_port, "/v1/completions", dict(body, kv_transfer_params=params))["choices"][0]["text"]
    check(got == completion(one, prompts[5]), "producer killed: the decode server computes the prompt, same answer")
    check(time.time() - t0 < T / 4, "producer killed: answered within %d s" % (T / 4))
    check(metrics(decode_port).get("llmrt_kv_transfer_fallbacks_total", 0) == before + 1,
          "producer killed: one fallback counted")

    # A producer killed mid-transfer: the stall switch makes its KV server send
    # half of the pulled run and hold the rest; the decode server is waiting
    # for those bytes when the process dies.
    os.environ["LLM_KV_SERVE_STALL_MS"] = "60000"
    try:
        stalled, stalled_port, stalled_err = start(["--kv-role", "prefill"])
    finally:
        del os.environ["LLM_KV_SERVE_STALL_MS"]
    step_timeout = 5.0  # defaults::kKvPullStepTimeoutMs

    def stall_lines():
        return sum("LLM_KV_SERVE_STALL_MS: sent" in line for line in stalled_err)

    def pull_from_stalled(prompt):
        pre = post(stalled_port, "/v1/completions",
                   dict(body, prompt=prompt, max_tokens=1, kv_transfer_params={"do_remote_decode": True}))
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", post(decode_port, "/v1/completions", dict(
            body, prompt=prompt, kv_transfer_params=pre["kv_transfer_params"]))), daemon=True)
        return t, out

    # Stalled, not killed: the step timeout ends the pull.
    before = metrics(decode_port).get("llmrt_kv_transfer_fallbacks_total", 0)
    n0 = stall_lines()
    t, out = pull_from_stalled(prompts[3])
    t0 = time.time()
    t.start()
    t.join(step_timeout + T)
    check(not t.is_alive() and stall_lines() == n0 + 1, "stalled producer: the pull started, then ended")
    check(out.get("r", {}).get("choices", [{}])[0].get("text") == completion(one, prompts[3]),
          "stalled producer: the decode server computes the prompt, same answer")
    check(time.time() - t0 >= step_timeout - 0.5, "stalled producer: ended by the step timeout (%.1f s)" %
          (time.time() - t0))
    # Killed while the decode server waits for the run's second half.
    n0 = stall_lines()
    t, out = pull_from_stalled(prompts[4])
    t.start()
    deadline = time.time() + T
    while stall_lines() == n0 and time.time() < deadline:
        time.sleep(0.02)
    check(stall_lines() == n0 + 1, "killed mid-transfer: the producer sent the first half of the run")
    time.sleep(0.3)
    check(t.is_alive(), "killed mid-transfer: the decode server still waits for the rest")
    n_reasons = sum("KV consumer" in line for line in decode_err)
    stalled.send_signal(signal.SIGKILL)
    stalled.wait()
    t0 = time.time()
    # The pull's end is the decode server's fallback line (the answer after
    # it takes the prompt's computation, long on a large model).
    while sum("KV consumer" in line for line in decode_err) == n_reasons and time.time() - t0 < step_timeout + T:
        time.sleep(0.02)
    waited = time.time() - t0
    t.join(step_timeout + T)
    check(not t.is_alive(), "killed mid-transfer: the decode server answered (no hang)")
    check(out.get("r", {}).get("choices", [{}])[0].get("text") == completion(one, prompts[4]),
          "killed mid-transfer: the decode server computes the prompt, same answer")
    check(waited < step_timeout - 1, "killed mid-transfer: the dropped connection seen, not the step timeout "
          "(the pull ended %.1f s after the kill)" % waited)
    reasons = [line.strip() for line in decode_err if "KV consumer" in line]
    print("\n".join("     decode server: " + r for r in reasons[-2:]))
    check(len(reasons) >= 2 and "timed out" not in reasons[-1] and "LLM_ERR_IO" in reasons[-1],
          "killed mid-transfer: the decode server names the failure (an I/O error, not a timeout)")
    check(metrics(decode_port).get("llmrt_kv_transfer_fallbacks_total", 0) == before + 2,
          "stalled and killed producers: two fallbacks counted")
    check(metrics(decode_port).get("llmrt_kv_blocks_used", -1) == 0, "after the kill: the decode pool is idle")

    # A prefill server that is down: the proxy decodes on the decode server alone.
    dead_prefill = start_proxy(killed_port, decode_port)[1]
    c = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % dead_prefill, api_key="x", max_retries=0, timeout=T)
    check(completion(c, prompts[6]) == completion(one, prompts[6]), "prefill server down: same answer")

    # A decode server that is down: a clear 502, at once.
    dead_decode = start_proxy(prefill_port, killed_port)[1]
    c = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % dead_decode, api_key="x", max_retries=0, timeout=T)
    for stream in (False, True):
        t0 = time.time()
        try:
            completion(c, prompts[7], stream)
            check(False, "decode server down (stream=%s): an error" % stream)
        except openai.APIStatusError as e:
            check(e.status_code == 502 and "decode_unavailable" in str(e.body),
                  "decode server down (stream=%s): 502 decode_unavailable" % stream)
        check(time.time() - t0 < 20, "decode server down (stream=%s): no hang" % stream)

    # Idle pools, no lease left (a lease of the down-decode case expires; the
    # prefill server's lease time is the default 30 s, so only leases from
    # finished pulls are checked gone here).
    time.sleep(1)
    for name, port in (("prefill", prefill_port), ("decode", decode_port), ("second decode", decode2_port)):
        m = metrics(port)
        check(m.get("llmrt_kv_blocks_used", -1) == 0, "%s server: no KV block held" % name)
    m = metrics(prefill_port)
    check(m.get("llmrt_kv_transfers_served_total", 0) >= 12 + 64 + 16, "prefill server: transfers served counted")
    check(m.get("llmrt_kv_leases_active", 99) <= 2, "prefill server: only the unpulled leases left (%s)" %
          m.get("llmrt_kv_leases_active"))
finally:
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("all passed")
