// What sampled call stacks (collscope stacks, stored by core/readers/stacks.h) say of the
// findings. Of hang findings: where each root-cause rank's main thread was while the job hung,
// whether it stood apart from its peers, and which process the stacks single out when the finding
// names none.
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

// Adds the stacks' evidence (keys "stacks" and "stack_frame.rank<R>") to each hang finding, and
// to host_stall and slow_compute findings the position whose share of a root-cause rank's samples
// grew during the finding ("stack_grew.rank<R>"): a host blocked in JIT compilation or a data
// loader looks like a slow GPU from the collectives, and its stack says otherwise. Stacks said
// again replace what they said before. `firing[i]` says finding i fired just now (the live agent
// sampled a burst of stacks for it): samples taken after its window count as inside it, since it
// is still going.
void AddStackEvidence(const std::vector<FoldedStack>& stacks, std::vector<Finding>* findings,
                      const std::vector<bool>& firing = {});

// The main-thread position of `rank` whose share of its samples inside [start_us, end_us) grew
// most over its share outside that time (or, with too few samples outside, over its peers' share
// inside it), by at least 20 points with at least 5 samples inside; "" when none did. *text gets
// "`label` in 62% of its samples during it, 3% outside it".
std::string GrownPosition(const std::vector<FoldedStack>& stacks, int rank, int64_t start_us,
                          int64_t end_us, std::string* text);

}  // namespace collscope::diagnose
