#!/usr/bin/env python3
"""Deliberately broken variants of the CUDA kernels and backend (issue 17's
mutation check, run by scripts/cuda-mutants.sh).

Each mutant is one realistic bug: a list of exact-text edits in kernel bodies
or backend logic (never in launch statements, which the emulator's launch
helper rewrites). An edit's old text must occur exactly once in its file, so
a mutant whose target has moved fails loudly instead of silently testing
nothing. `units` are the translation units that include the mutated code
(what a compile check must build).

  mutants.py --list                     names, one a line
  mutants.py --describe NAME            what the mutant breaks
  mutants.py --files NAME               files it edits, one a line
  mutants.py --units NAME               translation units to compile
  mutants.py --apply NAME --root DIR    edits the tree at DIR (exit 1 if a target is missing)
  mutants.py --compile UNIT --db FILE   compiles UNIT (an absolute path) with its command from the
                                        compile_commands.json FILE, into a scratch object
"""
import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

MUTANTS = [
    {
        "name": "moe-tie-to-higher-expert",
        "what": "MoE router: an exact tie between two experts goes to the higher index (the CPU's and llama.cpp's: the lower)",
        "edits": [("kernels/moe_route.cu",
                   "      if (ov > bv || (ov == bv && oe < be)) {\n",
                   "      if (ov > bv || (ov == bv && oe > be)) {\n")],
        "units": ["kernels/moe_route.cu"],
    },
    {
        "name": "moe-combine-unweighted",
        "what": "MoE combine: the chosen experts' outputs summed without their routing weights",
        "edits": [("kernels/moe_route.cu",
                   "      for (int32_t j = 0; j < K; ++j) acc += w[j] * p.y[static_cast<int64_t>(slot[j]) * E + d];\n",
                   "      for (int32_t j = 0; j < K; ++j) acc += p.y[static_cast<int64_t>(slot[j]) * E + d];\n")],
        "units": ["kernels/moe_route.cu"],
    },
    {
        "name": "moe-gemm-part-boundary",
        "what": "MoE experts' GEMM: the [gate; up] pair's up rows read one row late",
        "edits": [("kernels/moe_matmul.cu",
                   "  const uint8_t* row = s.experts[e] + (r - (part ? w.part[0].rows : 0)) * s.row_bytes;\n",
                   "  const uint8_t* row = s.experts[e] + (r - (part ? w.part[0].rows - 1 : 0)) * s.row_bytes;\n")],
        "units": ["kernels/moe_matmul.cu"],
    },
    # gpt-oss (issue 32), caught by test_cuda_kernels' AttentionSinks (the
    # sink in the numerator), SwigluOaiAndAddBias (the clamp: the tiny model's
    # gate/up never reach the limit, so test_cuda_families misses it) and
    # test_cuda_families' GptOss cases (all but the clamp)
    {
        "name": "sink-ignored",
        "what": "gpt-oss: the attention sinks never reach the attention kernels",
        "edits": [("src/backend/cuda/cuda_forward.cpp",
                   "  const float* sinks = cfg_.attn_sinks ? layers_[layer].sinks.get<float>() : nullptr;  // gpt-oss\n",
                   "  const float* sinks = nullptr;\n")],
        "units": ["src/backend/cuda/cuda_forward.cpp"],
    },
    {
        "name": "sink-in-numerator",
        "what": "attention sinks: the sink's term added to the numerator of every output element too "
                "(decode kernel's one-split write, the split combine and the prefill kernel)",
        "edits": [("kernels/attention_decode.cu",
                   "            __float2bfloat16_rn(l > 0.0f ? o[i] * a / l : 0.0f);\n",
                   "            __float2bfloat16_rn(l > 0.0f ? (o[i] * a + (l - sL[h] * a)) / l : 0.0f);\n"),
                  ("kernels/attention_decode.cu",
                   "    p.out[(static_cast<int64_t>(t) * p.n_head + hq) * p.head_dim + d] = __float2bfloat16_rn(acc * inv);\n",
                   "    p.out[(static_cast<int64_t>(t) * p.n_head + hq) * p.head_dim + d] =\n"
                   "        __float2bfloat16_rn((acc + (p.sinks != nullptr ? exp2f(s2 - m) : 0.0f)) * inv);\n"),
                  ("kernels/attention_prefill.cu",
                   "    l0 = l0 * a0 + exp2f(s2 - mm0);\n",
                   "    l0 = l0 * a0 + exp2f(s2 - mm0);\n    for (int dt = 0; dt < HD / 8; ++dt) o[dt][0] += exp2f(s2 - mm0) / a0;\n")],
        "units": ["kernels/attention_decode.cu", "kernels/attention_prefill.cu"],
    },
    {
        "name": "swiglu-oai-no-clamp",
        "what": "gpt-oss experts: the clamped SwiGLU without its clamps (gate min, up clamp)",
        "edits": [("kernels/silu_mul.cu",
                   "    g = fminf(g, limit);\n    u = fminf(fmaxf(u, -limit), limit);\n",
                   "\n")],
        "units": ["kernels/silu_mul.cu"],
    },
    {
        "name": "router-bias-missing",
        "what": "gpt-oss router: ffn_gate_inp.bias not added to the logits",
        "edits": [("kernels/moe_route.cu",
                   "    if (lane == 0) prob[e] = p.router_bias != nullptr ? s + p.router_bias[e] : s;\n",
                   "    if (lane == 0) prob[e] = s;\n")],
        "units": ["kernels/moe_route.cu"],
    },
    {
        "name": "output-bias-missing",
        "what": "gpt-oss: attn_output.bias not added after the output projection",
        "edits": [("src/backend/cuda/cuda_forward.cpp",
                   "    if (cfg_.out_bias)\n      LLM_RETURN_IF_ERROR(\n",
                   "    if (false)\n      LLM_RETURN_IF_ERROR(\n")],
        "units": ["src/backend/cuda/cuda_forward.cpp"],
    },
    {
        "name": "missing-syncthreads",
        "what": "decode attention: no barrier between storing a K/V tile in shared memory and reading it "
                "for the scores (a shared-memory race)",
        "edits": [("kernels/attention_decode.cu",
                   "    __syncthreads();\n\n    // ---- scores (log2 units), -inf past the last key\n",
                   "\n    // ---- scores (log2 units), -inf past the last key\n")],
        "units": ["kernels/attention_decode.cu"],
    },
    {
        "name": "block-table-off-by-one",
        "what": "paged KV reads (decode and prefill attention) look up the block of position pos + 1",
        "edits": [("kernels/device_util.cuh",
                   "  const int32_t block = table[pos / block_size];\n",
                   "  const int32_t block = table[(pos + 1) / block_size];\n")],
        "units": ["kernels/attention_decode.cu", "kernels/attention_prefill.cu"],
    },
    {
        "name": "gqa-head-mapping",
        "what": "prefill attention: query head hq reads KV head hq % n_head_kv instead of hq / n_rep",
        "edits": [("kernels/attention_prefill.cu",
                   "  const int32_t g = hq / (p.n_head / p.n_head_kv);\n",
                   "  const int32_t g = hq % p.n_head_kv;\n")],
        "units": ["kernels/attention_prefill.cu"],
    },
    {
        "name": "mma-fragment-swap",
        "what": "prefill attention: the Q (A) fragment registers a[1] and a[2] swapped (rows g+8 and "
                "columns 2c+8 exchanged against the PTX m16n8k16 layout)",
        "edits": [("kernels/attention_prefill.cu",
                   "    qf[kc][1] = Ld32(sQK + r1 * KS + kc * 16 + 2 * c4);\n"
                   "    qf[kc][2] = Ld32(sQK + r0 * KS + kc * 16 + 8 + 2 * c4);\n",
                   "    qf[kc][1] = Ld32(sQK + r0 * KS + kc * 16 + 8 + 2 * c4);\n"
                   "    qf[kc][2] = Ld32(sQK + r1 * KS + kc * 16 + 2 * c4);\n")],
        "units": ["kernels/attention_prefill.cu"],
    },
    {
        "name": "split-combine-no-rescale",
        "what": "decode attention's split-K combine adds the splits' outputs and sums without rescaling "
                "each by 2^(m_split - m_max)",
        "edits": [("kernels/attention_decode.cu",
                   "    if (ls > 0.0f) l += ls * exp2f(ws_ml[(base + s) * 2] - m);\n",
                   "    if (ls > 0.0f) l += ls;\n"),
                  ("kernels/attention_decode.cu",
                   "      if (ls > 0.0f) acc += ws_o[(base + s) * p.head_dim + d] * exp2f(ws_ml[(base + s) * 2] - m);",
                   "      if (ls > 0.0f) acc += ws_o[(base + s) * p.head_dim + d];")],
        "units": ["kernels/attention_decode.cu"],
    },
    {
        "name": "graph-stale-split-plan",
        "what": "decode graphs plan the attention's key splits from the capture step's context length "
                "(a host value baked into the graph) instead of splitting on the device: replays of "
                "longer contexts drop their newest keys",
        "edits": [("src/backend/cuda/cuda_graphs.cpp",
                   "  v.dec_dynamic = 1;\n"
                   "  PlanDecodeAttention(B, cfg_.n_head_kv, cfg_.head_dim, graph_max_keys_, n_sm_, kDecodeSlots, "
                   "&v.dec_splits,\n",
                   "  v.dec_dynamic = 0;\n"
                   "  PlanDecodeAttention(B, cfg_.n_head_kv, cfg_.head_dim, max_dec_keys_, n_sm_, kDecodeSlots, "
                   "&v.dec_splits,\n")],
        "units": ["src/backend/cuda/cuda_graphs.cpp"],
    },
    {
        "name": "quant-q4-nibble-swap",
        "what": "quantized weights (GEMV, dequantization, embedding): a Q4_0/Q4_1 byte's low nibble read as "
                "weight j + 16 and its high nibble as weight j (the GGUF order reversed)",
        "edits": [("kernels/quant_blocks.cuh",
                   "        const float q0 = static_cast<float>((qs[j] & 0xF) - off), "
                   "q1 = static_cast<float>((qs[j] >> 4) - off);\n",
                   "        const float q0 = static_cast<float>((qs[j] >> 4) - off), "
                   "q1 = static_cast<float>((qs[j] & 0xF) - off);\n")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-q6k-wrong-scale",
        "what": "quantized weights: a Q6_K chunk's second 16 weights use the first 16's scale",
        "edits": [("kernels/quant_blocks.cuh",
                   "        v[l] = __fmul_rn(l < 16 ? ds0 : ds1, static_cast<float>(q));\n",
                   "        v[l] = __fmul_rn(ds0, static_cast<float>(q));\n")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-q4k-min-scale",
        "what": "quantized weights: a Q4_K/Q5_K sub-block's minimum scaled by d instead of dmin",
        "edits": [("kernels/quant_blocks.cuh",
                   "dm = __fmul_rn(dmin, static_cast<float>(mn));",
                   "dm = __fmul_rn(d, static_cast<float>(mn));")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-iq4-grid-index",
        "what": "quantized weights: an IQ4_NL weight's low index looked up one grid entry off (index ^ 1)",
        "edits": [("kernels/quant_blocks.cuh",
                   "        v[j] = __fmul_rn(d, static_cast<float>(kIQ4NLValues[b[2 + j] & 0xF]));\n",
                   "        v[j] = __fmul_rn(d, static_cast<float>(kIQ4NLValues[(b[2 + j] & 0xF) ^ 1]));\n")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-iq4xs-scale-shift",
        "what": "quantized weights: an IQ4_XS sub-block's 6-bit scale offset by 31 instead of 32",
        "edits": [("kernels/quant_blocks.cuh",
                   "static_cast<int>((sh >> (2 * j)) & 3u) << 4) - 32;",
                   "static_cast<int>((sh >> (2 * j)) & 3u) << 4) - 31;")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-q3k-sign-bit",
        "what": "quantized weights: a Q3_K quant's high bit read with the wrong polarity (minus 4 when set)",
        "edits": [("kernels/quant_blocks.cuh",
                   "const int q = ((qs[l] >> shift) & 3) - ((b[l] >> j) & 1 ? 0 : 4);",
                   "const int q = ((qs[l] >> shift) & 3) - ((b[l] >> j) & 1 ? 4 : 0);")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-q2k-min-scale",
        "what": "quantized weights: a Q2_K group's minimum scaled by d instead of dmin",
        "edits": [("kernels/quant_blocks.cuh",
                   "ml[h] = __fmul_rn(dmin, static_cast<float>(b[2 * j + h] >> 4));",
                   "ml[h] = __fmul_rn(d, static_cast<float>(b[2 * j + h] >> 4));")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-iq2xs-grid-index",
        "what": "quantized weights: an IQ2_XS group of 8 looked up one lattice point off (index ^ 1)",
        "edits": [("kernels/quant_blocks.cuh",
                   "point[l] = kIQ2XSGrid[v & 511u], sign[l] = kIQ2Signs[v >> 9];",
                   "point[l] = kIQ2XSGrid[(v & 511u) ^ 1u], sign[l] = kIQ2Signs[v >> 9];")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-iq2xxs-sign-parity",
        "what": "quantized weights: IQ2_XXS's eighth sign of a group (the parity bit of kIQ2Signs) ignored",
        "edits": [("kernels/quant_blocks.cuh",
                   "for (int l = 0; l < 4; ++l) point[l] = kIQ2XXSGrid[p[l]], sign[l] = kIQ2Signs[(aux >> (7 * l)) & 127u];",
                   "for (int l = 0; l < 4; ++l) point[l] = kIQ2XXSGrid[p[l]], sign[l] = kIQ2Signs[(aux >> (7 * l)) & 127u] & 127u;")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-iq3xxs-scale-shift",
        "what": "quantized weights: an IQ3_XXS sub-block's scale read from bit 27 instead of 28 of its u32",
        "edits": [("kernels/quant_blocks.cuh",
                   "        mul[0] = mul[1] = 2 * static_cast<int>(aux >> 28) + 1;\n        unit = 0.25f;",
                   "        mul[0] = mul[1] = 2 * static_cast<int>((aux >> 27) & 15u) + 1;\n        unit = 0.25f;")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-iq1-delta-sign",
        "what": "quantized weights: IQ1_S's delta sign bit read with the wrong polarity (+1/8 when set)",
        "edits": [("kernels/quant_blocks.cuh",
                   "          for (int l = 0; l < 4; ++l) delta[l] = qh & 0x8000u ? -1 : 1;",
                   "          for (int l = 0; l < 4; ++l) delta[l] = qh & 0x8000u ? 1 : -1;")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-tq1-digit-order",
        "what": "quantized weights: TQ1_0's base-3 digits of its first 32 bytes read in reverse order (3^(4 - n))",
        "edits": [("kernels/quant_blocks.cuh",
                   "          byte = b[k & 31], n = k >> 5;",
                   "          byte = b[k & 31], n = 4 - (k >> 5);")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-mxfp4-scale-exponent",
        "what": "quantized weights: an MXFP4 block's E8M0 scale read as 2^(e - 127) instead of 2^(e - 128)",
        "edits": [("kernels/quant_blocks.cuh",
                   "const uint32_t bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;",
                   "const uint32_t bits = e < 2 ? 0x00200000u << e : e << 23;")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-fused-part-boundary",
        "what": "a fused quantized matrix ([Wq; Wk; Wv], [W_gate; W_up]): the first row of each later part "
                "is read from the end of the part before it (off by one at the boundary)",
        "edits": [("kernels/quant_blocks.cuh",
                   "  while (p + 1 < w.n_parts && r >= w.part[p].rows) r -= w.part[p++].rows;\n",
                   "  while (p + 1 < w.n_parts && r > w.part[p].rows) r -= w.part[p++].rows;\n")],
        "units": ["kernels/quant_gemv.cu", "kernels/dequant.cu"],
    },
    {
        "name": "quant-fast-q4k-min-scale",
        "what": "quantized GEMV, fast path (quant_fast.cuh): a Q4_K/Q5_K sub-block's minimum scaled by d "
                "instead of dmin",
        "edits": [("kernels/quant_fast.cuh",
                   "*dm = __fmul_rn(HalfBitsToFloat(dd >> 16), static_cast<float>(mn));",
                   "*dm = __fmul_rn(HalfBitsToFloat(dd & 0xFFFFu), static_cast<float>(mn));")],
        "units": ["kernels/quant_gemv.cu"],
    },
    {
        "name": "quant-fast-q5k-high-bit",
        "what": "quantized GEMV, fast path: a Q5_K weight's fifth bit read from the next sub-block's bit of qh",
        "edits": [("kernels/quant_fast.cuh",
                   "const uint32_t q = ((w >> (8 * i)) & 0xFu) | ((h >> (8 * i)) & 1u) << 4;",
                   "const uint32_t q = ((w >> (8 * i)) & 0xFu) | ((h >> (8 * i + 1)) & 1u) << 4;")],
        "units": ["kernels/quant_gemv.cu"],
    },
    {
        "name": "quant-fast-q6k-wrong-scale",
        "what": "quantized GEMV, fast path: a Q6_K chunk's second 16 weights use the first 16's scale",
        "edits": [("kernels/quant_fast.cuh",
                   "v[4 * m + i] = __fmul_rn(m < 4 ? ds0 : ds1, MagicFloat(q) - (kMagic + 32.0f));",
                   "v[4 * m + i] = __fmul_rn(ds0, MagicFloat(q) - (kMagic + 32.0f));")],
        "units": ["kernels/quant_gemv.cu"],
    },
    {
        "name": "quant-fast-q8-unsigned",
        "what": "quantized GEMV, fast path: a Q8_0 quant's byte read as unsigned minus 128 (its sign bit not flipped)",
        "edits": [("kernels/quant_fast.cuh",
                   "MagicFloat(((w >> (8 * i)) & 0xFFu) ^ 0x80u)",
                   "MagicFloat((w >> (8 * i)) & 0xFFu)")],
        "units": ["kernels/quant_gemv.cu"],
    },
    {
        "name": "quant-fast-q4-nibble-swap",
        "what": "quantized GEMV, fast path: a Q4_0 byte's low nibble read as weight m + 16 and its high one as weight m",
        "edits": [("kernels/quant_fast.cuh",
                   "      v[4 * k + i] = __fmul_rn(d, MagicFloat((w >> (8 * i)) & 0xFu) - (kMagic + 8.0f));\n"
                   "      v[4 * k + i + 16] = __fmul_rn(d, MagicFloat((w >> (8 * i + 4)) & 0xFu) - (kMagic + 8.0f));\n",
                   "      v[4 * k + i + 16] = __fmul_rn(d, MagicFloat((w >> (8 * i)) & 0xFu) - (kMagic + 8.0f));\n"
                   "      v[4 * k + i] = __fmul_rn(d, MagicFloat((w >> (8 * i + 4)) & 0xFu) - (kMagic + 8.0f));\n")],
        "units": ["kernels/quant_gemv.cu"],
    },
    {
        "name": "quant-fast-stage-skew",
        "what": "quantized GEMV, fast path: a tile's staged 16-byte loads counted without its first block's offset "
                "in its first 16 bytes (the tail of a tile whose blocks are not 16-aligned never staged)",
        "edits": [("kernels/quant_gemv.cu",
                   "static_cast<int>((*skew + nb * kBlockBytes + 15) / 16)",
                   "static_cast<int>((nb * kBlockBytes + 15) / 16)")],
        "units": ["kernels/quant_gemv.cu"],
    },
    {
        "name": "quant-fast-part-offset",
        "what": "quantized GEMV, fast path: each part of a fused matrix writes its outputs from row 0 of y "
                "(the parts' row offsets not accumulated)",
        "edits": [("kernels/quant_gemv.cu",
                   "      row0 += part.rows;\n",
                   "")],
        "units": ["kernels/quant_gemv.cu"],
    },
    {
        "name": "window-off-by-one",
        "what": "decode attention: a sliding-window layer's query sees one key more than its window "
                "(lo = n_keys - window - 1)",
        "edits": [("kernels/attention_decode.cu",
                   "  const int32_t lo = p.window > 0 && n_keys > p.window ? n_keys - p.window : 0;\n",
                   "  const int32_t lo = p.window > 0 && n_keys > p.window + 1 ? n_keys - p.window - 1 : 0;\n")],
        "units": ["kernels/attention_decode.cu"],
    },
    {
        "name": "prefill-tile-skip-past-window",
        "what": "prefill attention: the first key tile read starts one tile late when the window begins "
                "inside it (keys of the window's first tile dropped)",
        "edits": [("kernels/attention_prefill.cu",
                   "  for (int32_t kb = cta_lo / kBN * kBN; kb < kv_end; kb += kBN) {\n",
                   "  for (int32_t kb = (cta_lo + kBN - 1) / kBN * kBN; kb < kv_end; kb += kBN) {\n")],
        "units": ["kernels/attention_prefill.cu"],
    },
    {
        "name": "prefill-softcap-dropped",
        "what": "prefill attention: Gemma 2's attention-logit soft-cap not applied to the scores",
        "edits": [("kernels/attention_prefill.cu",
                   "  const bool capped = p.softcap > 0.0f;\n",
                   "  const bool capped = false;\n")],
        "units": ["kernels/attention_prefill.cu"],
    },
    {
        "name": "qk-norm-weight-dropped",
        "what": "RoPE + KV store: q/k heads RMS-normed without their norm weights (Gemma 3, Qwen3)",
        "edits": [("kernels/rope_kv.cu",
                   "      x0 *= sInv[h] * w[a];\n      x1 *= sInv[h] * w[b];\n",
                   "      x0 *= sInv[h];\n      x1 *= sInv[h];\n")],
        "units": ["kernels/rope_kv.cu"],
    },
    {
        "name": "kv-q4-nibble-swap",
        "what": "Q4_0 KV load: a block's first 16 values read from the high nibbles and the last 16 from the low ones",
        "edits": [("kernels/kv_elem.cuh",
                   "    const int32_t shift = (d0 & 31) >= 16 ? 4 : 0;\n",
                   "    const int32_t shift = (d0 & 31) >= 16 ? 0 : 4;\n")],
        "units": ["kernels/attention_decode.cu", "kernels/attention_prefill.cu"],
    },
    {
        "name": "kv-q4-scale-sign",
        "what": "Q4_0 KV store: the block's scale d = m / 8 instead of m / -8 (llama.cpp's rule; values mirrored)",
        "edits": [("kernels/kv_elem.cuh",
                   "    const float d = m / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;\n",
                   "    const float d = m / 8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;\n")],
        "units": ["kernels/rope_kv.cu"],
    },
    {
        "name": "kv-q4-no-rotation-back",
        "what": "Q4_0 KV on CUDA: each head's attention output not rotated back from V's Hadamard rotation",
        "edits": [("src/backend/cuda/cuda_forward.cpp",
                   "  if (kv.elem == kKvQ4 && KvRotationV(cfg_.head_dim) > 0)\n",
                   "  if (false && kv.elem == kKvQ4 && KvRotationV(cfg_.head_dim) > 0)\n")],
        "units": ["src/backend/cuda/cuda_forward.cpp"],
    },
    {
        "name": "kv-q4-query-not-rotated",
        "what": "Q4_0 KV on CUDA: K rows rotated before the store but the query left as it was",
        "edits": [("kernels/rope_kv.cu",
                   "      dev::HadamardRowWarp(sRow + static_cast<int64_t>(i) * hd, hd, is_v ? p.rot_v : p.rot_k, lane);\n",
                   "      if (i < 2 * p.n_head_kv) dev::HadamardRowWarp(sRow + static_cast<int64_t>(i) * hd, hd, is_v ? p.rot_v : p.rot_k, lane);\n")],
        "units": ["kernels/rope_kv.cu"],
    },
    {
        "name": "kv-fp8-exponent-bias",
        "what": "FP8 E4M3 KV store: the exponent rebased to bias 6 instead of 7 (every value stored twice as large)",
        "edits": [("kernels/kv_elem.cuh",
                   "  return sign | ((r >> 20) - (120u << 3));\n",
                   "  return sign | ((r >> 20) - (121u << 3));\n")],
        "units": ["kernels/rope_kv.cu"],
    },
    {
        "name": "kv-fp8-scale-per-row",
        "what": "FP8 E4M3 KV store: every block of a row scaled by the row's max|x| instead of its own",
        "edits": [("kernels/kv_elem.cuh",
                   "    const float amax = WarpMax(isfinite(v) ? fabsf(v) : 0.0f);\n",
                   "    float rmax = 0.0f;\n"
                   "    for (int32_t d = lane; d < head_dim; d += 32) rmax = fmaxf(rmax, isfinite(x[d]) ? fabsf(x[d]) : 0.0f);\n"
                   "    const float amax = WarpMax(rmax);\n")],
        "units": ["kernels/rope_kv.cu"],
    },
    {
        "name": "kv-fp8-no-saturation",
        "what": "FP8 E4M3 KV store: no saturation at 448 (an infinity or a value past 464 becomes the NaN code or wraps)",
        "edits": [("kernels/kv_elem.cuh",
                   "  if (a >= 0x43e00000u) return sign | 0x7eu;  // >= 448\n",
                   "")],
        "units": ["kernels/rope_kv.cu"],
    },
    {
        "name": "kv-fp8-widen-bias",
        "what": "FP8 E4M3 KV load (the emulator's cvt.rn.f16x2.e4m3x2): exponent rebased with bias 8 instead of 7",
        "edits": [("src/backend/cuda/emu/emu_fp8.cpp",
                   "  int exp = e == 0 ? -9 : e - 10;\n",
                   "  int exp = e == 0 ? -9 : e - 11;\n")],
        "units": ["src/backend/cuda/emu/emu_fp8.cpp"],
    },
]


def find(name):
    for m in MUTANTS:
        if m["name"] == name:
            return m
    sys.exit(f"mutants.py: no mutant named '{name}' (--list)")


def apply(m, root):
    edited = {}
    for rel, old, new in m["edits"]:
        path = root / rel
        text = edited.get(rel)
        if text is None:
            if not path.is_file():
                sys.exit(f"mutants.py: {m['name']}: {rel} does not exist under {root}")
            text = path.read_text()
        n = text.count(old)
        if n != 1:
            sys.exit(f"mutants.py: {m['name']}: the target text occurs {n} times in {rel} (needs exactly 1); "
                     f"the code moved: update the mutant\n--- target ---\n{old}")
        edited[rel] = text.replace(old, new)
    for rel, text in edited.items():  # written only once every target was found
        (root / rel).write_text(text)


def compile_unit(unit, db):
    """Runs the build's own compile command for `unit`, its object redirected
    to a scratch file (the build tree is left as it was); the exit status."""
    unit = os.path.realpath(unit)
    for e in json.load(open(db)):
        if os.path.realpath(os.path.join(e["directory"], e["file"])) != unit:
            continue
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "unit.o")
            fixed, i = [], 0
            while i < len(args):
                a = args[i]
                if a == "-o" and i + 1 < len(args):
                    fixed += ["-o", out]
                    i += 2
                elif a in ("-MF", "-MT", "-MQ") and i + 1 < len(args):
                    i += 2  # no dependency files written into the build tree
                elif a in ("-MD", "-MMD") or a.startswith(("-MF", "-MT", "-MQ")):
                    i += 1
                else:
                    fixed.append(a)
                    i += 1
            return subprocess.call(fixed, cwd=e["directory"])
    sys.exit(f"mutants.py: {unit} is not in {db} (configure the build with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)")


def main():
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--list", action="store_true")
    g.add_argument("--describe")
    g.add_argument("--files")
    g.add_argument("--units")
    g.add_argument("--apply")
    g.add_argument("--compile")
    ap.add_argument("--root", default=".")
    ap.add_argument("--db")
    a = ap.parse_args()
    if a.list:
        print("\n".join(m["name"] for m in MUTANTS))
    elif a.describe:
        print(find(a.describe)["what"])
    elif a.files:
        print("\n".join(sorted({e[0] for e in find(a.files)["edits"]})))
    elif a.units:
        print("\n".join(find(a.units)["units"]))
    elif a.compile:
        sys.exit(compile_unit(a.compile, a.db))
    else:
        apply(find(a.apply), pathlib.Path(a.root))


if __name__ == "__main__":
    main()
