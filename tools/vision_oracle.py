"""The oracle of the vision reference scripts (tools/vision_reference.py,
tools/vision_reference_qwen25vl.py, tools/vision_prompt_reference.py):
llama.cpp's libllama and multimodal library (libmtmd) through
llama-cpp-python's bindings, loaded from a folder of its libraries (--lib),
the synthesized model files they run, the synthetic pictures they are shown,
one picture's soft tokens, and the .tar.xz the references are kept in.
"""
import ctypes
import io
import os
import subprocess
import tarfile
from pathlib import Path

import numpy as np

THREADS = 2


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def picture(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255 * x / max(w - 1, 1)
    g = 255 * y / max(h - 1, 1)
    b = 128 + 100 * np.sin(x / 3.0 + y / 5.0)
    img = np.stack([r, g, b], axis=-1)
    cx, cy, rad = rng.uniform(0, w), rng.uniform(0, h), max(2.0, min(w, h) / 3)
    disc = (x - cx) ** 2 + (y - cy) ** 2 < rad ** 2
    img[disc] = rng.uniform(0, 255, size=3)
    bar = (x > w * 0.6) & (x < w * 0.75)
    img[bar] = [20, 220, 60]
    img += rng.normal(0, 12, size=img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def load_bindings(lib_dir):
    """llama-cpp-python's modules on the libraries of lib_dir, and the
    oracle's description (lib_dir/llmrt-oracle.txt): (llama_cpp, mtmd, note)."""
    lib = Path(lib_dir).resolve()
    os.environ["LLAMA_CPP_LIB_PATH"] = str(lib)
    os.environ["MTMD_CPP_LIB"] = str(lib)
    import llama_cpp
    import llama_cpp.mtmd_cpp as mtmd

    note = (lib / "llmrt-oracle.txt").read_text(encoding="utf-8").strip()
    return llama_cpp, mtmd, note


def synthesize(synth, synth_args, tmp):
    """llm-synth's text model and projector into folder tmp: (text, mmproj) paths."""
    text_path, proj_path = Path(tmp) / "text.gguf", Path(tmp) / "mmproj.gguf"
    subprocess.run([synth, *synth_args, "--out", str(text_path), "--mmproj", str(proj_path)],
                   check=True, stdout=subprocess.DEVNULL)
    return text_path, proj_path


def open_model(llama_cpp, mtmd, text_path, proj_path):
    """The text model and libmtmd's context on its projector, on the CPU with
    THREADS threads, flash attention off: (model, mtmd context)."""
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
    return model, ctx


def tokenize_picture(mtmd, ctx, img):
    """libmtmd's chunks for the marker alone with img (h x w x 3 bytes) as a
    raw RGB bitmap: (chunks, bitmap), for the caller to free."""
    h, w = img.shape[:2]
    marker = mtmd.mtmd_default_marker()
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
    return chunks, bmp


def encode_chunk(mtmd, ctx, chunk, n_embd):
    """An image chunk's soft tokens: n_tokens x n_embd float32 little-endian, flat."""
    assert mtmd.mtmd_encode_chunk(ctx, chunk) == 0
    n_tok = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
    ptr = mtmd.mtmd_get_output_embd(ctx)
    return np.ctypeslib.as_array(ptr, shape=(n_tok * n_embd,)).astype("<f4").copy()


def embed_picture(mtmd, ctx, img, n_embd):
    """The soft tokens of img's (last) image chunk."""
    chunks, bmp = tokenize_picture(mtmd, ctx, img)
    emb = None
    for c in range(mtmd.mtmd_input_chunks_size(chunks)):
        chunk = mtmd.mtmd_input_chunks_get(chunks, c)
        if mtmd.mtmd_input_chunk_get_type(chunk) != mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
            continue
        emb = encode_chunk(mtmd, ctx, chunk, n_embd)
    mtmd.mtmd_input_chunks_free(chunks)
    mtmd.mtmd_bitmap_free(bmp)
    assert emb is not None, "no image chunk"
    return emb


def write_tar(path, files):
    """files ({name: bytes}) into the .tar.xz at path, reproducibly (mtime 0)."""
    with tarfile.open(path, "w:xz") as tar:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            tar.addfile(ti, io.BytesIO(data))
    print(f"wrote {path} ({path.stat().st_size} bytes)")
