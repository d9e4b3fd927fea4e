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
import ctypes
import io
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vision_reference import fnv1a64, picture  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "vision"
SYNTH = ["--shape", "tiny-qwen2vl", "--type", "f32", "--seed", "11"]
THREADS = 2
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
    lib = Path(args.lib).resolve()
    os.environ["LLAMA_CPP_LIB_PATH"] = str(lib)
    os.environ["MTMD_CPP_LIB"] = str(lib)
    import llama_cpp
    import llama_cpp.mtmd_cpp as mtmd

    oracle_note = (lib / "llmrt-oracle.txt").read_text(encoding="utf-8").strip()
    with tempfile.TemporaryDirectory() as tmp:
        text_path, proj_path = Path(tmp) / "text.gguf", Path(tmp) / "mmproj.gguf"
        subprocess.run([args.synth, *SYNTH, "--out", str(text_path), "--mmproj", str(proj_path)],
                       check=True, stdout=subprocess.DEVNULL)
        llama_cpp.llama_backend_init()
        mp = llama_cpp.llama_model_default_params()
        model = llama_cpp.llama_model_load_from_file(str(text_path).encode(), mp)
        assert model, "llama.cpp could not load the text model"
        cp = mtmd.mtmd_context_params_default()
        cp.use_gpu = False
        cp.n_threads = THREADS
        cp.print_timings = False
        cp.warmup = False
        cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        ctx = mtmd.mtmd_init_from_file(str(proj_path).encode(), model, cp)
        assert ctx, "libmtmd could not load the projector file"
        n_embd = llama_cpp.llama_model_n_embd(model)
        marker = mtmd.mtmd_default_marker()

        blob = bytearray()
        cases = []
        for i, (w, h) in enumerate(SIZES):
            img = picture(w, h, 200 + i)
            tw, th = target_size(w, h)
            fitted = fit_pil(img, tw, th)
            data = (ctypes.c_uint8 * img.size).from_buffer_copy(img.tobytes())
            bmp = mtmd.mtmd_bitmap_init(w, h, data)
            chunks = mtmd.mtmd_input_chunks_init()
            text = mtmd.mtmd_input_text()
            text.text = marker
            text.text_len = len(marker)
            text.add_special = False
            text.parse_special = True
            bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bmp)
            rc = mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text), bitmaps, 1)
            assert rc == 0, f"mtmd_tokenize: {rc}"
            emb = None
            for c in range(mtmd.mtmd_input_chunks_size(chunks)):
                chunk = mtmd.mtmd_input_chunks_get(chunks, c)
                if mtmd.mtmd_input_chunk_get_type(chunk) != mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
                    continue
                assert mtmd.mtmd_encode_chunk(ctx, chunk) == 0
                n_tok = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
                ptr = mtmd.mtmd_get_output_embd(ctx)
                emb = np.ctypeslib.as_array(ptr, shape=(n_tok * n_embd,)).astype("<f4").copy()
            mtmd.mtmd_input_chunks_free(chunks)
            mtmd.mtmd_bitmap_free(bmp)
            assert emb is not None, "no image chunk"
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
    with tarfile.open(OUT / "qwen25vl.tar.xz", "w:xz") as tar:
        def add(name, data):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            tar.addfile(ti, io.BytesIO(data))
        add("qwen25vl.json", (json.dumps(doc, indent=1) + "\n").encode())
        add("qwen25vl.bin", bytes(blob))
    print(f"wrote {OUT / 'qwen25vl.tar.xz'} ({(OUT / 'qwen25vl.tar.xz').stat().st_size} bytes)")


if __name__ == "__main__":
    sys.exit(main())
