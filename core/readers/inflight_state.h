// collscope in-flight state files (<host>-pid<pid>.inflight.json, docs/capture.md): what the
// plugin's process had in flight when it last wrote, reduced to what hang diagnosis reads.
//
// Contract: a file of another version, or with an impossible communicator (rank outside
// n_ranks, more than kMaxStateRanks ranks), is refused whole with its path and reason; nothing
// is sized by a value before it is bounded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace collscope::readers {

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

// Ranks a state file's communicator may have; larger is refused before anything is sized by it.
inline constexpr int64_t kMaxStateRanks = 1 << 24;

// The plugin names its state files so; nothing else is read as one.
bool IsInflightStateName(const std::string& path);
Result<InflightState> ReadInflightState(const std::string& path);

}  // namespace collscope::readers
