"""Loads libllmrt and declares the C functions' signatures.

Where the library is looked for, first match wins:
  1. ``LLMRT_LIB``: a path to the shared library itself;
  2. the package folder (a wheel carries ``libllmrt.so`` there);
  3. ``LLMRT_LIB_DIR``, then the repository's ``build/lib`` and
     ``build-bind/lib`` (running from a checkout);
  4. the system's search path (``ctypes.util.find_library("llmrt")``).

ctypes releases the GIL for the duration of every call made through a
``CDLL``, so ``llm_poll`` waiting for tokens does not hold up other threads.
"""
from __future__ import annotations

import ctypes as C
import ctypes.util
import os
import sys
from pathlib import Path

from . import _structs as S

_NAMES = {"linux": "libllmrt.so", "darwin": "libllmrt.dylib", "win32": "llmrt.dll"}


def _candidates() -> list[str]:
    name = _NAMES.get(sys.platform, "libllmrt.so")
    out: list[str] = []
    if os.environ.get("LLMRT_LIB"):
        out.append(os.environ["LLMRT_LIB"])
    here = Path(__file__).resolve().parent
    out.append(str(here / name))
    dirs = []
    if os.environ.get("LLMRT_LIB_DIR"):
        dirs.append(Path(os.environ["LLMRT_LIB_DIR"]))
    for parent in here.parents:
        if (parent / "include" / "llm.h").is_file():
            dirs += [parent / "build" / "lib", parent / "build-bind" / "lib"]
            break
    out += [str(d / name) for d in dirs]
    found = ctypes.util.find_library("llmrt")
    if found:
        out.append(found)
    return out


def _load() -> C.CDLL:
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return C.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("llmrt: cannot find the llmrt shared library; tried: " + "; ".join(tried) +
                      " (set LLMRT_LIB to its path)")


lib = _load()

_P = C.POINTER
_ctx = C.c_void_p

_SIGNATURES = {
    "llm_version": (C.c_char_p, []),
    "llm_version_number": (C.c_uint32, []),
    "llm_status_str": (C.c_char_p, [S.llm_status]),
    "llm_last_error": (C.c_char_p, []),
    "llm_ctx_params_init": (S.llm_status, [_P(S.CtxParams)]),
    "llm_sampling_params_init": (S.llm_status, [_P(S.SamplingParams)]),
    "llm_request_init": (S.llm_status, [_P(S.Request)]),
    "llm_ctx_create": (S.llm_status, [_P(S.CtxParams), _P(_ctx)]),
    "llm_ctx_destroy": (None, [_ctx]),
    "llm_submit": (S.llm_status, [_ctx, _P(S.Request), _P(S.llm_request_id)]),
    "llm_cancel": (S.llm_status, [_ctx, S.llm_request_id]),
    "llm_poll": (S.llm_status, [_ctx, _P(S.Event), C.c_uint32, _P(C.c_uint32), C.c_int32]),
    "llm_wakeup": (S.llm_status, [_ctx]),
    "llm_get_stats": (S.llm_status, [_ctx, _P(S.Stats)]),
    "llm_get_device_stats": (S.llm_status, [_ctx, C.c_int32, _P(S.DeviceStats)]),
    "llm_model_get_info": (S.llm_status, [_ctx, _P(S.ModelInfo)]),
    "llm_tokenize": (S.llm_status, [_ctx, C.c_char_p, C.c_size_t, C.c_uint32, _P(S.llm_token), C.c_int32,
                                    _P(C.c_int32)]),
    "llm_detokenize": (S.llm_status, [_ctx, _P(S.llm_token), C.c_int32, C.c_uint32, C.c_char_p, C.c_size_t,
                                      _P(C.c_size_t)]),
    "llm_chat_apply_template": (S.llm_status, [_ctx, C.c_char_p, _P(S.ChatMessage), C.c_size_t, C.c_int32,
                                               C.c_char_p, C.c_size_t, _P(C.c_size_t)]),
    "llm_chat_apply_template_json": (S.llm_status, [_ctx, C.c_char_p, C.c_char_p, C.c_char_p, C.c_int32,
                                                    C.c_char_p, C.c_size_t, _P(C.c_size_t)]),
    "llm_chat_apply_template_vars": (S.llm_status, [_ctx, C.c_char_p, C.c_char_p, C.c_char_p, C.c_char_p, C.c_int32,
                                                    C.c_char_p, C.c_size_t, _P(C.c_size_t)]),
    "llm_content_part_init": (S.llm_status, [_P(S.ContentPart)]),
    "llm_chat_apply_template_v2": (S.llm_status, [_ctx, C.c_char_p, _P(S.ChatMessageV2), C.c_size_t, C.c_int32,
                                                  C.c_char_p, C.c_size_t, _P(C.c_size_t)]),
    "llm_chat_tool_format": (S.llm_status, [_ctx, C.c_char_p, _P(C.c_int32)]),
    "llm_chat_parse_tool_calls": (S.llm_status, [C.c_int32, C.c_char_p, C.c_size_t, C.c_char_p, C.c_size_t,
                                                 _P(C.c_size_t)]),
    "llm_kv_export_file": (S.llm_status, [_ctx, _P(S.llm_token), C.c_int32, C.c_uint64, C.c_char_p,
                                          _P(C.c_int32)]),
    "llm_kv_import_file": (S.llm_status, [_ctx, C.c_uint64, C.c_char_p, _P(C.c_int32)]),
    "llm_embed_params_init": (S.llm_status, [_P(S.EmbedParams)]),
    "llm_embed": (S.llm_status, [_ctx, _P(C.c_char_p), _P(_P(S.llm_token)), _P(C.c_int32), C.c_int32,
                                 _P(S.EmbedParams), _P(C.c_float), C.c_size_t, _P(C.c_int32)]),
    "llm_rerank_tokenize": (S.llm_status, [_ctx, C.c_char_p, C.c_char_p, _P(S.llm_token), C.c_int32,
                                           _P(C.c_int32)]),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
