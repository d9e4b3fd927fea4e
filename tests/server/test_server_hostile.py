#!/usr/bin/env python3
"""llm-server against hostile requests, over raw sockets.

  test_server_hostile.py LLM_SERVER REPO_DIR [--model GGUF] [--quick] [--write-corpus DIR]

Starts the server on a free loopback port (the bundled stories260K unless
--model names another) and sends, to both generation endpoints, requests
built to break it:
- nesting 10^3 .. 10^6 levels deep (objects and arrays) in every field that
  carries JSON: response_format's schema, tools' and functions' parameters,
  tool_choice, messages and their content parts, tool-call arguments (as an
  object and as a JSON string), logit_bias, stop, prompt, stream_options,
  an unknown field, and the body itself;
- huge arrays and strings in each field; wrong types in each field; numbers
  out of range (1e308, 1e999, -0, 40-digit integers, NaN and Infinity
  literals); invalid UTF-8 and lone surrogates in every string; duplicate
  keys; truncated bodies; bodies that are not JSON under other content types;
  a 100 MB body (with a length and chunked); 200,000 header lines and a
  100 KB header line; a body sent a byte at a time;
- schemas past the grammar's limits: an anyOf of 2,000 objects, an enum of
  100,000 strings, minItems 1000000, maxLength 5000.
After every case the server must have answered 4xx (never 5xx, never a
dropped connection where an answer is due), answer /health, and serve a
normal request; at the end its RSS must be within 10% of what it was after
the warm-up. Exits non-zero listing the cases that failed.

--write-corpus DIR writes each request as a file (its body cut to fit 4 KiB,
Content-Length to match): the seed corpus of tests/fuzz/fuzz_server.cpp.
"""
import json
import os
import socket
import sys
import time

import server_proc

args = sys.argv[1:]
server_bin, repo = args[0], args[1]
model = os.path.join(repo, "models/stories260K-f32.gguf")
quick = "--quick" in args
corpus_dir = None
if "--model" in args:
    model = args[args.index("--model") + 1]
if "--write-corpus" in args:
    corpus_dir = args[args.index("--write-corpus") + 1]
    os.makedirs(corpus_dir, exist_ok=True)

failures = []


def check(ok, what):
    if not ok or os.environ.get("VERBOSE"):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


proc = None
port = None
stderr_lines = []


def start_server():
    global proc, port, stderr_lines
    proc, port, stderr_lines = server_proc.start(server_bin, ["-m", model, "-t", "2", "--max-seqs", "4", "-c", "256"])


def stop_server():
    if not server_proc.stop(proc):
        failures.append("the server did not stop on SIGTERM")


start_server()


def rss_kb():
    with open("/proc/%d/status" % proc.pid) as f:
        for l in f:
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    return 0


