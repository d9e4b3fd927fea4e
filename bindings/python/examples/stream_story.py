"""Streams a story from the built-in model (or the GGUF file given), then the
same with asyncio and through the llama-cpp-python-shaped class."""
import asyncio
import sys

import llmrt
from llmrt.llama_compat import Llama

model = sys.argv[1] if len(sys.argv) > 1 else None

with llmrt.Context(model) as ctx:
    for piece in ctx.stream("Once upon a time", max_tokens=64):
        print(piece, end="", flush=True)
    print()

    async def two_at_once():
        a, b = await asyncio.gather(ctx.agenerate("The cat", max_tokens=24, seed=1),
                                    ctx.agenerate("The dog", max_tokens=24, seed=2))
        print("cat:", a.text)
        print("dog:", b.text)

    asyncio.run(two_at_once())

llm = Llama(model_path=model, n_ctx=512)
out = llm("Once upon a time", max_tokens=24, stop=["."])
print(out["choices"][0]["text"], out["usage"])
