// Speculative drafts under an output constraint (issue 20): a draft token
// the constraint forbids could never be accepted (the target's masked
// distribution gives it probability 0), so verifying it and everything after
// it wastes target compute; the drafts are cut at the first such token
// before the batch is built.
#pragma once

#include "sched/scheduler.h"

namespace llm {

void TrimDraftsToConstraints(const SchedulerOutput& plan);

}  // namespace llm
