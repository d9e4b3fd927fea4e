// EMULATE builds: the shared-memory race detector. The kernels (and the
// emulator's self-test) are compiled with -fsanitize=thread but linked
// without ThreadSanitizer's runtime: the compiler's instrumentation calls the
// __tsan_read/__tsan_write hooks below on every load and store, and they keep
// a per-byte shadow of the running block's shared memory (the dynamic buffer
// and the static __shared__ variables, which are thread-locals of the main
// program: see emu_device.h). Two threads touching the same byte in the same
// barrier interval, at least one writing, fail the launch, unless both are in
// one warp and a __syncwarp came between (a shuffle or vote does not
// order memory: racecheck on an H200 flagged exactly that, 2026-11-27). Atomics are synchronised and
// not recorded.
//
// Built only when LLM_EMU_RACE_HOOKS (EMULATE without sanitizers: the hooks
// would collide with TSan's runtime, and ASan cannot share a TU with TSan's
// instrumentation). LLM_EMU_RACECHECK=0 in the environment turns it off.
#include "emu_race.h"
#include "util/env.h"

#if LLM_EMU_RACE_HOOKS

#include <link.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace llm::emu {

thread_local constinit RaceState t_race;

namespace {

constexpr uint16_t kSeveral = 0xFFFF;

struct Shadow {
  uint32_t interval;
  uint16_t writer;  // thread + 1; 0: none in this interval
  uint16_t reader;  // thread + 1, kSeveral, or 0
  uint16_t wgen;    // writer's warp generation at the write
  uint16_t rgen;    // last reader's warp generation
  uint16_t rwarp;   // the readers' warp, kSeveral when readers span warps
  uint16_t pad;
};

thread_local std::vector<Shadow> t_tls_shadow, t_dyn_shadow;
thread_local uint32_t t_interval = 0;

bool Enabled() {
  static const bool on = !ReadEnv().emu_racecheck_off;
  return on;
}

// The main program's static TLS block (x86-64: just below the thread pointer).
int TlsPhdr(dl_phdr_info* info, size_t, void* out) {
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_TLS) {
      auto* r = static_cast<std::pair<size_t, size_t>*>(out);
      r->first = info->dlpi_phdr[i].p_memsz;
      r->second = info->dlpi_phdr[i].p_align;
    }
  return 1;  // the first object is the main program
}

void StaticTlsRange(uintptr_t* lo, size_t* size) {
  *lo = 0;
  *size = 0;
#if defined(__x86_64__)
  std::pair<size_t, size_t> tls{0, 1};
  dl_iterate_phdr(&TlsPhdr, &tls);
  uintptr_t tp;
  asm("mov %%fs:0, %0" : "=r"(tp));
  const size_t align = tls.second > 0 ? tls.second : 1;
  const size_t span = (tls.first + align - 1) / align * align + align;
  const auto probe = reinterpret_cast<uintptr_t>(&t_thread_idx);
  if (tls.first > 0 && probe >= tp - span && probe < tp) {  // the emulator lives in the main program
    *lo = tp - span;
    *size = span;
  }
#endif
}

const char* Where(const RaceState& r, uintptr_t a, size_t* off) {
  if (a - r.dyn_lo < r.dyn_size) {
    *off = a - r.dyn_lo;
    return "dynamic shared memory";
  }
  *off = a - r.tls_lo;
  return "static __shared__ memory (thread-local block)";
}

[[gnu::noinline]] void Report(uintptr_t a, uint16_t me, uint16_t other, bool write, bool other_wrote) {
  size_t off = 0;
  const char* where = Where(t_race, a, &off);
  RaceFail(std::string("shared-memory race: thread ") + std::to_string(me) + (write ? " writes" : " reads") +
           " byte " + std::to_string(off) + " of the " + where + ", which thread " +
           (other == kSeveral ? std::string("(several)") : std::to_string(other)) +
           (other_wrote ? " wrote" : " read") + " in the same barrier interval (linear thread ids)");
}

