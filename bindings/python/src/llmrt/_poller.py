"""The one thread per context that calls ``llm_poll`` and routes each event,
copied out of the library's memory, to the queue of its request.

Many threads (and event loops) submit and stream on one context at once; none
of them runs inside ``llm_poll`` and none sees another's events."""
from __future__ import annotations

import ctypes as C
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

from . import _structs as S
from ._lib import lib

EVENT_TOKEN = 1
EVENT_FINAL = 2

FINISH_REASONS = {0: None, 1: "stop", 2: "length", 3: "cancelled", 4: "error"}


@dataclass
class Metrics:
    prompt_tokens: int
    cached_prompt_tokens: int
    generated_tokens: int
    draft_tokens_proposed: int
    draft_tokens_accepted: int
    preemptions: int
    queue_ms: float
    ttft_ms: float
    tpot_ms: float
    total_ms: float


@dataclass
class Event:
    """One event of a request, owned by Python. ``kind`` is "token" or
    "final". Token events: ``token``, ``text`` (whole characters; may be ""
    while a character or a possible stop string is held back), ``logprob``,
    ``top_logprobs`` (a list of (token, logprob) when asked for). The final
    event: ``finish_reason`` ("stop", "length", "cancelled", "error"),
    ``status``/``message`` (the error that ended it), ``metrics``, ``text``
    (the held-back rest), ``prompt_logprobs`` when asked for."""
    kind: str
    request_id: int
    seq_index: int
    token: int
    text: str
    logprob: float = 0.0
    top_logprobs: list = field(default_factory=list)
    finish_reason: Optional[str] = None
    status: int = 0
    message: str = ""
    metrics: Optional[Metrics] = None
    prompt_logprobs: Optional[list] = None


def _copy(ev: S.Event) -> Event:
    text = C.string_at(ev.text, ev.text_len).decode("utf-8", "replace") if ev.text_len else ""
    if ev.type == EVENT_TOKEN:
        tops = [(ev.top_logprobs[i].token, ev.top_logprobs[i].logprob) for i in range(ev.n_top_logprobs)]
        return Event("token", ev.request_id, ev.seq_index, ev.token, text, ev.logprob, tops)
    m = ev.metrics
    metrics = Metrics(m.prompt_tokens, m.cached_prompt_tokens, m.generated_tokens, m.draft_tokens_proposed,
                      m.draft_tokens_accepted, m.preemptions, m.queue_ms, m.ttft_ms, m.tpot_ms, m.total_ms)
    prompt_lp = [ev.prompt_logprobs[i] for i in range(ev.n_prompt_logprobs)] if ev.prompt_logprobs else None
    return Event("final", ev.request_id, ev.seq_index, -1, text,
                 finish_reason=FINISH_REASONS.get(ev.finish_reason, "error"), status=ev.status,
                 message=(ev.message or b"").decode("utf-8", "replace"), metrics=metrics,
                 prompt_logprobs=prompt_lp)


Sink = Callable[[Event], None]


class Poller:
    """Starts on the first request; ``stop`` ends it (before llm_ctx_destroy)."""

    CAPACITY = 64

    def __init__(self, ctx: int):
        self._ctx = ctx
        self._lock = threading.Lock()
        self._sinks: dict[int, Sink] = {}
        self._thread: Optional[threading.Thread] = None
        self._stopping = False
        self.error: Optional[BaseException] = None

    def submit(self, do_submit: Callable[[], int], sink: Sink) -> int:
        """Runs ``do_submit`` (which calls llm_submit and returns the id) and
        registers ``sink`` for the id's events. The lock held across both
        keeps the poller from routing an event of the id before the sink is
        there."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="llmrt-poller", daemon=True)
                self._thread.start()
            rid = do_submit()
            self._sinks[rid] = sink
        return rid

    def forget(self, rid: int) -> None:
        """Drops a request's sink: its later events are discarded."""
        with self._lock:
            self._sinks.pop(rid, None)

    def stop(self) -> None:
        self._stopping = True
        if self._thread is not None:
            lib.llm_wakeup(self._ctx)
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        events = (S.Event * self.CAPACITY)()
        n = C.c_uint32(0)
        try:
            while not self._stopping:
                events[0].struct_size = C.sizeof(S.Event)
                st = lib.llm_poll(self._ctx, events, self.CAPACITY, C.byref(n), -1)
                if st != 0:
                    from .errors import make_error
                    raise make_error(st, lib.llm_last_error().decode("utf-8", "replace"))
                copied = [_copy(events[i]) for i in range(n.value)]
                for e in copied:
                    with self._lock:
                        sink = self._sinks.get(e.request_id)
                        if sink is None:  # a forgotten (abandoned) request
                            continue
                    sink(e)
        except BaseException as e:  # surfaced to every waiting request
            self.error = e
            with self._lock:
                sinks = list(self._sinks.values())
            for s in sinks:
                s(Event("final", 0, -1, -1, "", finish_reason="error", status=15, message=f"poller failed: {e}"))
