// EMULATE builds: the shared-memory race detector's interface to the
// executor (emu_race.cpp says how it works). Without LLM_EMU_RACE_HOOKS
// every call is a no-op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda_runtime.h"

namespace llm::emu {

struct RaceState {
  bool active = false;
  bool tls_probed = false;
  uintptr_t dyn_lo = 0, tls_lo = 0;
  size_t dyn_size = 0, tls_size = 0;
  int thread = 0;                     // linear id of the running thread
  const uint64_t* warp_gen = nullptr;  // its warp's collective generation
};

// Fails the running launch from inside a fiber (emu_executor.cpp).
[[noreturn]] void RaceFail(const std::string& why);

#if LLM_EMU_RACE_HOOKS
extern thread_local constinit RaceState t_race;
void RaceBeginBlock(unsigned char* dyn, size_t dyn_bytes, int thread, const uint64_t* warp_gen);
void RaceBarrier();
void RaceEndBlock();
// The executor switches threads: the accesses from here on are `thread`'s.
inline void RaceSwitch(int thread, const uint64_t* warp_gen) {
  t_race.thread = thread;
  t_race.warp_gen = warp_gen;
}
#else
inline void RaceBeginBlock(unsigned char*, size_t, int, const uint64_t*) {}
inline void RaceBarrier() {}
inline void RaceEndBlock() {}
inline void RaceSwitch(int, const uint64_t*) {}
#endif

}  // namespace llm::emu
