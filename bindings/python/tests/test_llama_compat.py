"""The llama-cpp-python-shaped class runs the calls of llama-cpp-python's own
documentation (README: "High-level API", chat completion, JSON mode, JSON
Schema mode, function calling) and returns the same shapes."""
import json

import jsonschema
import pytest

from llmrt.llama_compat import Llama, LlamaGrammar

from conftest import SMOLLM2


@pytest.fixture(scope="module")
def llm():
    if not SMOLLM2.is_file():
        pytest.skip("SmolLM2 not fetched")
    with Llama(model_path=str(SMOLLM2), n_ctx=2048, n_threads=2, seed=1337) as m:
        yield m


def test_high_level_completion(llm):
    output = llm("Q: Name the planets in the solar system? A: ", max_tokens=32, stop=["Q:", "\n"], echo=True)
    assert output["object"] == "text_completion" and output["id"].startswith("cmpl-")
    choice = output["choices"][0]
    assert choice["text"].startswith("Q: Name the planets in the solar system? A: ")
    assert "\n" not in choice["text"] and choice["finish_reason"] in ("stop", "length")
    u = output["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and u["completion_tokens"] <= 32


def test_streamed_completion_joins_to_the_whole(llm):
    whole = llm.create_completion("The capital of France is", max_tokens=16, temperature=0)
    pieces = list(llm.create_completion("The capital of France is", max_tokens=16, temperature=0, stream=True))
    assert "".join(p["choices"][0]["text"] for p in pieces) == whole["choices"][0]["text"]
    assert pieces[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_completion_logprobs(llm):
    out = llm.create_completion("The capital of France is", max_tokens=4, temperature=0, logprobs=2)
    lp = out["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == 4 and all(len(t) <= 2 for t in lp["top_logprobs"])
    assert "".join(lp["tokens"]) == out["choices"][0]["text"]


def test_chat_completion(llm):
    out = llm.create_chat_completion(messages=[
        {"role": "system", "content": "You are an assistant who perfectly describes images."},
        {"role": "user", "content": "Describe this image in detail please."}], max_tokens=32)
    msg = out["choices"][0]["message"]
    assert out["object"] == "chat.completion" and msg["role"] == "assistant" and msg["content"]


def test_json_mode(llm):
    out = llm.create_chat_completion(messages=[
        {"role": "system", "content": "You are a helpful assistant that outputs in JSON."},
        {"role": "user", "content": "Who won the world series in 2020"}],
        response_format={"type": "json_object"}, temperature=0.7, max_tokens=200)
    assert isinstance(json.loads(out["choices"][0]["message"]["content"]), dict)


def test_json_schema_mode(llm):
    schema = {"type": "object", "properties": {"team_name": {"type": "string"}}, "required": ["team_name"]}
    out = llm.create_chat_completion(messages=[
        {"role": "system", "content": "You are a helpful assistant that outputs in JSON."},
        {"role": "user", "content": "Who won the world series in 2020"}],
        response_format={"type": "json_object", "schema": schema}, temperature=0.7, max_tokens=200)
    jsonschema.validate(json.loads(out["choices"][0]["message"]["content"]), schema)
    g = LlamaGrammar.from_json_schema(json.dumps(schema))
    out = llm.create_completion("A team as JSON: ", grammar=g, max_tokens=100)
    jsonschema.validate(json.loads(out["choices"][0]["text"]), schema)


def test_function_calling(llm):
    out = llm.create_chat_completion(
        messages=[{"role": "system", "content": "A chat between a curious user and an artificial intelligence "
                                                "assistant. The assistant gives helpful, detailed, and polite "
                                                "answers to the user's questions. The assistant calls functions "
                                                "with appropriate input when necessary"},
                  {"role": "user", "content": "Extract Jason is 25 years old"}],
        tools=[{"type": "function", "function": {"name": "UserDetail", "parameters": {
            "type": "object", "title": "UserDetail",
            "properties": {"name": {"title": "Name", "type": "string"}, "age": {"title": "Age", "type": "integer"}},
            "required": ["name", "age"]}}}],
        tool_choice={"type": "function", "function": {"name": "UserDetail"}}, max_tokens=100)
    call = out["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "UserDetail"
    args = json.loads(call["function"]["arguments"])
    assert isinstance(args["name"], str) and isinstance(args["age"], int)


def test_streamed_chat(llm):
    chunks = list(llm.create_chat_completion(messages=[{"role": "user", "content": "Hi"}], stream=True,
                                             max_tokens=16))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_tokenize_detokenize(llm):
    ids = llm.tokenize(b"Hello, world!")
    assert llm.detokenize(ids) == b"Hello, world!"
    assert llm.n_vocab() == 49152 and llm.n_ctx() == 2048 and llm.token_eos() >= 0
