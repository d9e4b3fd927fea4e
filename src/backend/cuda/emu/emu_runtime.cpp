// EMULATE builds: the host side of the CUDA runtime. Device memory is host
// heap memory (so ASan sees out-of-bounds device accesses), filled with 0xFF
// bytes when allocated (NaN as f32 and bf16: outputs a kernel never wrote
// show). LLM_EMU_DEVICES=N emulates N devices (util/env.h): each has its
// own memory budget and accounting, every allocation and stream belongs to
// the device current on its thread (cudaSetDevice) when it was made, and a
// device pointer used while another device is current is an error (see
// ForeignDevicePointer); data crosses devices through cudaMemcpyPeer. Every stream runs eagerly in call order, which is one valid
// schedule of CUDA's stream semantics; a stream that captures a graph
// records its operations instead, each with the argument values of the call,
// and cudaGraphLaunch runs the recording again.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "emu_internal.h"
#include "util/env.h"

struct CUstream_st {
  int device = 0;  // the device current when it was created
  unsigned int flags = 0;
  bool capturing = false;
  bool invalidated = false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::vector<llm::emu::StreamOp> recorded;
};
struct CUgraph_st {
  std::vector<llm::emu::StreamOp> ops;
};
struct CUgraphExec_st {
  std::vector<llm::emu::StreamOp> ops;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point when{};
  bool recorded = false;
};

