#!/usr/bin/env python3
"""llm-server's reasoning output (issue 32) through the official `openai` client.

  test_server_reasoning.py LLM_SERVER LLM_SYNTH REPO_DIR

A tiny Qwen3-shaped model (llm-synth --think-tokens: "<think>" and
"</think>" are user-defined tokens, as Qwen3's are) with Qwen3's real chat
template, and a second template that opens the thinking in the generation
prompt ("<|im_start|>assistant\\n<think>\\n", as Qwen3's Thinking-2507
templates and DeepSeek-R1's do). Checks:
- enable_thinking false (chat_template_kwargs, and --chat-template-kwargs)
  renders the template's no-thinking form: /apply-template's prompt equals
  jinja2's rendering (tests/data/chat/qwen3_no_thinking.json);
- thinking opened by the prompt comes back as message.reasoning_content, not
  content, streamed as delta.reasoning_content (the deltas add up to the
  non-streamed text); the Messages API's "thinking" block (streamed as
  thinking_delta events, through Anthropic's client when installed) and the
  Responses API's "reasoning" item; reasoning_format "none" (per request, and
  --reasoning-format none) gives the whole text as content;
- "</think>" (made certain with a logit bias: a random-weight model writes
  none of its own) ends the thinking; a regex constraint then shapes the
  answer alone, streaming and not;
- a bad reasoning_format is a 400 naming it; --reasoning-format bogus exits 2.
What this cannot show with random weights is thinking text followed by an
answer in one reply: the parser's handling of those (Qwen3 and harmony
shapes) is tested on recorded outputs in tests/test_reasoning_parser.cpp.
Exits 77 (skipped) without openai.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import server_proc

server_bin, synth_bin, repo = sys.argv[1:4]
try:
    import openai
except ImportError as e:
    print("SKIP: %s (python3 -m pip install openai)" % e)
    sys.exit(77)

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


tmp = tempfile.mkdtemp(prefix="llmrt_reasoning_")
model = os.path.join(tmp, "qwen3-think.gguf")
template = os.path.join(repo, "tests/data/chat/templates/qwen3.jinja")
subprocess.run([synth_bin, "--shape", "tiny-qwen3", "--out", model, "--type", "f32", "--seed", "7", "--std", "0.25",
                "--think-tokens", "--chat-template", template], check=True, capture_output=True, timeout=120)
with open(template, encoding="utf-8") as f:
    qwen3 = f.read()
# Qwen3 Thinking-2507's change to the template: the generation prompt opens the thinking.
opening = "{{- '<|im_start|>assistant\\n' }}"
assert qwen3.count(opening) == 1
thinking_template = os.path.join(tmp, "qwen3-thinking.jinja")
with open(thinking_template, "w", encoding="utf-8") as f:
    f.write(qwen3.replace(opening, "{{- '<|im_start|>assistant\\n<think>\\n' }}"))

MESSAGES = [{"role": "user", "content": "What is 2+2?"}]


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def token_id(base, text):
    _, r = post(base, "/tokenize", {"content": text, "parse_special": True})
    return r["tokens"][0] if len(r["tokens"]) == 1 else None


def streamed(client, **kw):
    reasoning, content, finish = "", "", None
    for chunk in client.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        reasoning += getattr(d, "reasoning_content", None) or ""
        content += d.content or ""
        finish = chunk.choices[0].finish_reason or finish
    return reasoning, content, finish


# --- the model's own (Qwen3) template: enable_thinking reaches it
proc, port, _ = server_proc.start(server_bin, ["-m", model, "-c", "512", "-t", "2"])
try:
    base = "http://127.0.0.1:%d" % port
    with open(os.path.join(repo, "tests/data/chat/qwen3_no_thinking.json"), encoding="utf-8") as f:
        ref_off = [c for c in json.load(f)["cases"] if c["name"] == "user_only" and c["add_generation_prompt"]][0]
    with open(os.path.join(repo, "tests/data/chat/qwen3.json"), encoding="utf-8") as f:
        ref_on = [c for c in json.load(f)["cases"] if c["name"] == "user_only" and c["add_generation_prompt"]][0]
    _, r = post(base, "/apply-template", {"messages": ref_off["messages"],
                                          "chat_template_kwargs": {"enable_thinking": False}})
    check(r["prompt"] == ref_off["expected"] and r["prompt"].endswith("<think>\n\n</think>\n\n"),
          "enable_thinking false renders the no-thinking form, as jinja2 does: %r" % r["prompt"][-40:])
    _, r = post(base, "/apply-template", {"messages": ref_on["messages"]})
    check(r["prompt"] == ref_on["expected"], "without it, the thinking form (as jinja2): %r" % r["prompt"][-40:])
    client = openai.OpenAI(base_url=base + "/v1", api_key="none")
    out = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=6, temperature=0,
                                         extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    check(getattr(out.choices[0].message, "reasoning_content", None) is None,
          "no thinking in the output when the prompt closed it: %r" % out.choices[0].message)
finally:
    server_proc.stop(proc)

# --- the thinking template: the output starts inside the thinking
proc, port, _ = server_proc.start(server_bin, ["-m", model, "-c", "512", "-t", "2",
                                               "--chat-template-file", thinking_template])
try:
    base = "http://127.0.0.1:%d" % port
    client = openai.OpenAI(base_url=base + "/v1", api_key="none")
    close = token_id(base, "</think>")
    check(close is not None, "</think> is one token: %r" % close)

    whole = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=10, temperature=0,
                                           extra_body={"reasoning_format": "none"})
    raw = whole.choices[0].message.content
    check(raw and "</think>" not in raw and getattr(whole.choices[0].message, "reasoning_content", None) is None,
          "reasoning_format none: the whole text is content: %r" % raw)
    out = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=10, temperature=0)
    msg = out.choices[0].message
    reasoning = getattr(msg, "reasoning_content", None)
    check(reasoning == raw.strip() and msg.content == "" and out.choices[0].finish_reason == "length",
          "the default (auto): thinking in reasoning_content, apart from content: %r / %r" % (reasoning, msg.content))
    s_reasoning, s_content, s_finish = streamed(client, model="m", messages=MESSAGES, max_tokens=10, temperature=0)
    check(s_reasoning == reasoning and s_content == "" and s_finish == "length",
          "streamed: delta.reasoning_content adds up to the same: %r" % s_reasoning)

    bias = {str(close): 100}
    rx = "[a-z]{2,6}"
    out = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=16, temperature=0, logit_bias=bias,
                                         extra_body={"regex": rx})
    msg = out.choices[0].message
    check(getattr(msg, "reasoning_content", None) is None and re.fullmatch(rx, msg.content or "") is not None
          and out.choices[0].finish_reason == "stop",
          "</think> ends the thinking; the constraint applies to the answer only: %r" % msg.content)
    s_reasoning, s_content, s_finish = streamed(client, model="m", messages=MESSAGES, max_tokens=16, temperature=0,
                                                logit_bias=bias, extra_body={"regex": rx})
    check(s_reasoning == "" and s_content == msg.content and s_finish == "stop",
          "streamed the same: %r" % s_content)
    plain = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=16, temperature=0,
                                           logit_bias=bias, extra_body={"regex": rx, "reasoning_format": "none"})
    check(re.fullmatch(rx, plain.choices[0].message.content or "") is not None,
          "reasoning_format none: the constraint covers the whole output: %r" % plain.choices[0].message.content)

    # The same thinking in the other two APIs: a Messages "thinking" block
    # first (streamed as thinking_delta events, checked by Anthropic's own
    # client when it is installed), a Responses "reasoning" item first.
    _, m = post(base, "/v1/messages", {"model": "m", "max_tokens": 10, "messages": MESSAGES, "temperature": 0})
    check(m["content"] and m["content"][0] == {"type": "thinking", "thinking": reasoning, "signature": ""},
          "messages: a thinking block: %r" % m["content"])
    try:
        import anthropic
        an = anthropic.Anthropic(base_url=base, api_key="none")
        with an.messages.stream(model="m", max_tokens=10, messages=MESSAGES, extra_body={"temperature": 0}) as st:
            pieces = [e.thinking for e in st if e.type == "thinking"]
            final = st.get_final_message()
        check("".join(pieces) == reasoning and final.content[0].type == "thinking" and
              final.content[0].thinking == reasoning, "messages stream: thinking deltas: %r" % pieces)
    except ImportError:
        print("skip the Messages stream check: no anthropic package")
    _, rr = post(base, "/v1/responses", {"model": "m", "input": "What is 2+2?", "max_output_tokens": 10,
                                         "temperature": 0})
    check(rr["output"] and rr["output"][0]["type"] == "reasoning" and
          rr["output"][0]["content"][0]["text"] == reasoning, "responses: a reasoning item: %r" % rr["output"][:1])

    code, err = post(base, "/v1/chat/completions", {"messages": MESSAGES, "reasoning_format": "bogus"})
    check(code == 400 and err["error"]["param"] == "reasoning_format", "a bad reasoning_format is a 400: %r" % err)
finally:
    server_proc.stop(proc)

# --- --reasoning-format none: the server's default for requests that set none
proc, port, _ = server_proc.start(server_bin, ["-m", model, "-c", "512", "-t", "2", "--reasoning-format", "none",
                                               "--chat-template-file", thinking_template])
try:
    client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="none")
    out = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=10, temperature=0)
    check(out.choices[0].message.content == raw and getattr(out.choices[0].message, "reasoning_content", None) is None,
          "--reasoning-format none: content as the model wrote it")
    out = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=10, temperature=0,
                                         extra_body={"reasoning_format": "deepseek"})
    check(getattr(out.choices[0].message, "reasoning_content", None) == raw.strip(), "a request's reasoning_format wins")
finally:
    server_proc.stop(proc)
p = subprocess.run([server_bin, "-m", model, "--port", "0", "--reasoning-format", "bogus"], capture_output=True,
                   text=True, timeout=60)
check(p.returncode == 2 and "--reasoning-format" in p.stderr, "--reasoning-format bogus: exit 2 (%r)" % p.stderr[:120])

if failures:
    print("\n%d FAILED" % len(failures))
    sys.exit(1)
print("reasoning output checked")
