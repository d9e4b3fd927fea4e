// EMULATE builds: the SIMT executor. A grid's blocks run one after another on
// the calling thread; a block's threads are fibers with small stacks from a
// reused pool. A fiber runs until it reaches __syncthreads or a warp
// collective, then yields to this file's scheduler, which resumes only
// fibers whose barrier or collective has completed. A pass that resumes
// nobody while threads are still live is a deadlock: the launch fails.
//
// The context switch is a few instructions of x86-64 assembly (callee-saved
// registers and the stack pointer; no signal mask, which makes ucontext's
// swapcontext a system call); other architectures use ucontext. Under ASan
// every switch is announced with __sanitizer_{start,finish}_switch_fiber.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "emu_internal.h"
#include "emu_race.h"

#if defined(__SANITIZE_ADDRESS__)
#define LLM_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLM_EMU_ASAN 1
#endif
#endif
#if LLM_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace llm::emu {

thread_local constinit uint3 t_thread_idx{}, t_block_idx{}, t_block_dim{}, t_grid_dim{};

namespace {

#if LLM_EMU_ASAN
constexpr size_t kStackBytes = 512 << 10;  // ASan's redzones and fake frames
#else
constexpr size_t kStackBytes = 64 << 10;
#endif

// ---------------------------------------------------------------- context switch
#if defined(__x86_64__)
extern "C" void llm_emu_switch(void** save_sp, void* load_sp);
// Saves rbp, rbx, r12-r15 on the current stack, stores rsp in *save_sp,
// loads load_sp and pops the same registers from the new stack, then returns
// to whatever address that stack holds.
asm(R"(
  .text
  .p2align 4
  .globl llm_emu_switch
  .hidden llm_emu_switch
  .type llm_emu_switch,@function
llm_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size llm_emu_switch, .-llm_emu_switch
)");
struct Context {
  void* sp = nullptr;
};
#else
struct Context {
  ucontext_t uc;
};
#endif

enum class Wait : uint8_t { kNone, kBarrier, kWarp, kDone };

struct Fiber {
  Context ctx;
  dim3 tid;
  int warp = 0;
  Wait wait = Wait::kNone;
  uint64_t wait_gen = 0;
  char* stack = nullptr;
  void* fake_stack = nullptr;  // ASan's fake stack of this fiber while switched out
};

struct WarpState {
  int arrived = 0;
  int live = 0;
  uint64_t gen = 0;       // every collective: the lanes' rendezvous
  uint64_t sync_gen = 0;  // __syncwarp only: what orders shared memory in a warp (race detector)
  CollectiveOp op = kOpShfl;
  unsigned int active[2] = {0, 0};
  alignas(16) unsigned char buf[2][32][kLanePayload];
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<WarpState> warps;
  int live = 0;
  int bar_arrived = 0;
  uint64_t bar_gen = 0;
  const char* bar_file = nullptr;  // source site of the open barrier
  int bar_line = 0;
  int current = -1;
  std::string error;
  Context sched;
  const void* sched_stack = nullptr;  // the scheduler's stack, for ASan
  size_t sched_stack_size = 0;
  void* sched_fake = nullptr;
  const std::function<void()>* body = nullptr;
  std::vector<unsigned char> dyn_smem;
};

thread_local Block* t_block = nullptr;

// Stacks are reused across launches: one per thread of the largest block seen.
thread_local std::vector<std::unique_ptr<char[]>> t_stacks;

char* StackFor(size_t i) {
  while (t_stacks.size() <= i) t_stacks.emplace_back(new char[kStackBytes]);
#if LLM_EMU_ASAN
  // A fiber abandoned by a failed launch may have left poisoned frames.
  ASAN_UNPOISON_MEMORY_REGION(t_stacks[i].get(), kStackBytes);
#endif
  return t_stacks[i].get();
}

[[noreturn]] void FiberMain();

void SwitchTo(Context* save, Context* load) {
#if defined(__x86_64__)
  llm_emu_switch(&save->sp, load->sp);
#else
  swapcontext(&save->uc, &load->uc);
#endif
}

void InitFiber(Fiber& f, int stagger) {
#if defined(__x86_64__)
  // Top of stack, 16-aligned T: [T-8] a zero return address for FiberMain,
  // [T-16] FiberMain (llm_emu_switch's ret), below it six zero registers.
  // Stack tops staggered by `stagger` cache lines: tops 64 KiB apart would
  // all fall in the same cache sets, and a block's fibers evict each other.
  auto top = reinterpret_cast<uintptr_t>(f.stack + kStackBytes - stagger * 64) & ~uintptr_t{15};
  auto* sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;
  *--sp = reinterpret_cast<void*>(&FiberMain);
  for (int i = 0; i < 6; ++i) *--sp = nullptr;
  f.ctx.sp = sp;
#else
  getcontext(&f.ctx.uc);
  f.ctx.uc.uc_stack.ss_sp = f.stack;
  f.ctx.uc.uc_stack.ss_size = kStackBytes;
  f.ctx.uc.uc_link = nullptr;
  makecontext(&f.ctx.uc, &FiberMain, 0);
#endif
}

bool Runnable(const Block* b, const Fiber& f) {
  switch (f.wait) {
    case Wait::kNone: return true;
    case Wait::kBarrier: return b->bar_gen != f.wait_gen;
    case Wait::kWarp: return b->warps[f.warp].gen != f.wait_gen;
    case Wait::kDone: return false;
  }
  return false;
}

// The next runnable fiber after `from`, round robin (`from` itself last), or -1.
int NextRunnable(const Block* b, int from) {
  const int n = static_cast<int>(b->fibers.size());
  for (int i = from + 1; i < n; ++i)
    if (Runnable(b, b->fibers[i])) return i;
  for (int i = 0; i <= from; ++i)
    if (Runnable(b, b->fibers[i])) return i;
  return -1;
}

// From the running fiber to fiber `to`, or to the scheduler (to < 0).
// `dying`: the running fiber never runs again.
void SwitchFromFiber(Block* b, int to, bool dying) {
  Fiber& f = b->fibers[b->current];
  Context* target = &b->sched;
#if LLM_EMU_ASAN
  const void* bottom = b->sched_stack;
  size_t size = b->sched_stack_size;
#endif
  if (to >= 0) {
    b->current = to;
    t_thread_idx = b->fibers[to].tid;
    RaceSwitch(to, &b->warps[b->fibers[to].warp].sync_gen);
    target = &b->fibers[to].ctx;
#if LLM_EMU_ASAN
    bottom = b->fibers[to].stack;
    size = kStackBytes;
#endif
  }
#if LLM_EMU_ASAN
  __sanitizer_start_switch_fiber(dying ? nullptr : &f.fake_stack, bottom, size);
#endif
  SwitchTo(&f.ctx, target);
#if LLM_EMU_ASAN
  __sanitizer_finish_switch_fiber(f.fake_stack, nullptr, nullptr);
#endif
  (void)dying;
}

// The running fiber waits: on to the next runnable fiber (directly, without
// the scheduler); none runnable while threads live is a deadlock.
void WaitForOthers(Block* b) {
  const int me = b->current;
  const int next = NextRunnable(b, me);
  if (next == me) return;
  if (next < 0) {
    int at_bar = 0, at_warp = 0;
    for (const Fiber& f : b->fibers) {
      at_bar += f.wait == Wait::kBarrier;
      at_warp += f.wait == Wait::kWarp;
    }
    if (b->error.empty())
      b->error = "deadlock: " + std::to_string(b->live) + " live threads, " + std::to_string(at_bar) +
                 " waiting at __syncthreads, " + std::to_string(at_warp) + " at a warp collective";
  }
  SwitchFromFiber(b, next, false);
}

// Fails the launch from inside a fiber: back to the scheduler for good.
[[noreturn]] void AbortFiber(Block* b) {
  SwitchFromFiber(b, -1, true);
  std::abort();  // unreachable: the scheduler never resumes a failed block
}

void Fail(Block* b, std::string why) {
  if (b->error.empty()) b->error = std::move(why);
}

void ReleaseBarrierIfComplete(Block* b) {
  if (b->bar_arrived > 0 && b->bar_arrived == b->live) {
    b->bar_arrived = 0;
    ++b->bar_gen;
    RaceBarrier();
  }
}

void ReleaseWarpIfComplete(WarpState& w) {
  if (w.arrived > 0 && w.arrived == w.live) {
    w.arrived = 0;
    ++w.gen;
    // Only __syncwarp orders memory among a warp's lanes (CUDA's memory
    // model; compute-sanitizer's racecheck flags a shared word one lane reads
    // and another writes with only shuffles between them).
    if (w.op == kOpSyncWarp) ++w.sync_gen;
    w.active[w.gen & 1] = 0;  // the slot the next collective fills; its last readers are done
  }
}

[[noreturn]] void FiberMain() {
  Block* b = t_block;
#if LLM_EMU_ASAN
  // The first fiber is entered from the scheduler: remember its stack.
  const void* from = nullptr;
  size_t from_size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &from, &from_size);
  if (b->sched_stack == nullptr) {
    b->sched_stack = from;
    b->sched_stack_size = from_size;
  }
#endif
  (*b->body)();
  Fiber& f = b->fibers[b->current];
  f.wait = Wait::kDone;
  --b->live;
  --b->warps[f.warp].live;
  ReleaseBarrierIfComplete(b);  // exited threads no longer count at a barrier
  ReleaseWarpIfComplete(b->warps[f.warp]);
  int next = NextRunnable(b, b->current);
  if (next < 0 && b->live > 0) WaitForOthers(b);  // sets the deadlock error; never returns here
  SwitchFromFiber(b, next, true);
  std::abort();  // unreachable: a finished fiber is never resumed
}

