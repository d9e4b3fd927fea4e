"""Fixtures: the built-in stories260K context (shared), SmolLM2 when
scripts/fetch-models.sh has fetched it, the repository's files."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import llmrt

REPO = Path(__file__).resolve().parents[3]
SMOLLM2 = Path(os.environ.get("LLMRT_SMOLLM2", REPO / "models" / "pypi" / "SmolLM2-135M-Instruct.Q4_1.gguf"))


@pytest.fixture(scope="session")
def ctx():
    with llmrt.Context(n_ctx=512, n_threads=2) as c:
        yield c


@pytest.fixture(scope="session")
def smol():
    if not SMOLLM2.is_file():
        pytest.skip(f"SmolLM2 not fetched ({SMOLLM2}; scripts/fetch-models.sh)")
    with llmrt.Context(SMOLLM2, n_ctx=2048, n_threads=2) as c:
        yield c


def golden_cases():
    """(prompt ids, greedy ids, prompt text) of bindings/testdata/golden-greedy.tsv:
    stories260K F32 greedy, n_ctx 512, 200 tokens."""
    path = Path(os.environ.get("LLMRT_GOLDEN", REPO / "bindings" / "testdata" / "golden-greedy.tsv"))
    out = []
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        parts = line.split("\t")
        prompt = [int(x) for x in parts[0].split()]
        gen = [int(x) for x in parts[1].split()]
        text = parts[2] if len(parts) > 2 else ""
        out.append((prompt, gen, text))
    return out
