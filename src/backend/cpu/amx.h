// Whether this process may run AMX-BF16 tile instructions: the CPU reports
// AMX-TILE, AMX-BF16 and AVX512_BF16 (cpuid), LLM_CPU_AMX=0 and LLM_CPU_ISA
// are unset, and Linux granted the tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM, asked once per process; a refusal is logged once and
// leaves the AVX-512 paths). Decided at the first call, for the process.
#pragma once

namespace llm::cpu {

bool AmxBf16Usable();

}  // namespace llm::cpu
