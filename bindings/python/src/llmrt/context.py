"""``Context``: a loaded model, its KV cache and its engine thread.

    with llmrt.Context() as ctx:                  # the built-in stories260K
        for piece in ctx.stream("Once upon a time", max_tokens=64):
            print(piece, end="", flush=True)

Every method may be called from any thread; requests from many threads (and
asyncio tasks) run batched together."""
from __future__ import annotations

import ctypes as C
import os
import threading
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from . import _structs as S
from ._lib import lib
from ._poller import Poller
from ._request import build_request
from ._stream import AsyncEventStream, Completion, EventStream
from .errors import BUFFER_TOO_SMALL, NOT_FOUND, check

BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}
KV_TYPES = {"auto": 0, "f32": 1, "f16": 2, "q8_0": 3, "q4_0": 4, "fp8_e4m3": 5}
POOLINGS = {"model": -1, "mean": 1, "cls": 2, "last": 3, "rank": 4}


@dataclass(frozen=True)
class ModelInfo:
    n_vocab: int
    n_ctx_train: int
    n_ctx: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    bos: int
    eos: int
    n_params: int
    arch: str
    name: str


def _fspath(p: Union[None, str, os.PathLike]) -> Optional[bytes]:
    return None if p is None else os.fsencode(p)


class Context:
    """Loads ``model_path`` (a GGUF file or a Hugging Face folder; None: the
    built-in stories260K). Keyword arguments are the fields of
    ``llm_ctx_params``: ``n_ctx``, ``n_threads``, ``backend`` ("auto",
    "cpu", "cuda"), ``n_gpu_layers`` (a count, -1 every layer, or "auto":
    as many as fit the devices' free memory), ``kv_type`` ("auto", "f32", "f16",
    "q8_0", "q4_0"; "fp8_e4m3": CUDA sm_89+ only), ``kv_type_v`` (V's type when it differs from
    K's, as llama.cpp's ``type_v``; "auto": as ``kv_type``; CPU and CUDA),
    ``max_seqs``, ``kv_block_size``, ``n_kv_blocks``,
    ``max_batch_tokens``, ``max_queued``, ``draft_model_path``,
    ``self_draft_layers``, ``spec_k``, ``gpu_memory_fraction``, and the KV
    tiers under the prefix cache: ``kv_host_bytes``, ``kv_disk_dir``,
    ``kv_disk_bytes``; Mixture of Experts on CUDA: ``n_cpu_moe`` (experts
    of the first N MoE layers in host memory, -1 all; one device only),
    ``moe_cache_bytes``; several GPUs: ``main_gpu`` (-1: split over every
    device) and ``tensor_split`` (each device's share, e.g. ``[3, 1]``);
    pictures in prompts: ``mmproj_path`` (a projector file, llama.cpp's
    ``--mmproj``; then a prompt may be a list of ``str`` and ``llmrt.Image``).
    0 means the library's default, as in C."""

    def __init__(self, model_path: Union[None, str, os.PathLike] = None, *, n_ctx: int = 0, n_threads: int = 0,
                 backend: str = "auto", n_gpu_layers: Union[int, str] = -1, kv_type: str = "auto", kv_type_v: str = "auto",
                 max_seqs: int = 0,
                 kv_block_size: int = 0, n_kv_blocks: int = 0, max_batch_tokens: int = 0, max_queued: int = 0,
                 draft_model_path: Union[None, str, os.PathLike] = None, self_draft_layers: int = 0,
                 spec_k: int = 0, gpu_memory_fraction: float = 0.0, kv_host_bytes: int = 0,
                 kv_disk_dir: Union[None, str, os.PathLike] = None, kv_disk_bytes: int = 0, n_cpu_moe: int = 0,
                 moe_cache_bytes: int = 0, main_gpu: int = -1, tensor_split: Optional[Sequence[float]] = None,
                 mmproj_path: Union[None, str, os.PathLike] = None):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {sorted(BACKENDS)}")
        if kv_type not in KV_TYPES:
            raise ValueError(f"kv_type must be one of {sorted(KV_TYPES)}")
        if kv_type_v not in KV_TYPES:
            raise ValueError(f"kv_type_v must be one of {sorted(KV_TYPES)}")
        if isinstance(n_gpu_layers, str):
            if n_gpu_layers not in ("auto", "all"):
                raise ValueError('n_gpu_layers must be a count, "auto" or "all"')
            n_gpu_layers = S.GPU_LAYERS_AUTO if n_gpu_layers == "auto" else S.GPU_LAYERS_ALL
        p = S.CtxParams()
        p.struct_size = C.sizeof(S.CtxParams)
        check(lib.llm_ctx_params_init(C.byref(p)))
        self._paths = (_fspath(model_path), _fspath(draft_model_path), _fspath(kv_disk_dir), _fspath(mmproj_path))
        p.model_path, p.draft_model_path, p.kv_disk_dir, p.mmproj_path = self._paths
        p.kv_host_bytes, p.kv_disk_bytes = kv_host_bytes, kv_disk_bytes
        p.backend = BACKENDS[backend]
        p.n_threads, p.n_ctx, p.n_gpu_layers, p.kv_type = n_threads, n_ctx, n_gpu_layers, KV_TYPES[kv_type]
        p.kv_type_v = KV_TYPES[kv_type_v]  # "auto" is 0: as kv_type
        p.max_seqs, p.kv_block_size, p.n_kv_blocks = max_seqs, kv_block_size, n_kv_blocks
        p.max_batch_tokens, p.max_queued = max_batch_tokens, max_queued
        p.self_draft_layers, p.spec_k, p.gpu_memory_fraction = self_draft_layers, spec_k, gpu_memory_fraction
        p.n_cpu_moe, p.moe_cache_bytes = n_cpu_moe, moe_cache_bytes
        p.main_gpu = main_gpu
        if tensor_split is not None:
            if len(tensor_split) > S.MAX_DEVICES:
                raise ValueError(f"tensor_split has more than {S.MAX_DEVICES} entries")
            for i, share in enumerate(tensor_split):
                p.tensor_split[i] = share
        handle = C.c_void_p()
        self._handle: Optional[int] = None
        check(lib.llm_ctx_create(C.byref(p), C.byref(handle)))
        self._handle = handle.value
        self._poller = Poller(self._handle)
        self._close_lock = threading.Lock()
        self.model_path = None if model_path is None else os.fspath(model_path)

    # ------------------------------------------------------------ lifetime
    @property
    def handle(self) -> int:
        if self._handle is None:
            raise ValueError("llmrt: the context is closed")
        return self._handle

    def close(self) -> None:
        """Cancels what is in flight and frees the model and the KV cache."""
        with self._close_lock:
            if self._handle is not None:
                self._poller.stop()
                lib.llm_ctx_destroy(self._handle)
                self._handle = None

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # --------------------------------------------------------- information
    @property
    def info(self) -> ModelInfo:
        m = S.ModelInfo()
        m.struct_size = C.sizeof(S.ModelInfo)
        check(lib.llm_model_get_info(self.handle, C.byref(m)))
        return ModelInfo(m.n_vocab, m.n_ctx_train, m.n_ctx, m.n_embd, m.n_layer, m.n_head, m.n_head_kv, m.bos,
                         m.eos, m.n_params, (m.arch or b"").decode(), (m.name or b"").decode())

    def stats(self) -> dict:
        """``llm_stats`` as a dict (backend, tokens, KV blocks, rates...)."""
        s = S.Stats()
        s.struct_size = C.sizeof(S.Stats)
        check(lib.llm_get_stats(self.handle, C.byref(s)))
        out = {name: getattr(s, name) for name, _ in S.Stats._fields_ if not name.startswith(("struct_", "reserved"))}
        out["backend"] = {1: "cpu", 2: "cuda"}.get(out["backend"], "unknown")
        return out

    def devices(self) -> list:
        """``llm_get_device_stats`` for each CUDA device the layers run on, in
        layer order (empty on the CPU backend): dicts of device, first_layer,
        end_layer, weight_bytes, kv_pool_bytes, used_bytes, total_bytes."""
        out, i, n = [], 0, 1
        while i < n:
            d = S.DeviceStats()
            d.struct_size = C.sizeof(S.DeviceStats)
            st = lib.llm_get_device_stats(self.handle, i, C.byref(d))
            n = d.n_devices
            if i >= n:
                break
            check(st)
            out.append({name: getattr(d, name) for name, _ in S.DeviceStats._fields_
                        if name not in ("struct_size", "reserved", "n_devices")})
            i += 1
        return out

    # ----------------------------------------------------------- tokenizer
    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = False) -> list:
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        flags = (1 if add_special else 0) | (2 if parse_special else 0)
        cap = len(data) + 8
        while True:
            out = (S.llm_token * cap)()
            n = C.c_int32(0)
            st = lib.llm_tokenize(self.handle, data, len(data), flags, out, cap, C.byref(n))
            if st == BUFFER_TOO_SMALL:
                cap = n.value
                continue
            check(st)
            return list(out[: n.value])

    def detokenize_bytes(self, tokens: Sequence[int], *, render_special: bool = False,
                         strip_leading_space: bool = False) -> bytes:
        ids = (S.llm_token * max(1, len(tokens)))(*tokens)
        flags = (1 if render_special else 0) | (2 if strip_leading_space else 0)
        cap = 16 * len(tokens) + 16
        while True:
            buf = C.create_string_buffer(cap)
            n = C.c_size_t(0)
            st = lib.llm_detokenize(self.handle, ids, len(tokens), flags, buf, cap, C.byref(n))
            if st == BUFFER_TOO_SMALL:
                cap = n.value
                continue
            check(st)
            return buf.raw[: n.value]

    def detokenize(self, tokens: Sequence[int], **kw: Any) -> str:
        return self.detokenize_bytes(tokens, **kw).decode("utf-8", "replace")

    # ---------------------------------------------------------- generation
    def _submit(self, stream, prompt, kw) -> None:
        built = build_request(prompt, **kw)
        handle = self.handle

        def do_submit() -> int:
            rid = C.c_uint64(0)
            check(lib.llm_submit(handle, C.byref(built.req), C.byref(rid)))
            return rid.value

        stream.request_id = self._poller.submit(do_submit, stream.sink)

    def _cancel(self, stream) -> None:
        if self._handle is not None and stream.request_id:
            st = lib.llm_cancel(self._handle, stream.request_id)
            if st not in (0, NOT_FOUND):
                check(st)

    def _forget(self, stream) -> None:
        if stream.request_id:
            self._poller.forget(stream.request_id)

    def events(self, prompt: Union[str, Sequence[int]], **kw: Any) -> EventStream:
        """Submits a request and returns its events as they come. ``prompt``
        is text (tokenized with BOS as the model says; ``parse_special``
        reads "<s>"-like text as special tokens) or token ids (used as they
        are), or a list of parts, ``str`` and ``llmrt.Image`` (a context with
        ``mmproj_path``: each picture stands where its part stands). Options: ``max_tokens`` (256), ``temperature``, ``top_k``,
        ``top_p``, ``min_p``, ``repetition_penalty``, ``frequency_penalty``,
        ``presence_penalty``, ``penalty_last_n``, ``seed``, ``logit_bias``
        ({token: bias}), ``stop`` (strings), ``stop_token_ids``,
        ``ignore_eos``, ``n``, ``priority``, ``min_tokens``, ``top_logprobs``,
        ``prompt_logprobs``, ``cache_salt``, ``keep_kv`` (the conversation's KV
        is evicted last), and one constraint:
        ``response_format`` (OpenAI's), ``json_schema``, ``regex``,
        ``grammar`` (GBNF) or ``choices``; ``whitespace_flexible`` (JSON
        constraints: any whitespace instead of the bounded layout). Errors
        raise ``LlmError``."""
        s = EventStream(kw.get("n", 1), lambda: self._cancel(s), lambda: self._forget(s))
        self._submit(s, prompt, kw)
        return s

    def stream(self, prompt: Union[str, Sequence[int]], **kw: Any):
        """The generated text as it arrives (an iterator of str); leaving the
        loop early cancels the request."""
        return self.events(prompt, **kw).text()

    def generate(self, prompt: Union[str, Sequence[int]], **kw: Any) -> Completion:
        """Runs a request to its end: ``.text``, ``.choices``, ``.usage``."""
        return self.events(prompt, **kw).collect()

    async def aevents(self, prompt: Union[str, Sequence[int]], **kw: Any) -> AsyncEventStream:
        s = AsyncEventStream(kw.get("n", 1), lambda: self._cancel(s), lambda: self._forget(s))
        self._submit(s, prompt, kw)
        return s

    async def astream(self, prompt: Union[str, Sequence[int]], **kw: Any):
        """``stream`` for asyncio: ``async for piece in ctx.astream(...)``."""
        s = await self.aevents(prompt, **kw)
        async for piece in s.text():
            yield piece

    async def agenerate(self, prompt: Union[str, Sequence[int]], **kw: Any) -> Completion:
        return await (await self.aevents(prompt, **kw)).collect()

    # ---------------------------------------------------------- embeddings
    def embed(self, inputs: Union[str, Sequence[int], Sequence[Union[str, Sequence[int]]]], *,
              pooling: str = "model", normalize: bool = True, dimensions: int = 0, truncate: bool = False,
              add_special: bool = True) -> list:
        """Vectors of an embedding model (``llm_embed``): one list of floats
        per input; ``inputs`` is a text, token ids, or a list of either
        (all texts or all token lists). ``pooling`` "model" (the file's),
        "mean", "cls", "last" or "rank" (a reranker's score); ``dimensions``
        keeps the first values (Matryoshka); ``truncate`` cuts inputs longer
        than the context instead of refusing them."""
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {sorted(POOLINGS)}")
        single = isinstance(inputs, str) or (len(inputs) > 0 and isinstance(inputs[0], int))
        items = [inputs] if single else list(inputs)
        if not items:
            raise ValueError("embed needs at least one input")
        p = S.EmbedParams()
        p.struct_size = C.sizeof(S.EmbedParams)
        check(lib.llm_embed_params_init(C.byref(p)))
        p.pooling, p.normalize, p.dimensions, p.truncate = POOLINGS[pooling], int(normalize), dimensions, int(truncate)
        p.tokenize_flags = 1 if add_special else 0
        n = len(items)
        texts = tokens = lens = None
        keep = []
        if all(isinstance(x, str) for x in items):
            enc = [x.encode("utf-8") for x in items]
            texts = (C.c_char_p * n)(*enc)
            keep.append(enc)
        elif all(not isinstance(x, str) for x in items):
            arrays = [(S.llm_token * max(1, len(x)))(*x) for x in items]
            tokens = (C.POINTER(S.llm_token) * n)(*[C.cast(a, C.POINTER(S.llm_token)) for a in arrays])
            lens = (C.c_int32 * n)(*[len(x) for x in items])
            keep.append(arrays)
        else:
            raise ValueError("inputs must be all texts or all token lists")
        dim = C.c_int32(0)
        st = lib.llm_embed(self.handle, texts, tokens, lens, n, C.byref(p), None, 0, C.byref(dim))
        if st not in (0, BUFFER_TOO_SMALL):
            check(st)
        out = (C.c_float * (n * dim.value))()
        check(lib.llm_embed(self.handle, texts, tokens, lens, n, C.byref(p), out, n * dim.value, C.byref(dim)))
        rows = [list(out[i * dim.value:(i + 1) * dim.value]) for i in range(n)]
        return rows[0] if single else rows

    def rerank_tokenize(self, query: str, document: str) -> list:
        """A (query, document) pair laid out as the model's reranker reads
        it (``llm_rerank_tokenize``: its rerank template, or [BOS] query
        [EOS] [EOS] document [EOS]); score it with embed(ids, pooling="rank",
        normalize=False)."""
        q, d = query.encode("utf-8"), document.encode("utf-8")
        n = C.c_int32(0)
        st = lib.llm_rerank_tokenize(self.handle, q, d, None, 0, C.byref(n))
        if st != BUFFER_TOO_SMALL:
            check(st)
        out = (S.llm_token * max(1, n.value))()
        check(lib.llm_rerank_tokenize(self.handle, q, d, out, n.value, C.byref(n)))
        return list(out[: n.value])

    # ------------------------------------------------------------ KV state
    def kv_export_file(self, tokens: Sequence[int], path: Union[str, os.PathLike], *, cache_salt: int = 0) -> int:
        """Saves the KV of the cached prefix of ``tokens`` to ``path``;
        returns how many tokens it holds (whole KV blocks)."""
        ids = (S.llm_token * max(1, len(tokens)))(*tokens)
        n = C.c_int32(0)
        check(lib.llm_kv_export_file(self.handle, ids, len(tokens), cache_salt, os.fsencode(path), C.byref(n)))
        return n.value

    def kv_import_file(self, path: Union[str, os.PathLike], *, cache_salt: int = 0) -> int:
        """Loads a saved KV file into the prefix cache; returns how many
        tokens a request starting with them now reuses."""
        n = C.c_int32(0)
        check(lib.llm_kv_import_file(self.handle, cache_salt, os.fsencode(path), C.byref(n)))
        return n.value