std::string Describe(const dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

// Runs the block t_block_idx; returns an error message or "".
std::string RunBlock(Block& b, const std::function<void()>& body, size_t smem) {
  const dim3 bd = t_block_dim;
  const int n = static_cast<int>(bd.x * bd.y * bd.z);
  b.fibers.assign(n, Fiber{});
  b.warps.assign((n + 31) / 32, WarpState{});
  b.live = n;
  b.bar_arrived = 0;
  b.bar_gen = 0;
  b.error.clear();
  b.body = &body;
  if (smem > 0) {
    b.dyn_smem.assign(smem, 0xFF);  // NaN: what a kernel reads before writing shows
  }
  for (int i = 0; i < n; ++i) {
    Fiber& f = b.fibers[i];
    f.tid = dim3(i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y));
    f.warp = i / 32;
    f.stack = StackFor(i);
    ++b.warps[f.warp].live;
    InitFiber(f, (i * 37) % 128);
  }
  // Fiber 0 starts; from then on fibers hand over to each other, and control
  // comes back here when the last one exits or the block fails.
  b.current = 0;
  t_thread_idx = b.fibers[0].tid;
  RaceBeginBlock(b.dyn_smem.empty() ? nullptr : b.dyn_smem.data(), smem, 0, &b.warps[0].sync_gen);
#if LLM_EMU_ASAN
  b.sched_stack = nullptr;
  __sanitizer_start_switch_fiber(&b.sched_fake, b.fibers[0].stack, kStackBytes);
#endif
  SwitchTo(&b.sched, &b.fibers[0].ctx);
#if LLM_EMU_ASAN
  __sanitizer_finish_switch_fiber(b.sched_fake, nullptr, nullptr);
#endif
  RaceEndBlock();
  if (!b.error.empty()) return b.error;
  if (b.live > 0) return "internal error: the scheduler was resumed with live threads";
  return "";
}

