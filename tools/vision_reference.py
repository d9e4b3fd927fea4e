#!/usr/bin/env python3
"""Reference image embeddings of llama.cpp's multimodal library (libmtmd)
for the tiny synthesized projectors (tests/test_vision.cpp): Gemma 3,
Idefics3 (SmolVLM) and LLaVA-style CLIP + MLP, from llama-cpp-python's
bindings (an oracle at test-data generation time only, never a build or CI
dependency).

  cmake --build build --target llm-synth
  pip install llama-cpp-python numpy pillow       # a build that carries libmtmd.so
  LIB="$(bench/peer/build_ggml_cpu_exactgelu.sh)"  # llama-cpp-python's libraries, exact F32 GELU
  bench/peer/build_mtmd_clsfirst.sh "$LIB"          # LLaVA: libmtmd with CLIP's class token first
  LD_PRELOAD="$LIB/libmtmd_llava_clsfirst.so" python3 tools/vision_reference.py --lib "$LIB" [--synth build/bin/llm-synth] [--family F ...]
    # -> tests/data/vision/vision.tar.xz holding gemma3.json, gemma3.bin and
    #    the pictures as PNG (img_<w>x<h>.png), unpacked in place at configure time;
    #    tests/data/vision/<family>.tar.xz (idefics3, mlp) holding <family>.json/.bin

Two F16 roundings in pip's ggml would leave the oracle itself away from an
F32 model: GELU's lookup table (GGML_GELU_FP16) and ggml_conv_2d's im2col,
laid out in F16 unless the kernel is BF16 (the patch embedding of an F32
file computed on F16-rounded pixels and weights: 2-3.5e-4 of the soft
tokens' norm, up to 1.2e-3 on one value). So --lib names a folder of
llama-cpp-python's own libraries with libggml-cpu and libggml-base rebuilt
from the same source without them (bench/peer/build_ggml_cpu_exactgelu.sh);
with it llama.cpp agrees with a float64 numpy model of the file to ~2e-7.
Flash attention is off: with it, llama.cpp's CPU path casts K and V to F16.

For each synthetic picture (several sizes and aspect ratios, drawn with
numpy: gradients, a disc, a bar and noise), llama.cpp tokenizes
"<__media__>" with the picture as a raw RGB bitmap (mtmd_bitmap_init: no
image decoder involved), encodes the image chunk (mtmd_encode_chunk) and
returns its soft tokens (mtmd_get_output_embd): n_tokens x n_embd float32.

gemma3.bin holds, picture after picture, at the offsets gemma3.json names:
the picture (height x width x 3 bytes), the picture letterboxed to the
tower's S x S by Pillow (Image.resize BILINEAR to llama.cpp's fitted size,
pasted centred on black: an independent check of llmrt's resize), then
llama.cpp's embeddings (float32 little-endian). Recorded beside them: the
llm-synth arguments and the FNV-1a 64 hash of both files, so the test
rebuilds exactly the models llama.cpp saw.

The other families' files hold, per picture, the picture, then per image
chunk libmtmd made of it (Idefics3: each tile, row after row, then the
overview; LLaVA: one) the tower's input as Pillow makes it (LLaVA: BICUBIC
fit on the grey (122, 116, 104); Idefics3: LANCZOS to the longest edge,
LANCZOS to whole tiles, the tiles cut out and the overview LANCZOS from the
tiled picture) and llama.cpp's embeddings; and the text chunks between the
image chunks as token ids (the tiles' row/column markers).

LLaVA's tower is a CLIP with a class token. libmtmd 0.3.36 concatenates it
after the patches while still numbering positions and picking patch rows as
for a class token first (llama.cpp issue 25814, PR 25844 unmerged), so its
LLaVA embeddings are those of a shifted tower; the oracle's libmtmd is
rebuilt with that PR's one-line fix (bench/peer/build_mtmd_clsfirst.sh),
CLIP's and libmtmd's own layout before its graph refactor.
"""
import argparse
import ctypes
import io
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vision_oracle import (THREADS, encode_chunk, embed_picture, fnv1a64, load_bindings,  # noqa: E402
                           open_model, picture, synthesize, tokenize_picture, write_tar)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "vision"
SYNTH = ["--shape", "tiny-gemma3", "--type", "f32", "--seed", "7"]
# the other families: llm-synth shape, and pictures (width, height) of several
# sizes and aspect ratios (Idefics3: 2 x 1, 1 x 2 and 2 x 2 tiles at its
# longest edge 64 and tile 32; LLaVA: as Gemma 3's, with the grey pad)
FAMILIES = {
    "idefics3": {"synth": ["--shape", "tiny-smolvlm", "--type", "f32", "--seed", "11"],
                 "sizes": [(32, 32), (57, 23), (13, 20), (7, 31), (96, 64)]},
    "mlp": {"synth": ["--shape", "tiny-llava", "--type", "f32", "--seed", "13"],
            "sizes": [(32, 32), (57, 23), (13, 20), (100, 100), (7, 31)]},
}
# (width, height): the tower's own size (no resize), wide, tall, square,
# a thin strip, and sizes below the tower's (upscaled).
SIZES = [(32, 32), (57, 23), (13, 20), (100, 100), (7, 31), (48, 40), (24, 24)]


