"""Generation through the Python API: greedy output token for token against
the golden references, streaming equal to the collected result, sampling
options, logprobs, n > 1, stop strings, tokenizer round trips."""
import math

import llmrt

from conftest import golden_cases


def test_greedy_matches_the_golden_tokens(ctx):
    cases = golden_cases()
    assert len(cases) >= 3
    for prompt, expected, text in cases:
        out = ctx.generate(prompt, max_tokens=len(expected), temperature=0, ignore_eos=False)
        assert out.choices[0].tokens == expected[: len(out.choices[0].tokens)]
        assert len(out.choices[0].tokens) == len(expected) or out.finish_reason == "stop"


def test_stream_pieces_join_to_the_generated_text(ctx):
    whole = ctx.generate("Once upon a time", max_tokens=48, temperature=0)
    pieces = list(ctx.stream("Once upon a time", max_tokens=48, temperature=0))
    assert "".join(pieces) == whole.text
    assert all(pieces)
    assert ctx.detokenize(whole.choices[0].tokens) == whole.text


def test_events_carry_tokens_logprobs_and_metrics(ctx):
    events = list(ctx.events("Once upon a time", max_tokens=8, temperature=0, top_logprobs=3))
    tokens = [e for e in events if e.kind == "token"]
    final = events[-1]
    assert len(tokens) == 8 and final.kind == "final" and final.finish_reason == "length"
    for e in tokens:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        # greedy: the sampled token is the most likely one
        assert e.top_logprobs[0][0] == e.token and math.isclose(e.top_logprobs[0][1], e.logprob, abs_tol=1e-5)
    assert final.metrics.generated_tokens == 8 and final.metrics.prompt_tokens == len(ctx.tokenize("Once upon a time"))


def test_seeded_sampling_repeats_and_n_sequences(ctx):
    a = ctx.generate("The dog", max_tokens=24, temperature=1.0, seed=7, n=3)
    b = ctx.generate("The dog", max_tokens=24, temperature=1.0, seed=7, n=3)
    assert [c.tokens for c in a.choices] == [c.tokens for c in b.choices]
    assert len(a.choices) == 3 and len({tuple(c.tokens) for c in a.choices}) > 1
    assert a.usage["completion_tokens"] == sum(len(c.tokens) for c in a.choices)


def test_stop_strings_and_logit_bias(ctx):
    free = ctx.generate("Once upon a time", max_tokens=40, temperature=0)
    cut = free.text.index("Lily") + len("Lily")
    stopped = ctx.generate("Once upon a time", max_tokens=40, temperature=0, stop=["Lily"])
    assert stopped.finish_reason == "stop" and stopped.text == free.text[: cut - len("Lily")]
    first = free.choices[0].tokens[0]
    biased = ctx.generate("Once upon a time", max_tokens=4, temperature=0, logit_bias={first: float("-inf")})
    assert biased.choices[0].tokens[0] != first


def test_constraints(ctx):
    out = ctx.generate("The cat", max_tokens=16, choices=["yes", "no"])
    assert out.text in ("yes", "no")
    out = ctx.generate("The cat", max_tokens=12, regex="[a-z]+ [0-9]{2}")
    import re
    assert re.fullmatch("[a-z]+ [0-9]{2}", out.text)


def test_tokenizer_round_trip(ctx):
    text = "Once upon a time, a cat"
    ids = ctx.tokenize(text)
    assert ids[0] == ctx.info.bos
    assert ctx.detokenize(ids[1:], strip_leading_space=True) == text
    assert ctx.tokenize(text, add_special=False) == ids[1:]


def test_stats_and_info(ctx):
    before = ctx.stats()
    ctx.generate("Hello", max_tokens=5, temperature=0)
    after = ctx.stats()
    assert after["requests_finished"] == before["requests_finished"] + 1
    assert after["generated_tokens"] >= before["generated_tokens"] + 1
    assert after["backend"] == "cpu"
    info = ctx.info
    assert info.arch == "llama" and info.n_vocab == 512 and info.n_ctx == 512
    assert llmrt.library_version().count(".") == 2


def test_prefix_cache_hit_is_reported(ctx):
    prompt = "Once upon a time there was a big dog and a little cat who were friends and played all day"
    ctx.generate(prompt, max_tokens=2, temperature=0)
    again = ctx.generate(prompt, max_tokens=2, temperature=0)
    assert again.usage["prompt_tokens_details"]["cached_tokens"] >= 16


def test_kv_types_apart():
    # K and V in different element types (llm_ctx_params.kv_type_v): a
    # block's bytes are the sum of a K side and a V side of their own types,
    # so K Q8_0 + V F16 is the mean of an all-Q8_0 and an all-F16 block.
    def per_block(**kw):
        with llmrt.Context(n_ctx=128, n_threads=1, backend="cpu", n_kv_blocks=8, **kw) as c:
            out = c.generate("Once upon a time", max_tokens=4, temperature=0)
            assert len(out.choices[0].tokens) >= 1
            s = c.stats()
            return s["kv_pool_bytes"] // s["kv_blocks_total"]
    q8, f16 = per_block(kv_type="q8_0"), per_block(kv_type="f16")
    assert q8 != f16
    assert per_block(kv_type="q8_0", kv_type_v="f16") * 2 == q8 + f16
    assert per_block(kv_type="q8_0", kv_type_v="q8_0") == q8
    try:
        llmrt.Context(kv_type_v="q5_1")
    except ValueError as e:
        assert "kv_type_v" in str(e)
    else:
        raise AssertionError("an unknown kv_type_v was accepted")
    # FP8 E4M3 (LLM_KV_FP8_E4M3 = 5) is a CUDA (sm_89+) pool: the CPU refuses it by name.
    assert llmrt.context.KV_TYPES["fp8_e4m3"] == 5
    try:
        llmrt.Context(backend="cpu", kv_type="fp8_e4m3")
    except llmrt.UnsupportedError as e:
        assert "fp8_e4m3" in str(e)
    else:
        raise AssertionError("an FP8 E4M3 CPU pool was accepted")