std::mutex g_attr_mu;
std::unordered_map<const void*, size_t> g_max_dyn_smem;

}  // namespace

// ---------------------------------------------------------------- device side
void SyncThreads(const char* file, int line) {
  Block* b = t_block;
  if (b == nullptr) Trap("__syncthreads outside a kernel");
  Fiber& f = b->fibers[b->current];
  if (b->bar_arrived == 0) {
    b->bar_file = file;
    b->bar_line = line;
  } else if (b->bar_line != line || (b->bar_file != file && std::strcmp(b->bar_file, file) != 0)) {
    Fail(b, "divergent __syncthreads: thread " + Describe(f.tid) + " waits at " + file + ":" + std::to_string(line) +
                ", others at " + b->bar_file + ":" + std::to_string(b->bar_line));
    AbortFiber(b);
  }
  f.wait = Wait::kBarrier;
  f.wait_gen = b->bar_gen;
  ++b->bar_arrived;
  ReleaseBarrierIfComplete(b);
  while (b->bar_gen == f.wait_gen) {
    WaitForOthers(b);
    if (!b->error.empty()) AbortFiber(b);
  }
  f.wait = Wait::kNone;
}

WarpView WarpExchange(CollectiveOp op, const void* payload, size_t bytes, unsigned int mask) {
  Block* b = t_block;
  if (b == nullptr) Trap("warp collective outside a kernel");
  Fiber& f = b->fibers[b->current];
  WarpState& w = b->warps[f.warp];
  const int lane = LaneId();
  if (((mask >> lane) & 1u) == 0) {
    Fail(b, "warp collective: thread " + Describe(f.tid) + " is not in its own mask");
    AbortFiber(b);
  }
  if (w.arrived == 0) {
    w.op = op;
  } else if (w.op != op) {
    Fail(b, "divergent warp collective: lanes of warp " + std::to_string(f.warp) + " wait at different operations");
    AbortFiber(b);
  }
  const int slot = static_cast<int>(w.gen & 1);
  if (bytes > 0) std::memcpy(w.buf[slot][lane], payload, bytes);
  w.active[slot] |= 1u << lane;
  f.wait = Wait::kWarp;
  f.wait_gen = w.gen;
  ++w.arrived;
  ReleaseWarpIfComplete(w);
  while (w.gen == f.wait_gen) {
    WaitForOthers(b);
    if (!b->error.empty()) AbortFiber(b);
  }
  f.wait = Wait::kNone;
  // Valid until this warp's next-but-one collective, which needs this lane.
  return WarpView{&w.buf[slot][0][0], w.active[slot]};
}

