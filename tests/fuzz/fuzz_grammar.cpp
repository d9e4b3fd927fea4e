// Fuzzes the grammar dialect (docs/GRAMMAR.md): the input up to the first NUL
// byte is grammar text, the rest is matched against it byte by byte. Parse,
// lowering and matching must end in a value or a status within the limits
// of constrain/grammar.h and matcher.h, never a crash, hang or unbounded
// allocation; an error message always names a position.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "constrain/byte_program.h"
#include "constrain/gbnf_parser.h"
#include "constrain/matcher.h"
#include "fuzz/common.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view text = in.substr(0, nul);
  const std::string_view input = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  auto g = constrain::ParseGrammar(text);
  if (!g.ok()) {
    LLM_FUZZ_CHECK(!g.status().message().empty(), "a parse error without a message");
    return 0;
  }
  auto p = constrain::LowerToBytes(*g);
  if (!p.ok()) return 0;
  constrain::Matcher m(*p);
  // Accept the input in 3-byte "tokens", roll back one, re-accept: the
  // position-indexed history must give the same state.
  constrain::Matcher::StateId before = m.Current();
  for (size_t i = 0; i < input.size(); i += 3) {
    before = m.Current();
    if (!m.Accept(input.substr(i, 3))) break;
    const constrain::Matcher::StateId after = m.Current();
    m.Rollback(1);
    LLM_FUZZ_CHECK(m.Current() == before, "rollback lost the state");
    LLM_FUZZ_CHECK(m.Accept(input.substr(i, 3)) && m.Current() == after, "re-accepting gave another state");
  }
  (void)m.Matches(input);
  return 0;
}
