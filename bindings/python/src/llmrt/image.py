"""Pictures in a prompt (``llm_content_part``): a prompt given as a list of
``str`` and ``Image`` parts is sent as ``llm_request.parts``. The context
needs a projector file (``Context(..., mmproj_path=...)``, llama.cpp's
``--mmproj``)."""
from __future__ import annotations

import ctypes as C
from typing import Any, Sequence, Union

from . import _structs as S
from ._lib import lib
from .errors import check


class Image:
    """One picture: ``Image(data)`` with the bytes of a PNG, JPEG or WebP file
    (the format is sniffed by the library), or ``Image.rgb(pixels, width,
    height)`` with width x height 8-bit RGB pixels, row after row."""

    __slots__ = ("data", "width", "height")

    def __init__(self, data: Union[bytes, bytearray, memoryview], width: int = 0, height: int = 0) -> None:
        self.data = bytes(data)
        self.width, self.height = int(width), int(height)

    @classmethod
    def rgb(cls, pixels: Union[bytes, bytearray, memoryview], width: int, height: int) -> "Image":
        if width <= 0 or height <= 0:
            raise ValueError("an RGB image needs a positive width and height")
        return cls(pixels, width, height)

    @classmethod
    def open(cls, path: Any) -> "Image":
        """The encoded file at ``path``."""
        with open(path, "rb") as f:
            return cls(f.read())

    @property
    def is_rgb(self) -> bool:
        return self.width > 0


Part = Union[str, Image]


def is_parts(prompt: Any) -> bool:
    """Whether ``prompt`` is a list of parts (str and Image), not text or token ids."""
    return not isinstance(prompt, (str, bytes)) and any(isinstance(p, (str, Image)) for p in prompt)


def content_parts(parts: Sequence[Part], keep: list) -> tuple[Any, int]:
    """An ``llm_content_part`` array for ``parts``; what it points into is
    appended to ``keep`` (alive until the library has copied it)."""
    arr = (S.ContentPart * max(1, len(parts)))()
    for i, part in enumerate(parts):
        p = arr[i]
        p.struct_size = C.sizeof(S.ContentPart)
        check(lib.llm_content_part_init(C.byref(p)))
        if isinstance(part, str):
            text = part.encode("utf-8")
            keep.append(text)
            p.kind, p.text = S.CONTENT_TEXT, text
        elif isinstance(part, Image):
            buf = C.create_string_buffer(part.data, len(part.data)) if part.data else None
            keep.append(buf)
            p.kind = S.CONTENT_IMAGE_RGB if part.is_rgb else S.CONTENT_IMAGE
            p.data = C.cast(buf, C.c_void_p) if buf is not None else None
            p.n_data = len(part.data)
            p.width, p.height = part.width, part.height
        else:
            raise TypeError(f"a prompt part is str or llmrt.Image, not {type(part).__name__}")
    keep.append(arr)
    return arr, len(parts)
