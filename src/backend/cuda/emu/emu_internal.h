// EMULATE builds: what the emulator's parts share (not for kernels or the backend).
#pragma once

#include <functional>
#include <string>

#include "cuda_runtime.h"

namespace llm::emu {

// An operation in stream order: runs now (the emulator executes every stream
// eagerly, in call order), or is appended to the graph `stream` is capturing.
// Its result, when it runs eagerly, becomes the pending execution error a
// GPU would report at the next synchronising call.
using StreamOp = std::function<cudaError_t()>;
cudaError_t Submit(cudaStream_t stream, StreamOp op);

// cudaGetLastError's value: a launch (configuration) error, or a pending
// execution error.
void SetLastError(cudaError_t e);

// Runs a whole grid; a deadlock, a divergent barrier or collective, a race or
// a __trap fails it with cudaErrorLaunchFailure (message on stderr).
cudaError_t RunGrid(const char* name, dim3 grid, dim3 block, size_t smem, const std::function<void()>& body);

// ForeignDevicePointer (emu_device.h) checks kernel and GEMM operands.
// Whether `stream` may take work from the current device's launches.
bool StreamOnCurrentDevice(cudaStream_t stream);

// The opt-in dynamic shared memory limit set for a kernel (default 48 KiB).
size_t MaxDynamicSmem(const void* func);

constexpr size_t kSmemDefault = 48 * 1024, kSmemOptin = 227 * 1024;

}  // namespace llm::emu
