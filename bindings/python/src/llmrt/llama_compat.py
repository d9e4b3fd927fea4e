"""A class shaped like llama-cpp-python's ``Llama``, so that code written for
it switches with one import:

    from llmrt.llama_compat import Llama
    llm = Llama(model_path="model.gguf", n_ctx=2048, n_gpu_layers=-1)
    out = llm("Q: Name the planets in the solar system? A: ", max_tokens=32, stop=["Q:", "\\n"])
    print(out["choices"][0]["text"])

Results are the same dicts (``text_completion``, ``chat.completion`` and
their streamed chunks). Parameters that have no meaning here (``n_batch``,
``use_mmap``, ``verbose``...) are accepted and ignored."""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Iterator, List, Optional, Sequence, Union

from .chat import Chat
from .context import Context


class LlamaGrammar:
    """A GBNF grammar, as llama-cpp-python's ``LlamaGrammar``."""

    def __init__(self, text: str):
        self.text = text

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> "LlamaGrammar":
        return cls(grammar)

    @classmethod
    def from_json_schema(cls, json_schema: str, verbose: bool = True) -> "LlamaGrammar":
        g = cls("")
        g.json_schema = json_schema
        return g


def _constraint(grammar: Optional[LlamaGrammar], response_format: Optional[dict]) -> dict:
    if grammar is not None:
        if getattr(grammar, "json_schema", None):
            return {"json_schema": grammar.json_schema}
        return {"grammar": grammar.text}
    if response_format is not None:
        return {"response_format": response_format}
    return {}


def _stops(stop: Union[None, str, List[str]]) -> list:
    return [] if not stop else ([stop] if isinstance(stop, str) else list(stop))


