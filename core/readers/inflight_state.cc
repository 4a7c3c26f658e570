#include "core/readers/inflight_state.h"

#include <simdjson.h>

#include <string_view>

namespace collscope::readers {

bool IsInflightStateName(const std::string& path) { return path.ends_with(".inflight.json"); }

namespace {

int64_t IntOr(simdjson::dom::element e, const char* key, int64_t dflt) {
  int64_t v = 0;
  if (!e[key].get_int64().get(v)) return v;
  uint64_t u = 0;  // the plugin prints unsigned fields; a value past INT64_MAX is not a count
  if (!e[key].get_uint64().get(u)) return static_cast<int64_t>(u);
  return dflt;
}
std::string TextOr(simdjson::dom::element e, const char* key) {
  std::string_view v;
  if (e[key].get_string().get(v)) return {};
  return std::string(v);
}
int CountOf(simdjson::dom::element e, const char* n_key, const char* list_key) {
  int64_t n = IntOr(e, n_key, -1);
  if (n >= 0) return static_cast<int>(n);
  simdjson::dom::array a;
  return e[list_key].get_array().get(a) ? 0 : static_cast<int>(a.size());
}

}  // namespace

Result<InflightState> ReadInflightState(const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.load(path).get(root)) return Status::Corruption(path + ": " + simdjson::error_message(err));
  int64_t version = IntOr(root, "collscope_inflight_version", -1);
  if (version != 1)
    return Status::Corruption(path + ": not a collscope in-flight state file of version 1 (collscope_inflight_version " +
                         std::to_string(version) + ")");
  InflightState st;
  st.path = path;
  st.hostname = TextOr(root, "hostname");
  st.status = TextOr(root, "status");
  st.pid = IntOr(root, "pid", 0);
  st.global_rank = static_cast<int>(IntOr(root, "global_rank", -1));
  st.heartbeat_ts_us = IntOr(root, "heartbeat_ts_us", 0);
  for (const char* key : {"comms", "finalized_comms"}) {
    simdjson::dom::array arr;
    if (root[key].get_array().get(arr)) continue;
    for (simdjson::dom::element c : arr) {
      InflightComm cm;
      cm.id = TextOr(c, "id");
      if (cm.id.empty()) return Status::Corruption(path + ": a communicator without an id");
      cm.name = TextOr(c, "comm_name");
      const int64_t rank = IntOr(c, "rank", -1), n_ranks = IntOr(c, "n_ranks", 0);
      // Bounded before anything is sized by it (a communicator of 2^31 ranks is refused).
      if (n_ranks < 1 || n_ranks > kMaxStateRanks || rank < 0 || rank >= n_ranks)
        return Status::Corruption(path + ": communicator " + cm.id + ": rank " + std::to_string(rank) +
                             " of n_ranks " + std::to_string(n_ranks) + " is impossible (1 to " +
                             std::to_string(kMaxStateRanks) + " ranks)");
      cm.rank = static_cast<int>(rank);
      cm.n_ranks = static_cast<int>(n_ranks);
      cm.ops_started = static_cast<uint64_t>(IntOr(c, "ops_started", 0));
      cm.ops_completed = static_cast<uint64_t>(IntOr(c, "ops_completed", 0));
      cm.finalized = std::string_view(key) == "finalized_comms";
      simdjson::dom::array ops;
      if (!c["inflight"].get_array().get(ops))
        for (simdjson::dom::element o : ops) {
          InflightOp op;
          op.coll = TextOr(o, "kind") != "p2p";
          op.op = TextOr(o, "op");
          op.sn = IntOr(o, "sn", -1);
          op.peer = static_cast<int>(IntOr(o, "peer", -1));
          op.bytes = IntOr(o, "msg_size_bytes", 0);
          op.n_channels = static_cast<int>(IntOr(o, "n_channels", 0));
          op.channels_started = CountOf(o, "n_channels_started", "channels_started");
          op.channels_stopped = CountOf(o, "n_channels_stopped", "channels_stopped");
          op.start_ts_us = IntOr(o, "start_ts_us", 0);
          op.enqueue_ts_us = IntOr(o, "enqueue_ts_us", 0);
          cm.ops.push_back(std::move(op));
        }
      st.comms.push_back(std::move(cm));
    }
  }
  return st;
}

}  // namespace collscope::readers
