#!/usr/bin/env python3
"""llm-server's llama-server-style native endpoints.

  test_server_native.py LLM_SERVER REPO_DIR

With SmolLM2 (its chat template; the bundled stories260K when it is absent):
/tokenize (plain, add_special, with_pieces) against the C API's tokenizer
through /v1/completions' usage, /detokenize round trips, /apply-template
gives the prompt a chat completion is computed from (its token count is the
completion's usage.prompt_tokens), /props, and bad inputs are 400s; the
schema forms llama-server accepts on /v1/chat/completions (a top-level
json_schema, response_format's schema beside json_object or json_schema).
"""
import json
import os
import sys
import urllib.error
import urllib.request

import server_proc

server_bin, repo = sys.argv[1:3]
model = os.path.join(repo, "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.isfile(model):
    model = os.path.join(repo, "models/stories260K-f32.gguf")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


proc, port, _ = server_proc.start(server_bin, ["-m", model, "-t", "2", "--max-seqs", "3", "-c", "512"])
base = "http://127.0.0.1:%d" % port


def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


try:
    text = "What is the capital of France? Héllo, 世界!"
    st, r = post("/tokenize", {"content": text})
    check(st == 200 and len(r["tokens"]) > 5 and all(isinstance(x, int) for x in r["tokens"]), "/tokenize: %s" % r)
    plain = r["tokens"]
    st, r = post("/tokenize", {"content": text, "add_special": True})
    check(st == 200 and len(r["tokens"]) >= len(plain) and plain == [x for x in r["tokens"] if x in plain][:len(plain)],
          "/tokenize add_special keeps the text's ids, special ones around them")
    # the C API's own count for a completion prompt: usage.prompt_tokens
    st, c = post("/v1/completions", {"prompt": text, "max_tokens": 1})
    check(st == 200 and c["usage"]["prompt_tokens"] == len(r["tokens"]),
          "/tokenize add_special counts what /v1/completions computes (%s vs %s)" % (len(r["tokens"]), c.get("usage")))
    st, r = post("/tokenize", {"content": text, "with_pieces": True})
    pieces = r.get("tokens", [])
    check(st == 200 and [p["id"] for p in pieces] == plain, "/tokenize with_pieces: the same ids")
    joined = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in pieces)
    check(joined.replace("\u2581".encode(), b" ").strip() == text.encode(),
          "/tokenize with_pieces: the pieces spell the text (%r)" % joined[:80])
    st, r = post("/detokenize", {"tokens": plain})
    check(st == 200 and r["content"].strip() == text, "/detokenize round trip: %r" % r)
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour."}]
    st, r = post("/apply-template", {"messages": messages})
    check(st == 200 and "Name a colour." in r["prompt"], "/apply-template renders the conversation: %r" % r)
    prompt = r["prompt"]
    st, tok = post("/tokenize", {"content": prompt, "add_special": not prompt.startswith("<"), "parse_special": True})
    st, c = post("/v1/chat/completions", {"messages": messages, "max_tokens": 1})
    check(st == 200 and c["usage"]["prompt_tokens"] == len(tok["tokens"]),
          "/apply-template's prompt is what the chat completion computes (%d vs %s tokens)" % (len(tok["tokens"]), c.get("usage")))
    props = json.loads(urllib.request.urlopen(base + "/props", timeout=30).read())
    check(props["default_generation_settings"]["n_ctx"] == 512 and props["total_slots"] == 3, "/props: %s" % props)
    for path, body, param in [("/tokenize", {"content": 5}, "content"), ("/tokenize", {}, "content"),
                              ("/tokenize", {"content": "x", "with_pieces": "yes"}, "with_pieces"),
                              ("/detokenize", {"tokens": "abc"}, "tokens"), ("/detokenize", {"tokens": [-1]}, "tokens"),
                              ("/detokenize", {"tokens": [10 ** 9]}, "tokens"), ("/apply-template", {}, "messages"),
                              ("/apply-template", {"messages": "hi"}, "messages")]:
        st, r = post(path, body)
        check(st == 400 and r["error"]["param"] == param, "%s %s: 400 naming %s (%s %s)" % (path, body, param, st, r))
    # llama-server's ways of sending a schema to /v1/chat/completions: the
    # output is held to each (const: nothing else can be written)
    msgs = [{"role": "user", "content": "Write an example"}]
    for extra, want in [({"json_schema": {"const": "42"}}, '"42"'),
                        ({"response_format": {"type": "json_object", "schema": {"const": "foo"}}}, '"foo"'),
                        ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"const": 7}}}}, "7"),
                        ({"response_format": {"type": "json_schema", "schema": {"enum": [True]}}}, "true")]:
        st, r = post("/v1/chat/completions", dict({"messages": msgs, "max_tokens": 8, "temperature": 1.0}, **extra))
        got = r["choices"][0]["message"]["content"] if st == 200 else r
        check(st == 200 and got.strip() == want, "%s: %r" % (extra, got))
    for extra, param in [({"json_schema": 123}, "json_schema"),
                         ({"response_format": {"type": "json_object", "schema": 123}}, "response_format.schema"),
                         ({"response_format": {"type": "json_object", "schema": {"type": "hiccup"}}}, "response_format.schema"),
                         ({"response_format": {"type": "sound"}}, "response_format.type"),
                         ({"json_schema": {"const": 1}, "grammar": "root ::= \"a\""}, None)]:
        st, r = post("/v1/chat/completions", dict({"messages": msgs, "max_tokens": 4}, **extra))
        check(st == 400 and (param is None or r["error"]["param"] == param), "%s: 400 naming %s (%s %s)" % (extra, param, st, r))
finally:
    server_proc.stop(proc)
if failures:
    print("\n%d FAILED" % len(failures))
    sys.exit(1)
print("native endpoints checked")
