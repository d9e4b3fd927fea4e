// A C++ library that allocates in its static initializers and frees in its
// destructors (tests/dlopen/alongside.c loads it after libllmrt.so).
#include <string>
#include <unordered_set>

namespace {
std::unordered_set<unsigned> numbers = {1u, 2u, 3u, 4u, 5u};
std::string text(200, 'x');
}  // namespace

extern "C" __attribute__((visibility("default"))) int probe_size() {
  return static_cast<int>(numbers.size() + text.size());
}
