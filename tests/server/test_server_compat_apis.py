#!/usr/bin/env python3
"""OpenAI's Responses API and Anthropic's Messages API on llm-server, through
their official Python clients (openai, anthropic from PyPI).

  test_server_compat_apis.py LLM_SERVER REPO_DIR

SmolLM2 (greedy: --temp 0) when fetched, else the bundled stories260K: each
API's text equals the chat completion of the same conversation, streamed and
not; a tool call round trip (the call, its result sent back); a JSON Schema
output that validates (jsonschema); the length limit (incomplete /
max_tokens); and the requests these servers refuse are 400s. Skips (exit 0)
when a client package is missing.
"""
import json
import os
import sys
import urllib.request

import server_proc

try:
    import anthropic
    import jsonschema
    import openai
except ImportError as e:
    print("skipped: %s" % e)
    sys.exit(0)

server_bin, repo = sys.argv[1:3]
model = os.path.join(repo, "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf")
smol = os.path.isfile(model)
if not smol:
    model = os.path.join(repo, "models/stories260K-f32.gguf")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


QUESTION = "What is the capital of France?"
TOOL_PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

proc, port, _ = server_proc.start(server_bin, ["-m", model, "-t", "2", "-np", "4", "-c", "1024", "--temp", "0"])
try:
    oa = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="none")
    an = anthropic.Anthropic(base_url="http://127.0.0.1:%d" % port, api_key="none")
    chat = oa.chat.completions.create(model="m", messages=[{"role": "system", "content": "Be brief."},
                                                           {"role": "user", "content": QUESTION}], max_tokens=40)
    expected = chat.choices[0].message.content

    # ---- Responses API
    r = oa.responses.create(model="m", instructions="Be brief.", input=QUESTION, max_output_tokens=40)
    check(r.output_text == expected and r.usage.input_tokens == chat.usage.prompt_tokens and
          r.usage.output_tokens == chat.usage.completion_tokens, "responses: the chat completion's text and usage")
    check(r.status == ("completed" if chat.choices[0].finish_reason == "stop" else "incomplete"), "responses: status %s" % r.status)
    events = list(oa.responses.create(model="m", instructions="Be brief.", input=QUESTION, max_output_tokens=40, stream=True))
    types = [e.type for e in events]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    check(text == expected and types[:2] == ["response.created", "response.in_progress"] and
          types[-1] in ("response.completed", "response.incomplete") and
          [e.sequence_number for e in events] == list(range(len(events))), "responses stream: deltas join to the text, events in order")
    r = oa.responses.create(model="m", input=[{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}],
                            max_output_tokens=3)
    check(r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens", "responses: max_output_tokens")
    tools = [{"type": "function", "name": "get_weather", "description": "Current weather in a city", "parameters": TOOL_PARAMS}]
    r = oa.responses.create(model="m", input="What is the weather in Paris?", tools=tools, tool_choice="required")
    calls = [o for o in r.output if o.type == "function_call"]
    check(len(calls) >= 1 and calls[0].name == "get_weather" and "city" in json.loads(calls[0].arguments),
          "responses: a required function call")
    if calls:
        follow = oa.responses.create(model="m", tools=tools, max_output_tokens=30, input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"type": "function_call", "call_id": calls[0].call_id, "name": calls[0].name, "arguments": calls[0].arguments},
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 21 C"}])
        check(follow.status in ("completed", "incomplete") and len(follow.output) >= 1, "responses: the call's output sent back")
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}, "country": {"type": "string", "maxLength": 30}},
              "required": ["city", "country"], "additionalProperties": False}
    r = oa.responses.create(model="m", input="Name a city and its country as JSON.", max_output_tokens=200,
                            text={"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}})
    try:
        jsonschema.validate(json.loads(r.output_text), schema)
        check(True, "responses: text.format json_schema validates")
    except Exception as e:
        check(False, "responses: text.format json_schema validates (%s)" % e)
    for kwargs, what in [(dict(input="hi", previous_response_id="resp_x"), "previous_response_id"),
                         (dict(input=[{"type": "input_image", "image_url": "x"}]), "an image item"),
                         (dict(input="hi", tools=[{"type": "web_search"}]), "a built-in tool")]:
        try:
            oa.responses.create(model="m", **kwargs)
            check(False, "responses: %s refused" % what)
        except openai.BadRequestError as e:
            check(e.status_code == 400, "responses: %s refused (400)" % what)

    # ---- Messages API
    m = an.messages.create(model="m", max_tokens=40, system="Be brief.", messages=[{"role": "user", "content": QUESTION}])
    check(m.content[0].text == expected and m.usage.input_tokens == chat.usage.prompt_tokens and
          m.stop_reason == ("end_turn" if chat.choices[0].finish_reason == "stop" else "max_tokens"),
          "messages: the chat completion's text, usage and stop reason")
    with an.messages.stream(model="m", max_tokens=40, system="Be brief.", messages=[{"role": "user", "content": QUESTION}]) as st:
        streamed = "".join(st.text_stream)
        final = st.get_final_message()
    check(streamed == expected and final.content[0].text == expected, "messages stream: text deltas join to the text")
    check(final.usage.input_tokens == chat.usage.prompt_tokens, "messages stream: input_tokens (%d)" % final.usage.input_tokens)
    raw = urllib.request.urlopen(urllib.request.Request(
        "http://127.0.0.1:%d/v1/messages" % port, headers={"Content-Type": "application/json"},
        data=json.dumps({"model": "m", "max_tokens": 4, "stream": True, "system": "Be brief.",
                         "messages": [{"role": "user", "content": QUESTION}]}).encode()), timeout=120).read().decode()
    start = json.loads(raw.split("data: ", 1)[1].split("\n", 1)[0])
    check(start["type"] == "message_start" and start["message"]["usage"]["input_tokens"] == chat.usage.prompt_tokens,
          "messages stream: message_start tells the prompt's length (%s)" % start["message"]["usage"])
    m = an.messages.create(model="m", max_tokens=3, messages=[{"role": "user", "content": QUESTION}])
    check(m.stop_reason == "max_tokens", "messages: max_tokens stop reason")
    counted = an.messages.count_tokens(model="m", system="Be brief.", messages=[{"role": "user", "content": QUESTION}])
    check(counted.input_tokens == chat.usage.prompt_tokens,
          "messages.count_tokens: the prompt a request computes (%d vs %d)" % (counted.input_tokens, chat.usage.prompt_tokens))
    atools = [{"name": "get_weather", "description": "Current weather in a city", "input_schema": TOOL_PARAMS}]
    with_tools = an.messages.count_tokens(model="m", tools=atools, messages=[{"role": "user", "content": QUESTION}])
    check(with_tools.input_tokens > counted.input_tokens - 10, "messages.count_tokens with tools: %d" % with_tools.input_tokens)
    m = an.messages.create(model="m", max_tokens=100, tools=atools, tool_choice={"type": "any"},
                           messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    uses = [b for b in m.content if b.type == "tool_use"]
    check(m.stop_reason == "tool_use" and uses and uses[0].name == "get_weather" and "city" in uses[0].input,
          "messages: a tool_use block")
    if uses:
        m2 = an.messages.create(model="m", max_tokens=30, tools=atools, messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [u.model_dump(exclude_none=True) for u in m.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny, 21 C"}]}])
        check(m2.stop_reason in ("end_turn", "max_tokens", "tool_use") and m2.content, "messages: the tool_result sent back")
    with an.messages.stream(model="m", max_tokens=100, tools=atools, tool_choice={"type": "tool", "name": "get_weather"},
                            messages=[{"role": "user", "content": "Weather in Rome?"}]) as st:
        final = st.get_final_message()
    check(final.stop_reason == "tool_use" and final.content[-1].type == "tool_use" and "city" in final.content[-1].input,
          "messages stream: a tool_use block with its input")
    for kwargs, what in [(dict(messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}], max_tokens=5), "an image block"),
                         (dict(messages=[{"role": "user", "content": "hi"}], max_tokens=5, thinking={"type": "sometimes"}), "a thinking type it does not know")]:
        try:
            an.messages.create(model="m", **kwargs)
            check(False, "messages: %s refused" % what)
        except anthropic.BadRequestError as e:
            check(e.status_code == 400, "messages: %s refused (400)" % what)
    # Thinking on request (issue 32): the model's own, split out as thinking
    # blocks where its template thinks (SmolLM2's does not: text only).
    m = an.messages.create(model="m", max_tokens=5, thinking={"type": "enabled", "budget_tokens": 1024},
                           messages=[{"role": "user", "content": "hi"}])
    check(m.content and all(b.type == "text" for b in m.content), "messages: thinking enabled is served")
finally:
    server_proc.stop(proc)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
