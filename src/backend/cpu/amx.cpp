// AmxBf16Usable (amx.h): cpuid leaf 7 and the XTILEDATA permission request.
#include "backend/cpu/amx.h"

#include <cstdio>

#include "backend/cpu/encoder_matmul.h"
#include "util/env.h"

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define LLM_AMX_PROBE 1
#endif

namespace llm::cpu {

#if defined(LLM_AMX_PROBE)
namespace {

constexpr long kArchReqXcompPerm = 0x1023;  // arch_prctl: request a dynamic XSAVE feature
constexpr long kXfeatureXtiledata = 18;     // the tile data registers

bool CpuHasAmxBf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  const bool tile = (d >> 24) & 1, tile_bf16 = (d >> 22) & 1;
  const bool avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1;
  if (a < 1) return false;  // leaf 7 subleaf 1 (AVX512_BF16) absent
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
  const bool avx512_bf16 = (a1 >> 5) & 1;
  return tile && tile_bf16 && avx512f && avx512bw && avx512_bf16;
}

}  // namespace
#endif

bool AmxBf16Usable() {
#if defined(LLM_AMX_PROBE)
  static const bool use = [] {
    const EnvOptions env = ReadEnv();
    // The kernel also converts with AVX-512F; LLM_CPU_ISA turns it off too.
    if (env.cpu_amx_off || !EncoderMatMulAvx512() || !CpuHasAmxBf16()) return false;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
      std::fprintf(stderr, "llmrt: AMX tiles refused by the kernel (arch_prctl XTILEDATA); using AVX-512\n");
      return false;
    }
    return true;
  }();
  return use;
#else
  return false;
#endif
}

}  // namespace llm::cpu
