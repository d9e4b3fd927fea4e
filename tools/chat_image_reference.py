#!/usr/bin/env python3
"""Reference renderings of chat messages with pictures for
llm_chat_apply_template_v2 (tests/test_capi_images.cpp), by jinja2 (the
engine transformers renders chat templates with; a test-data-time tool only).

  pip install jinja2
  python3 tools/chat_image_reference.py   # -> tests/data/chat/gemma3_images.json

The template is Gemma 3's (the library's built-in copy for architecture
"gemma3", src/chat/builtin_templates.cpp, which is Google's template as the
Hugging Face tokenizer_config.json carries it). Messages reach it as
transformers hands them to a processor's template: content a list of
{"type": "text", "text": ...} and {"type": "image"} items. bos_token is the
synthesized tiny-gemma3 vocabulary's "<s>".
"""
import json
import os
import re

import jinja2

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def gemma3_template():
    src = open(os.path.join(ROOT, "src", "chat", "builtin_templates.cpp"), encoding="utf-8").read()
    return re.search(r'kGemma3 = R"jinja\((.*?)\)jinja"', src, re.S).group(1)


CASES = [
    ("one picture after text", [
        {"role": "user", "content": [{"type": "text", "text": "Describe this picture."}, {"type": "image"}]},
    ]),
    ("system turn, two pictures, a reply, a follow-up", [
        {"role": "system", "content": [{"type": "text", "text": "You are terse."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Compare with "},
                                     {"type": "image"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "The second is darker."}]},
        {"role": "user", "content": [{"type": "text", "text": "Why?"}]},
    ]),
    ("a picture alone", [
        {"role": "user", "content": [{"type": "image"}]},
    ]),
]


def main():
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(gemma3_template())
    out = []
    for name, messages in CASES:
        out.append({"name": name, "messages": messages,
                    "rendered": tmpl.render(messages=messages, add_generation_prompt=True, bos_token="<s>",
                                            eos_token="</s>")})
    path = os.path.join(ROOT, "tests", "data", "chat", "gemma3_images.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/chat_image_reference.py (jinja2 " + jinja2.__version__ + ")",
                   "cases": out}, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
