"""llmrt: an embeddable LLM inference runtime, from Python.

    import llmrt
    with llmrt.Context() as ctx:                     # the built-in stories260K
        for piece in ctx.stream("Once upon a time", max_tokens=64):
            print(piece, end="", flush=True)

``Context`` (generation, streaming, asyncio, tokenizer, stats, KV files),
``Chat`` (OpenAI-shaped chat completions with templates and tools),
``llama_compat.Llama`` (llama-cpp-python's shape). Errors raise ``LlmError``
subclasses carrying the C API's status and message."""
from ._lib import lib as _clib
from ._poller import Event, Metrics
from ._stream import AsyncEventStream, Choice, Completion, EventStream
from .chat import Chat, parse_tool_calls
from .context import Context, ModelInfo
from .image import Image
from .errors import (BusyError, ContextOverflowError, InvalidArgumentError, KvStateError, LlmError,
                     ModelLoadError, OutOfMemoryError, UnsupportedError)

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the loaded libllmrt ("0.1.0")."""
    return _clib.llm_version().decode()


__all__ = ["Context", "Chat", "Image", "ModelInfo", "Completion", "Choice", "Event", "Metrics", "EventStream",
           "AsyncEventStream", "parse_tool_calls", "LlmError", "InvalidArgumentError", "ModelLoadError",
           "UnsupportedError", "OutOfMemoryError", "BusyError", "ContextOverflowError", "KvStateError",
           "library_version"]