namespace llm::emu {
namespace {

constexpr size_t kAlign = 256;  // cudaMalloc's alignment
constexpr int kMaxDevices = 16;

struct Allocation {
  size_t bytes;
  int device;
};

struct State {
  std::recursive_mutex mu;
  std::map<uintptr_t, Allocation> device;  // device allocations: start -> bytes, owner
  std::set<void*> pinned;
  std::set<cudaStream_t> streams;
  size_t used[kMaxDevices] = {};  // bytes allocated per device
  cudaError_t last = cudaSuccess;     // what cudaGetLastError returns and clears
  cudaError_t pending = cudaSuccess;  // an execution error, reported by the next synchronising call
  int global_captures = 0;            // streams capturing in global mode
};

State& S() {
  static State* s = new State;  // never destroyed: buffers may be freed from static destructors
  return *s;
}

thread_local int t_device = 0;  // cudaSetDevice's, per host thread as in CUDA

// The switches are read when asked (tests set them before creating a
// context; allocations are not hot).
size_t DeviceBytes() {
  const long mib = ReadEnv().emu_device_mib;
  return (mib > 0 ? static_cast<size_t>(mib) : size_t{16384}) << 20;
}
int DeviceCount() { return static_cast<int>(std::clamp<long>(ReadEnv().emu_devices, 1, kMaxDevices)); }

// The device owning the allocation [p, p + n) lies inside, or -1.
int DeviceOfRange(const void* p, size_t n) {
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = s.device.upper_bound(a);
  if (it == s.device.begin()) return -1;
  --it;
  const size_t bytes = it->second.bytes;
  const bool inside = a >= it->first && a - it->first <= bytes && n <= bytes - (a - it->first);
  return inside ? it->second.device : -1;
}
// Inside one allocation of the current device.
bool IsDeviceRange(const void* p, size_t n) { return DeviceOfRange(p, n) == t_device; }

bool Valid(cudaStream_t st) {
  if (st == nullptr) return true;
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  return s.streams.count(st) != 0;
}
// A launch into a stream of another device is refused (the legacy stream
// is every device's).
bool OnCurrentDevice(cudaStream_t st) { return st == nullptr || st->device == t_device; }

// Calls a capture-mode-global stream forbids (synchronous copies, malloc)
// invalidate its capture and fail, as on a GPU.
bool GlobalCaptureForbids() {
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (s.global_captures == 0) return false;
  for (cudaStream_t st : s.streams)
    if (st->capturing && st->mode == cudaStreamCaptureModeGlobal) st->invalidated = true;
  return true;
}

cudaError_t Result(cudaError_t e) {
  if (e != cudaSuccess) SetLastError(e);
  return e;
}

cudaError_t TakePending() {
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const cudaError_t e = s.pending;
  s.pending = cudaSuccess;
  return e;
}

// Device operands must lie in allocations of the current device: stricter
// than CUDA's unified addressing, which would route a copy of another
// device's memory, because here it is always a missing cudaSetDevice.
cudaError_t CopyChecked(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (n == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  if ((dst_dev && !IsDeviceRange(dst, n)) || (src_dev && !IsDeviceRange(src, n))) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

const void* ForeignDevicePointer(const void* p) {
  if (p == nullptr) return nullptr;
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (s.device.empty()) return nullptr;
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = s.device.upper_bound(a);
  if (it == s.device.begin()) return nullptr;
  --it;
  const bool inside = a - it->first < it->second.bytes;
  return inside && it->second.device != t_device ? p : nullptr;
}

bool StreamOnCurrentDevice(cudaStream_t st) { return OnCurrentDevice(st); }

void SetLastError(cudaError_t e) {
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  s.last = e;
}

cudaError_t Submit(cudaStream_t st, StreamOp op) {
  if (!Valid(st)) return cudaErrorInvalidResourceHandle;
  if (st != nullptr && st->capturing) {
    if (st->invalidated) return cudaErrorStreamCaptureInvalidated;
    st->recorded.push_back(std::move(op));
    return cudaSuccess;
  }
  const cudaError_t e = op();
  if (e != cudaSuccess) {
    State& s = S();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    s.pending = e;
    s.last = e;
  }
  return cudaSuccess;
}

}  // namespace llm::emu

using namespace llm::emu;  // NOLINT: this file implements the global CUDA API

// ---------------------------------------------------------------- device
cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return Result(cudaErrorInvalidValue);
  *count = DeviceCount();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= DeviceCount()) return Result(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return Result(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (p == nullptr) return Result(cudaErrorInvalidValue);
  if (device < 0 || device >= DeviceCount()) return Result(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  const int cc = ::llm::ReadEnv().emu_cc;  // LLM_EMU_CC (util/env.h); 90 unless set
  std::snprintf(p->name, sizeof p->name, "llmrt emulator (sm_%d)", cc);
  p->totalGlobalMem = DeviceBytes();
  p->sharedMemPerBlock = kSmemDefault;
  p->sharedMemPerBlockOptin = kSmemOptin;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7FFFFFFF;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->clockRate = 1980000;
  p->major = cc / 10;
  p->minor = cc % 10;
  p->multiProcessorCount = 132;
  p->maxThreadsPerMultiProcessor = 2048;
  p->memoryClockRate = 2619000;
  p->memoryBusWidth = 5120;
  p->l2CacheSize = 50 << 20;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  if (GlobalCaptureForbids()) return Result(cudaErrorStreamCaptureUnsupported);
  return TakePending();
}
cudaError_t cudaDeviceReset() {
  TakePending();
  SetLastError(cudaSuccess);
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const cudaError_t e = s.last;
  s.last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() {
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  return s.last;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define LLM_EMU_NAME(x) \
  case x:               \
    return #x;
    LLM_EMU_NAME(cudaSuccess)
    LLM_EMU_NAME(cudaErrorInvalidValue)
    LLM_EMU_NAME(cudaErrorMemoryAllocation)
    LLM_EMU_NAME(cudaErrorInitializationError)
    LLM_EMU_NAME(cudaErrorInvalidConfiguration)
    LLM_EMU_NAME(cudaErrorInvalidDevicePointer)
    LLM_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    LLM_EMU_NAME(cudaErrorInvalidResourceHandle)
    LLM_EMU_NAME(cudaErrorNotReady)
    LLM_EMU_NAME(cudaErrorIllegalAddress)
    LLM_EMU_NAME(cudaErrorLaunchOutOfResources)
    LLM_EMU_NAME(cudaErrorLaunchFailure)
    LLM_EMU_NAME(cudaErrorInvalidDevice)
    LLM_EMU_NAME(cudaErrorNoDevice)
    LLM_EMU_NAME(cudaErrorStreamCaptureUnsupported)
    LLM_EMU_NAME(cudaErrorStreamCaptureInvalidated)
    LLM_EMU_NAME(cudaErrorStreamCaptureUnmatched)
    LLM_EMU_NAME(cudaErrorStreamCaptureImplicit)
    LLM_EMU_NAME(cudaErrorAssert)
    LLM_EMU_NAME(cudaErrorIllegalState)
    LLM_EMU_NAME(cudaErrorUnknown)
#undef LLM_EMU_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorLaunchFailure: return "unspecified launch failure (emulator: see the message on stderr)";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched: return "capture was not initiated in this stream";
    default: return "emulated CUDA error";
  }
}

// ---------------------------------------------------------------- memory
cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (p == nullptr) return Result(cudaErrorInvalidValue);
  *p = nullptr;
  if (GlobalCaptureForbids()) return Result(cudaErrorStreamCaptureUnsupported);
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (bytes == 0) return cudaSuccess;
  size_t& used = s.used[t_device];
  if (bytes > DeviceBytes() - std::min(used, DeviceBytes())) return Result(cudaErrorMemoryAllocation);
  // The exact size (not rounded up to the alignment): ASan flags the first byte past it.
  void* m = ::operator new(bytes, std::align_val_t(kAlign), std::nothrow);
  if (m == nullptr) return Result(cudaErrorMemoryAllocation);
  std::memset(m, 0xFF, bytes);
  s.device[reinterpret_cast<uintptr_t>(m)] = Allocation{bytes, t_device};
  used += bytes;
  *p = m;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const auto it = s.device.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.device.end()) return Result(cudaErrorInvalidValue);
  s.used[it->second.device] -= it->second.bytes;  // any device may free it, as in CUDA
  s.device.erase(it);
  ::operator delete(p, std::align_val_t(kAlign));
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  if (p == nullptr) return Result(cudaErrorInvalidValue);
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  void* m = ::operator new(bytes, std::align_val_t(kAlign), std::nothrow);
  if (m == nullptr) return Result(cudaErrorMemoryAllocation);
  std::memset(m, 0xFF, bytes);
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  s.pinned.insert(m);
  *p = m;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (s.pinned.erase(p) == 0) return Result(cudaErrorInvalidValue);
  ::operator delete(p, std::align_val_t(kAlign));
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return Result(cudaErrorInvalidValue);
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  *total_bytes = DeviceBytes();
  *free_bytes = DeviceBytes() - std::min(s.used[t_device], DeviceBytes());
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!IsDeviceRange(p, bytes)) return Result(cudaErrorInvalidValue);
  return Result(Submit(stream, [p, value, bytes]() {
    std::memset(p, value, bytes);
    return cudaSuccess;
  }));
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (GlobalCaptureForbids()) return Result(cudaErrorStreamCaptureUnsupported);
  const cudaError_t e = cudaMemsetAsync(p, value, bytes, nullptr);
  return e != cudaSuccess ? e : TakePending();
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  const cudaError_t c = CopyChecked(dst, src, bytes, kind);
  if (c != cudaSuccess) return Result(c);
  if (bytes == 0) return cudaSuccess;
  // Recorded in a graph, the copy reads `src` when the graph runs, as on a GPU.
  return Result(Submit(stream, [dst, src, bytes]() {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }));
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (GlobalCaptureForbids()) return Result(cudaErrorStreamCaptureUnsupported);
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  return e != cudaSuccess ? e : TakePending();
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return Result(cudaErrorInvalidValue);
  const int n = DeviceCount();
  if (dst_device < 0 || dst_device >= n || src_device < 0 || src_device >= n) return Result(cudaErrorInvalidDevice);
  if (DeviceOfRange(dst, bytes) != dst_device || DeviceOfRange(src, bytes) != src_device)
    return Result(cudaErrorInvalidValue);
  return Result(Submit(stream, [dst, src, bytes]() {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }));
}
cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  if (GlobalCaptureForbids()) return Result(cudaErrorStreamCaptureUnsupported);
  const cudaError_t e = cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, nullptr);
  return e != cudaSuccess ? e : TakePending();
}

