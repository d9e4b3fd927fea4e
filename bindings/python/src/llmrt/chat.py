"""Chat on a ``Context``: OpenAI-shaped messages in, OpenAI-shaped
``chat.completion`` dicts (or ``chat.completion.chunk`` dicts when
streaming) out, with the model's chat template, tools and tool-call parsing,
and ``response_format``.

    chat = llmrt.Chat(ctx)
    reply = chat.create([{"role": "user", "content": "Hi"}], max_tokens=64)
    print(reply["choices"][0]["message"]["content"])
"""
from __future__ import annotations

import ctypes as C
import json
import time
import uuid
from typing import Any, Iterator, Mapping, Optional, Sequence

from . import _structs as S
from ._lib import lib
from .context import Context
from .errors import BUFFER_TOO_SMALL, UNSUPPORTED, check

TOOL_FORMAT_AUTO = 0
TOOL_FORMAT_GENERIC = 1

# A model without a chat template (stories260K) gets this plain one, and
# stops where it would start the user's next turn.
FALLBACK_TEMPLATE = ("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                     "{% if add_generation_prompt %}assistant:{% endif %}")
FALLBACK_STOP = "\nuser:"


def _call_with_buffer(fn, *args) -> str:
    cap = 4096
    while True:
        buf = C.create_string_buffer(cap)
        n = C.c_size_t(0)
        st = fn(*args, buf, cap, C.byref(n))
        if st == BUFFER_TOO_SMALL:
            cap = n.value
            continue
        check(st)
        return buf.raw[: n.value].decode("utf-8")


def parse_tool_calls(text: str, fmt: int = TOOL_FORMAT_AUTO) -> dict:
    """The library's tool-call parser: {"content": str, "tool_calls":
    [{"name", "arguments" (an object)}]}."""
    data = text.encode("utf-8")
    return json.loads(_call_with_buffer(lib.llm_chat_parse_tool_calls, fmt, data, len(data)))


def _tools_prompt(tools: Sequence[Mapping[str, Any]], choice: Any) -> str:
    lines = ["Tools you can call (\"parameters\" is the JSON Schema of a tool's arguments):"]
    lines += [json.dumps(t["function"], ensure_ascii=False) for t in tools]
    ask = "To call a tool, reply with only a JSON object {\"name\": <tool name>, \"arguments\": <arguments object>}"
    if choice == "required":
        ask += ". Call one of the tools now."
    elif isinstance(choice, Mapping):
        ask += f". Call the tool \"{choice['function']['name']}\" now."
    else:
        ask += ", or answer normally without calling one."
    return "\n".join(lines + [ask])


def _call_schema(tools: Sequence[Mapping[str, Any]], choice: Any) -> dict:
    """A JSON Schema that only a call of the allowed tools matches."""
    named = choice["function"]["name"] if isinstance(choice, Mapping) else None
    options = []
    for t in tools:
        f = t["function"]
        if named is not None and f["name"] != named:
            continue
        options.append({"type": "object", "properties": {"name": {"const": f["name"]},
                                                         "arguments": f.get("parameters") or {"type": "object"}},
                        "required": ["name", "arguments"], "additionalProperties": False})
    if not options:
        raise ValueError(f"tool_choice names a tool that is not in tools: {named!r}")
    return options[0] if len(options) == 1 else {"anyOf": options}


def _content_text(content: Any) -> str:
    if content is None:
        return ""  # templates test `in content`: null would fail them
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise ValueError("only text content parts are supported")
        parts.append(part["text"])
    return "\n".join(parts)


def _call_text(call: Mapping[str, Any]) -> str:
    f = call.get("function", {})
    args = f.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    # The name first, as models write it.
    return "{\"name\": " + json.dumps(f.get("name"), ensure_ascii=False) + ", \"arguments\": " + \
        json.dumps(args, ensure_ascii=False) + "}"


def _messages_for_template(messages: Sequence[Mapping[str, Any]], calls_as_text: bool) -> list:
    """OpenAI's messages as templates (and transformers) want them: content as
    text, tool-call arguments as objects; for a template that does not know
    tools (``calls_as_text``), an assistant's calls are also written into its
    content the way the model was asked to write them."""
    out = []
    for m in messages:
        m = dict(m)
        role = {"developer": "system", "function": "tool"}.get(m.get("role"), m.get("role"))
        m["role"] = role
        m["content"] = _content_text(m.get("content"))
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                c = json.loads(json.dumps(c))
                f = c.get("function", {})
                if isinstance(f.get("arguments"), str):
                    try:
                        f["arguments"] = json.loads(f["arguments"])
                    except ValueError:
                        pass
                calls.append(c)
            if calls_as_text:
                text = "\n".join(_call_text(c) for c in m["tool_calls"])
                m["content"] = text if not m["content"] else m["content"] + "\n" + text
            m["tool_calls"] = calls
        out.append(m)
    return out


class Chat:
    """Chat completions over a context with its model's template (or
    ``template``, a Jinja text)."""

    def __init__(self, ctx: Context, template: Optional[str] = None, model_name: Optional[str] = None):
        self.ctx = ctx
        self.template = template
        self.stops: list = []
        self.model_name = model_name or (ctx.info.name or "llmrt")
        probe = (S.ChatMessage * 1)(S.ChatMessage(b"user", b"hi"))
        n = C.c_size_t(0)
        tmpl = template.encode() if template else None
        st = lib.llm_chat_apply_template(ctx.handle, tmpl, probe, 1, 1, None, 0, C.byref(n))
        if st == UNSUPPORTED and template is None:
            self.template = FALLBACK_TEMPLATE
            self.stops = [FALLBACK_STOP]
        elif st not in (0, BUFFER_TOO_SMALL):
            check(st)
        fmt = C.c_int32(TOOL_FORMAT_GENERIC)
        if not self.stops:
            check(lib.llm_chat_tool_format(ctx.handle, self._tmpl(), C.byref(fmt)))
        self.tool_format = fmt.value
        bos = ctx.info.bos
        self._bos_text = ctx.detokenize([bos], render_special=True) if bos >= 0 else ""

    def _tmpl(self) -> Optional[bytes]:
        return self.template.encode("utf-8") if self.template else None

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Optional[Sequence[Mapping[str, Any]]] = None,
               add_generation_prompt: bool = True,
               chat_template_kwargs: Optional[Mapping[str, Any]] = None) -> str:
        """The prompt the template makes of ``messages`` (and ``tools``);
        ``chat_template_kwargs``: more template variables
        (``{"enable_thinking": False}``)."""
        calls_as_text = self.tool_format == TOOL_FORMAT_GENERIC
        msgs = json.dumps(_messages_for_template(messages, calls_as_text), ensure_ascii=False).encode("utf-8")
        tl = json.dumps(list(tools), ensure_ascii=False).encode("utf-8") if tools else None
        if chat_template_kwargs:
            vs = json.dumps(dict(chat_template_kwargs), ensure_ascii=False).encode("utf-8")
            return _call_with_buffer(lib.llm_chat_apply_template_vars, self.ctx.handle, self._tmpl(), msgs, tl, vs,
                                     int(add_generation_prompt))
        return _call_with_buffer(lib.llm_chat_apply_template_json, self.ctx.handle, self._tmpl(), msgs, tl,
                                 int(add_generation_prompt))

    def _prepare(self, messages, tools, tool_choice, kw) -> tuple:
        messages = list(messages)
        tools = list(tools or [])
        if tool_choice == "none":
            tools = []
        native = bool(tools) and self.tool_format != TOOL_FORMAT_GENERIC
        if tools and not native:
            note = _tools_prompt(tools, tool_choice)
            if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
                messages[0] = dict(messages[0], content=messages[0]["content"] + "\n\n" + note)
            else:
                messages.insert(0, {"role": "system", "content": note})
        if tools and (tool_choice == "required" or isinstance(tool_choice, Mapping)):
            if any(k in kw for k in ("response_format", "json_schema", "regex", "grammar", "choices")):
                raise ValueError("tool_choice required/named cannot be combined with another constraint")
            kw["json_schema"] = _call_schema(tools, tool_choice)
        prompt = self.render(messages, tools if native else None,
                             chat_template_kwargs=kw.pop("chat_template_kwargs", None))
        has_bos = bool(self._bos_text) and prompt.startswith(self._bos_text)
        kw.setdefault("parse_special", True)
        kw.setdefault("add_special", not has_bos)
        if self.stops:
            stop = kw.get("stop") or []
            kw["stop"] = ([stop] if isinstance(stop, str) else list(stop)) + self.stops
        if kw.get("max_tokens") is None:
            kw["max_tokens"] = max(1, self.ctx.info.n_ctx - len(self.ctx.tokenize(prompt, add_special=False)) - 1)
        return prompt, tools, (TOOL_FORMAT_AUTO if native else TOOL_FORMAT_GENERIC)

    def _message(self, text: str, tools, fmt) -> tuple:
        if not tools:
            return {"role": "assistant", "content": text}, None
        try:
            parsed = parse_tool_calls(text, fmt)
        except Exception:
            return {"role": "assistant", "content": text}, None
        if not parsed["tool_calls"]:
            return {"role": "assistant", "content": text}, None
        calls = [{"id": c.get("id") or "call_" + uuid.uuid4().hex[:24], "type": "function",
                  "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
                 for c in parsed["tool_calls"]]
        return {"role": "assistant", "content": parsed["content"] or None, "tool_calls": calls}, "tool_calls"

    def create(self, messages: Sequence[Mapping[str, Any]], *, tools: Optional[Sequence[Mapping[str, Any]]] = None,
               tool_choice: Any = "auto", stream: bool = False, **kw: Any):
        """A ``chat.completion`` dict, or with ``stream=True`` an iterator of
        ``chat.completion.chunk`` dicts. ``kw``: the options of
        ``Context.events`` (``max_tokens`` None = up to the context's end)."""
        kw = dict(kw)
        prompt, tools, fmt = self._prepare(messages, tools, tool_choice, kw)
        events = self.ctx.events(prompt, **kw)
        if stream:
            return self._chunks(events, tools, fmt)
        done = events.collect()
        choices = []
        for c in done.choices:
            msg, reason = self._message(c.text, tools, fmt)
            choice = {"index": c.index, "message": msg, "finish_reason": reason or c.finish_reason,
                      "logprobs": None}
            if kw.get("top_logprobs"):
                choice["logprobs"] = {"content": self._logprobs(c)}
            choices.append(choice)
        return {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
                "model": self.model_name, "choices": choices, "usage": done.usage}

    def _logprobs(self, c) -> list:
        out = []
        for i, tok in enumerate(c.tokens):
            piece = self.ctx.detokenize([tok])
            tops = c.top_logprobs[i] if i < len(c.top_logprobs) else []
            out.append({"token": piece, "logprob": c.logprobs[i],
                        "top_logprobs": [{"token": self.ctx.detokenize([t]), "logprob": lp} for t, lp in tops]})
        return out

    def _chunks(self, events, tools, fmt) -> Iterator[dict]:
        cid = "chatcmpl-" + uuid.uuid4().hex
        created = int(time.time())

        def chunk(i: int, delta: dict, reason: Optional[str] = None) -> dict:
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": self.model_name,
                    "choices": [{"index": i, "delta": delta, "finish_reason": reason}]}

        started = set()
        texts: dict = {}
        with events:
            for e in events:
                i = e.seq_index
                if i not in started:
                    started.add(i)
                    yield chunk(i, {"role": "assistant", "content": ""})
                if tools:  # calls are reported whole, at the end
                    texts[i] = texts.get(i, "") + e.text
                elif e.text:
                    yield chunk(i, {"content": e.text})
                if e.kind == "final":
                    reason = e.finish_reason
                    if tools:
                        msg, r = self._message(texts.get(i, ""), tools, fmt)
                        delta = {k: v for k, v in msg.items() if k != "role" and v is not None}
                        if "tool_calls" in delta:
                            delta["tool_calls"] = [dict(c, index=k) for k, c in enumerate(delta["tool_calls"])]
                        if delta:
                            yield chunk(i, delta)
                        reason = r or reason
                    yield chunk(i, {}, reason)
