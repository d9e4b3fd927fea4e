"""Embeddings through the Python API on llm-synth's tiny BERT (mean pooling):
one text and a batch agree, vectors are unit length (or raw), Matryoshka
dimensions, the llama-cpp-python-shaped calls, and the refusals."""
import math
import os
import subprocess
from pathlib import Path

import pytest

import llmrt
from llmrt.llama_compat import Llama

from conftest import REPO


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    synth = Path(os.environ.get("LLMRT_SYNTH", REPO / "build" / "bin" / "llm-synth"))
    if not synth.is_file():
        pytest.skip(f"llm-synth not built ({synth})")
    path = tmp_path_factory.mktemp("bert") / "tiny-bert.gguf"
    subprocess.run([str(synth), "--shape", "tiny-bert", "--out", str(path), "--type", "f32", "--seed", "7"],
                   check=True, capture_output=True)
    with llmrt.Context(path, n_threads=2) as c:
        yield c, path


def test_one_and_batched_agree(bert):
    ctx, _ = bert
    texts = ["the cat sat", "a much longer sentence about a dog and a ball", "x"]
    batch = ctx.embed(texts)
    assert len(batch) == 3 and all(len(v) == ctx.info.n_embd for v in batch)
    for t, v in zip(texts, batch):
        assert ctx.embed(t) == v  # bitwise: batching does not change a vector
        assert math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-5)
    raw = ctx.embed(texts[0], normalize=False)
    norm = math.sqrt(sum(x * x for x in raw))
    assert all(math.isclose(a, b / norm, rel_tol=1e-5, abs_tol=1e-7) for a, b in zip(batch[0], raw))
    ids = ctx.tokenize(texts[0])
    assert ctx.embed(ids) == batch[0]


def test_dimensions_and_errors(bert):
    ctx, _ = bert
    short = ctx.embed("the cat sat", dimensions=8)
    assert len(short) == 8 and math.isclose(sum(x * x for x in short), 1.0, rel_tol=1e-5)
    with pytest.raises(llmrt.InvalidArgumentError):
        ctx.embed("the cat", dimensions=ctx.info.n_embd + 1)
    with pytest.raises(llmrt.InvalidArgumentError):
        ctx.embed("")
    with pytest.raises(llmrt.UnsupportedError):
        ctx.generate("the cat", max_tokens=4)


def test_generative_model_refuses_embed(ctx):
    with pytest.raises(llmrt.UnsupportedError):
        ctx.embed("hello")


def test_llama_compat_embedding(bert):
    _, path = bert
    llm = Llama(model_path=str(path), embedding=True)
    out = llm.create_embedding(["the cat sat", "x"])
    assert out["object"] == "list" and [d["index"] for d in out["data"]] == [0, 1]
    assert out["data"][0]["embedding"] == llm.embed("the cat sat")
    assert out["usage"]["prompt_tokens"] > 0
    llm.close()


@pytest.fixture(scope="module")
def qwen3_rerank(tmp_path_factory):
    synth = Path(os.environ.get("LLMRT_SYNTH", REPO / "build" / "bin" / "llm-synth"))
    if not synth.is_file():
        pytest.skip(f"llm-synth not built ({synth})")
    path = tmp_path_factory.mktemp("qwen3r") / "tiny-qwen3-rerank.gguf"
    subprocess.run([str(synth), "--shape", "tiny-qwen3-rerank", "--out", str(path), "--type", "f32", "--seed", "7"],
                   check=True, capture_output=True)
    with llmrt.Context(path, n_threads=2) as c:
        yield c


RERANK_TEMPLATE = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
                   "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
                   "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer "
                   "the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
                   "<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_decoder_reranker_pairs(qwen3_rerank):
    """Qwen3-Reranker: the pair through the file's rerank template (special
    tokens parsed, none added), scored as P(yes): the softmax over the
    [yes, no] head sums to 1."""
    ctx = qwen3_rerank
    q, d = "what is the capital of China?", "Beijing."
    ids = ctx.rerank_tokenize(q, d)
    prompt = RERANK_TEMPLATE.replace("{query}", q).replace("{document}", d)
    assert ids == ctx.tokenize(prompt, add_special=False, parse_special=True)
    yes_no = ctx.embed(ids, pooling="rank", normalize=False)
    assert len(yes_no) == 2 and math.isclose(sum(yes_no), 1.0, rel_tol=1e-6)
    assert ctx.embed([ids, ctx.rerank_tokenize(q, "Paris.")], pooling="rank", normalize=False)[0] == yes_no


def test_cross_encoder_pair_layout(bert):
    ctx, _ = bert
    q, d = ctx.tokenize("w57", add_special=False), ctx.tokenize("w99 w12", add_special=False)
    bos, eos = ctx.info.bos, ctx.info.eos
    assert ctx.rerank_tokenize("w57", "w99 w12") == [bos] + q + [eos, eos] + d + [eos]