def recv_response(s, timeout):
    """(status, body bytes) of one HTTP/1.1 response, or (None, reason)."""
    s.settimeout(timeout)
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                return None, "connection closed before a response (%d bytes)" % len(buf)
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = None
        chunked = False
        for h in head.split(b"\r\n")[1:]:
            k, _, v = h.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
            if k.strip().lower() == b"transfer-encoding" and b"chunked" in v.lower():
                chunked = True
        if length is not None:
            while len(rest) < length:
                chunk = s.recv(65536)
                if not chunk:
                    break
                rest += chunk
            return status, rest[:length]
        if chunked:
            while not rest.endswith(b"0\r\n\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                rest += chunk
        return status, rest
    except (socket.timeout, OSError) as e:
        return None, "no response: %s" % e


def raw(head, body=b"", timeout=60, body_chunks=None, delay=0.0):
    """Sends head + body on a fresh connection; returns (status, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(head)
            if body_chunks is not None:
                for c in body_chunks:
                    s.sendall(c)
                    if delay:
                        time.sleep(delay)
            else:
                s.sendall(body)
        except OSError:
            pass  # the server may answer (413) and close before all is sent
        return recv_response(s, timeout)
    finally:
        s.close()


sent = [0]


def post(path, body, content_type="application/json", timeout=60):
    sent[0] += 1
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
            "Connection: close\r\n\r\n" % (path, content_type, len(body))).encode()
    if corpus_dir is not None:
        # A seed of at most 4 KiB whose Content-Length says what it holds.
        kept = body[:4096 - 200]
        seed = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                % (path, content_type, len(kept))).encode() + kept
        import hashlib
        with open(os.path.join(corpus_dir, hashlib.sha1(seed).hexdigest()[:16]), "wb") as f:
            f.write(seed)
    return raw(head, body, timeout)


def get(path):
    return raw(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % path).encode(), timeout=30)


NORMAL_CHAT = {"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 4, "temperature": 0}
NORMAL_COMPLETION = {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}


def died(what):
    time.sleep(0.2)
    if proc.poll() is None:
        return False
    print("".join(stderr_lines[-20:]))
    failures.append("%s: the server died (exit %s)" % (what, proc.returncode))
    return True


last_rss = [0]


def still_serving(what):
    if os.environ.get("RSS_TRACE"):
        r = rss_kb()
        if abs(r - last_rss[0]) > 2048:
            print("rss %d KiB (%+d) after %s" % (r, r - last_rss[0], what), flush=True)
            last_rss[0] = r
    if died(what):
        raise SystemExit("FAIL %s: the server died (exit %s)" % (what, proc.returncode))
    st, body = get("/health")
    check(st == 200, "%s: /health answers 200 afterwards (got %s %r)" % (what, st, body[:200]))
    st, body = post("/v1/chat/completions", json.dumps(NORMAL_CHAT))
    ok = st == 200
    if ok:
        try:
            ok = json.loads(body)["choices"][0]["finish_reason"] in ("stop", "length")
        except Exception:
            ok = False
    check(ok, "%s: a normal request is served afterwards (got %s %r)" % (what, st, body[:200]))


def expect_4xx(what, status, body, allow_ok=False):
    ok = status is not None and (400 <= status < 500 or (allow_ok and status == 200))
    if ok and status >= 400:
        try:
            err = json.loads(body)["error"]
            ok = isinstance(err.get("message"), str) and err["message"] != ""
        except Exception:
            ok = False
    check(ok, "%s: %s (%s)" % (what, status, body[:160] if isinstance(body, bytes) else body))


def case(what, path, body, content_type="application/json", allow_ok=False, timeout=60):
    t0 = time.time()
    st, resp = post(path, body, content_type, timeout)
    expect_4xx(what, st, resp, allow_ok)
    still_serving(what)
    if os.environ.get("SECTION_TIMES") and time.time() - t0 > 1.0:
        print("        %.1f s: %s" % (time.time() - t0, what), flush=True)
    return st, resp


# -------------------------------------------------------------- builders
def nested_object(depth, leaf="1"):
    return '{"a":' * depth + leaf + "}" * depth


def nested_array(depth, leaf="1"):
    return "[" * depth + leaf + "]" * depth


def nested_schema(depth):
    return '{"type":"object","properties":{"a":' * depth + '{"type":"string"}' + "}}" * depth


def with_field(base, key, raw_value):
    """base (a dict) as JSON text with `key` set to the raw JSON text."""
    text = json.dumps(base)
    return text[:-1] + (", " if len(base) else "") + json.dumps(key) + ": " + raw_value + "}"


# Where each JSON-carrying field takes a nested value (raw JSON text of the
# field's value around the nested part N).
CHAT_FIELDS = {
    "response_format.json_schema.schema": ("response_format", '{"type":"json_schema","json_schema":{"name":"x","schema":%s}}', "schema"),
    "tools[0].function.parameters": ("tools", '[{"type":"function","function":{"name":"f","parameters":%s}}]', "schema"),
    "functions[0].parameters": ("functions", '[{"name":"f","parameters":%s}]', "schema"),
    "tool_choice": ("tool_choice", '%s', "object"),
    "logit_bias": ("logit_bias", '{"1":%s}', "any"),
    "stop": ("stop", '%s', "array"),
    "stream_options": ("stream_options", '{"include_usage":%s}', "any"),
    "unknown_field": ("x_unknown", '%s', "any"),
    "seed": ("seed", '%s', "any"),
}
MESSAGE_FIELDS = {
    "messages[0].content (parts)": '[{"type":"text","text":"hi","extra":%s}]',
    "messages[0].content": '%s',
    "messages[0].tool_calls[0].function.arguments (object)": None,
    "messages[0].tool_calls[0].function.arguments (string)": None,
}


def nested(kind, depth, variant):
    if kind == "schema":
        return nested_schema(depth) if variant == 0 else nested_array(depth)
    if kind == "array" or variant == 1:
        return nested_array(depth)
    return nested_object(depth)


def chat_with_message(message_json):
    return '{"max_tokens":4,"messages":[' + message_json + ']}'


def crash_cases():
    """The three requests that killed the server (issue #37)."""
    big = 100000
    return [
        ("#37: response_format schema nested %d levels" % big, "/v1/chat/completions",
         with_field(NORMAL_CHAT, "response_format", '{"type":"json_schema","json_schema":{"name":"x","schema":%s}}' % nested_schema(big))),
        ("#37: tools[0].function.parameters nested %d levels" % big, "/v1/chat/completions",
         with_field(NORMAL_CHAT, "tools", '[{"type":"function","function":{"name":"f","parameters":%s}}]' % nested_schema(big))),
        ("#37: tool_calls arguments object nested %d levels" % big, "/v1/chat/completions",
         chat_with_message('{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":%s}}]},{"role":"user","content":"hi"}' % nested_object(big))),
    ]


if "--crash-cases" in args:
    # Each of the three on a fresh server: shows which one kills it.
    for i, (what, path, body) in enumerate(crash_cases()):
        if i:
            start_server()
        st, resp = post(path, body)
        if not died(what):
            expect_4xx(what, st, resp)
            print("%s: %s %s" % (what, st, resp[:200]), flush=True)
        else:
            print("%s: the server died (exit %s)" % (what, proc.returncode), flush=True)
        stop_server()
    print("%d FAILED" % len(failures) if failures else "the three requests got 4xx")
    sys.exit(1 if failures else 0)

section_t0 = [time.time(), "start"]


def section(name):
    if os.environ.get("SECTION_TIMES"):
        print("%6.1f s  %s" % (time.time() - section_t0[0], section_t0[1]), flush=True)
    section_t0[0], section_t0[1] = time.time(), name


depths = [1000, 100000] if quick else [1000, 10000, 100000, 1000000]
WARM_PEAK_SCHEMA = {"anyOf": [{"type": "object", "properties": {"k%d" % i: {"type": "integer"}}, "required": ["k%d" % i]}
                              for i in range(2000)]}
warm_rss = None

try:
    # --------------------------------------------------------- warm-up
    for _ in range(3):
        still_serving("warm-up")
    for body in [{"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}},
                 {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": "required"}]:
        st, _ = post("/v1/chat/completions", json.dumps(dict(NORMAL_CHAT, **body)))
        check(st == 200, "warm-up: constrained request served (%s)" % st)
    # One large schema (the suite's largest transient peak, ~10 MB): the heap
    # grows to what the suite will need before the baseline is taken. What
    # the allocator keeps after such a peak is not a leak, and with a baseline
    # of ~17 MB (the bundled model on the CPU) it alone passed 10%; a leak
    # still grows with the dozens of hostile requests that follow.
    st, _ = post("/v1/chat/completions", json.dumps(dict(NORMAL_CHAT, response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": WARM_PEAK_SCHEMA}})))
    check(st in (200, 400), "warm-up: a large schema answered (%s)" % st)
    still_serving("warm-up peak")
    warm_rss = rss_kb()

    for what, path, body in crash_cases():
        case(what, path, body)

    # ------------------------------------------------ deep nesting
    section('deep nesting')
    for depth in depths:
        for variant in (0, 1):
            for name, (key, shape, kind) in CHAT_FIELDS.items():
                v = nested(kind, depth, variant)
                case("nesting %d (%s) in %s" % (depth, "arrays" if variant else "objects", name), "/v1/chat/completions",
                     with_field(NORMAL_CHAT, key, shape % v))
            v = nested_object(depth) if variant == 0 else nested_array(depth)
            case("nesting %d in messages[0].content parts" % depth, "/v1/chat/completions",
                 chat_with_message('{"role":"user","content":[{"type":"text","text":"hi","extra":%s}]}' % v))
            case("nesting %d in messages[0].content" % depth, "/v1/chat/completions",
                 chat_with_message('{"role":"user","content":%s}' % v))
            case("nesting %d in messages[0] itself" % depth, "/v1/chat/completions", chat_with_message(v))
            case("nesting %d in tool_calls arguments (object/array)" % depth, "/v1/chat/completions",
                 chat_with_message('{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":%s}}]},{"role":"user","content":"hi"}' % v))
            case("nesting %d in tool_calls arguments (JSON in a string)" % depth, "/v1/chat/completions",
                 chat_with_message('{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":%s}}]},{"role":"user","content":"hi"}' % json.dumps(v)))
            case("nesting %d as the whole body" % depth, "/v1/chat/completions", v)
            case("nesting %d in prompt" % depth, "/v1/completions", with_field(NORMAL_COMPLETION, "prompt", nested_array(depth)))
            case("nesting %d in completions' response_format" % depth, "/v1/completions",
                 with_field(NORMAL_COMPLETION, "response_format", '{"type":"json_schema","json_schema":{"name":"x","schema":%s}}' % nested_schema(depth)))
    # just under and over the documented limits
    for d, ok in ((120, True), (129, False)):
        st, resp = post("/v1/chat/completions", with_field(NORMAL_CHAT, "response_format",
                        '{"type":"json_schema","json_schema":{"name":"x","schema":%s}}' % nested_schema(d // 2)))
        check(st == (200 if ok else 400), "schema of about %d levels: %s %s" % (d, st, resp[:200]))

    # ----------------------------------------- schemas past the grammar's limits
    section("schemas past the grammar's limits")
    for what, schema in [
        ("anyOf of 2000 objects", {"anyOf": [{"type": "object", "properties": {"k%d" % i: {"type": "integer"}}, "required": ["k%d" % i]} for i in range(2000)]}),
        ("enum of 100000 strings", {"enum": ["value-%d" % i for i in range(100000)]}),
        ("minItems 1000000", {"type": "array", "items": {"type": "integer"}, "minItems": 1000000}),
        ("maxLength 5000 x 200 properties", {"type": "object", "properties": {"p%d" % i: {"type": "string", "maxLength": 5000} for i in range(200)}}),
        ("pattern with a huge count", {"type": "string", "pattern": "^a{99999}$"}),
        ("oneOf of 500 branches", {"oneOf": [{"const": i} for i in range(500)]}),
    ]:
        st, resp = case("schema: " + what, "/v1/chat/completions",
                        json.dumps(dict(NORMAL_CHAT, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})),
                        allow_ok=True)
        if st == 400:
            check(b"param" in resp and b"response_format" in resp, "schema: %s names the parameter: %r" % (what, resp[:200]))

    # A schema the compiler refuses (issue 29): a 400 naming the keyword
    # and where it stands, never a 500.
    for what, schema, keyword in [
        ("uniqueItems over strings, minItems 2", {"type": "object", "properties": {"tags": {
            "type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 2}}}, b"/properties/tags/uniqueItems"),
        ("draft-03", {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"}, b"$schema"),
        ("a lookahead pattern", {"type": "string", "pattern": "^(?!aws:).+$"}, b"pattern"),
        ("a $ref to another document", {"$ref": "https://example.test/other.json"}, b"$ref"),
        ("a script class in a pattern", {"type": "string", "pattern": "^\\p{Greek}+$"}, b"Greek"),
    ]:
        st, resp = case("refused schema: " + what, "/v1/chat/completions",
                        json.dumps(dict(NORMAL_CHAT, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})))
        check(st == 400 and keyword in resp, "refused schema: %s: 400 naming %r: %s %r" % (what, keyword, st, resp[:300]))

    # -------------------------------------------- huge arrays and strings
    section('huge arrays and strings')
    n_big = 200000 if quick else 1000000
    huge_string = json.dumps("a" * (8 << 20))
    huge_array = "[" + ",".join(["1"] * n_big) + "]"
    huge_strings = "[" + ",".join(['"s"'] * n_big) + "]"
    huge_object = "{" + ",".join('"%d":1' % i for i in range(n_big // 4)) + "}"
    for key, value in [("stop", huge_strings), ("stop", huge_string), ("logit_bias", huge_object),
                       ("stop_token_ids", huge_array), ("tools", huge_array), ("messages", huge_array),
                       ("x_unknown", huge_array), ("x_unknown", huge_string), ("model", huge_string),
                       ("response_format", '{"type":"json_schema","json_schema":{"name":%s,"schema":{}}}' % huge_string),
                       ("seed", huge_array)]:
        case("huge %s in %s" % ("string" if value.startswith('"') else "container", key), "/v1/chat/completions",
             with_field({k: v for k, v in NORMAL_CHAT.items() if k != key}, key, value), allow_ok=(key == "x_unknown"))
    case("huge message content (8 MiB)", "/v1/chat/completions",
         chat_with_message('{"role":"user","content":%s}' % huge_string))
    case("huge prompt (8 MiB)", "/v1/completions", with_field({"max_tokens": 4}, "prompt", huge_string))
    case("many messages", "/v1/chat/completions",
         '{"max_tokens":4,"messages":[' + ",".join(['{"role":"user","content":"hi"}'] * (n_big // 4)) + "]}")
    case("many prompts", "/v1/completions", with_field({"max_tokens": 4}, "prompt", huge_strings))

    # ---------------------------------------------------- wrong types
    section('wrong types')
    wrong = ["1", "-1", "1.5", '"x"', "true", "null", "[]", "{}", "[1]", '{"a":1}', '[[]]', '[{}]', '""']
    chat_keys = ["messages", "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
                 "n", "stop", "stream", "stream_options", "logit_bias", "logprobs", "top_logprobs", "seed",
                 "response_format", "tools", "tool_choice", "functions", "function_call", "parallel_tool_calls",
                 "presence_penalty", "frequency_penalty", "repetition_penalty", "stop_token_ids", "min_tokens",
                 "priority", "ignore_eos", "regex", "grammar", "choice", "guided_regex", "guided_choice"]
    for key in chat_keys:
        for v in wrong:
            base = {k: x for k, x in NORMAL_CHAT.items() if k != key}
            st, resp = post("/v1/chat/completions", with_field(base, key, v))
            expect_4xx("wrong type %s=%s" % (key, v), st, resp, allow_ok=True)
        still_serving("wrong types in " + key)
    message_shapes = ['{"role":%s,"content":"x"}', '{"role":"user","content":%s}',
                      '{"role":"user","content":[%s]}', '{"role":"user","content":[{"type":%s,"text":"x"}]}',
                      '{"role":"user","content":[{"type":"text","text":%s}]}',
                      '{"role":"assistant","content":"","tool_calls":%s}',
                      '{"role":"assistant","content":"","tool_calls":[%s]}',
                      '{"role":"assistant","content":"","tool_calls":[{"function":%s}]}',
                      '{"role":"assistant","content":"","tool_calls":[{"function":{"name":%s,"arguments":"{}"}}]}',
                      '{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":%s}}]}']
    for shape in message_shapes:
        for v in wrong:
            st, resp = post("/v1/chat/completions", chat_with_message(shape % v))
            expect_4xx("wrong type in message %s" % (shape % v), st, resp, allow_ok=True)
        still_serving("wrong types in " + shape)
    tool_shapes = ['[%s]', '[{"type":%s,"function":{"name":"f"}}]', '[{"type":"function","function":%s}]',
                   '[{"type":"function","function":{"name":%s}}]',
                   '[{"type":"function","function":{"name":"f","description":%s}}]',
                   '[{"type":"function","function":{"name":"f","parameters":%s}}]']
    for shape in tool_shapes:
        for v in wrong:
            st, resp = post("/v1/chat/completions", with_field(NORMAL_CHAT, "tools", shape % v))
            expect_4xx("wrong type in tools %s" % (shape % v), st, resp, allow_ok=True)
        for v in wrong:
            st, resp = post("/v1/chat/completions", with_field(dict(NORMAL_CHAT, tools=[{"type": "function", "function": {"name": "f"}}]),
                                                               "tool_choice", '{"type":"function","function":%s}' % v))
            expect_4xx("wrong type in tool_choice.function %s" % v, st, resp, allow_ok=True)
        still_serving("wrong types in " + shape)
    for shape in ['{"type":%s}', '{"type":"json_schema","json_schema":%s}',
                  '{"type":"json_schema","json_schema":{"name":%s,"schema":{}}}',
                  '{"type":"json_schema","json_schema":{"name":"x","strict":%s,"schema":{}}}',
                  '{"type":"json_schema","json_schema":{"name":"x","schema":%s}}',
                  '{"type":"json_schema","json_schema":{"name":"x","schema":{"type":%s}}}',
                  '{"type":"json_schema","json_schema":{"name":"x","schema":{"properties":%s}}}',
                  '{"type":"json_schema","json_schema":{"name":"x","schema":{"enum":%s}}}',
                  '{"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":%s}}}']:
        for v in wrong:
            st, resp = post("/v1/chat/completions", with_field(NORMAL_CHAT, "response_format", shape % v))
            expect_4xx("wrong type in response_format %s" % (shape % v), st, resp, allow_ok=True)
        still_serving("wrong types in " + shape)
    for key in ["prompt", "max_tokens", "logprobs", "echo", "suffix", "best_of", "n"]:
        for v in wrong:
            base = {k: x for k, x in NORMAL_COMPLETION.items() if k != key}
            st, resp = post("/v1/completions", with_field(base, key, v))
            expect_4xx("completions: wrong type %s=%s" % (key, v), st, resp, allow_ok=True)
        still_serving("completions: wrong types in " + key)

    # ------------------------------------------------ numbers out of range
    section('numbers out of range')
    numbers = ["1e308", "-1e308", "1e999", "-1e999", "-0", "-0.0", "1e-400", "123456789012345678901234567890",
               "-123456789012345678901234567890", "18446744073709551616", "9223372036854775808", "NaN", "Infinity",
               "-Infinity", "0x10", "01", "1.", ".5", "+1"]
    for key in ["max_tokens", "temperature", "top_p", "top_k", "n", "seed", "min_tokens", "priority", "top_logprobs",
                "presence_penalty", "repetition_penalty"]:
        for v in numbers:
            base = {k: x for k, x in NORMAL_CHAT.items() if k != key}
            st, resp = post("/v1/chat/completions", with_field(base, key, v))
            expect_4xx("number %s=%s" % (key, v), st, resp, allow_ok=True)
        still_serving("numbers in " + key)
    for v in numbers:
        case("number as logit_bias value %s" % v, "/v1/chat/completions", with_field(NORMAL_CHAT, "logit_bias", '{"1":%s}' % v), allow_ok=True)
        case("number as token id %s" % v, "/v1/completions", with_field({"max_tokens": 4}, "prompt", "[%s]" % v), allow_ok=True)
        case("number in a schema bound %s" % v, "/v1/chat/completions", with_field(NORMAL_CHAT, "response_format",
             '{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","minimum":%s,"maxLength":%s,"minItems":%s}}}' % (v, v, v)), allow_ok=True)

    # ------------------------------------- invalid UTF-8 and lone surrogates
    section('invalid UTF-8 and lone surrogates')
    bad_strings = [b'"\xff\xfe"', b'"\xc3"', b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"', b'"\\ud800"', b'"\\udc00x"',
                   b'"\\ud800\\u0041"', b'"\xc0\xaf"', b'"a\x00b"', b'"\\u0000"']
    for s in bad_strings:
        for key, shape in [("model", b"%s"), ("stop", b"%s"), ("messages", b'[{"role":"user","content":%s}]'),
                           ("messages", b'[{"role":%s,"content":"x"}]'),
                           ("response_format", b'{"type":"json_schema","json_schema":{"name":"x","schema":{"const":%s}}}'),
                           ("response_format", b'{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":%s}}}'),
                           ("tools", b'[{"type":"function","function":{"name":"f","description":%s}}]'),
                           ("regex", b"%s"), ("grammar", b"%s"), ("choice", b"[%s]")]:
            base = {k: x for k, x in NORMAL_CHAT.items() if k != key}
            body = json.dumps(base).encode()[:-1] + b', "' + key.encode() + b'": ' + (shape % s) + b"}"
            st, resp = post("/v1/chat/completions", body)
            expect_4xx("bad string %r in %s" % (s, key), st, resp, allow_ok=True)
        st, resp = post("/v1/completions", b'{"max_tokens":4,"prompt":' + s + b"}")
        expect_4xx("bad string %r as prompt" % s, st, resp, allow_ok=True)
        st, resp = post("/v1/chat/completions", b'{"max_tokens":4,"messages":[{"role":"user","content":"x"}],' + s + b":1}")
        expect_4xx("bad string %r as a key" % s, st, resp, allow_ok=True)
        still_serving("bad strings %r" % s)

    # ------------------------------------------------------ duplicate keys
    section('duplicate keys')
    case("duplicate top-level key", "/v1/chat/completions",
         '{"max_tokens":4,"messages":[{"role":"user","content":"x"}],"max_tokens":100000}')
    case("duplicate key in a message", "/v1/chat/completions",
         '{"max_tokens":4,"messages":[{"role":"user","role":"system","content":"x"}]}')
    case("duplicate key in a schema", "/v1/chat/completions", with_field(NORMAL_CHAT, "response_format",
         '{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","type":"integer"}}}'))
    case("100000 duplicate keys", "/v1/chat/completions",
         '{"max_tokens":4,"messages":[{"role":"user","content":"x"}],' + ",".join(['"n":1'] * 100000) + "}")

    # ----------------------------------------------- truncated bodies
    section('truncated bodies')
    full = json.dumps(dict(NORMAL_CHAT, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}))
    for cut in range(1, len(full), max(1, len(full) // 24)):
        st, resp = post("/v1/chat/completions", full[:cut])
        expect_4xx("truncated body at %d" % cut, st, resp)
    still_serving("truncated bodies")
    # a Content-Length larger than what is sent, then the client goes away
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"messages\":")
    s.close()
    still_serving("body shorter than its Content-Length")

    # ------------------------------------------------ content types
    section('content types')
    for ct, body in [("application/x-www-form-urlencoded", "messages=hi&max_tokens=4"),
                     ("multipart/form-data; boundary=xx", "--xx\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--xx--\r\n"),
                     ("text/plain", "hello"), ("application/octet-stream", "\x00\x01\x02"),
                     ("application/json; charset=utf-16", '{"m'),
                     ("application/xml", "<messages/>")]:
        case("content type %s" % ct, "/v1/chat/completions", body, content_type=ct)
    st, resp = raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n"
                   b"Connection: close\r\n\r\n0123456789")
    expect_4xx("gzip content encoding with garbage", st, resp)
    still_serving("gzip content encoding")

    # -------------------------------------------- 100 MB bodies
    section('100 MB bodies')
    hundred = 100 << 20
    st, resp = raw(("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: %d\r\nConnection: close\r\n\r\n" % hundred).encode(),
                   body_chunks=(b"[" * (1 << 20) for _ in range(100)), timeout=60)
    check(st == 413 or st is None, "100 MB body with a length: 413 or closed (%s %r)" % (st, resp[:120]))
    still_serving("100 MB body")

    def chunked_body():
        for _ in range(100):
            yield b"100000\r\n" + b"[" * (1 << 20) + b"\r\n"
        yield b"0\r\n\r\n"
    st, resp = raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n", body_chunks=chunked_body(), timeout=60)
    check(st == 413 or st is None, "100 MB chunked body: 413 or closed (%s %r)" % (st, resp[:120]))
    still_serving("100 MB chunked body")
    st, resp = raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999999999999999\r\n"
                   b"Connection: close\r\n\r\n{}")
    check(st is None or 400 <= st < 500, "absurd Content-Length: 4xx or closed (%s)" % st)
    still_serving("absurd Content-Length")

    # ------------------------------------------------------ header floods
    section('header floods')
    flood = b"".join(b"X-Flood-%d: %s\r\n" % (i, b"v" * 40) for i in range(200000))  # ~10 MB of headers
    st, resp = raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n", body_chunks=[flood, b"\r\n"], timeout=60)
    check(st is None or 400 <= st < 500, "200000 header lines: 4xx or closed (%s)" % st)
    still_serving("header flood")
    st, resp = raw(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"a" * 100000 + b"\r\n\r\n", timeout=30)
    check(st is None or 400 <= st < 500, "a 100 KB header line: 4xx or closed (%s)" % st)
    still_serving("long header line")

    # ------------------------------------------------------ slow bodies
    section('slow bodies')
    body = json.dumps(NORMAL_CHAT).encode()
    st, resp = raw(("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)).encode(),
                   body_chunks=(body[i:i + 1] for i in range(len(body))), delay=0.02, timeout=60)
    check(st == 200, "a body sent a byte every 20 ms is served (%s)" % st)
    slow = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{")
        slow.append(s)
    t0 = time.time()
    still_serving("20 clients stalled mid-body")
    check(time.time() - t0 < 10, "a normal request is served beside 20 stalled bodies (%.1f s)" % (time.time() - t0))
    for s in slow:
        s.close()

    # ------------------------------------------------------------ RSS
    section('RSS')
    for _ in range(3):
        still_serving("cool-down")
    time.sleep(1)
    end_rss = rss_kb()
    check(end_rss <= warm_rss * 1.10, "RSS after the suite %d KiB within 10%% of the warm %d KiB" % (end_rss, warm_rss))
    print("RSS: warm %d KiB, after the suite %d KiB (%+.1f%%)" % (warm_rss, end_rss, 100.0 * (end_rss - warm_rss) / warm_rss))
finally:
    stop_server()

if failures:
    print("\n%d FAILED:" % len(failures))
    for f in failures[:80]:
        print("  " + f)
    sys.exit(1)
print("all hostile cases answered 4xx, the server kept serving (%d requests)" % sent[0])
