"""Builds an ``llm_request`` from Python keyword arguments. Everything the
request points to is kept alive by the returned holder until ``llm_submit``
has copied it (the library copies all of it at submit)."""
from __future__ import annotations

import ctypes as C
import json
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from . import _structs as S
from ._lib import lib
from .errors import check
from .image import content_parts, is_parts

TOKENIZE_ADD_SPECIAL = 1
TOKENIZE_PARSE_SPECIAL = 2

CONSTRAINT_JSON_SCHEMA = 1
CONSTRAINT_JSON_OBJECT = 2
CONSTRAINT_REGEX = 3
CONSTRAINT_CHOICE = 4
CONSTRAINT_GRAMMAR = 5

WHITESPACE_BOUNDED = 0
WHITESPACE_FREE = 1

SEED_RANDOM = 2**64 - 1

_SAMPLING = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "frequency_penalty",
             "presence_penalty", "penalty_last_n")


def constraint_of(response_format: Optional[Mapping[str, Any]] = None, *, json_schema: Any = None,
                  regex: Optional[str] = None, grammar: Optional[str] = None,
                  choices: Optional[Sequence[str]] = None) -> tuple[int, Optional[str], Optional[list[str]]]:
    """(kind, text, choices) of the one constraint given. response_format is
    OpenAI's ({"type": "json_object"} or {"type": "json_schema",
    "json_schema": {"schema": ...}}) or llama-cpp-python's ({"type":
    "json_object", "schema": ...})."""
    given = [x for x in (response_format, json_schema, regex, grammar, choices) if x is not None]
    if len(given) > 1:
        raise ValueError("give at most one of response_format, json_schema, regex, grammar, choices")
    if json_schema is not None:
        return CONSTRAINT_JSON_SCHEMA, json_schema if isinstance(json_schema, str) else json.dumps(json_schema), None
    if regex is not None:
        return CONSTRAINT_REGEX, regex, None
    if grammar is not None:
        return CONSTRAINT_GRAMMAR, str(grammar), None
    if choices is not None:
        return CONSTRAINT_CHOICE, None, [str(c) for c in choices]
    if response_format is not None:
        kind = response_format.get("type")
        if kind == "text":
            return 0, None, None
        if kind == "json_object":
            schema = response_format.get("schema")
            if schema is None:
                return CONSTRAINT_JSON_OBJECT, None, None
            return CONSTRAINT_JSON_SCHEMA, json.dumps(schema), None
        if kind == "json_schema":
            spec = response_format.get("json_schema") or {}
            schema = spec.get("schema", response_format.get("schema"))
            if schema is None:
                raise ValueError("response_format json_schema needs json_schema.schema")
            return CONSTRAINT_JSON_SCHEMA, json.dumps(schema), None
        raise ValueError(f"unknown response_format type {kind!r}")
    return 0, None, None


class BuiltRequest:
    """An ``llm_request`` and the buffers it points into."""

    def __init__(self) -> None:
        self.req = S.Request()
        self.req.struct_size = C.sizeof(S.Request)
        check(lib.llm_request_init(C.byref(self.req)))
        self.sampling = S.SamplingParams()
        self.sampling.struct_size = C.sizeof(S.SamplingParams)
        check(lib.llm_sampling_params_init(C.byref(self.sampling)))
        self.keep: list[Any] = []

    def _strings(self, items: Iterable[str]):
        enc = [s.encode("utf-8") for s in items]
        arr = (C.c_char_p * max(1, len(enc)))(*enc)
        self.keep += [enc, arr]
        return arr, len(enc)

    def _tokens(self, ids: Sequence[int]):
        arr = (S.llm_token * max(1, len(ids)))(*ids)
        self.keep.append(arr)
        return arr, len(ids)


def build_request(prompt: Union[str, Sequence[int]], *, max_tokens: int = 256, add_special: bool = True,
                  parse_special: bool = False, temperature: Optional[float] = None, top_k: Optional[int] = None,
                  top_p: Optional[float] = None, min_p: Optional[float] = None,
                  repetition_penalty: Optional[float] = None, frequency_penalty: Optional[float] = None,
                  presence_penalty: Optional[float] = None, penalty_last_n: Optional[int] = None,
                  seed: Optional[int] = None, logit_bias: Optional[Mapping[int, float]] = None,
                  stop: Union[None, str, Sequence[str]] = None, stop_token_ids: Optional[Sequence[int]] = None,
                  ignore_eos: bool = False, n: int = 1, priority: int = 0, min_tokens: int = 0,
                  top_logprobs: int = 0, prompt_logprobs: bool = False, cache_salt: int = 0, keep_kv: bool = False,
                  response_format: Optional[Mapping[str, Any]] = None, json_schema: Any = None,
                  regex: Optional[str] = None, grammar: Optional[str] = None,
                  choices: Optional[Sequence[str]] = None, whitespace_flexible: bool = False) -> BuiltRequest:
    b = BuiltRequest()
    r = b.req
    if is_parts(prompt):
        r.prompt = None
        r.parts, r.n_parts = content_parts(list(prompt), b.keep)
        r.tokenize_flags = (TOKENIZE_ADD_SPECIAL if add_special else 0) | (TOKENIZE_PARSE_SPECIAL if parse_special else 0)
    elif isinstance(prompt, str):
        text = prompt.encode("utf-8")
        b.keep.append(text)
        r.prompt = text
        r.tokenize_flags = (TOKENIZE_ADD_SPECIAL if add_special else 0) | (TOKENIZE_PARSE_SPECIAL if parse_special else 0)
    else:
        r.prompt = None
        r.prompt_tokens, r.n_prompt_tokens = b._tokens(list(prompt))
    r.max_tokens = max_tokens
    values = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                  repetition_penalty=repetition_penalty, frequency_penalty=frequency_penalty,
                  presence_penalty=presence_penalty, penalty_last_n=penalty_last_n)
    for name in _SAMPLING:
        if values[name] is not None:
            setattr(b.sampling, name, values[name])
    if seed is not None:
        b.sampling.seed = seed & (2**64 - 1)
    if logit_bias:
        arr = (S.LogitBias * len(logit_bias))(*[S.LogitBias(int(t), float(v)) for t, v in logit_bias.items()])
        b.keep.append(arr)
        b.sampling.logit_bias = arr
        b.sampling.n_logit_bias = len(logit_bias)
    r.sampling = C.pointer(b.sampling)
    if stop:
        r.stop, r.n_stop = b._strings([stop] if isinstance(stop, str) else list(stop))
    if stop_token_ids:
        r.stop_token_ids, r.n_stop_token_ids = b._tokens(list(stop_token_ids))
    r.ignore_eos = int(bool(ignore_eos))
    r.n = n
    r.priority = priority
    r.min_tokens = min_tokens
    r.top_logprobs = top_logprobs
    r.prompt_logprobs = int(bool(prompt_logprobs))
    r.cache_salt = cache_salt
    r.keep_kv = int(bool(keep_kv))
    kind, text, choice_list = constraint_of(response_format, json_schema=json_schema, regex=regex, grammar=grammar,
                                            choices=choices)
    r.constraint_kind = kind
    r.constraint_whitespace = WHITESPACE_FREE if whitespace_flexible else WHITESPACE_BOUNDED
    if text is not None:
        enc = text.encode("utf-8")
        b.keep.append(enc)
        r.constraint = enc
    if choice_list is not None:
        r.choices, r.n_choices = b._strings(choice_list)
    return b
