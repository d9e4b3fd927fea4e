"""The ctypes mirrors against the C header: every struct's size and every
field's offset as tests/test_abi.cpp pins them, the sizes the library's init
functions write, and the status codes."""
import ctypes as C
import re

import pytest

from llmrt import _structs as S
from llmrt import errors
from llmrt._lib import lib

from conftest import REPO

MIRRORS = {
    "llm_ctx_params": S.CtxParams, "llm_sampling_params": S.SamplingParams, "llm_logit_bias": S.LogitBias,
    "llm_request": S.Request, "llm_metrics": S.Metrics, "llm_event": S.Event, "llm_top_logprob": S.TopLogprob,
    "llm_stats": S.Stats, "llm_model_info": S.ModelInfo, "llm_device_stats": S.DeviceStats,
    "llm_content_part": S.ContentPart, "llm_chat_message_v2": S.ChatMessageV2,
}


def _pins():
    src = (REPO / "tests" / "test_abi.cpp").read_text()
    sizes = {m[0]: int(m[1]) for m in re.findall(r"EXPECT_EQ\(sizeof\((llm_\w+)\),\s*(\d+)u?\)", src)}
    offsets = [(m[0], m[1], int(m[2])) for m in re.findall(r"PIN\((llm_\w+),\s*([\w.]+),\s*(\d+)\)", src)]
    return sizes, offsets


def test_sizes_match_the_pinned_layout():
    sizes, _ = _pins()
    assert set(MIRRORS) <= set(sizes)
    for name, cls in MIRRORS.items():
        assert C.sizeof(cls) == sizes[name], name


def test_offsets_match_the_pinned_layout():
    _, offsets = _pins()
    checked = 0
    for struct, field, off in offsets:
        cls = MIRRORS.get(struct)
        if cls is None:
            continue
        base, *rest = field.split(".")
        o = getattr(cls, base).offset
        if rest:  # a nested struct's field (llm_event.metrics.x)
            inner = dict(cls._fields_)[base]
            o += getattr(inner, rest[0]).offset
        assert o == off, f"{struct}.{field}"
        checked += 1
    assert checked >= 40


@pytest.mark.parametrize("init,cls", [("llm_ctx_params_init", S.CtxParams),
                                      ("llm_sampling_params_init", S.SamplingParams),
                                      ("llm_request_init", S.Request),
                                      ("llm_content_part_init", S.ContentPart)])
def test_init_writes_the_mirrors_size(init, cls):
    buf = (C.c_uint8 * 4096)()
    getattr(lib, init).argtypes = [C.c_void_p]
    try:
        assert getattr(lib, init)(buf) == 0
    finally:
        getattr(lib, init).argtypes = [C.POINTER(cls)]
    assert C.c_uint32.from_buffer(buf).value == C.sizeof(cls)


def test_status_codes_match_the_header():
    header = (REPO / "include" / "llm.h").read_text()
    codes = {m[0]: int(m[1]) for m in re.findall(r"LLM_ERR_(\w+) = (\d+)", header)}
    for name in ["INVALID_ARGUMENT", "NULL_ARGUMENT", "STRUCT_SIZE", "IO", "MODEL_FORMAT", "UNSUPPORTED",
                 "OUT_OF_MEMORY", "BUSY", "NOT_FOUND", "CONTEXT_OVERFLOW", "INVALID_UTF8", "BUFFER_TOO_SMALL",
                 "BACKEND", "SHUTDOWN", "INTERNAL", "KV_MISMATCH", "KV_CORRUPT"]:
        assert getattr(errors, name) == codes[name], name
        assert lib.llm_status_str(codes[name]).decode() == "LLM_ERR_" + name


def test_whitespace_values_match_the_header_and_reach_the_request():
    from llmrt import _request as R
    header = (REPO / "include" / "llm.h").read_text()
    values = {m[0]: int(m[1]) for m in re.findall(r"LLM_WHITESPACE_(\w+) = (\d+)", header)}
    assert values == {"BOUNDED": R.WHITESPACE_BOUNDED, "FREE": R.WHITESPACE_FREE}
    assert R.build_request("x", json_schema={"type": "object"}).req.constraint_whitespace == R.WHITESPACE_BOUNDED
    b = R.build_request("x", json_schema={"type": "object"}, whitespace_flexible=True)
    assert b.req.constraint_whitespace == R.WHITESPACE_FREE


def test_reasoning_values_match_the_header():
    header = (REPO / "include" / "llm.h").read_text()
    values = {m[0]: int(m[1]) for m in re.findall(r"LLM_((?:REASONING|PART)_\w+) = (\d+)", header)}
    assert values == {"REASONING_NONE": S.REASONING_NONE, "REASONING_DEEPSEEK": S.REASONING_DEEPSEEK,
                      "REASONING_HARMONY": S.REASONING_HARMONY, "REASONING_AUTO": S.REASONING_AUTO,
                      "PART_CONTENT": S.PART_CONTENT, "PART_REASONING": S.PART_REASONING}


def test_content_part_values_match_the_header_and_init():
    header = (REPO / "include" / "llm.h").read_text()
    values = {m[0]: int(m[1]) for m in re.findall(r"LLM_(CONTENT_\w+) = (\d+)", header)}
    assert values == {"CONTENT_TEXT": S.CONTENT_TEXT, "CONTENT_IMAGE": S.CONTENT_IMAGE,
                      "CONTENT_IMAGE_RGB": S.CONTENT_IMAGE_RGB}
    part = S.ContentPart()
    C.memset(C.byref(part), 0x5A, C.sizeof(part))
    assert lib.llm_content_part_init(C.byref(part)) == 0
    assert (part.struct_size, part.kind, part.text, part.data, part.n_data, part.width, part.height) == \
        (C.sizeof(S.ContentPart), S.CONTENT_TEXT, None, None, 0, 0, 0)
