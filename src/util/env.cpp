// The only file under src/ that calls getenv (see env.h).
#include "util/env.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace llm {
namespace {

bool Is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

}  // namespace

EnvOptions ReadEnv() {
  EnvOptions e;
  if (Is("LLM_BACKEND", "cpu")) {
    e.backend = EnvOptions::Backend::kCpu;
  } else if (Is("LLM_BACKEND", "cuda")) {
    e.backend = EnvOptions::Backend::kCuda;
  }
  e.cpu_isa_generic = Is("LLM_CPU_ISA", "generic");
  e.cpu_isa_avx2 = Is("LLM_CPU_ISA", "avx2");
  e.cpu_amx_off = Is("LLM_CPU_AMX", "0");
  e.cpu_pack_off = Is("LLM_CPU_PACK", "0");
  e.cpu_release_off = Is("LLM_CPU_RELEASE", "0");
  e.cpu_lanes_off = Is("LLM_CPU_LANES", "0");
  e.cpu_act_own = Is("LLM_CPU_ACT", "own");
  e.cuda_debug = Is("LLM_CUDA_DEBUG", "1");
  e.cuda_force_decode_attention = Is("LLM_CUDA_ATTENTION", "decode");
  e.cuda_graphs_off = Is("LLM_CUDA_GRAPHS", "0");
  e.emu_racecheck_off = Is("LLM_EMU_RACECHECK", "0");
  if (const char* v = std::getenv("LLM_EMU_DEVICE_MIB"); v != nullptr) e.emu_device_mib = std::max(0L, std::atol(v));
  if (const char* v = std::getenv("LLM_EMU_DEVICES"); v != nullptr) e.emu_devices = std::clamp(std::atol(v), 1L, 16L);
  if (const char* v = std::getenv("LLM_EMU_CC"); v != nullptr) {
    int major = 0, minor = 0;
    if (std::sscanf(v, "%d.%d", &major, &minor) == 2 && major >= 8 && major <= 9 && minor >= 0 && minor <= 9)
      e.emu_cc = 10 * major + minor;
  }
  if (const char* v = std::getenv("LLM_KV_SERVE_STALL_MS"); v != nullptr)
    e.kv_serve_stall_ms = std::clamp(std::atol(v), 0L, 600000L);
  return e;
}

}  // namespace llm
