#!/usr/bin/env python3
"""llm-server's function calling and structured output, through the official
`openai` client (and raw HTTP for the error shapes).

  test_server_tools.py LLM_SERVER REPO_DIR

Starts the server with SmolLM2-135M-Instruct and checks:
- bad tools / tool_choice / parallel_tool_calls / response_format /
  regex / grammar / choice values get OpenAI-shaped 400s naming the param;
- tool_choice "none" answers with content; "auto" describes the tools in
  the prompt (more prompt tokens) and answers with content or valid calls;
- a multi-turn exchange (an assistant's tool_calls, then a role "tool"
  result) renders through the chat template and is answered, streamed too;
- forced calls (tool_choice "required" and a named function), streaming and
  not, return tool_calls whose arguments parse and validate (PyPI jsonschema)
  against the function's parameters, finish_reason "tool_calls", and streamed
  deltas that reassemble (index, id, name, argument pieces) to the same call;
  response_format json_schema / json_object, choice and regex outputs match.
  Invalid schemas / regexes / grammars are 400s naming the param.
Exits 77 (skipped) without the model, openai or jsonschema.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

server_bin, repo = sys.argv[1:3]
MODEL = os.path.join(repo, "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.isfile(MODEL):
    print("SKIP: %s is absent (scripts/fetch-models.sh fetches it)" % MODEL)
    sys.exit(77)
try:
    import jsonschema
    import openai
except ImportError as e:
    print("SKIP: %s (python3 -m pip install openai jsonschema)" % e)
    sys.exit(77)

NAME = "SmolLM2-135M-Instruct.Q4_1"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


proc = subprocess.Popen([server_bin, "-m", MODEL, "--port", "0", "-t", "2", "--max-seqs", "8", "-c", "2048"],
                        stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
port_line = [None]
reader = threading.Thread(target=lambda: port_line.__setitem__(0, proc.stdout.readline()), daemon=True)
reader.start()
reader.join(120)
line = port_line[0] or ""
if "listening on http://127.0.0.1:" not in line:
    proc.kill()
    sys.exit("server did not start: %r" % line)
base = "http://127.0.0.1:%d" % int(line.split("http://127.0.0.1:")[1].split()[0])
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)


def http(body):
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather forecast for a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "add", "description": "Adds two integers", "parameters": ADD}},
]
SCHEMAS = {"get_weather": WEATHER, "add": ADD}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def base_body(**kw):
    b = {"model": NAME, "messages": USER, "max_tokens": 16, "temperature": 0}
    b.update(kw)
    return b


def expect_400(body, param, what):
    status, got = http(body)
    err = got.get("error", {}) if isinstance(got, dict) else {}
    check(status == 400 and err.get("param") == param and err.get("type") == "invalid_request_error"
          and err.get("message"), "%s: 400 with param %s (got %d %s)" % (what, param, status, got))


def valid_call(call, allowed):
    """Arguments parse as JSON and validate against the named tool's schema."""
    name = call.function.name
    if name not in allowed:
        return "unknown tool %r" % name
    try:
        args = json.loads(call.function.arguments)
        jsonschema.validate(args, SCHEMAS[name])
    except (ValueError, jsonschema.ValidationError) as e:
        return "%s(%s): %s" % (name, call.function.arguments, str(e).splitlines()[0])
    if not call.id or call.type != "function":
        return "no id / type"
    return None


def stream_calls(**kw):
    """Reassembles streamed tool_call deltas as OpenAI clients do."""
    calls, content, finish = {}, "", None
    for chunk in client.chat.completions.create(model=NAME, stream=True, **kw):
        for c in chunk.choices:
            content += c.delta.content or ""
            finish = c.finish_reason or finish
            for d in c.delta.tool_calls or []:
                cur = calls.setdefault(d.index, {"id": None, "name": None, "arguments": ""})
                if d.id:
                    check(cur["id"] is None, "a call's id comes once")
                    cur["id"] = d.id
                if d.function and d.function.name:
                    cur["name"] = d.function.name
                if d.function and d.function.arguments:
                    cur["arguments"] += d.function.arguments
    return calls, content, finish


