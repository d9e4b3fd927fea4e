#!/usr/bin/env python3
"""llm-server's API keys and its Host/Origin check, over raw sockets.

  test_server_access.py LLM_SERVER REPO_DIR

Starts the server on loopback with the bundled model, two keys (one given
with --api-key, one in a key file) and -v (every request logged), then
checks: every endpoint but /health answers 401 without a key or with a
wrong one, and serves with either key (Authorization: Bearer, or x-api-key);
a Host that is not a local name (DNS rebinding) and an Origin of another
site get 403 before the key is even looked at, while --allowed-host names
pass; CORS: a preflight (OPTIONS) needs no key and names the origin only
when it is allowed (the local ones and --cors-origins), answers (streams
too) to an allowed origin carry Access-Control-Allow-Origin; and no key
ever appears in what the server logs.
"""
import json
import os
import socket
import sys
import tempfile
import time

import server_proc

server_bin, repo = sys.argv[1:3]
model = os.path.join(repo, "models/stories260K-f32.gguf")
KEY1, KEY2 = "sk-test-0123456789abcdef", "sk-file-fedcba9876543210"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


keyfile = tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False)
keyfile.write("# test keys\n%s\n" % KEY2)
keyfile.close()
proc, port, log = server_proc.start(server_bin, ["-m", model, "-t", "1", "--max-seqs", "2", "-c", "128", "-v",
                                                 "--api-key", KEY1, "--api-key-file", keyfile.name,
                                                 "--allowed-host", "my-box.lan",
                                                 "--cors-origins", "localhost,web.mydomain.fr"], timeout=60)


def request(method, path, headers, body=b""):
    status, _, payload = request_full(method, path, headers, body)
    return status, payload


