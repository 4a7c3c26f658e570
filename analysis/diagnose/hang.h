// Hang root cause from PyTorch Flight Recorder dumps and from collscope's in-flight state files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/readers/flight_recorder.h"
#include "core/status.h"

namespace collscope::diagnose {

using readers::IsFlightRecorderDump;

// Wait graph: each rank is blocked in its oldest pending collective; in it, members that never
// enqueued that sequence number are what it waits on. Root causes are the waited-on ranks that
// wait on nobody themselves; everyone transitively waiting on them is a victim.
std::vector<Finding> AnalyzeFlightRecorder(const std::vector<readers::FrDump>& dumps);
// With `unusable`, a dump that cannot be read is listed there ("path: reason") and the others are
// diagnosed; without it, it is an error.
Result<std::vector<Finding>> DiagnoseFlightRecorder(const std::vector<std::string>& paths,
                                                    std::vector<std::string>* unusable = nullptr);

// One collscope in-flight state file (<host>-pid<pid>.inflight.json, docs/capture.md), reduced
// to what hang diagnosis reads.
struct InflightOp {
  bool coll = true;        // "coll" or "p2p"
  std::string op;          // NCCL function name
  int64_t sn = -1;         // coll_sn (per function) or p2p_sn
  int peer = -1;           // p2p: peer's communicator rank
  int64_t bytes = 0;
  int n_channels = 0, channels_started = 0, channels_stopped = 0;
  int64_t start_ts_us = 0, enqueue_ts_us = 0;
};
struct InflightComm {
  std::string id, name;
  int rank = -1, n_ranks = 0;
  uint64_t ops_started = 0, ops_completed = 0;
  bool finalized = false;  // listed under finalized_comms (aborted with ops in flight)
  std::vector<InflightOp> ops;
};
struct InflightState {
  std::string path, hostname, status;
  int64_t pid = 0;
  int global_rank = -1;    // -1 when the launcher set no rank variable
  int64_t heartbeat_ts_us = 0;
  std::vector<InflightComm> comms;
};
Result<InflightState> ReadInflightState(const std::string& path);

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
// Ranks a state file's communicator may have; larger is refused before anything is sized by it.
inline constexpr int64_t kMaxStateRanks = 1 << 24;
// `unusable` as for DiagnoseFlightRecorder.
Result<std::vector<Finding>> DiagnoseInflight(const std::vector<std::string>& paths,
                                              std::vector<std::string>* unusable = nullptr);

}  // namespace collscope::diagnose
