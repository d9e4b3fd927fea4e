#!/usr/bin/env python3
"""Reference for images inside a prompt (tests/test_image_prompt.cpp):
llama.cpp (libmtmd + libllama, through llama-cpp-python's bindings; an
oracle at test-data generation time only) runs the tiny synthesized Gemma 3
text model with its projector (llm-synth --mmproj, as tools/vision_reference.py)
on prompts of text, images and text, and records the logits of the last
text piece's positions and a greedy continuation with the logits after each
of its tokens.

  cmake --build build --target llm-synth
  LIB="$(bench/peer/build_ggml_cpu_exactgelu.sh)"   # exact F32 GELU and im2col
  python3 tools/vision_prompt_reference.py --lib "$LIB" [--synth build/bin/llm-synth] [--family F]
    # -> tests/data/vision/prompt.tar.xz holding prompt.json and prompt.bin
    #    (Gemma 3), or prompt_<F>.tar.xz (idefics3, mlp: tiny-smolvlm and
    #    tiny-llava with their projectors; LIB with build_mtmd_clsfirst.sh's
    #    libmtmd, see vision_reference.py; qwen2vl: tiny-qwen2vl with its
    #    Qwen2.5-VL projector, vision_reference_qwen25vl.py's files),
    #    unpacked in place at configure time

Qwen2.5-VL (--family qwen2vl) reads each picture at its own size and its
text model turns positions by M-RoPE: libmtmd gives an image of nx x ny
merged cells starting at position p0 the positions (t, h, w) = (p0,
p0 + i / nx, p0 + i % nx) for its cell i, and the text after it resumes at
p0 + max(nx, ny) (mtmd_image_tokens_get_n_pos); text tokens have (p, p, p).
So positions and KV slots differ: each case records "n_prompt" (slots,
what llmrt counts as prompt tokens: mtmd_helper_get_n_tokens) and
"n_prompt_pos" (positions), and each image piece its grid "nx", "ny". The
pictures have grids with nx != ny both ways, so the max(nx, ny) resume is
exercised; one case is text only (every position (p, p, p)).

Idefics3 makes several image chunks of one picture (its tiles, then the
overview, with text chunks between them): each is a piece {"image": i,
"tile": k}, k counting the picture's chunks. Its and LLaVA's image spans are
decoded causally (mtmd_decode_use_non_causal is false for them), Gemma 3's
both ways.

How llama.cpp runs such a prompt (mtmd_tokenize, then per chunk): a text
chunk is decoded as tokens; an image chunk is encoded (mtmd_encode_chunk:
the vision tower and projector) and its soft tokens decoded as embedding
rows (mtmd_helper_decode_image_chunk) with causal attention switched off
for Gemma 3 (mtmd_decode_use_non_causal), so the image's positions see each
other both ways; the rows are not multiplied by Gemma's sqrt(n_embd), which
its graph applies to token ids only. The image is decoded in one batch
(n_batch 512 >= its 16 soft tokens). The last text chunk is decoded with
logits for every position, then GREEDY tokens one at a time.

prompt.bin holds the pictures (height x width x 3 bytes each) and the
logits (float32 little-endian) at the offsets prompt.json names; the pieces
are recorded as llama.cpp tokenized them ({"tokens": [...]} or {"image": i}),
so the test needs no tokenizer. Flash attention is off (its CPU path casts
K and V to F16) and the KV cache is F32 (the default F16 cache moves these
small logits by ~4e-3), 2 threads, CPU.
"""
import argparse
import ctypes
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vision_oracle import THREADS, fnv1a64, load_bindings, open_model, picture, synthesize, write_tar  # noqa: E402
from vision_reference import FAMILIES, SYNTH  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "vision"
GREEDY = 8
N_BATCH = 512
# pictures (width, height, seed) and prompts (text with <__media__> markers,
# each marker taking the next picture index listed)
PICTURES = [(57, 23, 200), (40, 48, 201), (32, 32, 202)]
PROMPTS = [
    ("the quick brown fox jumps <__media__> over the lazy dog and then", [0]),
    ("the quick brown fox jumps <__media__> over the lazy dog and then", [1]),  # same text, another picture
    ("a <__media__> b c <__media__> and so on", [2, 0]),                         # two images, ~45 positions
]
# qwen2vl: grids 4 x 2 (112 x 56 kept), 2 x 5 (57 x 140 rounded to 56 x
# 140), 9 x 3 (250 x 90 rounded to 252 x 84)
PICTURES_QWEN2VL = [(112, 56, 300), (57, 140, 301), (250, 90, 302)]
PROMPTS_QWEN2VL = PROMPTS + [
    ("describe <__media__> then <__media__> please", [1, 2]),                    # tall then wide
    ("the quick brown fox jumps over the lazy dog and then", []),               # text only
]


