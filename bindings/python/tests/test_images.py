"""Pictures in the prompt through the Python binding (issue 36): on
llm-synth's tiny-gemma3 with its projector (``mmproj_path``), a prompt of
``str`` and ``llmrt.Image`` parts reaches the engine; a PNG and the same
pixels given raw (``Image.rgb``, from Pillow's decode stored in
tests/data/images) are the same picture: one encoding, one image-cache hit
(``stats()``), the same greedy tokens; the picture's 16 soft tokens count in
the prompt; bad parts raise. Skips without llm-synth (``LLMRT_SYNTH``, else
the repository's build/bin)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import llmrt

REPO = Path(__file__).resolve().parents[3]
IMAGES = REPO / "tests" / "data" / "images"


def _synth() -> str | None:
    p = Path(os.environ.get("LLMRT_SYNTH", REPO / "build" / "bin" / "llm-synth"))
    return str(p) if p.is_file() else None


@pytest.fixture(scope="module")
def vctx(tmp_path_factory):
    synth = _synth()
    if synth is None:
        pytest.skip("llm-synth not found (LLMRT_SYNTH)")
    d = tmp_path_factory.mktemp("g3")
    model, mmproj = d / "g3.gguf", d / "mmproj.gguf"
    subprocess.run([synth, "--shape", "tiny-gemma3", "--out", str(model), "--type", "f32", "--seed", "7",
                    "--mmproj", str(mmproj)], check=True, stdout=subprocess.DEVNULL)
    with llmrt.Context(model, mmproj_path=mmproj, n_ctx=512, n_threads=2) as c:
        yield c


def test_png_and_raw_rgb_are_one_picture(vctx):
    png = llmrt.Image.open(IMAGES / "rgb.png")
    try:
        first = vctx.generate(["Describe: ", png], max_tokens=6, ignore_eos=True, temperature=0.0)
    except llmrt.UnsupportedError as e:  # a build without libpng
        pytest.skip(str(e))
    s1 = vctx.stats()
    assert s1["images_encoded"] == 1 and s1["image_cache_hits"] == 0 and s1["image_tokens"] == 16
    assert s1["image_encode_seconds"] > 0
    # the same pixels, raw: 17 x 11 RGB as Pillow decoded rgb.png
    raw = llmrt.Image.rgb((IMAGES / "rgb.png.rgb").read_bytes(), 17, 11)
    second = vctx.generate(["Describe: ", raw], max_tokens=6, ignore_eos=True, temperature=0.0)
    s2 = vctx.stats()
    assert s2["images_encoded"] == 1, "the same picture was encoded again"
    assert s2["image_cache_hits"] == 1 and s2["image_tokens"] == 32
    assert second.choices[0].tokens == first.choices[0].tokens
    assert len(first.choices[0].tokens) == 6
    # the picture's 16 soft tokens (and its markers) are prompt positions
    text_only = vctx.generate(["Describe: "], max_tokens=1)
    assert first.usage["prompt_tokens"] >= text_only.usage["prompt_tokens"] + 16
    # another picture: another encoding, other tokens' context
    other = bytearray((IMAGES / "rgb.png.rgb").read_bytes())
    other[0] ^= 0xFF
    vctx.generate(["Describe: ", llmrt.Image.rgb(bytes(other), 17, 11)], max_tokens=1)
    assert vctx.stats()["images_encoded"] == 2


def test_bad_parts_raise(vctx):
    with pytest.raises(llmrt.InvalidArgumentError):  # 17 x 11 pixels need 561 bytes
        vctx.generate(["x", llmrt.Image.rgb(b"\0" * 560, 17, 11)], max_tokens=1)
    with pytest.raises(llmrt.LlmError):  # not a picture
        vctx.generate(["x", llmrt.Image(b"this is not a picture")], max_tokens=1)
    with pytest.raises(ValueError):
        llmrt.Image.rgb(b"\0\0\0", 0, 1)
    with pytest.raises(TypeError):
        vctx.generate(["x", 3.5], max_tokens=1)


def test_image_without_projector_is_refused(ctx):
    with pytest.raises(llmrt.LlmError, match="mmproj"):
        ctx.generate(["x", llmrt.Image.rgb(b"\0" * 12, 2, 2)], max_tokens=1)
