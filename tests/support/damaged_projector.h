// Projector files damaged one way at a time, for the vision tests' refusal
// checks: a file's bytes with one string replaced (a same-length rename
// keeps it a valid GGUF), and what VisionModel makes of such bytes.
#pragma once

#include <string>

#include "util/status.h"

namespace llm::test {

// `good` with the first `from` replaced by `to` (a failed expectation, and
// `good` unchanged, when `from` is not in it).
std::string Patched(const std::string& good, const std::string& from, const std::string& to);
// The status of reading `bytes` as a GGUF file and then as a projector.
Status OpenProjectorBytes(const std::string& bytes);

}  // namespace llm::test