def _is_last_of_picture(mtmd, chunks, c, last):
    """Idefics3: whether image chunk c is its picture's overview (the chunk
    before it is text ending in <global-img>)."""
    prev = mtmd.mtmd_input_chunks_get(chunks, c - 1)
    if mtmd.mtmd_input_chunk_get_type(prev) != mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
        return False
    n = ctypes.c_size_t(0)
    ptr = mtmd.mtmd_input_chunk_get_tokens_text(prev, ctypes.byref(n))
    return n.value >= 1 and int(ptr[n.value - 1]) == _is_last_of_picture.global_img


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--synth", default=str(ROOT / "build" / "bin" / "llm-synth"))
    ap.add_argument("--lib", required=True, help="folder of llama-cpp-python's libraries (exact-GELU libggml-cpu)")
    ap.add_argument("--family", default="gemma3", choices=["gemma3", *FAMILIES, "qwen2vl"])
    args = ap.parse_args()
    qwen2vl = args.family == "qwen2vl"
    if qwen2vl:
        from vision_reference_qwen25vl import SYNTH as SYNTH_QWEN  # noqa: E402
        synth = SYNTH_QWEN
    else:
        synth = SYNTH if args.family == "gemma3" else FAMILIES[args.family]["synth"]
    pictures, prompts = (PICTURES_QWEN2VL, PROMPTS_QWEN2VL) if qwen2vl else (PICTURES, PROMPTS)
    stem = "prompt" if args.family == "gemma3" else f"prompt_{args.family}"
    if args.family == "mlp" and "libmtmd_llava_clsfirst.so" not in os.environ.get("LD_PRELOAD", ""):
        sys.exit("the LLaVA reference needs libmtmd's class token first: run with "
                 "LD_PRELOAD=<lib>/libmtmd_llava_clsfirst.so (bench/peer/build_mtmd_clsfirst.sh)")
    n_ctx = 256 if args.family == "gemma3" else 1024
    llama_cpp, mtmd, oracle_note = load_bindings(args.lib)
    blob = bytearray()
    pics = []
    for w, h, seed in pictures:
        img = picture(w, h, seed)
        pics.append(img)
    pic_docs = []
    for img in pics:
        pic_docs.append({"width": int(img.shape[1]), "height": int(img.shape[0]), "rgb_offset": len(blob)})
        blob += img.tobytes()

    with tempfile.TemporaryDirectory() as tmp:
        text_path, proj_path = synthesize(args.synth, synth, tmp)
        model, mctx = open_model(llama_cpp, mtmd, text_path, proj_path)
        vocab = llama_cpp.llama_model_get_vocab(model)
        n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        n_embd = llama_cpp.llama_model_n_embd(model)
        _is_last_of_picture.global_img = -2
        if args.family == "idefics3":
            for t in range(n_vocab):
                buf = ctypes.create_string_buffer(64)
                k = llama_cpp.llama_token_to_piece(vocab, t, buf, 64, 0, True)
                if buf.raw[:k] == b"<global-img>":
                    _is_last_of_picture.global_img = t
                    break
            assert _is_last_of_picture.global_img >= 0
        both_ways = bool(mtmd.mtmd_decode_use_non_causal(mctx, None))
        assert both_ways == (args.family == "gemma3"), "only Gemma 3's image spans are non-causal"

        cases = []
        assert bool(mtmd.mtmd_decode_use_mrope(mctx)) == qwen2vl, "M-RoPE positions for qwen2vl only"
        for text, pic_ids in prompts:
            cparams = llama_cpp.llama_context_default_params()
            cparams.n_ctx = n_ctx
            cparams.n_batch = N_BATCH
            cparams.n_ubatch = N_BATCH
            cparams.n_threads = THREADS
            cparams.n_threads_batch = THREADS
            cparams.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
            # an F32 KV cache: llama.cpp's default F16 one rounds K and V
            # (~4e-3 on these logits, more than the gaps between the top two)
            cparams.type_k = llama_cpp.GGML_TYPE_F32
            cparams.type_v = llama_cpp.GGML_TYPE_F32
            lctx = llama_cpp.llama_init_from_model(model, cparams)
            assert lctx
            bmps = [mtmd.mtmd_bitmap_init(pics[i].shape[1], pics[i].shape[0],
                                          (ctypes.c_uint8 * pics[i].size).from_buffer_copy(pics[i].tobytes()))
                    for i in pic_ids]
            chunks = mtmd.mtmd_input_chunks_init()
            t = mtmd.mtmd_input_text()
            raw = text.replace("<__media__>", mtmd.mtmd_default_marker().decode()).encode()
            t.text = raw
            t.text_len = len(raw)
            t.add_special = True
            t.parse_special = True
            arr = (mtmd.mtmd_bitmap_p_ctypes * len(bmps))(*bmps)
            assert mtmd.mtmd_tokenize(mctx, chunks, ctypes.byref(t), arr, len(bmps)) == 0
            n_chunks = mtmd.mtmd_input_chunks_size(chunks)
            pieces = []
            n_past = llama_cpp.llama_pos(0)
            img_no = 0
            last = n_chunks - 1
            assert mtmd.mtmd_input_chunk_get_type(mtmd.mtmd_input_chunks_get(chunks, last)) == \
                mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT, "the prompt should end with text"
            n_image_tokens = None
            n_slots = 0  # KV slots (tokens); n_past counts positions
            tile = 0
            for c in range(last):
                chunk = mtmd.mtmd_input_chunks_get(chunks, c)
                if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                    n = ctypes.c_size_t(0)
                    ptr = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                    pieces.append({"tokens": [int(ptr[i]) for i in range(n.value)]})
                else:
                    n_image_tokens = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
                    piece = {"image": pic_ids[img_no]}
                    if qwen2vl:
                        it = mtmd.mtmd_input_chunk_get_tokens_image(chunk)
                        piece["nx"] = int(mtmd.mtmd_image_tokens_get_nx(it))
                        piece["ny"] = int(mtmd.mtmd_image_tokens_get_ny(it))
                        piece["n_pos"] = int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
                        assert piece["nx"] * piece["ny"] == n_image_tokens
                        assert piece["n_pos"] == max(piece["nx"], piece["ny"])
                    if args.family == "idefics3":
                        piece["tile"] = tile
                        tile += 1
                    pieces.append(piece)
                    # Idefics3: a picture's last chunk is its overview, closed by a text chunk
                    if args.family != "idefics3" or _is_last_of_picture(mtmd, chunks, c, last):
                        img_no += 1
                        tile = 0
                n_slots += mtmd.mtmd_input_chunk_get_n_tokens(chunk)
                new_past = llama_cpp.llama_pos(n_past.value)  # text chunks add to it
                rc = mtmd.mtmd_helper_eval_chunk_single(mctx, lctx, chunk, n_past.value, 0, N_BATCH, False,
                                                        ctypes.byref(new_past))
                assert rc == 0, f"chunk {c}: {rc}"
                n_past = new_past
            assert img_no == len(pic_ids)
            # the last text chunk: logits at every position
            chunk = mtmd.mtmd_input_chunks_get(chunks, last)
            n = ctypes.c_size_t(0)
            ptr = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
            tail = [int(ptr[i]) for i in range(n.value)]
            pieces.append({"tokens": tail})
            batch = llama_cpp.llama_batch_init(max(len(tail), 1), 0, 1)
            batch.n_tokens = len(tail)
            for i, tok in enumerate(tail):
                batch.token[i] = tok
                batch.pos[i] = n_past.value + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = True
            assert llama_cpp.llama_decode(lctx, batch) == 0
            tail_logits = np.stack([np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(lctx, i), shape=(n_vocab,))
                                    .astype("<f4").copy() for i in range(len(tail))])
            pos = n_prompt = n_past.value + len(tail)
            n_prompt_pos = n_prompt
            n_prompt = n_slots + len(tail)  # = n_prompt_pos unless M-RoPE images moved the positions
            gen, gen_logits = [], []
            row = tail_logits[-1]
            for g in range(GREEDY):
                tok = int(np.argmax(row))
                gen.append(tok)
                if g == GREEDY - 1:
                    break
                batch.n_tokens = 1
                batch.token[0] = tok
                batch.pos[0] = pos
                batch.n_seq_id[0] = 1
                batch.seq_id[0][0] = 0
                batch.logits[0] = True
                assert llama_cpp.llama_decode(lctx, batch) == 0
                pos += 1
                row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(lctx, 0), shape=(n_vocab,)).astype("<f4").copy()
                gen_logits.append(row)
            llama_cpp.llama_batch_free(batch)
            mtmd.mtmd_input_chunks_free(chunks)
            for b in bmps:
                mtmd.mtmd_bitmap_free(b)
            llama_cpp.llama_free(lctx)
            case = {"text": text, "pieces": pieces, "n_prompt": n_prompt,
                    "tail_logits_offset": len(blob)}
            if qwen2vl:
                case["n_prompt_pos"] = n_prompt_pos
            blob += tail_logits.tobytes()
            case["greedy"] = gen
            case["greedy_logits_offset"] = len(blob)
            blob += np.stack(gen_logits).astype("<f4").tobytes()
            cases.append(case)
            print(f"{text!r} {pic_ids}: {len(pieces)} pieces, {n_prompt} tokens, {n_prompt_pos} positions, greedy {gen}")
        mtmd.mtmd_free(mctx)
        llama_cpp.llama_model_free(model)
        doc = {
            "origin": "tools/vision_prompt_reference.py",
            "oracle": f"llama-cpp-python {llama_cpp.__version__}'s libmtmd + libllama on {oracle_note}; "
                      f"CPU, {THREADS} threads, flash attention off, F32 KV cache, raw RGB bitmaps, n_batch {N_BATCH}",
            "family": args.family,
            "both_ways": both_ways,
            "mrope": qwen2vl,
            "synth_args": synth,
            "text_fnv1a64": fnv1a64(text_path.read_bytes()),
            "mmproj_fnv1a64": fnv1a64(proj_path.read_bytes()),
            "n_vocab": n_vocab,
            "n_embd": n_embd,
            "n_image_tokens": n_image_tokens,
            "pictures": pic_docs,
            "cases": cases,
        }
    OUT.mkdir(parents=True, exist_ok=True)
    write_tar(OUT / f"{stem}.tar.xz", {f"{stem}.json": (json.dumps(doc, indent=1) + "\n").encode(),
                                       f"{stem}.bin": bytes(blob)})


if __name__ == "__main__":
    sys.exit(main())
