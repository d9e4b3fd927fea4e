"""Cancellation by leaving a loop, closing a stream, many threads and asyncio
tasks on one context (each gets its own request's tokens)."""
import asyncio
import threading
import time

import pytest

from conftest import golden_cases


def _wait_finished(ctx, count, timeout=10.0):
    end = time.time() + timeout
    while ctx.stats()["requests_finished"] < count and time.time() < end:
        time.sleep(0.01)
    return ctx.stats()["requests_finished"] >= count


def test_breaking_out_of_the_loop_cancels(ctx):
    before = ctx.stats()
    got = []
    for piece in ctx.stream("Once upon a time", max_tokens=400, ignore_eos=True, temperature=0):
        got.append(piece)
        if len(got) == 3:
            break
    assert _wait_finished(ctx, before["requests_finished"] + 1)
    after = ctx.stats()
    # far fewer than the 400 asked for were generated
    assert after["generated_tokens"] - before["generated_tokens"] < 200


def test_cancel_gives_a_cancelled_final_event(ctx):
    s = ctx.events("Once upon a time", max_tokens=400, ignore_eos=True)
    first = next(s)
    assert first.kind == "token"
    s.cancel()
    rest = list(s)
    assert rest[-1].kind == "final" and rest[-1].finish_reason == "cancelled"
    assert rest[-1].metrics.generated_tokens < 400


def test_threads_share_a_context(ctx):
    cases = golden_cases()[:4] * 2
    results = [None] * len(cases)

    def run(i):
        prompt, expected, _ = cases[i]
        results[i] = ctx.generate(prompt, max_tokens=len(expected), temperature=0).choices[0].tokens

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for (prompt, expected, _), got in zip(cases, results):
        assert got is not None and got == expected[: len(got)]


def test_asyncio_tasks_share_a_context(ctx):
    cases = golden_cases()[:4]

    async def main():
        outs = await asyncio.gather(*[ctx.agenerate(p, max_tokens=len(e), temperature=0) for p, e, _ in cases])
        pieces = []
        async for piece in ctx.astream("Once upon a time", max_tokens=16, temperature=0):
            pieces.append(piece)
        return outs, "".join(pieces)

    outs, streamed = asyncio.run(main())
    for (p, expected, _), out in zip(cases, outs):
        assert out.choices[0].tokens == expected[: len(out.choices[0].tokens)]
    assert streamed == ctx.generate("Once upon a time", max_tokens=16, temperature=0).text


def test_polling_releases_the_gil(ctx):
    # After a request the poller thread waits inside llm_poll with no time
    # limit; had it kept the GIL, no other Python thread would run.
    ctx.generate("Once upon a time", max_tokens=4)
    ticks = 0
    stop = threading.Event()

    def spin():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.2)
    stop.set()
    t.join()
    assert ticks > 20


def test_closed_context_refuses(ctx):
    import llmrt
    c = llmrt.Context(n_ctx=128)
    c.close()
    with pytest.raises(ValueError):
        c.generate("hi")
    c.close()  # twice is fine
