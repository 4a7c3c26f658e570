// What sampled call stacks (collscope stacks, stored by core/readers/stacks.h) say of the hang
// findings: where each root-cause rank's main thread was while the job hung, whether it stood
// apart from its peers, and which process the stacks single out when the finding names none.
//
// Stacks join the findings by global rank (the launcher's RANK in the sampled process). Only
// samples taken after the hang began are compared: stacks of a job that was still running say
// nothing of its hang, and the evidence says so rather than staying silent. Stacks never change a
// finding's root causes; they explain them ("rank 12 has been in `torch.compile` for 40 s while the
// other 63 processes have been in `ncclAllReduce` ...").
#pragma once

#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/stack_profile.h"

namespace collscope::diagnose {

// Adds the stacks' evidence (keys "stacks" and "stack_frame.rank<R>") to each hang finding.
void AddStackEvidence(const std::vector<FoldedStack>& stacks, std::vector<Finding>* findings);

}  // namespace collscope::diagnose
