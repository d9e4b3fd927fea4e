#!/usr/bin/env python3
"""Reference renderings of conversations with tools, made with Python's jinja2.

tests/test_chat_tools.cpp checks that llmrt renders each case byte for byte
as jinja2 does, through ChatTemplate::ApplyJson and llm_chat_apply_template_json:
the template sees `tools` (a list of function definitions), assistant turns
with `tool_calls` (arguments as objects, as transformers passes them, or as
JSON strings, as OpenAI clients send them) and `role: tool` results with
`tool_call_id` / `name`, and content that is null.

The environment and the models' special tokens are those of
tools/chat_reference.py (transformers' apply_chat_template), except that
`tools` is the list given here.

Usage:
  pip install jinja2
  python3 tools/chat_tools_reference.py      # writes tests/data/chat/tools.json
"""
import json
import os
import sys

import jinja2
from jinja2.exceptions import TemplateError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_reference import MODELS, OUT_DIR, TEMPLATE_DIR, make_env  # noqa: E402

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather forecast for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Zürich"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Adds two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                       "required": ["a", "b"]}}},
]


def call(id_, name, arguments):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATIONS = [
    ("tools_user", TOOLS, [{"role": "user", "content": "What's the weather in Paris?"}]),
    ("tools_system_user", TOOLS, [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Oslo for 3 days?"},
    ]),
    ("call_and_result", TOOLS, [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [call("call_1", "get_weather", {"city": "Paris", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
         "content": "{\"temperature\": 21, \"sky\": \"sunny\"}"},
    ]),
    ("two_calls_two_results", TOOLS, [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "Add 2 and 3, and get Berlin's weather."},
        {"role": "assistant", "content": "Doing both.",
         "tool_calls": [call("c1", "add", {"a": 2, "b": 3}), call("c2", "get_weather", {"city": "Berlin", "days": 2})]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
        {"role": "tool", "tool_call_id": "c2", "content": "{\"temperature\": 12.5}"},
        {"role": "assistant", "content": "2 + 3 = 5; Berlin: 12.5 degrees."},
        {"role": "user", "content": "Thanks!"},
    ]),
    ("string_arguments", TOOLS, [
        {"role": "user", "content": "Add 1.5 and 2"},
        {"role": "assistant", "content": "", "tool_calls": [call("x", "add", "{\"a\": 1.5, \"b\": 2}")]},
        {"role": "tool", "tool_call_id": "x", "content": "3.5"},
    ]),
    ("tool_messages_without_tools", None, [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call("w", "get_weather", {"city": "Rome"})]},
        {"role": "tool", "tool_call_id": "w", "content": "hot"},
    ]),
    ("empty_tools", [], [{"role": "user", "content": "Hi"}]),
]


def main():
    env = make_env()
    cases = []
    for model, special in MODELS.items():
        with open(os.path.join(TEMPLATE_DIR, model + ".jinja"), encoding="utf-8", newline="") as f:
            text = f.read()
        template = env.from_string(text)
        kwargs = {k: v for k, v in special.items() if v is not None}
        for name, tools, messages in CONVERSATIONS:
            for agp in (False, True):
                case = {"model": model, "name": name, "add_generation_prompt": agp, "messages": messages,
                        "tools": tools}
                try:
                    case["expected"] = template.render(messages=messages, tools=tools, documents=None,
                                                       add_generation_prompt=agp, **kwargs)
                except TemplateError as e:
                    case["error"] = str(e)
                except (TypeError, ValueError) as e:  # Python errors in the template (a None used as a string)
                    case["error"] = "%s: %s" % (type(e).__name__, e)
                cases.append(case)
    doc = {"command": "python3 tools/chat_tools_reference.py",
           "generator": "jinja2 " + jinja2.__version__ + ", Python " + sys.version.split()[0],
           "models": {m: {"template_file": "tests/data/chat/templates/" + m + ".jinja", **s} for m, s in MODELS.items()},
           "cases": cases}
    with open(os.path.join(OUT_DIR, "tools.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("tools: %d cases (%d errors)" % (len(cases), sum(1 for c in cases if "error" in c)))


if __name__ == "__main__":
    main()
