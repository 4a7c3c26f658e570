// How much of the named ranks' communication a finding rests on. A finding about a rank whose
// records are fewer than its peers' (its ring overwritten, its log cut short, dumps missing) is
// judged on less evidence than the detectors assume, so its confidence is weighed by the rank's
// coverage against its peers' (core/coverage.h), over the finding's communicators and window:
// confidence x sqrt(coverage vs peers), as a test's z scales with the square root of its samples.
// What every member lacks alike (a size cutoff, a 2.29 snapshot's sampling) weighs nothing.
#pragma once

#include <vector>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/finding.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::diagnose {

// Adds to each finding of the record detectors (comm.*: what other evidence finds rests on other
// data) that names ranks the evidence `coverage` (the lowest share, over its named
// ranks, of the instances their communicators' members recorded) and `coverage_vs_peers` (that
// share against the peers' median, at most 1), with a sentence naming the least covered rank
// ("rank 5 recorded 480 of 1000 collective instances its communicators' members recorded in this
// window (48%; its peers 100%)"), and weighs the confidence as above. A named rank without a
// record in the finding's communicators and window (a rank that never wrote its log) is said, and
// weighs nothing: such findings rest on the other ranks' records. `data` maps global ranks to the
// store's processes (LoadCommData's).
Status WeighByCoverage(Store& store, int32_t run_id, const CommData& data, std::vector<Finding>* findings);

}  // namespace collscope::diagnose
