#include "engine/constrained_drafts.h"

#include "engine/request_state.h"

namespace llm {

void TrimDraftsToConstraints(const SchedulerOutput& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence* s = c.seq;
    if (s->drafts.empty()) continue;
    constrain::ConstraintState* cs = Gen(s).constraint.get();
    if (cs == nullptr) continue;
    s->drafts.resize(cs->AllowedDrafts(s->tokens, s->drafts));
  }
}

}  // namespace llm