class Llama:
    def __init__(self, model_path: Optional[str] = None, *, n_gpu_layers: int = 0, n_ctx: int = 512,
                 n_threads: Optional[int] = None, seed: int = 0xFFFFFFFF, chat_format: Optional[str] = None,
                 chat_template: Optional[str] = None, flash_attn: bool = False, type_k: Optional[int] = None,
                 type_v: Optional[int] = None, embedding: bool = False, **ignored: Any):
        # llama-cpp-python's n_gpu_layers: 0 = CPU only (its default), -1 = all.
        backend = "cpu" if n_gpu_layers == 0 else "auto"
        self.ctx = Context(model_path, n_ctx=n_ctx, n_threads=n_threads or 0, backend=backend,
                           n_gpu_layers=-1 if n_gpu_layers < 0 else n_gpu_layers)
        self.model_path = model_path
        self._seed = None if seed in (0xFFFFFFFF, -1) else seed
        self._chat: Optional[Chat] = None
        self._chat_template = chat_template
        self.verbose = ignored.get("verbose", True)

    # ----------------------------------------------------------- model
    def n_ctx(self) -> int:
        return self.ctx.info.n_ctx

    def n_vocab(self) -> int:
        return self.ctx.info.n_vocab

    def n_embd(self) -> int:
        return self.ctx.info.n_embd

    def token_bos(self) -> int:
        return self.ctx.info.bos

    def token_eos(self) -> int:
        return self.ctx.info.eos

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> List[int]:
        return self.ctx.tokenize(text.decode("utf-8") if isinstance(text, bytes) else text,
                                 add_special=add_bos, parse_special=special)

    def detokenize(self, tokens: Sequence[int], prev_tokens: Optional[Sequence[int]] = None,
                   special: bool = False) -> bytes:
        return self.ctx.detokenize_bytes(list(tokens), render_special=special)

    def set_seed(self, seed: int) -> None:
        self._seed = seed

    def close(self) -> None:
        self.ctx.close()

    def __enter__(self) -> "Llama":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------ completions
    def _options(self, max_tokens, temperature, top_p, min_p, top_k, repeat_penalty, frequency_penalty,
                 presence_penalty, seed, stop, logit_bias) -> dict:
        kw = dict(temperature=temperature, top_p=top_p, min_p=min_p, top_k=top_k,
                  repetition_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
                  presence_penalty=presence_penalty, stop=_stops(stop) or None)
        s = seed if seed is not None else self._seed
        if s is not None:
            kw["seed"] = s
        if logit_bias:
            kw["logit_bias"] = {int(k): float(v) for k, v in logit_bias.items()}
        if max_tokens is not None and max_tokens > 0:
            kw["max_tokens"] = max_tokens
        return kw

    def create_completion(self, prompt: Union[str, List[int]], suffix: Optional[str] = None,
                          max_tokens: Optional[int] = 16, temperature: float = 0.8, top_p: float = 0.95,
                          min_p: float = 0.05, typical_p: float = 1.0, logprobs: Optional[int] = None,
                          echo: bool = False, stop: Union[None, str, List[str]] = None,
                          frequency_penalty: float = 0.0, presence_penalty: float = 0.0,
                          repeat_penalty: float = 1.0, top_k: int = 40, stream: bool = False,
                          seed: Optional[int] = None, model: Optional[str] = None,
                          grammar: Optional[LlamaGrammar] = None, logit_bias: Optional[dict] = None,
                          **ignored: Any):
        if suffix:
            raise NotImplementedError("llmrt: suffix (fill-in-the-middle) is not supported")
        kw = self._options(max_tokens, temperature, top_p, min_p, top_k, repeat_penalty, frequency_penalty,
                           presence_penalty, seed, stop, logit_bias)
        if "max_tokens" not in kw:  # None or <= 0: up to the end of the context
            n_prompt = len(prompt) if not isinstance(prompt, str) else len(self.ctx.tokenize(prompt))
            kw["max_tokens"] = max(1, self.n_ctx() - n_prompt)
        if logprobs:
            kw["top_logprobs"] = min(int(logprobs), 20)
        kw.update(_constraint(grammar, None))
        cid = "cmpl-" + uuid.uuid4().hex
        created = int(time.time())
        name = model or self.model_path or "llmrt"
        prefix = (prompt if isinstance(prompt, str) else self.ctx.detokenize(prompt)) if echo else ""
        events = self.ctx.events(prompt, **kw)
        if stream:
            return self._completion_chunks(events, cid, created, name, prefix, bool(logprobs))
        done = events.collect()
        c = done.choices[0]
        return {"id": cid, "object": "text_completion", "created": created, "model": name,
                "choices": [{"text": prefix + c.text, "index": 0,
                             "logprobs": self._logprobs(c) if logprobs else None,
                             "finish_reason": c.finish_reason}],
                "usage": {k: v for k, v in done.usage.items() if k != "prompt_tokens_details"}}

    def _logprobs(self, c) -> dict:
        pieces = [self.ctx.detokenize([t]) for t in c.tokens]
        offsets, at = [], 0
        for p in pieces:
            offsets.append(at)
            at += len(p)
        tops = [{self.ctx.detokenize([t]): lp for t, lp in top} for top in c.top_logprobs]
        return {"tokens": pieces, "text_offset": offsets, "token_logprobs": list(c.logprobs),
                "top_logprobs": tops}

    def _completion_chunks(self, events, cid, created, name, prefix, logprobs) -> Iterator[dict]:
        def chunk(text: str, reason: Optional[str], lp=None) -> dict:
            return {"id": cid, "object": "text_completion", "created": created, "model": name,
                    "choices": [{"text": text, "index": 0, "logprobs": lp, "finish_reason": reason}]}

        with events:
            if prefix:
                yield chunk(prefix, None)
            for e in events:
                if e.kind == "final":
                    if e.text:
                        yield chunk(e.text, None)
                    yield chunk("", e.finish_reason)
                elif e.text:
                    lp = None
                    if logprobs:
                        piece = self.ctx.detokenize([e.token])
                        lp = {"tokens": [piece], "text_offset": [0], "token_logprobs": [e.logprob],
                              "top_logprobs": [{self.ctx.detokenize([t]): v for t, v in e.top_logprobs}]}
                    yield chunk(e.text, None, lp)

    def __call__(self, prompt: Union[str, List[int]], **kw: Any):
        return self.create_completion(prompt, **kw)

    def create_chat_completion(self, messages: List[dict], functions: Optional[List[dict]] = None,
                               function_call: Any = None, tools: Optional[List[dict]] = None,
                               tool_choice: Any = None, temperature: float = 0.2, top_p: float = 0.95,
                               top_k: int = 40, min_p: float = 0.05, typical_p: float = 1.0, stream: bool = False,
                               stop: Union[None, str, List[str]] = None, seed: Optional[int] = None,
                               response_format: Optional[dict] = None, max_tokens: Optional[int] = None,
                               presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                               repeat_penalty: float = 1.0, model: Optional[str] = None,
                               logit_bias: Optional[dict] = None, logprobs: Optional[bool] = None,
                               top_logprobs: Optional[int] = None, grammar: Optional[LlamaGrammar] = None,
                               **ignored: Any):
        if self._chat is None:
            self._chat = Chat(self.ctx, self._chat_template, model_name=self.model_path or "llmrt")
        if functions and not tools:  # the older OpenAI shape
            tools = [{"type": "function", "function": f} for f in functions]
            if isinstance(function_call, dict):
                tool_choice = {"type": "function", "function": function_call}
            elif function_call in ("none", "auto"):
                tool_choice = function_call
        kw = self._options(max_tokens, temperature, top_p, min_p, top_k, repeat_penalty, frequency_penalty,
                           presence_penalty, seed, stop, logit_bias)
        kw.setdefault("max_tokens", None)
        if logprobs:
            kw["top_logprobs"] = min(int(top_logprobs or 0), 20) or 1
        kw.update(_constraint(grammar, response_format))
        return self._chat.create(messages, tools=tools, tool_choice=tool_choice or "auto", stream=stream, **kw)

    def embed(self, input: Union[str, List[str]], normalize: bool = True, truncate: bool = True) -> list:
        """Vectors of an embedding model: one list per text (a list of lists
        for a list of texts), as llama-cpp-python's ``embed``."""
        return self.ctx.embed(input, normalize=normalize, truncate=truncate)

    def create_embedding(self, input: Union[str, List[str]], model: Optional[str] = None) -> dict:
        """OpenAI's embeddings response shape, as llama-cpp-python's."""
        texts = [input] if isinstance(input, str) else list(input)
        vectors = self.ctx.embed(texts)
        n_tokens = sum(len(self.ctx.tokenize(t)) for t in texts)
        return {"object": "list", "model": model or self.model_path or "llmrt",
                "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}