try:
    # ------------------------------------------------------------ validation
    expect_400(base_body(tools={"a": 1}), "tools", "tools not a list")
    expect_400(base_body(tools=[{"type": "retrieval"}]), "tools[0]", "a tool that is not a function")
    expect_400(base_body(tools=[{"type": "function", "function": {"name": "bad name!"}}]), "tools[0].function.name",
               "a bad function name")
    expect_400(base_body(tools=[{"type": "function", "function": {"name": "f", "parameters": []}}]),
               "tools[0].function.parameters", "parameters not a schema object")
    expect_400(base_body(tools=TOOLS + TOOLS[:1]), "tools[2].function.name", "two tools of one name")
    expect_400(base_body(tool_choice="auto"), "tool_choice", "tool_choice without tools")
    expect_400(base_body(tools=TOOLS, tool_choice="always"), "tool_choice", "an unknown tool_choice")
    expect_400(base_body(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice",
               "tool_choice naming an unknown function")
    expect_400(base_body(tools=TOOLS, parallel_tool_calls="yes"), "parallel_tool_calls", "parallel_tool_calls not bool")
    expect_400(base_body(response_format={"type": "xml"}), "response_format.type", "an unknown response_format")
    expect_400(base_body(response_format={"type": "json_schema"}), "response_format.json_schema",
               "json_schema without its object")
    expect_400(base_body(response_format={"type": "json_schema", "json_schema": {"name": "x", "strict": 1}}),
               "response_format.json_schema.strict", "strict not a boolean")
    expect_400(base_body(whitespace_flexible="yes"), "whitespace_flexible", "whitespace_flexible not a boolean")
    expect_400(base_body(regex=""), "regex", "an empty regex")
    expect_400(base_body(grammar=3), "grammar", "a grammar that is not a string")
    expect_400(base_body(choice=[]), "choice", "an empty choice list")
    expect_400(base_body(choice=["a", 1]), "choice", "a choice that is not a string")
    expect_400(base_body(regex="[0-9]+", response_format={"type": "json_object"}), "regex", "two constraints")
    expect_400(base_body(tools=TOOLS, tool_choice="required", response_format={"type": "json_object"}), "tool_choice",
               "a forced call with response_format")
    expect_400(base_body(messages=USER + [{"role": "assistant", "tool_calls": [{"type": "function"}]}]),
               "messages[1].tool_calls", "a malformed earlier tool call")

    # ------------------------------------------------------------ none / auto
    plain = client.chat.completions.create(model=NAME, messages=USER, max_tokens=16, temperature=0)
    none = client.chat.completions.create(model=NAME, messages=USER, tools=TOOLS, tool_choice="none", max_tokens=16,
                                          temperature=0)
    check(none.choices[0].message.tool_calls is None and none.choices[0].message.content == plain.choices[0].message.content
          and none.usage.prompt_tokens == plain.usage.prompt_tokens,
          "tool_choice none: the plain answer, the plain prompt (%d tokens)" % none.usage.prompt_tokens)
    auto = client.chat.completions.create(model=NAME, messages=USER, tools=TOOLS, max_tokens=60, temperature=0)
    msg = auto.choices[0].message
    check(auto.usage.prompt_tokens > plain.usage.prompt_tokens + 50,
          "tool_choice auto: the tools are in the prompt (%d tokens, %d without)"
          % (auto.usage.prompt_tokens, plain.usage.prompt_tokens))
    if msg.tool_calls:
        problems = [valid_call(c, SCHEMAS) for c in msg.tool_calls]
        check(auto.choices[0].finish_reason == "tool_calls" and not any(problems),
              "auto: the model called %s: %s" % ([c.function.name for c in msg.tool_calls], problems))
    else:
        check(isinstance(msg.content, str) and auto.choices[0].finish_reason in ("stop", "length"),
              "auto: the model answered in text (%r)" % (msg.content or "")[:60])

    # ------------------------------------------------------------ multi-turn with a tool result
    turns = USER + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "unit": "celsius"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temperature": 21, "sky": "sunny"})},
    ]
    followup = client.chat.completions.create(model=NAME, messages=turns, tools=TOOLS, tool_choice="none",
                                              max_tokens=24, temperature=0)
    check(followup.usage.prompt_tokens > none.usage.prompt_tokens + 20 and followup.choices[0].message.content,
          "a role 'tool' result after an assistant's tool_calls renders (%d prompt tokens) and is answered: %r"
          % (followup.usage.prompt_tokens, followup.choices[0].message.content[:60]))
    text = ""
    for chunk in client.chat.completions.create(model=NAME, messages=turns, tools=TOOLS, tool_choice="none",
                                                max_tokens=24, temperature=0, stream=True):
        for c in chunk.choices:
            text += c.delta.content or ""
    check(text == followup.choices[0].message.content, "... and streamed, the same answer")

    # ------------------------------------------------------------ auto: a call the model writes itself
    # After one call and its result, SmolLM2 (greedy) answers "And in Berlin?"
    # with a call in the JSON form the prompt teaches: tool_calls without any
    # constraint, parsed from the text (llm_chat_parse_tool_calls).
    again = turns + [{"role": "user", "content": "And in Berlin?"}]
    r = client.chat.completions.create(model=NAME, messages=again, tools=TOOLS, max_tokens=60, temperature=0)
    calls = r.choices[0].message.tool_calls or []
    problems = [valid_call(c, SCHEMAS) for c in calls]
    check(r.choices[0].finish_reason == "tool_calls" and len(calls) == 1 and not any(problems)
          and r.choices[0].message.content is None,
          "auto, second turn: tool_calls %s %s (content %r)"
          % ([(c.function.name, c.function.arguments) for c in calls], problems, r.choices[0].message.content))
    streamed, content, finish = stream_calls(messages=again, tools=TOOLS, max_tokens=60, temperature=0)
    got = [(streamed[i]["name"], streamed[i]["arguments"]) for i in sorted(streamed)]
    want = [(c.function.name, c.function.arguments) for c in calls]
    check(finish == "tool_calls" and got == want and content == "" and all(streamed[i]["id"] for i in streamed),
          "auto, second turn, streamed: the deltas reassemble to %s" % got)
    r = client.chat.completions.create(model=NAME, messages=again, tools=TOOLS, max_tokens=60, temperature=0,
                                       tool_choice="auto", parallel_tool_calls=False)
    check(len(r.choices[0].message.tool_calls or []) <= 1, "parallel_tool_calls false: at most one call")

    # ------------------------------------------------------------ constrained: forced calls, response_format
    status, probe = http(base_body(response_format={"type": "json_object"}))
    check(status == 200, "the engine accepts constraints (%d %s)" % (status, probe.get("error")))
    expect_400(base_body(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}),
               "response_format", "an invalid schema, refused at submit")
    expect_400(base_body(regex="(unclosed"), "regex", "an invalid regex")
    expect_400(base_body(grammar="root ::= missing"), "grammar", "a grammar with an undefined rule")
    for choice, allowed in [("required", ["get_weather", "add"]),
                            ({"type": "function", "function": {"name": "add"}}, ["add"])]:
        for temperature in (0, 1.0):
            r = client.chat.completions.create(model=NAME, messages=USER, tools=TOOLS, tool_choice=choice,
                                               max_tokens=200, temperature=temperature, seed=7)
            calls = r.choices[0].message.tool_calls or []
            problems = [valid_call(c, allowed) for c in calls]
            check(r.choices[0].finish_reason == "tool_calls" and len(calls) >= 1 and not any(problems),
                  "tool_choice %s, temperature %g: %s %s" % (choice, temperature,
                                                             [(c.function.name, c.function.arguments) for c in calls],
                                                             problems))
        calls, content, finish = stream_calls(messages=USER, tools=TOOLS, tool_choice=choice, max_tokens=200,
                                              temperature=0)
        once = client.chat.completions.create(model=NAME, messages=USER, tools=TOOLS, tool_choice=choice,
                                              max_tokens=200, temperature=0).choices[0].message.tool_calls
        got = [(calls[i]["name"], calls[i]["arguments"]) for i in sorted(calls)]
        want = [(c.function.name, c.function.arguments) for c in once or []]
        check(finish == "tool_calls" and got == want and all(calls[i]["id"] for i in calls),
              "tool_choice %s streamed: deltas reassemble to %s (not streamed: %s)" % (choice, got, want))

    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 150}},
              "required": ["name", "age"], "additionalProperties": False}
    for temperature in (0, 1.0):
        r = client.chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": "Describe a person as JSON."}], max_tokens=200,
            temperature=temperature, seed=3,
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema,
                                                                    "strict": True}})
        try:
            jsonschema.validate(json.loads(r.choices[0].message.content), schema)
            ok = r.choices[0].finish_reason == "stop"
        except (ValueError, jsonschema.ValidationError) as e:
            ok = False
        check(ok, "response_format json_schema, temperature %g: %r" % (temperature, r.choices[0].message.content))
    # Any JSON object lets a small model nest without end (greedy SmolLM2
    # nests "clouds" in "clouds" on the weather question): ask for a flat one.
    r = client.chat.completions.create(
        model=NAME, max_tokens=200, temperature=0, response_format={"type": "json_object"},
        messages=[{"role": "user", "content": "Give the weather in Paris as a JSON object with the keys city and "
                                              "temperature."}])
    try:
        ok = isinstance(json.loads(r.choices[0].message.content), dict) and r.choices[0].finish_reason == "stop"
    except ValueError:
        ok = False
    check(ok, "response_format json_object: %r" % r.choices[0].message.content)
    # The layout: bounded by default (no tabs, no blank lines, at most 4
    # spaces of indentation per level), free with whitespace_flexible.
    for flexible in (False, True):
        r = client.chat.completions.create(
            model=NAME, max_tokens=120, temperature=1.0, seed=3, response_format={"type": "json_object"},
            extra_body={"whitespace_flexible": flexible},
            messages=[{"role": "user", "content": "Give the weather in Paris as an indented JSON object."}])
        text = r.choices[0].message.content or ""
        runs = re.findall(r'"(?:[^"\\]|\\.)*"|([ \t\r\n]+)', text)
        bounded = all(run in ("", " ") or re.fullmatch(r"\n {0,40}", run) for run in runs)
        check(flexible or bounded, "whitespace_flexible=%s: %r" % (flexible, text))
    r = client.chat.completions.create(model=NAME, messages=USER, max_tokens=20, temperature=0,
                                       extra_body={"choice": ["sunny", "rainy", "cloudy"]})
    check(r.choices[0].message.content in ("sunny", "rainy", "cloudy"), "choice: %r" % r.choices[0].message.content)
    r = client.chat.completions.create(model=NAME, messages=USER, max_tokens=20, temperature=0,
                                       extra_body={"regex": "[0-9]{1,2} degrees"})
    check(re.fullmatch("[0-9]{1,2} degrees", r.choices[0].message.content or "") is not None,
          "regex: %r" % r.choices[0].message.content)

    # ------------------------------------------------------------ a template that knows tools (Qwen3's)
    # The template renders the tools, the earlier calls and the results
    # itself (llm_chat_apply_template_json); replies are parsed in any format.
    proc2 = subprocess.Popen([server_bin, "-m", MODEL, "--port", "0", "-t", "2", "-c", "2048", "--chat-template",
                              os.path.join(repo, "tests/data/chat/templates/qwen3.jinja")],
                             stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    try:
        line2 = proc2.stdout.readline()
        base2 = "http://127.0.0.1:%d" % int(line2.split("http://127.0.0.1:")[1].split()[0])
        client2 = openai.OpenAI(base_url=base2 + "/v1", api_key="unused", max_retries=0, timeout=300)
        plain2 = client2.chat.completions.create(model=NAME, messages=USER, max_tokens=8, temperature=0)
        tools2 = client2.chat.completions.create(model=NAME, messages=USER, tools=TOOLS, max_tokens=60, temperature=0)
        # Qwen3's tool block: its instructions, <tools>, one JSON line per tool.
        check(tools2.usage.prompt_tokens > plain2.usage.prompt_tokens + 150,
              "qwen3 template: the tools are rendered by the template (%d prompt tokens, %d without)"
              % (tools2.usage.prompt_tokens, plain2.usage.prompt_tokens))
        calls2 = tools2.choices[0].message.tool_calls or []
        check(all(valid_call(c, SCHEMAS) is None for c in calls2),
              "qwen3 template, auto: %s" % ([(c.function.name, c.function.arguments) for c in calls2]
                                            or repr(tools2.choices[0].message.content)[:60]))
        hist = client2.chat.completions.create(model=NAME, messages=turns, tools=TOOLS, max_tokens=8, temperature=0)
        check(hist.usage.prompt_tokens > tools2.usage.prompt_tokens + 30,
              "qwen3 template: an earlier call and its result render (%d prompt tokens)" % hist.usage.prompt_tokens)
    finally:
        proc2.send_signal(signal.SIGTERM)
        proc2.wait(30)
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
