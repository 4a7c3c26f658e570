// Where in the step a finding happens. The collscope plugin tags each record with the step, phase
// and micro-batch current when its operation started (the annotation library's, shared in
// process; stored in record_annotations), so a finding of the record detectors can say which
// phase its collectives ran in: a straggler late in backward points at the backward pass (or the
// data-parallel communication overlapped with it), one late in forward at the forward pass.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/finding.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::diagnose {

// Adds to each finding of the record detectors (comm.*) that names ranks, where the records of
// those ranks in its communicators and window carry an annotated step, the evidence `phases`
// ("backward 87%, forward 13%": the share of those records per phase; "(none)" where a step
// was current but no phase), `annotated_steps` ("12-30") and `annotated_records`, and a
// sentence to the summary naming the phase that holds most of them. Findings whose records carry
// no annotation are left as they are. `data` maps global ranks to the store's processes
// (LoadCommData's).
Status AddAnnotatedPhases(Store& store, int32_t run_id, const CommData& data, std::vector<Finding>* findings);

}  // namespace collscope::diagnose