def letterbox_pil(img, side):
    """llama.cpp's fit (float scale, ceil, centred on black) with Pillow's resize."""
    from PIL import Image
    h, w = img.shape[:2]
    if (w, h) == (side, side):
        return img.copy()
    s = min(np.float32(side) / np.float32(w), np.float32(side) / np.float32(h))
    nw = min(int(math.ceil(np.float32(w) * s)), side)
    nh = min(int(math.ceil(np.float32(h) * s)), side)
    scaled = Image.fromarray(img, "RGB")
    if (nw, nh) != (w, h):
        scaled = scaled.resize((nw, nh), Image.BILINEAR)
    canvas = Image.new("RGB", (side, side), (0, 0, 0))
    canvas.paste(scaled, ((side - nw) // 2, (side - nh) // 2))
    return np.asarray(canvas, dtype=np.uint8)


def fit_pil(img, side, resample, pad):
    """llama.cpp's fixed-size fit with Pillow's resize, on a pad colour."""
    from PIL import Image
    h, w = img.shape[:2]
    if (w, h) == (side, side):
        return img.copy()
    s = min(np.float32(side) / np.float32(w), np.float32(side) / np.float32(h))
    nw = min(int(math.ceil(np.float32(w) * s)), side)
    nh = min(int(math.ceil(np.float32(h) * s)), side)
    scaled = Image.fromarray(img, "RGB")
    if (nw, nh) != (w, h):
        scaled = scaled.resize((nw, nh), resample)
    canvas = Image.new("RGB", (side, side), pad)
    canvas.paste(scaled, ((side - nw) // 2, (side - nh) // 2))
    return np.asarray(canvas, dtype=np.uint8)


def tiles_pil(img, side, longest):
    """Idefics3's tiling (llama.cpp's mtmd_image_preprocessor_idefics3) with Pillow's LANCZOS."""
    from PIL import Image
    h, w = img.shape[:2]
    ratio = w / h
    if w >= h:
        rw, rh = longest, int(longest / ratio)
        rh += rh % 2
    else:
        rw, rh = int(longest * ratio), longest
        rw += rw % 2
    gx, gy = (rw + side - 1) // side, (rh + side - 1) // side

    def resize(im, size):
        return im if im.size == size else im.resize(size, Image.LANCZOS)

    refined = resize(resize(Image.fromarray(img, "RGB"), (rw, rh)), (gx * side, gy * side))
    arr = np.asarray(refined, dtype=np.uint8)
    out = [arr[y * side:(y + 1) * side, x * side:(x + 1) * side].copy() for y in range(gy) for x in range(gx)]
    out.append(np.asarray(resize(refined, (side, side)), dtype=np.uint8))
    return out, gx, gy


def run_family(args, llama_cpp, mtmd, oracle_note, family):
    """Records the family's cases; returns (json doc, bin blob)."""
    from PIL import Image
    spec = FAMILIES[family]
    if family == "mlp" and "libmtmd_llava_clsfirst.so" not in os.environ.get("LD_PRELOAD", ""):
        sys.exit("the LLaVA reference needs libmtmd's class token first: run with "
                 "LD_PRELOAD=<lib>/libmtmd_llava_clsfirst.so (bench/peer/build_mtmd_clsfirst.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        text_path, proj_path = synthesize(args.synth, spec["synth"], tmp)
        model, ctx = open_model(llama_cpp, mtmd, text_path, proj_path)
        n_embd = llama_cpp.llama_model_n_embd(model)
        side = 32  # the synthesized towers' clip.vision.image_size
        blob = bytearray()
        cases = []
        for i, (w, h) in enumerate(spec["sizes"]):
            img = picture(w, h, 300 + i)
            if family == "idefics3":
                inputs, gx, gy = tiles_pil(img, side, 64)
            else:
                inputs, gx, gy = [fit_pil(img, side, Image.BICUBIC, (122, 116, 104))], 0, 0
            chunks, bmp = tokenize_picture(mtmd, ctx, img)
            case = {"width": w, "height": h, "grid_x": gx, "grid_y": gy, "rgb_offset": len(blob), "chunks": []}
            blob += img.tobytes()
            n_img = 0
            for c in range(mtmd.mtmd_input_chunks_size(chunks)):
                chunk = mtmd.mtmd_input_chunks_get(chunks, c)
                if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                    n = ctypes.c_size_t(0)
                    ptr = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                    case["chunks"].append({"tokens": [int(ptr[k]) for k in range(n.value)]})
                    continue
                n_tok = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
                emb = encode_chunk(mtmd, ctx, chunk, n_embd)
                assert n_img < len(inputs), "more image chunks than Pillow's tower inputs"
                ch = {"input_offset": len(blob), "n_tokens": int(n_tok)}
                blob += inputs[n_img].tobytes()
                ch["embd_offset"] = len(blob)
                blob += emb.tobytes()
                case["chunks"].append(ch)
                n_img += 1
            assert n_img == len(inputs), f"{n_img} image chunks for {len(inputs)} tower inputs"
            mtmd.mtmd_input_chunks_free(chunks)
            mtmd.mtmd_bitmap_free(bmp)
            cases.append(case)
            print(f"{family} {w}x{h}: {n_img} image chunks ({gx} x {gy} tiles), {len(case['chunks'])} chunks")
        mtmd.mtmd_free(ctx)
        llama_cpp.llama_model_free(model)
        doc = {
            "origin": "tools/vision_reference.py",
            "oracle": f"llama-cpp-python {llama_cpp.__version__}'s libmtmd on {oracle_note}; "
                      f"CPU, {THREADS} threads, flash attention off, raw RGB bitmaps",
            "family": family,
            "synth_args": spec["synth"],
            "text_fnv1a64": fnv1a64(text_path.read_bytes()),
            "mmproj_fnv1a64": fnv1a64(proj_path.read_bytes()),
            "image_size": side,
            "n_embd": n_embd,
            "cases": cases,
        }
    return doc, blob


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--synth", default=str(ROOT / "build" / "bin" / "llm-synth"))
    ap.add_argument("--lib", required=True, help="folder of llama-cpp-python's libraries (exact-GELU libggml-cpu)")
    ap.add_argument("--family", action="append", choices=["gemma3", *FAMILIES],
                    help="families to record (default: all)")
    args = ap.parse_args()
    llama_cpp, mtmd, oracle_note = load_bindings(args.lib)
    from PIL import Image
    families = args.family or ["gemma3", *FAMILIES]
    for family in families:
        if family == "gemma3":
            continue
        doc, blob = run_family(args, llama_cpp, mtmd, oracle_note, family)
        OUT.mkdir(parents=True, exist_ok=True)
        write_tar(OUT / f"{family}.tar.xz", {f"{family}.json": (json.dumps(doc, indent=1) + "\n").encode(),
                                             f"{family}.bin": bytes(blob)})
    if "gemma3" not in families:
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        text_path, proj_path = synthesize(args.synth, SYNTH, tmp)
        model, ctx = open_model(llama_cpp, mtmd, text_path, proj_path)
        n_embd = llama_cpp.llama_model_n_embd(model)

        side = 32  # the synthesized tower's clip.vision.image_size
        blob = bytearray()
        cases = []
        pngs = {}
        for i, (w, h) in enumerate(SIZES):
            img = picture(w, h, 100 + i)
            boxed = letterbox_pil(img, side)
            emb = embed_picture(mtmd, ctx, img, n_embd)
            case = {"width": w, "height": h, "png": f"img_{w}x{h}.png", "rgb_offset": len(blob)}
            blob += img.tobytes()
            case["boxed_offset"] = len(blob)
            blob += boxed.tobytes()
            case["embd_offset"] = len(blob)
            case["n_tokens"] = int(emb.size // n_embd)
            blob += emb.tobytes()
            cases.append(case)
            buf = io.BytesIO()
            Image.fromarray(img, "RGB").save(buf, format="PNG", optimize=True)
            pngs[case["png"]] = buf.getvalue()
            print(f"{w}x{h}: {case['n_tokens']} tokens, |e| = {float(np.linalg.norm(emb)):.4f}")
        mtmd.mtmd_free(ctx)
        llama_cpp.llama_model_free(model)
        doc = {
            "origin": "tools/vision_reference.py",
            "oracle": f"llama-cpp-python {llama_cpp.__version__}'s libmtmd on {oracle_note}; "
                      f"CPU, {THREADS} threads, flash attention off, raw RGB bitmaps",
            "synth_args": SYNTH,
            "text_fnv1a64": fnv1a64(text_path.read_bytes()),
            "mmproj_fnv1a64": fnv1a64(proj_path.read_bytes()),
            "image_size": side,
            "n_embd": n_embd,
            "cases": cases,
        }
    OUT.mkdir(parents=True, exist_ok=True)
    write_tar(OUT / "vision.tar.xz", {"gemma3.json": (json.dumps(doc, indent=1) + "\n").encode(),
                                      "gemma3.bin": bytes(blob), **pngs})


if __name__ == "__main__":
    sys.exit(main())
