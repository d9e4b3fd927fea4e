// Zeroed memory for large, long-lived buffers such as the CPU KV pool.
//
// Pages cost nothing until touched (an anonymous mapping on POSIX, calloc
// elsewhere), and on Linux the mapping asks for transparent huge pages
// (MADV_HUGEPAGE; most distributions enable THP only on request). Attention
// walks every block of every sequence at each step, a block (all layers'
// K and V) apart, so with 4 KiB pages nearly every tile it reads is a TLB
// miss; 2 MiB pages cover hundreds of blocks each.
#pragma once

#include <cstddef>
#include <memory>

namespace llm {

// nullptr when the memory cannot be had. Free with FreeLarge(p, bytes).
void* AllocZeroedLarge(size_t bytes);
void FreeLarge(void* p, size_t bytes);
// Makes the pages of bytes [begin, end) of an AllocZeroedLarge buffer
// resident by writing a zero into each (their content stays zero).
// Disjoint ranges may be touched from several threads at once.
void TouchPages(void* p, size_t begin, size_t end);

struct LargeDeleter {
  size_t bytes = 0;
  void operator()(void* p) const { FreeLarge(p, bytes); }
};

template <typename T>
using LargeArray = std::unique_ptr<T[], LargeDeleter>;

template <typename T>
LargeArray<T> AllocZeroedArray(size_t n) {
  const size_t bytes = n * sizeof(T);
  return LargeArray<T>(static_cast<T*>(AllocZeroedLarge(bytes)), LargeDeleter{bytes});
}

}  // namespace llm
