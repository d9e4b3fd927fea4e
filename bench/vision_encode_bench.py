#!/usr/bin/env python3
"""Image encoding time on the CPU: llmrt beside llama.cpp's libmtmd, the
Gemma 3 shape, the same projector file and pictures, the same thread count
(issue 36).

  cmake --build build --target llm-synth llmrt
  python3 bench/vision_encode_bench.py [--build build] [--threads 2] [--rounds 3] [--type f16]

The projector is llm-synth's `gemma3-4b-vision` (random weights, Gemma 3's
released tower: SigLIP so400m, width 1152, 27 layers, 896 x 896 pixels in
14 x 14 patches, pooled to 256 soft tokens of width 2560), beside a one-layer
text model of that width, which neither side's timing includes.

  llmrt      the Python binding (Context(..., mmproj_path=...), a prompt of
             text, picture, text, one token generated): llm_stats'
             image_encode_seconds, the time the engine spent preprocessing
             and encoding the picture (decoding the PNG not included)
  llama.cpp  llama-cpp-python's libmtmd (ctypes): the wall time of
             mtmd_encode_chunk on the picture's chunk (mtmd_tokenize's
             preprocessing not included, as it is cheap: a resize)

Each round encodes one new picture on each side (a new seed, so neither
side's cache answers); the sides alternate which goes first (llmrt first in
even rounds). A warm-up encode on each side comes first and is not counted.
Prints the per-round times, the medians, and llmrt / llama.cpp. Write the
figures to bench/results/<date>-vision-encode.md with the machine and the
command. Needs llama-cpp-python (with its mtmd module), numpy and Pillow.
"""
import argparse
import ctypes
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def picture(w, h, seed):
    """A w x h RGB picture with structure (gradients and blocks), as PNG bytes and raw RGB."""
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 255 // max(1, w - 1)), (y * 255 // max(1, h - 1)), ((x // 37 + y // 29) % 2) * 200],
                   axis=-1).astype(np.int32)
    img = np.clip(img + rng.integers(-30, 31, size=img.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img, "RGB").save(buf, format="PNG")
    return buf.getvalue(), img.tobytes()


class Llmrt:
    def __init__(self, build, text, proj, threads):
        os.environ.setdefault("LLMRT_LIB_DIR", str(Path(build) / "lib"))
        sys.path.insert(0, str(ROOT / "bindings" / "python" / "src"))
        import llmrt
        self.llmrt = llmrt
        self.ctx = llmrt.Context(str(text), n_threads=threads, backend="cpu", n_ctx=1024, mmproj_path=str(proj))

    def encode(self, png):
        before = self.ctx.stats()
        self.ctx.generate(["Describe ", self.llmrt.Image(png), " now."], max_tokens=1)
        after = self.ctx.stats()
        assert after["images_encoded"] == before["images_encoded"] + 1, "llmrt: the picture was not encoded"
        return after["image_encode_seconds"] - before["image_encode_seconds"]


class Mtmd:
    def __init__(self, text, proj, threads):
        import llama_cpp
        import llama_cpp.mtmd_cpp as mtmd
        self.mtmd = mtmd
        llama_cpp.llama_backend_init()
        mp = llama_cpp.llama_model_default_params()
        self.model = llama_cpp.llama_model_load_from_file(str(text).encode(), mp)
        assert self.model, "llama.cpp could not load the text model"
        cp = mtmd.mtmd_context_params_default()
        cp.use_gpu = False
        cp.n_threads = threads
        cp.print_timings = False
        cp.warmup = False
        self.ctx = mtmd.mtmd_init_from_file(str(proj).encode(), self.model, cp)
        assert self.ctx, "libmtmd could not load the projector file"

    def encode(self, w, h, rgb):
        mtmd = self.mtmd
        data = (ctypes.c_uint8 * len(rgb)).from_buffer_copy(rgb)
        bmp = mtmd.mtmd_bitmap_init(w, h, data)
        chunks = mtmd.mtmd_input_chunks_init()
        text = mtmd.mtmd_input_text()
        prompt = b"Describe " + mtmd.mtmd_default_marker() + b" now."
        text.text, text.text_len = prompt, len(prompt)
        text.add_special, text.parse_special = True, True
        bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bmp)
        assert mtmd.mtmd_tokenize(self.ctx, chunks, ctypes.byref(text), bitmaps, 1) == 0, "mtmd_tokenize failed"
        seconds = None
        for c in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, c)
            if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                continue
            t0 = time.perf_counter()
            assert mtmd.mtmd_encode_chunk(self.ctx, chunk) == 0, "mtmd_encode_chunk failed"
            seconds = time.perf_counter() - t0
            n = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
            assert n == 256, f"llama.cpp made {n} soft tokens, not 256"
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bmp)
        assert seconds is not None, "libmtmd made no image chunk"
        return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--type", default="f16", choices=["f16", "f32", "bf16"])
    ap.add_argument("--size", default="896x896", help="the pictures' size WxH (both sides resize to 896 x 896)")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        text, proj = Path(tmp) / "text.gguf", Path(tmp) / "mmproj.gguf"
        subprocess.run([str(Path(args.build) / "bin" / "llm-synth"), "--shape", "gemma3-4b-vision", "--type",
                        args.type, "--out", str(text), "--mmproj", str(proj)], check=True, stdout=subprocess.DEVNULL)
        ours, theirs = Llmrt(args.build, text, proj, args.threads), Mtmd(text, proj, args.threads)
        png, rgb = picture(w, h, 1)
        print(f"warm-up: llmrt {ours.encode(png):.2f} s, llama.cpp {theirs.encode(w, h, rgb):.2f} s", flush=True)
        a, b = [], []
        for r in range(args.rounds):
            png, rgb = picture(w, h, 100 + r)
            for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                if side == 0:
                    a.append(ours.encode(png))
                else:
                    b.append(theirs.encode(w, h, rgb))
            print(f"round {r + 1}: llmrt {a[-1]:.2f} s, llama.cpp {b[-1]:.2f} s", flush=True)
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"\nGemma 3 tower ({args.type}, {w}x{h} picture, 256 soft tokens), {args.threads} threads, "
          f"median of {args.rounds}:")
    print(f"| | s per image |\n|---|---|\n| llmrt | {ma:.2f} |\n| llama.cpp libmtmd | {mb:.2f} |")
    print(f"| llama.cpp / llmrt (speed-up) | {mb / ma:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
