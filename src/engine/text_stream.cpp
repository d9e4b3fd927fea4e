#include "engine/text_stream.h"

#include <algorithm>
#include <utility>

#include "util/utf8.h"

namespace llm {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Appends `bytes` to *out with each byte that does not start a valid
// character replaced by U+FFFD.
void Sanitise(std::string_view bytes, std::string* out) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {  // ASCII fast path
      out->push_back(bytes[i++]);
      continue;
    }
    uint32_t cp;
    size_t len;
    if (DecodeUtf8(bytes, i, &cp, &len)) {
      out->append(bytes.substr(i, len));
    } else {
      out->append(kReplacement);  // len == 1: skip the offending byte only
    }
    i += len;
  }
}

}  // namespace

TextStream::TextStream(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings) {
    if (s.empty()) continue;
    std::string clean;
    Sanitise(s, &clean);
    stops_.push_back(std::move(clean));
  }
}

void TextStream::AppendSanitised(std::string_view bytes) { Sanitise(bytes, &text_); }

bool TextStream::FindStop() {
  // Only text_ can hold a match: anything that could begin one was held back
  // rather than emitted. The match that ends first wins (the longest of those
  // ending together): that is the stop a byte-by-byte stream would have hit,
  // so where the token boundaries fall never changes the output.
  size_t best_start = std::string::npos, best_end = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t pos = text_.find(s);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_start = pos;
      best_end = end;
    }
  }
  if (best_start == std::string::npos) return false;
  text_.resize(best_start);
  pending_.clear();
  stopped_ = true;
  return true;
}

size_t TextStream::HeldStopPrefix() const {
  // No full match is present (FindStop ran first), so only proper prefixes
  // count. Stop strings are short; quadratic in their length is fine.
  size_t held = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, text_.size());
    for (size_t len = max_len; len > held; --len) {
      if (text_.compare(text_.size() - len, len, s, 0, len) == 0) {
        held = len;
        break;
      }
    }
  }
  return held;
}

std::string_view TextStream::Emit(size_t n) {
  out_.assign(text_, 0, n);  // buffers keep their capacity: no allocation in steady state
  text_.erase(0, n);
  return out_;
}

std::string_view TextStream::Push(std::string_view piece, bool* stopped) {
  if (stopped_) {
    if (stopped) *stopped = true;
    out_.clear();
    return out_;
  }
  scratch_.assign(pending_);
  scratch_.append(piece);
  const size_t complete = Utf8CompletePrefix(scratch_);
  AppendSanitised(std::string_view(scratch_).substr(0, complete));
  pending_.assign(scratch_, complete, std::string::npos);

  std::string_view result;
  if (FindStop()) {
    result = Emit(text_.size());
  } else {
    result = Emit(text_.size() - HeldStopPrefix());
  }
  if (stopped) *stopped = stopped_;
  return result;
}

std::string_view TextStream::Flush() {
  if (stopped_) {
    out_.clear();
    text_.clear();
    pending_.clear();
    return out_;
  }
  if (!pending_.empty()) {
    // An incomplete tail was, by construction, a valid start of one
    // character: it becomes one U+FFFD.
    text_.append(kReplacement);
    pending_.clear();
  }
  FindStop();  // a stop string containing U+FFFD could complete only now
  return Emit(text_.size());
}

}  // namespace llm
