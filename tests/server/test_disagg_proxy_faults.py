#!/usr/bin/env python3
"""llm-disagg-proxy against upstreams that fail, and llm-server under a burst
of connections; no model run, no UCX, a few seconds.

  test_disagg_proxy_faults.py LLM_SERVER LLM_DISAGG_PROXY REPO_DIR

The prefill and decode servers here are fake ones (raw sockets in this
script), so each failure happens exactly when the test says:
- a connection reset after the request was read, before any answer (what a
  client sees when a server's kernel never let the server accept it): the
  proxy sends the request once more on a new connection, to prefill and to
  decode, streamed and not; the transfer still happens (the decode server
  gets the prefill's kv_transfer_params), /metrics counts the retries;
- reset twice: no third try; a prefill falls back (the decode server gets
  the request without kv_transfer_params), a decode is a 502;
- a streamed answer whose connection closes after its first event, in the
  middle of its chunked body: not sent again; the client gets that event, then an error event;
- /v1/messages (Anthropic) and /v1/responses (OpenAI): split like chat, the
  prefill request limited to one token in each API's own field;
- a burst of 64 connections while the server cannot accept (SIGSTOP): every
  one answered once it can (llm-server and the proxy listen with the
  system's backlog, not cpp-httplib's 5, which dropped or reset most of
  them: listen_backlog.h).
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import server_proc

server_bin, proxy_bin, repo = sys.argv[1:4]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def read_request(conn):
    """One HTTP request off `conn`: (method, path, body bytes) or None."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, path = lines[0].split()[:2]
    length = 0
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return method, path, body