def request_full(method, path, headers, body=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = "%s %s HTTP/1.1\r\n" % (method, path)
    for k, v in headers.items():
        head += "%s: %s\r\n" % (k, v)
    if body:
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    head += "Connection: close\r\n\r\n"
    s.sendall(head.encode() + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else None
    head, _, payload = data.partition(b"\r\n\r\n")
    fields = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.decode("latin-1").partition(":")
        fields[k.strip().lower()] = v.strip()
    return status, fields, payload


CHAT = json.dumps({"messages": [{"role": "user", "content": "Once"}], "max_tokens": 2}).encode()
COMPLETION = json.dumps({"prompt": "Once", "max_tokens": 2}).encode()
ENDPOINTS = [("GET", "/v1/models", b""), ("GET", "/v1/models/stories260K-f32", b""), ("GET", "/v1/stats", b""),
             ("GET", "/metrics", b""), ("POST", "/v1/chat/completions", CHAT), ("POST", "/v1/completions", COMPLETION)]
# Every other route: a key is wanted before anything else is looked at.
OTHER_ROUTES = [("GET", "/models"), ("GET", "/props"), ("GET", "/slots"), ("POST", "/chat/completions"),
                ("POST", "/completion"), ("POST", "/completions"), ("POST", "/v1/responses"), ("POST", "/v1/messages"),
                ("POST", "/tokenize"), ("POST", "/detokenize"), ("POST", "/apply-template"),
                ("POST", "/v1/embeddings"), ("POST", "/embeddings"), ("POST", "/v1/rerank"), ("POST", "/rerank")]
local = "127.0.0.1:%d" % port
try:
    for method, path in OTHER_ROUTES:
        st, _ = request(method, path, {"Host": local}, b"{}" if method == "POST" else b"")
        check(st == 401, "%s %s without a key: 401 (%s)" % (method, path, st))
        st, _ = request(method, path, {"Host": local, "Authorization": "Bearer sk-wrong"}, b"{}" if method == "POST" else b"")
        check(st == 401, "%s %s with a wrong key: 401 (%s)" % (method, path, st))
    # CORS
    pre = {"Host": local, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "Authorization"}
    for origin, allowed in (("http://localhost:5173", True), ("http://web.mydomain.fr", True),
                            ("http://evil.example", False), ("http://localhost.evil.example", False)):
        st, h, _ = request_full("OPTIONS", "/v1/chat/completions", dict(pre, Origin=origin))
        ok = st == 200 and h.get("access-control-allow-methods") == "GET, POST, DELETE, OPTIONS"
        ok = ok and (h.get("access-control-allow-origin") == origin if allowed else "access-control-allow-origin" not in h)
        check(ok, "preflight from %s without a key: 200, origin %s (%s %r)" % (origin, "named" if allowed else "not named", st, h))
    st, _, _ = request_full("OPTIONS", "/v1/chat/completions", dict(pre, Host="evil.example", Origin="http://evil.example"))
    check(st == 403, "a preflight with a rebinding Host: 403 (%s)" % st)
    for origin in ("http://web.mydomain.fr", "http://127.0.0.1:3000"):
        st, h, _ = request_full("POST", "/v1/chat/completions", {"Host": local, "Origin": origin, "Authorization": "Bearer " + KEY1}, CHAT)
        check(st == 200 and h.get("access-control-allow-origin") == origin and h.get("vary") == "Origin",
              "an answer to the allowed origin %s names it (%s %r)" % (origin, st, h.get("access-control-allow-origin")))
    stream = json.dumps({"messages": [{"role": "user", "content": "Once"}], "max_tokens": 2, "stream": True}).encode()
    st, h, body = request_full("POST", "/v1/chat/completions", {"Host": local, "Origin": "http://web.mydomain.fr", "Authorization": "Bearer " + KEY1}, stream)
    check(st == 200 and h.get("access-control-allow-origin") == "http://web.mydomain.fr" and b"[DONE]" in body,
          "a stream to an allowed origin names it (%s %r)" % (st, h.get("access-control-allow-origin")))
    st, h, _ = request_full("GET", "/v1/models", {"Host": local, "Authorization": "Bearer " + KEY1})
    check(st == 200 and "access-control-allow-origin" not in h, "no Origin, no CORS header (%r)" % h)
    for method, path, body in ENDPOINTS:
        st, resp = request(method, path, {"Host": local}, body)
        ok = st == 401
        if ok:
            err = json.loads(resp)["error"]
            ok = err["type"] == "authentication_error" and err["code"] == "invalid_api_key"
        check(ok, "%s %s without a key: 401 (%s %r)" % (method, path, st, resp[:120]))
        st, _ = request(method, path, {"Host": local, "Authorization": "Bearer " + KEY1[:-1] + "x"}, body)
        check(st == 401, "%s %s with a wrong key: 401 (%s)" % (method, path, st))
        st, _ = request(method, path, {"Host": local, "Authorization": "Bearer " + KEY1}, body)
        check(st == 200, "%s %s with --api-key's key: 200 (%s)" % (method, path, st))
        st, _ = request(method, path, {"Host": "localhost:%d" % port, "x-api-key": KEY2}, body)
        check(st == 200, "%s %s with the key file's key as x-api-key: 200 (%s)" % (method, path, st))
        st, _ = request(method, path, {"Host": "evil.example:%d" % port, "Authorization": "Bearer " + KEY1}, body)
        check(st == 403, "%s %s with a rebinding Host: 403 (%s)" % (method, path, st))
        st, _ = request(method, path, {"Host": local, "Origin": "http://evil.example", "Authorization": "Bearer " + KEY1}, body)
        check(st == 403, "%s %s with another site's Origin: 403 (%s)" % (method, path, st))
        st, _ = request(method, path, {"Host": "my-box.lan:%d" % port, "Authorization": "Bearer " + KEY2}, body)
        check(st == 200, "%s %s with an --allowed-host name: 200 (%s)" % (method, path, st))
    st, resp = request("GET", "/health", {"Host": local})
    check(st == 200, "/health needs no key (%s)" % st)
    st, _ = request("GET", "/health", {"Host": "evil.example"})
    check(st == 403, "/health with a rebinding Host: 403 (%s)" % st)
    st, _ = request("GET", "/nowhere", {"Host": local})
    check(st == 401, "an unknown path without a key: 401, not 404 (%s)" % st)
    try:
        import openai
        client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key=KEY1, max_retries=0)
        r = client.chat.completions.create(model="stories260K-f32", messages=[{"role": "user", "content": "Once"}], max_tokens=2)
        check(r.choices[0].finish_reason in ("stop", "length"), "the openai client with the key is served")
        bad = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="sk-nope", max_retries=0)
        try:
            bad.models.list()
            check(False, "the openai client with a wrong key gets AuthenticationError")
        except openai.AuthenticationError:
            check(True, "the openai client with a wrong key gets AuthenticationError")
    except ImportError:
        print("(openai not installed: its checks skipped)")
finally:
    server_proc.stop(proc)
    os.unlink(keyfile.name)

time.sleep(0.5)  # the log reader's last lines
text = "".join(log)
check(len(log) > 10, "the server logged the requests (-v): %d lines" % len(log))
check(KEY1 not in text and KEY2 not in text and KEY1[:12] not in text, "no key appears in the server's log")
if failures:
    print("\n%d FAILED" % len(failures))
    sys.exit(1)
print("access checks passed")
