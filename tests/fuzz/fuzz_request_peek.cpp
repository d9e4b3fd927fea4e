// Fuzzes the connection gate's request-peek parser
// (samples/server/request_peek.h) with the input as the peeked bytes, under
// several peek-buffer sizes, and checks what must hold whatever the bytes:
// a full buffer is always handed over, and a request judged complete stays
// complete when more bytes arrive (the gate never parks it again).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "request_peek.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  for (size_t cap : {size_t{16}, size_t{256}, size_t{64} << 10}) {
    const std::string_view got = all.substr(0, cap);
    const bool done = server::HttpRequestComplete(got, cap);
    if (got.size() == cap && !done) std::abort();
    for (size_t cut = got.size(); cut > 0 && cut + 64 > got.size(); --cut) {
      // Monotone: if a prefix was complete, every longer prefix is too.
      if (server::HttpRequestComplete(got.substr(0, cut), cap) && !done) std::abort();
    }
  }
  return 0;
}
