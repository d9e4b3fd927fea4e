"""Errors of the C API as Python exceptions: each carries the status code, its
name (``LLM_ERR_BUSY``) and the library's message (``llm_last_error``)."""
from __future__ import annotations

# The status codes of include/llm.h (tests/test_abi.py checks them against it).
OK = 0
INVALID_ARGUMENT = 1
NULL_ARGUMENT = 2
STRUCT_SIZE = 3
IO = 4
MODEL_FORMAT = 5
UNSUPPORTED = 6
OUT_OF_MEMORY = 7
BUSY = 8
NOT_FOUND = 9
CONTEXT_OVERFLOW = 10
INVALID_UTF8 = 11
BUFFER_TOO_SMALL = 12
BACKEND = 13
SHUTDOWN = 14
INTERNAL = 15
KV_MISMATCH = 16
KV_CORRUPT = 17


class LlmError(Exception):
    """A C API call failed. ``status`` is the code, ``name`` its
    ``LLM_ERR_*`` name, ``message`` what the library said."""

    def __init__(self, status: int, name: str, message: str):
        self.status = status
        self.name = name
        self.message = message
        super().__init__(f"{name}: {message}" if message else name)


class InvalidArgumentError(LlmError, ValueError):
    """A value out of range or inconsistent (also NULL arguments, invalid
    UTF-8 and struct-size mismatches)."""


class ModelLoadError(LlmError, OSError):
    """The model file is missing, unreadable or malformed."""


class UnsupportedError(LlmError):
    """Valid, but not supported by this build or backend."""


class OutOfMemoryError(LlmError, MemoryError):
    """Host or device memory exhausted."""


class BusyError(LlmError):
    """The request queue is full: retry later."""


class ContextOverflowError(LlmError, ValueError):
    """The prompt or the request does not fit the context."""


class KvStateError(LlmError):
    """A KV stream of another model or geometry, or a corrupt one."""


_CLASSES = {
    INVALID_ARGUMENT: InvalidArgumentError,
    NULL_ARGUMENT: InvalidArgumentError,
    STRUCT_SIZE: InvalidArgumentError,
    INVALID_UTF8: InvalidArgumentError,
    IO: ModelLoadError,
    MODEL_FORMAT: ModelLoadError,
    UNSUPPORTED: UnsupportedError,
    OUT_OF_MEMORY: OutOfMemoryError,
    BUSY: BusyError,
    CONTEXT_OVERFLOW: ContextOverflowError,
    KV_MISMATCH: KvStateError,
    KV_CORRUPT: KvStateError,
}


def make_error(status: int, message: str) -> LlmError:
    from ._lib import lib
    name = lib.llm_status_str(status).decode()
    return _CLASSES.get(status, LlmError)(status, name, message)


def check(status: int) -> None:
    """Raises the exception for a failed call's status (with the calling
    thread's llm_last_error)."""
    if status != OK:
        from ._lib import lib
        raise make_error(status, lib.llm_last_error().decode("utf-8", "replace"))
