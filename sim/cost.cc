// Alpha-beta cost model of NCCL ring/tree collectives and the Inspector bandwidth formulas.
#include <algorithm>
#include <cmath>

#include "sim/sim.h"

namespace collscope::sim {

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kAllReduce: return "AllReduce";
    case Op::kAllGather: return "AllGather";
    case Op::kReduceScatter: return "ReduceScatter";
    case Op::kBroadcast: return "Broadcast";
    case Op::kReduce: return "Reduce";
    case Op::kSend: return "Send";
    case Op::kRecv: return "Recv";
    case Op::kAlltoAll: return "AlltoAll";
    default: return "Invalid";
  }
}

bool ParseOp(std::string_view t, Op* op) {
  struct E { std::string_view a, b; Op op; };
  static const E table[] = {{"AllReduce", "allreduce", Op::kAllReduce},
                            {"AllGather", "allgather", Op::kAllGather},
                            {"ReduceScatter", "reducescatter", Op::kReduceScatter},
                            {"Broadcast", "broadcast", Op::kBroadcast},
                            {"Reduce", "reduce", Op::kReduce},
                            {"Send", "send", Op::kSend},
                            {"Recv", "recv", Op::kRecv},
                            {"AlltoAll", "alltoall", Op::kAlltoAll}};
  for (const auto& e : table) {
    if (t == e.a || t == e.b) { *op = e.op; return true; }
  }
  if (t == "all_reduce") { *op = Op::kAllReduce; return true; }
  if (t == "all_gather") { *op = Op::kAllGather; return true; }
  if (t == "reduce_scatter") { *op = Op::kReduceScatter; return true; }
  return false;
}

std::string_view CommKindName(CommKind k) {
  switch (k) {
    case CommKind::kWorld: return "world";
    case CommKind::kDp: return "dp";
    case CommKind::kCp: return "cp";
    case CommKind::kTp: return "tp";
    case CommKind::kPp: return "pp";
    case CommKind::kEp: return "ep";
    default: return "?";
  }
}

bool ParseCommKind(std::string_view t, CommKind* k) {
  for (int i = 0; i < static_cast<int>(CommKind::kCount); ++i) {
    if (CommKindName(static_cast<CommKind>(i)) == t) { *k = static_cast<CommKind>(i); return true; }
  }
  return false;
}

std::string_view AlgoName(Algo a) { return a == Algo::kRing ? "RING" : "TREE"; }
std::string_view ProtoName(Proto p) {
  return p == Proto::kLL ? "LL" : p == Proto::kLL128 ? "LL128" : "SIMPLE";
}

ProtoParams GetProtoParams(Proto p) {
  switch (p) {
    case Proto::kLL: return {3.0, 0.5, 0.45};
    case Proto::kLL128: return {4.0, 0.75, 0.92};
    default: return {6.0, 1.0, 1.0};
  }
}

namespace {
double RingTime(Op op, int n, double bytes, double bw_bpus, double hop_us, ProtoParams pp) {
  // bytes: Inspector size. bw_bpus: bytes per microsecond.
  const double nn = n;
  const double lat = hop_us * pp.hop_mult;
  const double b = bw_bpus * pp.bw_eff;
  switch (op) {
    case Op::kAllReduce:
      return pp.base_us + 2 * (nn - 1) * lat + 2 * (nn - 1) / nn * bytes / b;
    case Op::kAllGather:
    case Op::kReduceScatter:
      return pp.base_us + (nn - 1) * lat + (nn - 1) * bytes / b;  // total = bytes*n
    case Op::kAlltoAll:
      return pp.base_us + (nn - 1) * lat + (nn - 1) * bytes / b;  // bytes per peer
    case Op::kBroadcast:
    case Op::kReduce:
      return pp.base_us + (nn - 1) * lat + bytes / b;
    default:  // Send/Recv: one hop
      return pp.base_us + lat + bytes / b;
  }
}
}  // namespace

CollCost CollectiveCost(Op op, int n, int64_t inspector_bytes, double bw_gbs, double hop_us,
                        bool multi_host) {
  CollCost best;
  best.time_us = 1e300;
  const double bw_bpus = bw_gbs * 1e3;  // GB/s -> bytes/us
  const double bytes = static_cast<double>(inspector_bytes);
  for (Proto p : {Proto::kLL, Proto::kLL128, Proto::kSimple}) {
    ProtoParams pp = GetProtoParams(p);
    double t = RingTime(op, std::max(n, 1), bytes, bw_bpus, hop_us, pp);
    if (t < best.time_us) { best.time_us = t; best.algo = Algo::kRing; best.proto = p; }
    if (op == Op::kAllReduce && multi_host && n > 2) {
      // Double binary tree: logarithmic latency, ~90% of ring bandwidth.
      const double depth = std::ceil(std::log2(static_cast<double>(n)));
      const double tt = pp.base_us + 2 * depth * hop_us * pp.hop_mult +
                        2.0 * (n - 1) / n * bytes / (bw_bpus * pp.bw_eff * 0.9);
      if (tt < best.time_us) { best.time_us = tt; best.algo = Algo::kTree; best.proto = p; }
    }
  }
  const double chunk = 512.0 * 1024;
  best.channels = static_cast<int>(std::clamp(std::ceil(bytes / chunk), 1.0, multi_host ? 8.0 : 16.0));
  return best;
}

void InspectorBandwidth(Op op, int n, int64_t s, uint64_t exec_us, double* algbw, double* busbw) {
  double traffic = 0, factor = 0;
  const double nn = n;
  switch (op) {
    case Op::kAllReduce: traffic = s; factor = 2 * (nn - 1) / nn; break;
    case Op::kReduceScatter:
    case Op::kAllGather: traffic = static_cast<double>(s) * nn; factor = (nn - 1) / nn; break;
    case Op::kBroadcast:
    case Op::kReduce:
    case Op::kSend:
    case Op::kRecv: traffic = s; factor = 1; break;
    default: traffic = 0; factor = 0; break;
  }
  if (exec_us == 0) { *algbw = 0; *busbw = 0; return; }
  const double t = static_cast<double>(exec_us) / 1e6;
  *algbw = traffic / 1e9 / t;
  *busbw = *algbw * factor;
}

}  // namespace collscope::sim