[[gnu::noinline]] void Check(uintptr_t a, size_t n, bool write) {
  const RaceState& r = t_race;
  Shadow* base;
  if (a - r.dyn_lo < r.dyn_size) {
    if (a - r.dyn_lo + n > t_dyn_shadow.size()) return;
    base = t_dyn_shadow.data() + (a - r.dyn_lo);
  } else {
    if (a - r.tls_lo + n > t_tls_shadow.size()) return;
    base = t_tls_shadow.data() + (a - r.tls_lo);
  }
  const uint16_t me = static_cast<uint16_t>(r.thread + 1), warp = static_cast<uint16_t>(r.thread / 32);
  const auto gen = static_cast<uint16_t>(*r.warp_gen);
  for (size_t i = 0; i < n; ++i) {
    Shadow& s = base[i];
    if (s.interval != t_interval) s = Shadow{t_interval, 0, 0, 0, 0, 0, 0};
    // synchronised by a __syncwarp since the other access?
    const bool w_synced = s.writer != 0 && (s.writer - 1) / 32 == warp && s.wgen != gen;
    if (s.writer != 0 && s.writer != me && !w_synced) Report(a + i, me - 1, s.writer - 1, write, true);
    if (write) {
      const bool r_synced = s.rwarp == warp && s.rgen != gen;
      if (s.reader != 0 && s.reader != me && !r_synced)
        Report(a + i, me - 1, s.reader == kSeveral ? kSeveral : s.reader - 1, true, false);
      s.writer = me;
      s.wgen = gen;
    } else if (s.reader == 0) {
      s.reader = me;
      s.rwarp = warp;
      s.rgen = gen;
    } else if (s.reader != me) {
      s.reader = kSeveral;
      if (s.rwarp != warp) s.rwarp = kSeveral;
      s.rgen = gen;
    }
  }
}

inline void Access(const void* p, size_t n, bool write) {
  const RaceState& r = t_race;
  if (!r.active) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a - r.dyn_lo >= r.dyn_size && a - r.tls_lo >= r.tls_size) return;
  Check(a, n, write);
}

}  // namespace

void RaceBeginBlock(unsigned char* dyn, size_t dyn_bytes, int thread, const uint64_t* warp_gen) {
  RaceState& r = t_race;
  r.active = false;
  if (!Enabled()) return;
  if (r.tls_size == 0 && !r.tls_probed) {
    StaticTlsRange(&r.tls_lo, &r.tls_size);
    r.tls_probed = true;
    t_tls_shadow.assign(r.tls_size, Shadow{});
  }
  r.dyn_lo = reinterpret_cast<uintptr_t>(dyn);
  r.dyn_size = dyn != nullptr ? dyn_bytes : 0;
  if (t_dyn_shadow.size() < r.dyn_size) t_dyn_shadow.assign(r.dyn_size, Shadow{});
  ++t_interval;  // shadow entries of earlier blocks are stale from here on
  r.thread = thread;
  r.warp_gen = warp_gen;
  r.active = true;
}

void RaceBarrier() { ++t_interval; }

void RaceEndBlock() { t_race.active = false; }

}  // namespace llm::emu

using llm::emu::Access;

// ---- the hooks the compiler's -fsanitize=thread instrumentation calls
extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
#define LLM_EMU_HOOK(n)                                                        \
  void __tsan_read##n(void* p) { Access(p, n, false); }                        \
  void __tsan_write##n(void* p) { Access(p, n, true); }                        \
  void __tsan_unaligned_read##n(void* p) { Access(p, n, false); }              \
  void __tsan_unaligned_write##n(void* p) { Access(p, n, true); }
LLM_EMU_HOOK(1)
LLM_EMU_HOOK(2)
LLM_EMU_HOOK(4)
LLM_EMU_HOOK(8)
LLM_EMU_HOOK(16)
#undef LLM_EMU_HOOK
void __tsan_read_range(void* p, unsigned long n) { Access(p, n, false); }
void __tsan_write_range(void* p, unsigned long n) { Access(p, n, true); }
void __tsan_vptr_read(void**) {}
void __tsan_vptr_update(void**, void*) {}

// Atomics: performed, not recorded (they synchronise).
#define LLM_EMU_ATOMICS(bits, T)                                                                                    \
  T __tsan_atomic##bits##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }           \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }          \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); } \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                           \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                         \
  }                                                                                                                 \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                             \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                         \
  }                                                                                                                 \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                                 \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                               \
    return c;                                                                                                       \
  }
LLM_EMU_ATOMICS(8, unsigned char)
LLM_EMU_ATOMICS(16, unsigned short)
LLM_EMU_ATOMICS(32, unsigned int)
LLM_EMU_ATOMICS(64, unsigned long long)
#undef LLM_EMU_ATOMICS
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) {}
}

#endif  // LLM_EMU_RACE_HOOKS
