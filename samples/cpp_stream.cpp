// Streams a story from the built-in model through the C++ wrappers
// (include/llm.hpp): ./cpp_stream ["prompt"] [max_tokens]
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "llm.hpp"

int main(int argc, char** argv) {
  const char* prompt = argc > 1 ? argv[1] : "Once upon a time";
  try {
    llm::Context ctx;  // the model built into the library
    llm::Sampling sampling;
    sampling.temperature = 0.8f;
    sampling.seed = 42;
    llm::Request req(prompt);
    req.max_tokens = argc > 2 ? std::atoi(argv[2]) : 200;
    req.sampling = &sampling;
    std::cout << prompt;
    llm::Result r = llm::generate(ctx, req, [](std::string_view piece) { std::cout << piece << std::flush; });
    std::cout << '\n';
    std::fprintf(stderr, "[%d tokens, %.2f ms/token]\n", r.metrics.generated_tokens, r.metrics.tpot_ms);
  } catch (const llm::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
