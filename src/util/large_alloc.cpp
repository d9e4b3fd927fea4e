#include "util/large_alloc.h"

#include <cstdlib>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#define LLM_HAVE_MMAP 1
#endif

namespace llm {

void* AllocZeroedLarge(size_t bytes) {
  if (bytes == 0) bytes = 1;
#if defined(LLM_HAVE_MMAP)
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#if defined(MADV_HUGEPAGE)
  (void)madvise(p, bytes, MADV_HUGEPAGE);  // a hint: failure changes nothing
#endif
  return p;
#else
  return std::calloc(bytes, 1);
#endif
}

void TouchPages(void* p, size_t begin, size_t end) {
  constexpr size_t kPage = 4096;  // the smallest page size in use: every page is written
  volatile char* c = static_cast<char*>(p);
  for (size_t i = begin; i < end; i += kPage) c[i] = 0;
}

void FreeLarge(void* p, size_t bytes) {
  if (p == nullptr) return;
#if defined(LLM_HAVE_MMAP)
  munmap(p, bytes == 0 ? 1 : bytes);
#else
  (void)bytes;
  std::free(p);
#endif
}

}  // namespace llm
