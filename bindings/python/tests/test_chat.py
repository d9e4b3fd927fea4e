"""Chat completions: the template (SmolLM2's own; stories260K's fallback),
streaming equal to the whole reply, JSON-Schema output validated with
jsonschema, tools and tool-call parsing."""
import json

import jsonschema
import pytest

import llmrt


def test_fallback_template_without_one(ctx):
    chat = llmrt.Chat(ctx)
    assert chat.render([{"role": "user", "content": "hi"}]) == "user: hi\nassistant:"
    reply = chat.create([{"role": "user", "content": "Tell me a story"}], max_tokens=30, temperature=0)
    assert reply["object"] == "chat.completion"
    msg = reply["choices"][0]["message"]
    assert msg["role"] == "assistant" and msg["content"] and "\nuser:" not in msg["content"]


def test_template_renders_like_the_model_says(smol):
    chat = llmrt.Chat(smol)
    prompt = chat.render([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    assert prompt == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                      "<|im_start|>assistant\n")


def test_chat_template_kwargs(ctx):
    chat = llmrt.Chat(ctx, template="{{ 'nothink' if enable_thinking is defined and not enable_thinking else 'think' }}"
                                    "{% for m in messages %}|{{ m.content }}{% endfor %}")
    msgs = [{"role": "user", "content": "hi"}]
    assert chat.render(msgs) == "think|hi"
    assert chat.render(msgs, chat_template_kwargs={"enable_thinking": False}) == "nothink|hi"
    with pytest.raises(llmrt.LlmError):
        chat.render(msgs, chat_template_kwargs={"messages": []})
    reply = chat.create(msgs, max_tokens=2, temperature=0, chat_template_kwargs={"enable_thinking": False})
    assert reply["usage"]["prompt_tokens"] == len(ctx.tokenize("nothink|hi", add_special=True))


def test_chat_stream_equals_whole(smol):
    chat = llmrt.Chat(smol)
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    whole = chat.create(msgs, max_tokens=24, temperature=0)
    chunks = list(chat.create(msgs, max_tokens=24, temperature=0, stream=True))
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert whole["usage"]["completion_tokens"] <= 24


def test_json_schema_output_validates(smol):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                               "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]},
                                                        "maxItems": 3}},
              "required": ["name", "age", "tags"], "additionalProperties": False}
    chat = llmrt.Chat(smol)
    for seed in range(3):
        reply = chat.create([{"role": "user", "content": "Describe a person as JSON."}], temperature=1.0,
                            seed=seed, max_tokens=200,
                            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}})
        choice = reply["choices"][0]
        assert choice["finish_reason"] == "stop"
        jsonschema.validate(json.loads(choice["message"]["content"]), schema)


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_required_tool_call(smol):
    chat = llmrt.Chat(smol)
    reply = chat.create([{"role": "user", "content": "What is the weather in Paris?"}], tools=TOOLS,
                        tool_choice="required", temperature=0, max_tokens=100)
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    args = json.loads(call["function"]["arguments"])
    assert isinstance(args.get("city"), str)
    # the round trip: the call and its result go back into the conversation
    follow = chat.create([{"role": "user", "content": "What is the weather in Paris?"}, choice["message"],
                          {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21 C"}],
                         tools=TOOLS, tool_choice="none", max_tokens=30, temperature=0)
    assert follow["choices"][0]["message"]["content"]


def test_tool_call_parser():
    out = llmrt.parse_tool_calls('<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>')
    assert out == {"content": "", "tool_calls": [{"name": "f", "arguments": {"x": 1}}]}
    with pytest.raises(llmrt.InvalidArgumentError):
        llmrt.parse_tool_calls('<tool_call>{"name": "f", "argu')
