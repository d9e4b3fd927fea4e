"""A submitted request's events, read synchronously (``EventStream``) or from
asyncio (``AsyncEventStream``), and the finished result (``Completion``).

Leaving a stream early (``break`` out of the loop, ``close()``, the ``with``
block, or dropping it) cancels the request."""
from __future__ import annotations

import asyncio
import queue
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Iterator, Optional

from ._poller import Event, Metrics
from .errors import LlmError, make_error


@dataclass
class Choice:
    """One generated sequence."""
    index: int
    text: str = ""
    tokens: list = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    top_logprobs: list = field(default_factory=list)
    finish_reason: Optional[str] = None
    metrics: Optional[Metrics] = None


@dataclass
class Completion:
    """A finished request: ``choices`` (one per sequence, ``n`` of them);
    ``text`` is the first one's; ``usage`` counts tokens as OpenAI does."""
    choices: list
    prompt_logprobs: Optional[list] = None

    @property
    def text(self) -> str:
        return self.choices[0].text

    @property
    def finish_reason(self) -> Optional[str]:
        return self.choices[0].finish_reason

    @property
    def metrics(self) -> Optional[Metrics]:
        return self.choices[0].metrics

    @property
    def usage(self) -> dict:
        m = self.choices[0].metrics
        prompt = m.prompt_tokens if m else 0
        gen = sum(c.metrics.generated_tokens for c in self.choices if c.metrics)
        return {"prompt_tokens": prompt, "completion_tokens": gen, "total_tokens": prompt + gen,
                "prompt_tokens_details": {"cached_tokens": m.cached_prompt_tokens if m else 0}}


class _Collector:
    def __init__(self, n: int):
        self.choices = [Choice(i) for i in range(n)]
        self.prompt_logprobs = None

    def add(self, e: Event) -> None:
        c = self.choices[e.seq_index]
        c.text += e.text
        if e.kind == "token":
            c.tokens.append(e.token)
            c.logprobs.append(e.logprob)
            if e.top_logprobs:
                c.top_logprobs.append(e.top_logprobs)
        else:
            c.finish_reason = e.finish_reason
            c.metrics = e.metrics
            if e.prompt_logprobs is not None:
                self.prompt_logprobs = e.prompt_logprobs

    def result(self) -> Completion:
        return Completion(self.choices, self.prompt_logprobs)


def _raise_if_error(e: Event) -> None:
    if e.kind == "final" and e.finish_reason == "error":
        raise make_error(e.status or 15, e.message)


class _Base:
    def __init__(self, n: int, cancel: Callable[[], None], forget: Callable[[], None]):
        self.n = n
        self._finals = 0
        self._cancel = cancel
        self._forget = forget
        self._closed = False
        self.request_id = 0

    @property
    def finished(self) -> bool:
        return self._finals >= self.n

    def _count(self, e: Event) -> None:
        if e.kind == "final":
            self._finals = self.n if e.seq_index < 0 else self._finals + 1

    def cancel(self) -> None:
        """Stops the request (it ends with finish reason "cancelled")."""
        if not self.finished:
            self._cancel()

    def close(self) -> None:
        """Cancels the request if it is still running and drops its events."""
        if not self._closed:
            self._closed = True
            self.cancel()
            self._forget()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class EventStream(_Base):
    """Iterates a request's events (``Event``) until every sequence's final
    one; a final event that carries an error raises its ``LlmError`` after
    the tokens before it."""

    def __init__(self, n: int, cancel: Callable[[], None], forget: Callable[[], None]):
        super().__init__(n, cancel, forget)
        self._q: "queue.Queue[Event]" = queue.Queue()

    def sink(self, e: Event) -> None:
        self._q.put(e)

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        if self.finished or self._closed:
            raise StopIteration
        e = self._q.get()
        self._count(e)
        _raise_if_error(e)
        return e

    def text(self) -> Iterator[str]:
        """The generated text as it arrives (non-empty pieces; sequence 0
        when n > 1 — use the events to tell sequences apart)."""
        try:
            for e in self:
                if e.text and e.seq_index == 0:
                    yield e.text
        finally:
            self.close()

    def collect(self) -> Completion:
        c = _Collector(self.n)
        try:
            for e in self:
                c.add(e)
        finally:
            self.close()
        return c.result()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncEventStream(_Base):
    """``EventStream`` for asyncio: ``async for e in stream``; the events
    arrive through the event loop the stream was created on."""

    def __init__(self, n: int, cancel: Callable[[], None], forget: Callable[[], None]):
        super().__init__(n, cancel, forget)
        self._loop = asyncio.get_running_loop()
        self._q: "asyncio.Queue[Event]" = asyncio.Queue()

    def sink(self, e: Event) -> None:
        try:
            self._loop.call_soon_threadsafe(self._q.put_nowait, e)
        except RuntimeError:  # the loop is closed: nobody is listening
            pass

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        if self.finished or self._closed:
            raise StopAsyncIteration
        e = await self._q.get()
        self._count(e)
        _raise_if_error(e)
        return e

    async def text(self) -> AsyncIterator[str]:
        try:
            async for e in self:
                if e.text and e.seq_index == 0:
                    yield e.text
        finally:
            self.close()

    async def collect(self) -> Completion:
        c = _Collector(self.n)
        try:
            async for e in self:
                c.add(e)
        finally:
            self.close()
        return c.result()

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["Choice", "Completion", "EventStream", "AsyncEventStream", "LlmError"]
