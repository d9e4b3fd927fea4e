// Every environment variable llmrt reads, parsed in one place (the table in
// README.md, "Environment switches", lists them). They are switches for
// tests, measurements and A/B runs, not configuration: a program configures
// llmrt through llm_ctx_params.
//
// ReadEnv() reads the environment at the moment it is called; callers call it
// when they are created (llm_ctx_create, a backend's Create), so a switch set
// before a context is made applies to that context. The SIMD choices of
// process-wide kernel tables are made once, at their first use.
#pragma once

namespace llm {

struct EnvOptions {
  // LLM_BACKEND=cpu|cuda: what LLM_BACKEND_AUTO resolves to (the test suite
  // sets cpu so results pinned to the F32 reference hold on GPU machines).
  enum class Backend { kAuto, kCpu, kCuda };
  Backend backend = Backend::kAuto;
  // LLM_CPU_ISA=generic: the portable CPU kernels even where AVX2 is there.
  bool cpu_isa_generic = false;
  // LLM_CPU_ISA=avx2: the AVX2 kernels without their AVX-512 VNNI tiles.
  bool cpu_isa_avx2 = false;
  // LLM_CPU_AMX=0: no AMX tiles (the embedding step's GEMM keeps its
  // AVX-512 panels where the CPU has AMX-BF16).
  bool cpu_amx_off = false;
  // LLM_CPU_PACK=0: CPU matmuls read the GGUF rows, not the packed copy.
  bool cpu_pack_off = false;
  // LLM_CPU_RELEASE=0: keep the mapped file pages of packed weights resident
  // (for measuring what releasing them saves).
  bool cpu_release_off = false;
  // LLM_CPU_LANES=0: one shared pass per step, no per-sequence lanes.
  bool cpu_lanes_off = false;
  // LLM_CPU_ACT=own: CPU matmuls round every quantized weight's activations
  // llmrt's own way (32-value blocks, F32 scales), not as llama.cpp does for
  // the type, and F16 / BF16 weights read F32 activations instead of ones
  // rounded to F16 / BF16 as llama.cpp's, and attention reads an F32 query
  // against Q4_0 / Q8_0 keys, not llama.cpp's Q8_0-rounded one
  // (backend/cpu/act_rounding.h; for A/B perplexity runs).
  bool cpu_act_own = false;
  // LLM_CUDA_DEBUG=1: synchronise and check after every CUDA launch (graphs off).
  bool cuda_debug = false;
  // LLM_CUDA_ATTENTION=decode: the decode attention kernel for every row.
  bool cuda_force_decode_attention = false;
  // LLM_CUDA_GRAPHS=0: no CUDA graph capture or replay.
  bool cuda_graphs_off = false;
  // LLM_EMU_RACECHECK=0: the CUDA emulator's shared-memory race detector off.
  bool emu_racecheck_off = false;
  // LLM_EMU_DEVICE_MIB=N: the CUDA emulator's device memory, MiB (0: 16 GiB).
  long emu_device_mib = 0;
  // LLM_EMU_DEVICES=N: how many devices the CUDA emulator shows (1..16;
  // default 1), each with LLM_EMU_DEVICE_MIB of memory.
  long emu_devices = 1;
  // LLM_EMU_CC=M.m: the compute capability the CUDA emulator's devices
  // report (8.0 .. 9.9; default 9.0), e.g. 8.6 to see what an sm_86 part
  // refuses (FP8 E4M3 KV needs 8.9). Held as 10 * M + m.
  int emu_cc = 90;
  // LLM_KV_SERVE_STALL_MS=N: a KV producer's server sends the first half of
  // each PULL's bytes, then holds the rest N ms (the tests kill a producer
  // mid-transfer with it; 0: off).
  long kv_serve_stall_ms = 0;
};

// The switches as set now; unset or unrecognised values leave the defaults.
EnvOptions ReadEnv();

}  // namespace llm