def reset(conn):
    """Close with RST (SO_LINGER 0), as the kernel ends a connection it dropped."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def send_json(conn, obj):
    b = json.dumps(obj).encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                 b"Connection: close\r\n\r\n" % len(b) + b)
    conn.close()


def chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


SSE_EVENTS = [b'data: {"choices":[{"index":0,"text":"hel"}]}\n\n', b'data: {"choices":[{"index":0,"text":"lo"}]}\n\n',
              b"data: [DONE]\n\n"]


class Fake:
    """A fake llm-server: each POST takes the next action of `actions`
    ("reset", "ok", "stream", "stream_break"); GETs answer {"status": "ok"}."""

    def __init__(self, answer):
        self.answer, self.actions, self.seen = answer, [], []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        req = read_request(conn)
        if req is None:
            return conn.close()
        method, path, body = req
        if method == "GET":
            return send_json(conn, {"status": "ok"})
        with self.lock:
            self.seen.append((path, json.loads(body)))
            action = self.actions.pop(0) if self.actions else "ok"
        if action == "reset":
            return reset(conn)
        if action == "ok":
            return send_json(conn, self.answer)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
                     chunk(SSE_EVENTS[0]))
        if action == "stream_break":
            # Closed in the middle of the chunked body. An orderly close, not
            # a reset: a reset could discard the event above before the
            # proxy has read it; the request was read whole, so this is a FIN.
            return conn.close()
        conn.sendall(chunk(SSE_EVENTS[1]) + chunk(SSE_EVENTS[2]) + b"0\r\n\r\n")
        conn.close()

    def reset_log(self, actions):
        with self.lock:
            self.actions, self.seen = list(actions), []


DESCRIPTOR = {"do_remote_prefill": True, "llmrt_descriptor": "llmkv1 fake"}
prefill = Fake({"choices": [{"index": 0, "text": "x"}], "kv_transfer_params": DESCRIPTOR})
decode = Fake({"choices": [{"index": 0, "text": "hello", "finish_reason": "length"}]})

procs = []
try:
    proxy_proc = subprocess.Popen([proxy_bin, "--port", "0", "--timeout", "60", "--prefill",
                                   "http://127.0.0.1:%d" % prefill.port, "--decode", "http://127.0.0.1:%d" % decode.port],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(proxy_proc)
    proxy_log = []
    line = proxy_proc.stdout.readline()
    threading.Thread(target=lambda: [proxy_log.append(l) for l in proxy_proc.stderr], daemon=True).start()
    proxy_port = int(line.split("listening on http://")[1].split()[0].rsplit(":", 1)[1])

    def post(path, body, timeout=60):
        """(status, raw body) of a POST to the proxy."""
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (proxy_port, path), data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def metrics():
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % proxy_port, timeout=30).read().decode()
        return {l.split()[0]: float(l.split()[1]) for l in text.splitlines() if l and not l.startswith("#")}

    def delta(before, name):
        return metrics().get("llmrt_proxy_" + name, -1) - before.get("llmrt_proxy_" + name, 0)

    req = {"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}

    # Reset before any answer, once: sent again; the transfer goes through.
    for stream in (False, True):
        m0 = metrics()
        prefill.reset_log(["reset", "ok"])
        decode.reset_log(["reset", "stream" if stream else "ok"])
        status, body = post("/v1/completions", dict(req, stream=stream))
        want = b"".join(SSE_EVENTS) if stream else b'"hello"'
        check(status == 200 and want in body, "reset before the answer (stream=%s): answered (%d %r)" %
              (stream, status, body[:80]))
        check(len(prefill.seen) == 2 and len(decode.seen) == 2,
              "reset before the answer (stream=%s): prefill and decode each sent twice (%d, %d)" %
              (stream, len(prefill.seen), len(decode.seen)))
        check(decode.seen and decode.seen[-1][1].get("kv_transfer_params") == DESCRIPTOR,
              "reset before the answer (stream=%s): the decode server got the prefill's descriptor" % stream)
        check(delta(m0, "prefill_retries_total") == 1 and delta(m0, "decode_retries_total") == 1 and
              delta(m0, "prefill_failures_total") == 0 and delta(m0, "split_total") == 1,
              "reset before the answer (stream=%s): one retry of each counted, no failure" % stream)
    retry_lines = lambda: sum("closed the connection before answering" in l for l in proxy_log)
    deadline = time.time() + 10  # the lines are in the pipe; the reader thread may lag under load
    while retry_lines() < 4 and time.time() < deadline:
        time.sleep(0.05)
    check(retry_lines() == 4, "the retries are logged (%d lines)" % retry_lines())

    # Reset twice: one retry only; the prefill falls back, the decode is a 502.
    m0 = metrics()
    prefill.reset_log(["reset", "reset"])
    decode.reset_log(["ok"])
    status, body = post("/v1/completions", req)
    check(status == 200 and len(prefill.seen) == 2 and "kv_transfer_params" not in decode.seen[-1][1],
          "prefill reset twice: two tries, then the decode server computes the prompt")
    check(delta(m0, "prefill_failures_total") == 1, "prefill reset twice: one fallback counted")
    decode.reset_log(["reset", "reset", "ok"])
    status, body = post("/v1/completions", req)
    check(status == 502 and b"decode_unavailable" in body and len(decode.seen) == 2,
          "decode reset twice: 502 decode_unavailable after two tries (%d, %d tries)" % (status, len(decode.seen)))

    # A stream that breaks after its first event: not sent again, ends with an error.
    m0 = metrics()
    prefill.reset_log([])
    decode.reset_log(["stream_break"])
    status, body = post("/v1/completions", dict(req, stream=True))
    events = [e for e in body.split(b"\n\n") if e.strip()]
    check(status == 200 and events[:1] == [SSE_EVENTS[0].strip()], "broken stream: the first event relayed")
    last = json.loads(events[-1][len(b"data: "):]) if events and events[-1].startswith(b"data: {") else {}
    check(last.get("error", {}).get("code") == "decode_stream_broken" and b"[DONE]" not in body,
          "broken stream: ends with an error event, no [DONE] (%r)" % events[-1:])
    check(len(decode.seen) == 1 and delta(m0, "streams_broken_total") == 1 and delta(m0, "decode_retries_total") == 0,
          "broken stream: not sent again, counted")

    # Anthropic Messages and OpenAI Responses take the same path.
    for path, body, limit in (
            ("/v1/messages", {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]},
             "max_tokens"),
            ("/v1/responses", {"model": "m", "input": "Hi", "max_output_tokens": 8}, "max_output_tokens")):
        prefill.reset_log([])
        decode.reset_log([])
        status, _ = post(path, body)
        p = prefill.seen[0] if prefill.seen else ("", {})
        d = decode.seen[0] if decode.seen else ("", {})
        check(status == 200 and p[0] == path and p[1].get(limit) == 1 and p[1].get("stream") is False and
              p[1].get("kv_transfer_params", {}).get("do_remote_decode") is True,
              "%s: the prefill server gets it as one token (%s = 1) with do_remote_decode" % (path, limit))
        check(d[0] == path and d[1].get(limit) == 8 and d[1].get("kv_transfer_params") == DESCRIPTOR,
              "%s: the decode server gets it whole with the prefill's descriptor" % path)

    # A burst of 64 connections at each of llm-server and the proxy while
    # neither can accept (SIGSTOP, long enough for the kernel to give up on
    # handshakes that a backlog of 5 could not queue): every one answered.
    server, server_port, _ = server_proc.start(server_bin, ["-m", os.path.join(repo, "models/stories260K-f32.gguf"),
                                                            "-c", "256", "-np", "2", "-t", "1"])
    procs.append(server)
    targets = (("llm-server", server.pid, server_port), ("llm-disagg-proxy", proxy_proc.pid, proxy_port))
    try:
        for name, _, port in targets:
            out = subprocess.run(["ss", "-ltnH", "sport = :%d" % port], capture_output=True, text=True).stdout.split()
            check(len(out) >= 3 and int(out[2]) >= 64, "%s: listen backlog %s (at least 64)" %
                  (name, out[2] if len(out) >= 3 else "?"))
    except FileNotFoundError:
        print("     (ss not installed: the backlog is checked by the burst alone)")
    answered = {name: 0 for name, _, _ in targets}
    lock = threading.Lock()

    def health(name, port):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.settimeout(30)
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port)
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    with lock:
                        answered[name] += 1
        except OSError:
            pass

    threads = [threading.Thread(target=health, args=(name, port), daemon=True)
               for name, _, port in targets for _ in range(64)]
    for _, pid, _ in targets:
        os.kill(pid, signal.SIGSTOP)
    try:
        for t in threads:
            t.start()
        time.sleep(6)
    finally:
        for _, pid, _ in targets:
            os.kill(pid, signal.SIGCONT)
    deadline = time.time() + 15
    for t in threads:
        t.join(max(0, deadline - time.time()))
    for name, _, _ in targets:
        check(answered[name] == 64, "%s: 64 connections made while it could not accept, all answered (%d)" %
              (name, answered[name]))
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