// ---------------------------------------------------------------- streams and graphs
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* st, unsigned int flags) {
  if (st == nullptr) return Result(cudaErrorInvalidValue);
  auto* n = new CUstream_st;
  n->device = t_device;
  n->flags = flags;
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  s.streams.insert(n);
  *st = n;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t st) {
  if (st == nullptr) return Result(cudaErrorInvalidResourceHandle);
  State& s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (s.streams.erase(st) == 0) return Result(cudaErrorInvalidResourceHandle);
  if (st->capturing && st->mode == cudaStreamCaptureModeGlobal) --s.global_captures;
  delete st;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t st) {
  if (!Valid(st)) return Result(cudaErrorInvalidResourceHandle);
  if (st != nullptr && st->capturing) {
    st->invalidated = true;
    return Result(cudaErrorStreamCaptureUnsupported);
  }
  if (st == nullptr && GlobalCaptureForbids()) return Result(cudaErrorStreamCaptureUnsupported);
  return TakePending();
}
cudaError_t cudaStreamQuery(cudaStream_t st) {
  if (!Valid(st)) return Result(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned int) {
  if (!Valid(st) || e == nullptr) return Result(cudaErrorInvalidResourceHandle);
  return cudaSuccess;  // streams run eagerly: the event's work is done
}

cudaError_t cudaStreamBeginCapture(cudaStream_t st, cudaStreamCaptureMode mode) {
  if (st == nullptr) return Result(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot capture
  if (!Valid(st)) return Result(cudaErrorInvalidResourceHandle);
  if (st->capturing) return Result(cudaErrorIllegalState);
  st->capturing = true;
  st->invalidated = false;
  st->mode = mode;
  st->recorded.clear();
  if (mode == cudaStreamCaptureModeGlobal) {
    State& s = S();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    ++s.global_captures;
  }
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t* graph) {
  if (graph == nullptr) return Result(cudaErrorInvalidValue);
  *graph = nullptr;
  if (st == nullptr || !Valid(st)) return Result(cudaErrorInvalidResourceHandle);
  if (!st->capturing) return Result(cudaErrorStreamCaptureUnmatched);
  st->capturing = false;
  if (st->mode == cudaStreamCaptureModeGlobal) {
    State& s = S();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    --s.global_captures;
  }
  std::vector<StreamOp> ops = std::move(st->recorded);
  st->recorded.clear();
  if (st->invalidated) {
    st->invalidated = false;
    return Result(cudaErrorStreamCaptureInvalidated);
  }
  *graph = new CUgraph_st{std::move(ops)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t st, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return Result(cudaErrorInvalidValue);
  if (!Valid(st)) return Result(cudaErrorInvalidResourceHandle);
  *status = st == nullptr || !st->capturing ? cudaStreamCaptureStatusNone
            : st->invalidated              ? cudaStreamCaptureStatusInvalidated
                                           : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return Result(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t st) {
  if (exec == nullptr) return Result(cudaErrorInvalidValue);
  if (!Valid(st)) return Result(cudaErrorInvalidResourceHandle);
  for (const StreamOp& op : exec->ops) {
    const cudaError_t e = Submit(st, op);
    if (e != cudaSuccess) return Result(e);
  }
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

// ---------------------------------------------------------------- events
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
  if (e == nullptr) return Result(cudaErrorInvalidValue);
  *e = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st) {
  if (e == nullptr) return Result(cudaErrorInvalidResourceHandle);
  return Result(Submit(st, [e]() {
    e->when = std::chrono::steady_clock::now();
    e->recorded = true;
    return cudaSuccess;
  }));
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (e == nullptr) return Result(cudaErrorInvalidResourceHandle);
  return TakePending();
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return Result(cudaErrorInvalidValue);
  if (!start->recorded || !end->recorded) return Result(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}
