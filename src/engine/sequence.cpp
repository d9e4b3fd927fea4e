#include "engine/sequence.h"

#include "engine/seq_gen.h"

namespace llm {

Sequence::Sequence() = default;
Sequence::~Sequence() = default;
Sequence::Sequence(Sequence&&) noexcept = default;
Sequence& Sequence::operator=(Sequence&&) noexcept = default;

}  // namespace llm
