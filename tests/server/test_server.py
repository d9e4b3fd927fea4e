#!/usr/bin/env python3
"""llm-server end to end, through the official `openai` client.

  test_server.py LLM_SERVER REPO_DIR

Starts the server on a free loopback port with SmolLM2-135M-Instruct and
checks, at temperature 0 with short outputs:
- /v1/models, /health, /v1/stats, /metrics (Prometheus text format);
- chat completions: non-streaming (usage, finish_reason); streaming gives the
  same text, finish_reason and usage; stop strings; logprobs; seeds;
  top_logprobs (streamed too), logit_bias, min_tokens and their bad values;
- completions: both ways, a list of prompts, token-id prompts;
- a chat request without max_tokens runs to EOS (or the context's end); a
  prompt that alone fills the context is a 400;
- with 300 idle connections open, or 100 clients trickling request heads,
  a request is served within 2 s;
- bad requests get OpenAI-shaped errors with HTTP 400 (404 for unknown paths);
- 16 concurrent streaming clients each get the text their prompt gets alone;
- a client that disconnects mid-stream, or before a non-streamed answer,
  has its request cancelled: /v1/stats
  shows running == 0 and the KV blocks back at the baseline within seconds;
- SIGTERM stops the server cleanly (exit code 0).
Exits 77 (skipped) without the model or the openai package.
"""
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

server_bin, repo = sys.argv[1:3]
MODEL = os.path.join(repo, "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.isfile(MODEL):
    print("SKIP: %s is absent (scripts/fetch-models.sh fetches it)" % MODEL)
    sys.exit(77)
try:
    import openai
except ImportError:
    print("SKIP: the openai package is not installed (python3 -m pip install openai)")
    sys.exit(77)

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


# ------------------------------------------------------------------ server
proc = subprocess.Popen([server_bin, "-m", MODEL, "--port", "0", "-t", "2", "--max-seqs", "16", "-c", "1024"],
                        stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
port_line = [None]


def read_port():
    port_line[0] = proc.stdout.readline()


reader = threading.Thread(target=read_port, daemon=True)
reader.start()
reader.join(120)
line = port_line[0] or ""
if "listening on http://127.0.0.1:" not in line:
    proc.kill()
    sys.exit("server did not start: %r" % line)
port = int(line.split("http://127.0.0.1:")[1].split()[0])
base = "http://127.0.0.1:%d" % port
print(line.strip(), flush=True)

client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)


def http(method, path, body=None):
    """(status, parsed JSON body) of a raw request."""
    data = body.encode() if isinstance(body, str) else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def stats():
    return http("GET", "/v1/stats")[1]


def chat(content, max_tokens=20, temperature=0, **kw):
    return client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1",
                                          messages=[{"role": "user", "content": content}],
                                          temperature=temperature, max_tokens=max_tokens, **kw)


def chat_stream(content, max_tokens=20, **kw):
    text, finish, usage = "", None, None
    for chunk in client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1",
                                                messages=[{"role": "user", "content": content}],
                                                temperature=0, max_tokens=max_tokens, stream=True, **kw):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    return text, finish, usage