void RaceFail(const std::string& why) {
  Block* b = t_block;
  Fail(b, why);
  AbortFiber(b);
}

unsigned char* DynamicSmem() {
  Block* b = t_block;
  return b != nullptr && !b->dyn_smem.empty() ? b->dyn_smem.data() : nullptr;
}

void Trap(const char* why) {
  Block* b = t_block;
  if (b == nullptr || b->current < 0) {
    std::fprintf(stderr, "llmrt CUDA emulator: %s outside a kernel\n", why);
    std::abort();
  }
  Fail(b, std::string(why) + " in thread " + Describe(b->fibers[b->current].tid));
  AbortFiber(b);
}

// ---------------------------------------------------------------- launches
size_t MaxDynamicSmem(const void* func) {
  std::lock_guard<std::mutex> lock(g_attr_mu);
  const auto it = g_max_dyn_smem.find(func);
  return it != g_max_dyn_smem.end() ? it->second : kSmemDefault;
}

cudaError_t FuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (func == nullptr) return cudaErrorInvalidValue;
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return value >= -1 && value <= 100 ? cudaSuccess : cudaErrorInvalidValue;
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  if (value < 0 || static_cast<size_t>(value) > kSmemOptin) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(g_attr_mu);
  g_max_dyn_smem[func] = static_cast<size_t>(value);
  return cudaSuccess;
}

void LaunchKernel(const char* name, const void* func, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                  std::function<void()> body, const void* foreign) {
  if (!StreamOnCurrentDevice(stream)) {  // a stream of another device
    SetLastError(cudaErrorInvalidResourceHandle);
    return;
  }
  // sm_90 limits: a block of at most 1024 threads (z at most 64), a grid of
  // 2^31-1 x 65535 x 65535 blocks, 48 KiB of dynamic shared memory unless
  // the kernel opted in to more.
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 ||
      grid.y == 0 || grid.z == 0 || grid.x > 0x7FFFFFFFu || grid.y > 65535 || grid.z > 65535) {
    SetLastError(cudaErrorInvalidConfiguration);
    return;
  }
  if (smem > MaxDynamicSmem(func)) {
    SetLastError(cudaErrorInvalidValue);
    return;
  }
  if (foreign != nullptr) {
    std::fprintf(stderr, "llmrt CUDA emulator: kernel %s given %p, another device's memory\n", name, foreign);
    const cudaError_t e = Submit(stream, [] { return cudaErrorIllegalAddress; });
    if (e != cudaSuccess) SetLastError(e);
    return;
  }
  const cudaError_t e = Submit(stream, [name, grid, block, smem, body = std::move(body)]() {
    return RunGrid(name, grid, block, smem, body);
  });
  if (e != cudaSuccess) SetLastError(e);
}

cudaError_t RunGrid(const char* name, dim3 grid, dim3 block, size_t smem, const std::function<void()>& body) {
  if (t_block != nullptr) return cudaErrorLaunchFailure;  // a launch from inside a kernel
  Block b;
  t_block = &b;
  t_grid_dim = grid;
  t_block_dim = block;
  std::string err;
  for (unsigned int z = 0; z < grid.z && err.empty(); ++z)
    for (unsigned int y = 0; y < grid.y && err.empty(); ++y)
      for (unsigned int x = 0; x < grid.x && err.empty(); ++x) {
        t_block_idx = dim3(x, y, z);
        err = RunBlock(b, body, smem);
        if (!err.empty()) err = "block " + Describe(t_block_idx) + ": " + err;
      }
  t_block = nullptr;
  if (err.empty()) return cudaSuccess;
  std::fprintf(stderr, "llmrt CUDA emulator: kernel %s failed: %s\n", name, err.c_str());
  return cudaErrorLaunchFailure;
}

}  // namespace llm::emu
