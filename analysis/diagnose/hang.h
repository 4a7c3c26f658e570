// Hang root cause from PyTorch Flight Recorder dumps, collscope's in-flight state files and saved
// NCCL RAS status reports, as the store holds them (core/readers/hang_evidence.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/readers/flight_recorder.h"
#include "core/readers/inflight_state.h"
#include "core/readers/ras.h"
#include "core/status.h"

namespace collscope::diagnose {

using readers::InflightComm;
using readers::InflightOp;
using readers::InflightState;
using readers::IsFlightRecorderDump;

// Wait graph: each rank is blocked in its oldest pending collective; in it, members that never
// enqueued that sequence number are what it waits on. Root causes are the waited-on ranks that
// wait on nobody themselves; everyone transitively waiting on them is a victim.
std::vector<Finding> AnalyzeFlightRecorder(const std::vector<readers::FrDump>& dumps);

// Wait graph over the processes' state files. Per communicator, the collective in flight at most
// members is the one they wait in; members without it never joined (or issued another op or
// size), and members whose GPU never started it while the others' did are behind. A pending
// point-to-point op waits on a peer that has no matching op in flight. Root causes are waited-on
// processes that wait on nobody: they never joined, or they are stuck mid-transfer in an op every
// peer joined. A communicator whose members all joined one op and none finished it, with nobody
// else to blame, is stuck mid-transfer.
struct InflightOptions {
  // In a snapshot of a running job ("running" status, live communicator), an op counts as stuck
  // only once it has been in flight this long: younger ones are the normal skew between members.
  // Ops still in flight when a communicator was finalized (abort) or the process exited count
  // whatever their age.
  int64_t min_age_us = 30'000'000;
};
std::vector<Finding> AnalyzeInflight(const std::vector<InflightState>& states,
                                     const InflightOptions& options = {});

// NCCL RAS status reports (detector "ras.status"), one finding per report (reports naming the same
// ranks are one). Per communicator and NCCL function, the ranks whose launched count is behind the
// others' are root causes when they are fewer than half of the ranks that reported a count; the
// ranks at the top count are victims. Ranks missing from the report, in a dead or unresponsive
// process, or reporting an init or async error are root causes too; a rank whose only signal is
// missing data lowers the confidence (0.5). Counts are launches, not completions: a rank stuck
// inside a kernel shows its peers' count, and the evidence says so. Global ranks come from the
// communicator whose size is the job's process count (its ranks are global; other communicators'
// ranks map through their (host, pid)); otherwise hosts and processes are named and `ranks` stays
// empty.
//
// RAS names nodes by IP address, the records by host name: `job` (the records' processes) joins
// them by pid. A pid that one process of the job has names that process, its global rank and its
// host, and so names the node; on a node so named, a pid several hosts share is that host's
// process. A node that two joins give different hosts is joined to none. Joined findings name the
// records' host names (what the other detectors name, so they merge); the node stays in the text.
// Exact where the records know it: RAS's communicator hash is Inspector's communicator id, so a
// RAS rank of a communicator is the process that recorded that rank of it, whatever its pid
// (containers give every host the same pids), and names its node.
struct JobProcess {
  std::string hostname;
  int64_t pid = -1;
  int global_rank = -1;
  std::vector<std::pair<std::string, int>> comm_ranks;  // (communicator id, 0x..., its rank there)
};
std::vector<Finding> AnalyzeRasReports(const std::vector<readers::RasReport>& reports,
                                       const std::vector<JobProcess>& job = {});

}  // namespace collscope::diagnose