try:
    # -------------------------------------------------------- metadata
    models = client.models.list().data
    check([m.id for m in models] == ["SmolLM2-135M-Instruct.Q4_1"], "/v1/models lists the file stem: %s" % models)
    check(http("GET", "/health") == (200, {"status": "ok"}), "/health is ok")
    s0 = stats()
    check(s0["kv_blocks_total"] > 0 and s0["running"] == 0, "/v1/stats: %d KV blocks, nothing running"
          % s0["kv_blocks_total"])

    # -------------------------------------------------------- /metrics (Prometheus)
    def metrics():
        with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
            ctype = resp.headers.get("Content-Type", "")
            text = resp.read().decode()
        helps, types, values = set(), {}, {}
        for line in text.splitlines():
            if line.startswith("# HELP "):
                helps.add(line.split()[2])
            elif line.startswith("# TYPE "):
                _, _, name, kind = line.split()
                types[name] = kind
            elif line:
                name, value = line.rsplit(" ", 1)
                values[name.split("{")[0]] = float(value)
        return ctype, helps, types, values

    ctype, helps, types, m0 = metrics()
    check(ctype.startswith("text/plain; version=0.0.4"), "/metrics Content-Type %r" % ctype)
    check(set(m0) == helps == set(types) and len(m0) >= 30,
          "/metrics: every one of %d metrics has # HELP and # TYPE" % len(m0))
    check(all((kind == "counter") == name.endswith("_total") for name, kind in types.items()) and
          types.get("llmrt_generated_tokens_total") == "counter" and types.get("llmrt_kv_blocks_used") == "gauge",
          "/metrics: counters are the *_total figures, the rest gauges")
    check(m0["llmrt_kv_blocks"] == s0["kv_blocks_total"] and m0["llmrt_running_sequences"] == 0,
          "/metrics agrees with /v1/stats")
    chat("Count to three.", max_tokens=3)
    _, _, _, m1 = metrics()
    check(m1["llmrt_generated_tokens_total"] - m0["llmrt_generated_tokens_total"] >= 1 and
          m1["llmrt_requests_finished_total"] == m0["llmrt_requests_finished_total"] + 1,
          "/metrics counters advance with a request")

    # -------------------------------------------------------- no max_tokens (issue 20)
    # The openai client sends no max_tokens unless asked: the reply runs to
    # EOS or the end of the context (1024 here), as with OpenAI and llama.cpp.
    try:
        r = client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1",
                                           messages=[{"role": "user", "content": "Hello, who are you?"}],
                                           temperature=0)
        check(r.choices[0].message.content.strip() != "" and r.choices[0].finish_reason in ("stop", "length") and
              r.usage.prompt_tokens + r.usage.completion_tokens <= 1024 + 1,
              "chat without max_tokens: %s, %d tokens" % (r.choices[0].finish_reason, r.usage.completion_tokens))
    except openai.APIError as e:
        check(False, "chat without max_tokens: %s" % e)
    st, body = http("POST", "/v1/chat/completions",
                    {"model": "m", "messages": [{"role": "user", "content": "word " * 1100}]})
    check(st == 400 and body["error"]["code"] == "context_length_exceeded" and "fills the context" in
          body["error"]["message"], "a prompt that alone fills the context: 400 %s" % body.get("error"))

    # -------------------------------------------------------- idle connections (issue 20)
    # 300 clients that connect and send nothing must not delay a real request.
    idle = []
    for _ in range(300):
        s = socket.socket()
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        idle.append(s)
    time.sleep(0.5)
    t0 = time.time()
    r = chat("Say hi.", max_tokens=2)
    waited = time.time() - t0
    check(r.usage.completion_tokens >= 1 and waited < 2.0,
          "with 300 idle connections open a request is served in %.2f s (< 2 s)" % waited)
    t0 = time.time()
    st, _ = http("GET", "/health")
    check(st == 200 and time.time() - t0 < 2.0, "... and /health in %.2f s" % (time.time() - t0))
    for s in idle:
        s.close()

    # 100 slow clients (more than the 64 HTTP workers) that trickle a request
    # head, a line every 0.3 s, must not starve a real request either.
    slow = []
    for _ in range(100):
        s = socket.socket()
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.append(s)
    trickling = threading.Event()
    trickling.set()

    def trickle():
        i = 0
        while trickling.is_set():
            for s in slow:
                try:
                    s.sendall(b"X-Slow-%d: y\r\n" % i)
                except OSError:
                    pass
            i += 1
            time.sleep(0.3)

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    time.sleep(1.0)
    t0 = time.time()
    r = chat("Say hi.", max_tokens=2)
    waited = time.time() - t0
    trickling.clear()
    trickler.join()
    for s in slow:
        s.close()
    check(r.usage.completion_tokens >= 1 and waited < 2.0,
          "with 100 clients trickling request heads a request is served in %.2f s (< 2 s)" % waited)

    # -------------------------------------------------------- chat
    q = "What is the capital of France?"
    r = chat(q)
    text = r.choices[0].message.content
    check(r.object == "chat.completion" and r.choices[0].message.role == "assistant", "chat completion object")
    check(text.strip() != "" and "<|im_" not in text, "chat answers: %r" % text)
    check(r.choices[0].finish_reason in ("stop", "length"), "finish_reason %s" % r.choices[0].finish_reason)
    check(r.usage.prompt_tokens > 5 and 1 <= r.usage.completion_tokens <= 20 and
          r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens,
          "usage: %s" % r.usage)
    if r.choices[0].finish_reason == "length":
        check(r.usage.completion_tokens == 20, "finish_reason length at max_tokens")

    s_text, s_finish, s_usage = chat_stream(q, stream_options={"include_usage": True})
    check(s_text == text, "streamed chat text equals the non-streamed text: %r" % s_text)
    check(s_finish == r.choices[0].finish_reason, "streamed finish_reason %s" % s_finish)
    check(s_usage is not None and s_usage.completion_tokens == r.usage.completion_tokens and
          s_usage.prompt_tokens == r.usage.prompt_tokens, "streamed usage: %s" % s_usage)

    r2 = chat(q, max_completion_tokens=5)
    check(r2.usage.completion_tokens <= 5, "max_completion_tokens caps the reply")

    words = text.split()
    if len(words) >= 3:
        stop = " " + words[2]
        cut = text.index(stop)
        rs = chat(q, stop=[stop, "zzzz"])
        check(rs.choices[0].message.content == text[:cut] and rs.choices[0].finish_reason == "stop",
              "stop strings cut the reply before %r: %r" % (stop, rs.choices[0].message.content))

    rl = chat(q, max_tokens=6, logprobs=True)
    lp = rl.choices[0].logprobs.content
    check(len(lp) == rl.usage.completion_tokens and all(t.logprob <= 0 for t in lp),
          "logprobs: one per generated token, all <= 0")

    # -------------------------------------------------------- top_logprobs, logit_bias (issue 20)
    rt = chat(q, max_tokens=5, logprobs=True, top_logprobs=3)
    lp = rt.choices[0].logprobs.content
    check(len(lp) == rt.usage.completion_tokens and
          all(len(t.top_logprobs) == 3 and t.top_logprobs[0].token == t.token and
              t.top_logprobs[0].logprob == t.logprob and
              t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob
              and t.top_logprobs[1].bytes == list(t.top_logprobs[1].token.encode()) for t in lp),
          "chat top_logprobs=3: three alternatives per token, the greedy one first: %s"
          % [(t.token, [a.token for a in t.top_logprobs]) for t in lp])
    streamed_top = []
    for chunk in client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}], temperature=0,
                                                max_tokens=5, logprobs=True, top_logprobs=2, stream=True):
        for ch in chunk.choices:
            if ch.logprobs and ch.logprobs.content:
                streamed_top += [[a.token for a in t.top_logprobs] for t in ch.logprobs.content]
    check(streamed_top == [[a.token for a in t.top_logprobs[:2]] for t in lp],
          "streamed top_logprobs match the non-streamed ones")
    forced = client.completions.create(model="m", prompt=[1, 4093, 198], max_tokens=4, temperature=0,
                                       logprobs=2, logit_bias={"4093": 100})
    ftoks = forced.choices[0].logprobs.tokens
    check(len(ftoks) == 4 and len(set(ftoks)) == 1 and forced.choices[0].text == ftoks[0] * 4 and
          all(len(d) <= 2 for d in forced.choices[0].logprobs.top_logprobs),
          "logit_bias +100 forces token 4093 (%r) every time; completions top_logprobs are dicts" % ftoks[:1])
    banned = client.completions.create(model="m", prompt=[1, 4093, 198], max_tokens=8, temperature=0,
                                       logprobs=0, logit_bias={"4093": -100})
    check(ftoks[0] not in banned.choices[0].logprobs.tokens, "logit_bias -100 bans it: %r"
          % banned.choices[0].logprobs.tokens)
    for bad, param in [({"logit_bias": {"abc": 1}}, "logit_bias"), ({"logit_bias": {"1": 101}}, "logit_bias"),
                       ({"logit_bias": {"99999999": 1}}, None), ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
                       ({"top_logprobs": 2}, "top_logprobs"), ({"min_tokens": 9, "max_tokens": 4}, None)]:
        st, body = http("POST", "/v1/chat/completions",
                        dict({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}, **bad))
        check(st == 400 and (param is None or body["error"]["param"] == param),
              "%s: 400 %s" % (bad, body.get("error", {}).get("message")))
    rmin = chat(q, max_tokens=12, extra_body={"min_tokens": 8, "logit_bias": {"2": 100}})
    check(rmin.usage.completion_tokens == 9 and rmin.choices[0].finish_reason == "stop",
          "min_tokens=8 holds back an EOS pushed by logit_bias until 8 tokens: %d tokens, %s"
          % (rmin.usage.completion_tokens, rmin.choices[0].finish_reason))

    seeded = [client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Tell me a joke."}],
                                             temperature=1.0, seed=1234, max_tokens=12).choices[0].message.content
              for _ in range(2)]
    check(seeded[0] == seeded[1], "the same seed gives the same sample")

    rn = client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}],
                                        temperature=0, max_tokens=8, n=2)
    check(len(rn.choices) == 2 and rn.choices[0].message.content == rn.choices[1].message.content,
          "n=2 gives two choices (equal at temperature 0)")

    # -------------------------------------------------------- completions
    p = "Once upon a time"
    c = client.completions.create(model="m", prompt=p, max_tokens=16, temperature=0)
    c_text = c.choices[0].text
    check(c.object == "text_completion" and c_text.strip() != "", "completion: %r" % c_text)
    check(c.usage.completion_tokens <= 16, "completion usage: %s" % c.usage)
    cs = "".join(ch.choices[0].text for ch in
                 client.completions.create(model="m", prompt=p, max_tokens=16, temperature=0, stream=True)
                 if ch.choices)
    check(cs == c_text, "streamed completion equals the non-streamed one: %r" % cs)
    p2 = "The little dog"
    alone2 = client.completions.create(model="m", prompt=p2, max_tokens=8, temperature=0).choices[0].text
    alone1 = client.completions.create(model="m", prompt=p, max_tokens=8, temperature=0).choices[0].text
    both = client.completions.create(model="m", prompt=[p, p2], max_tokens=8, temperature=0)
    check([x.text for x in sorted(both.choices, key=lambda x: x.index)] == [alone1, alone2],
          "a list of prompts gives one choice each")
    ct = client.completions.create(model="m", prompt=[1, 4093, 198], max_tokens=4, temperature=0)
    check(ct.usage.prompt_tokens == 3 and ct.usage.completion_tokens >= 1,
          "a prompt of token ids is used verbatim: %s" % ct.usage)

    # -------------------------------------------------------- errors
    try:
        chat(q, temperature=5)
        check(False, "temperature=5 is rejected")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and e.body.get("param") == "temperature",
              "temperature=5: 400 naming the parameter: %s" % e.body)
    st, body = http("POST", "/v1/chat/completions", {"model": "m"})
    check(st == 400 and body["error"]["param"] == "messages" and body["error"]["type"] == "invalid_request_error",
          "missing messages: 400 %s" % body)
    st, body = http("POST", "/v1/chat/completions", "{not json")
    check(st == 400 and "error" in body, "invalid JSON: 400")
    st, body = http("POST", "/v1/completions", {"prompt": "x", "max_tokens": 0})
    check(st == 400 and body["error"]["param"] == "max_tokens", "max_tokens=0: 400")
    st, body = http("POST", "/v1/completions", {"prompt": "x " * 2000, "max_tokens": 4})
    check(st == 400 and body["error"]["code"] == "context_length_exceeded", "prompt over the context: 400 %s"
          % body["error"].get("code"))
    st, body = http("GET", "/v1/nothing")
    check(st == 404 and "error" in body, "unknown endpoint: 404")

    # -------------------------------------------------------- 16 concurrent streams
    topics = ["cats", "the sea", "mountains", "bread", "music", "rain", "trains", "gardens",
              "the moon", "winter", "books", "rivers", "coffee", "bicycles", "stars", "forests"]
    prompts = ["Write one sentence about %s." % t for t in topics]
    alone = [chat(pr, max_tokens=12).choices[0].message.content for pr in prompts]
    start = threading.Barrier(len(prompts))

    def one(i):
        start.wait()
        return chat_stream(prompts[i], max_tokens=12)[0]

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        together = list(pool.map(one, range(len(prompts))))
    mismatched = [i for i in range(len(prompts)) if together[i] != alone[i]]
    check(not mismatched, "16 concurrent streams match their solo runs (%.1f s); mismatched: %s"
          % (time.time() - t0, [(together[i], alone[i]) for i in mismatched]))

    # -------------------------------------------------------- disconnect mid-stream
    def settled(timeout):
        deadline = time.time() + timeout
        while True:
            s = stats()
            if (s["running"] == 0 and s["waiting"] == 0 and s["server"]["live_requests"] == 0) or time.time() > deadline:
                return s
            time.sleep(0.05)

    base_stats = settled(10)
    used0 = base_stats["kv_blocks_used"]
    body = json.dumps({"model": "m", "prompt": "Once upon a time", "max_tokens": 900, "temperature": 0,
                       "ignore_eos": True, "stream": True})
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
    got = b""
    while got.count(b"data: ") < 6:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    during = stats()
    check(b"HTTP/1.1 200" in got and b"text/event-stream" in got and got.count(b"data: ") >= 6,
          "the stream started")
    check(during["running"] == 1 and during["kv_blocks_used"] > used0,
          "while streaming: running 1, %d KV blocks used (baseline %d)" % (during["kv_blocks_used"], used0))
    sock.close()
    t0 = time.time()
    after = settled(10)
    check(after["running"] == 0 and after["kv_blocks_used"] == used0,
          "after the disconnect: running %d, KV blocks used %d (baseline %d) after %.2f s"
          % (after["running"], after["kv_blocks_used"], used0, time.time() - t0))
    check(after["server"]["cancelled_on_disconnect"] == base_stats["server"]["cancelled_on_disconnect"] + 1,
          "the request was cancelled, not finished")
    check(after["generated_tokens"] - base_stats["generated_tokens"] < 900,
          "it stopped early (%d tokens)" % (after["generated_tokens"] - base_stats["generated_tokens"]))
    check(http("GET", "/health")[0] == 200, "the server still answers")

    # -------------------------------------------------------- disconnect before a non-streamed answer
    base_stats = settled(10)
    body = json.dumps({"model": "m", "prompt": "Once upon a time", "max_tokens": 900, "temperature": 0,
                       "ignore_eos": True})
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
    deadline = time.time() + 10
    while stats()["running"] == 0 and time.time() < deadline:
        time.sleep(0.02)
    sock.close()
    t0 = time.time()
    after = settled(10)
    check(after["running"] == 0 and after["kv_blocks_used"] == used0 and
          after["server"]["cancelled_on_disconnect"] == base_stats["server"]["cancelled_on_disconnect"] + 1,
          "a client gone before its non-streamed answer: cancelled (%d), KV blocks %d (baseline %d) after %.2f s"
          % (after["server"]["cancelled_on_disconnect"] - base_stats["server"]["cancelled_on_disconnect"],
             after["kv_blocks_used"], used0, time.time() - t0))
    check(after["generated_tokens"] - base_stats["generated_tokens"] < 900,
          "it stopped early (%d tokens)" % (after["generated_tokens"] - base_stats["generated_tokens"]))
finally:
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "killed after 30 s"
    check(rc == 0, "SIGTERM: clean exit (%s)" % rc)

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
