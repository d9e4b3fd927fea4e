#!/usr/bin/env python3
"""Reference image embeddings of llama.cpp's multimodal library (libmtmd)
for the tiny synthesized Qwen2.5-VL projector (tests/test_vision_qwen25vl.cpp),
as tools/vision_reference.py records them for Gemma 3 (same oracle: read
its docstring for --lib and why the exact-GELU, F32-im2col libraries).

  cmake --build build --target llm-synth
  LIB="$(bench/peer/build_ggml_cpu_exactgelu.sh)"
  python3 tools/vision_reference_qwen25vl.py --lib "$LIB" [--synth build/bin/llm-synth]
    # -> tests/data/vision/qwen25vl.tar.xz holding qwen25vl.json and
    #    qwen25vl.bin, unpacked in place at configure time

Qwen2.5-VL reads each picture at its own size: llama.cpp sizes it to
multiples of 28 (patch 14 x the 2 x 2 merger) holding 8 to 4096 merged
tokens, fits it there with Pillow-compatible BICUBIC resampling (centred on
black where the aspect ratio moved), and the tower attends in windows of
112 pixels in some layers. The pictures (drawn by vision_reference.py's
picture()) cover: sizes kept as they are, rounded, upscaled to the
8-token floor, wide and tall, one window and several windows per side.

qwen25vl.bin holds, picture after picture, at the offsets qwen25vl.json
names: the picture (height x width x 3 bytes); the picture as the tower
reads it (resized_h x resized_w x 3), made by Pillow (Image.resize BICUBIC
to llama.cpp's fitted size, the width pass then the height pass as
llama.cpp orders them, pasted centred on black: an independent check of
llmrt's sizing and resize); llama.cpp's embeddings (n_tokens x n_embd
float32 little-endian). Also recorded: the llm-synth arguments and the
FNV-1a 64 hash of both files.
"""
import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vision_oracle import (THREADS, embed_picture, fnv1a64, load_bindings, open_model, picture,  # noqa: E402
                           synthesize, write_tar)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "vision"
SYNTH = ["--shape", "tiny-qwen2vl", "--type", "f32", "--seed", "11"]
ALIGN = 28                      # patch_size 14 x merge 2
MIN_PIXELS = 8 * ALIGN * ALIGN  # llama.cpp's floor for Qwen2.5-VL
MAX_PIXELS = 4096 * ALIGN * ALIGN
# (width, height): a multiple of 28 kept as is; rounded, wide (3 windows
# across), tall (2 down), square (2 x 2) and 6 x 4 cells; upscaled to the
# floor (a wide strip, a thin sliver). Small, as the noisy pixels do not
# compress.
SIZES = [(112, 84), (250, 90), (60, 200), (150, 150), (57, 23), (7, 31), (180, 100)]


def target_size(w, h):
    """llama.cpp's calc_size_preserved_ratio for Qwen2.5-VL, in float32."""
    f32 = np.float32
    def rnd(x):  # std::round: half away from zero
        q = f32(x) / f32(ALIGN)
        return int(math.floor(abs(q) + 0.5)) * ALIGN
    def ceil_(x):
        return int(math.ceil(f32(x) / f32(ALIGN))) * ALIGN
    def floor_(x):
        return int(math.floor(f32(x) / f32(ALIGN))) * ALIGN
    wb, hb = max(ALIGN, rnd(f32(w))), max(ALIGN, rnd(f32(h)))
    if wb * hb > MAX_PIXELS:
        beta = np.sqrt(f32(h) * f32(w) / f32(MAX_PIXELS), dtype=np.float32)
        hb, wb = max(ALIGN, floor_(f32(h) / beta)), max(ALIGN, floor_(f32(w) / beta))
    elif wb * hb < MIN_PIXELS:
        beta = np.sqrt(f32(MIN_PIXELS) / (f32(h) * f32(w)), dtype=np.float32)
        hb, wb = ceil_(f32(h) * beta), ceil_(f32(w) * beta)
    return wb, hb


def fit_pil(img, tw, th):
    """llama.cpp's fit into tw x th (float scale, ceil, centred on black) with Pillow's BICUBIC."""
    from PIL import Image
    h, w = img.shape[:2]
    if (w, h) == (tw, th):
        return img.copy()
    s = min(np.float32(tw) / np.float32(w), np.float32(th) / np.float32(h))
    nw = min(int(math.ceil(np.float32(w) * s)), tw)
    nh = min(int(math.ceil(np.float32(h) * s)), th)
    # Pillow's BICUBIC one pass at a time, width first as llama.cpp does:
    # Pillow's own resize((nw, nh)) runs the height first when that is less
    # work (60x200 -> 56x187 differs in 8901 of 31416 bytes that way)
    scaled = Image.fromarray(img, "RGB")
    if nw != w:
        scaled = scaled.resize((nw, h), Image.BICUBIC)
    if nh != h:
        scaled = scaled.resize((nw, nh), Image.BICUBIC)
    canvas = Image.new("RGB", (tw, th), (0, 0, 0))
    canvas.paste(scaled, ((tw - nw) // 2, (th - nh) // 2))
    return np.asarray(canvas, dtype=np.uint8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--synth", default=str(ROOT / "build" / "bin" / "llm-synth"))
    ap.add_argument("--lib", required=True, help="folder of llama-cpp-python's libraries (exact-GELU libggml-cpu)")
    args = ap.parse_args()
    llama_cpp, mtmd, oracle_note = load_bindings(args.lib)
    with tempfile.TemporaryDirectory() as tmp:
        text_path, proj_path = synthesize(args.synth, SYNTH, tmp)
        model, ctx = open_model(llama_cpp, mtmd, text_path, proj_path)
        n_embd = llama_cpp.llama_model_n_embd(model)

        blob = bytearray()
        cases = []
        for i, (w, h) in enumerate(SIZES):
            img = picture(w, h, 200 + i)
            tw, th = target_size(w, h)
            fitted = fit_pil(img, tw, th)
            emb = embed_picture(mtmd, ctx, img, n_embd)
            n_tokens = int(emb.size // n_embd)
            assert n_tokens == (tw // ALIGN) * (th // ALIGN), (w, h, tw, th, n_tokens)
            case = {"width": w, "height": h, "resized_width": tw, "resized_height": th, "rgb_offset": len(blob)}
            blob += img.tobytes()
            case["resized_offset"] = len(blob)
            blob += fitted.tobytes()
            case["embd_offset"] = len(blob)
            case["n_tokens"] = n_tokens
            blob += emb.tobytes()
            cases.append(case)
            print(f"{w}x{h} -> {tw}x{th}: {n_tokens} tokens, |e| = {float(np.linalg.norm(emb)):.4f}")
        mtmd.mtmd_free(ctx)
        llama_cpp.llama_model_free(model)
        doc = {
            "origin": "tools/vision_reference_qwen25vl.py",
            "oracle": f"llama-cpp-python {llama_cpp.__version__}'s libmtmd on {oracle_note}; "
                      f"CPU, {THREADS} threads, flash attention off, raw RGB bitmaps",
            "synth_args": SYNTH,
            "text_fnv1a64": fnv1a64(text_path.read_bytes()),
            "mmproj_fnv1a64": fnv1a64(proj_path.read_bytes()),
            "n_embd": n_embd,
            "cases": cases,
        }
    OUT.mkdir(parents=True, exist_ok=True)
    write_tar(OUT / "qwen25vl.tar.xz", {"qwen25vl.json": (json.dumps(doc, indent=1) + "\n").encode(),
                                        "qwen25vl.bin": bytes(blob)})


if __name__ == "__main__":
    sys.exit(main())
