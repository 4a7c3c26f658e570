// Internal types of the simulator: resolved faults, the job layout and random numbers.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sim/sim.h"

namespace collscope::sim {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Counter-based random numbers (order independent, so output does not depend on the order in
// which the engine happens to resolve ranks).
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
inline uint64_t Hash(uint64_t a, uint64_t b) { return Mix(a ^ Mix(b)); }
inline uint64_t Hash(uint64_t a, uint64_t b, uint64_t c) { return Hash(Hash(a, b), c); }
inline uint64_t Hash(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return Hash(Hash(a, b, c), d);
}
inline double Uniform(uint64_t h) { return ((h >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
inline double Normal(uint64_t h) {
  const double u1 = Uniform(h), u2 = Uniform(Mix(h ^ 0x5851f42d4c957f2dULL));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}
// Log-normal factor with mean 1.
inline double LogNormal(uint64_t h, double sigma) {
  if (sigma <= 0) return 1.0;
  return std::exp(sigma * Normal(h) - 0.5 * sigma * sigma);
}

enum class FaultKind : uint8_t {
  kGpuStraggler, kHostSlowdown, kNicDegrade, kLinkFlap, kHostStall, kPipelineBubble,
  kMaskedStraggler, kHang, kLinkDown, kMismatch, kCount
};
std::string_view FaultKindName(FaultKind k);

struct Fault {
  FaultKind kind = FaultKind::kCount;
  FaultSpec spec;  // as given
  int rank = -1, host = -1, rail = -1, stage = -1;
  int start_step = -1, end_step = -1;          // [start_step, end_step)
  double start_off_us = -1, end_off_us = -1;   // offsets from job start, [start, end)
  double factor = 1.0;
  double delay_us = 0, period_us = 0, down_us = 0, retry_us = 0, stall_us = 0;
  CommKind comm_kind = CommKind::kDp;
  bool has_op = false;
  Op op = Op::kAllReduce;
  Op mismatch_op = Op::kAllReduce;
  bool has_mismatch_op = false;
  int64_t coll_sn = -1;
  double size_factor = 1.0;
  bool effect_hang = false;

  // Resolved while simulating (for ground truth).
  bool triggered = false;
  double first_us = kInf, last_us = -kInf;  // true time of first/last effect
  std::vector<int> gt_ranks, gt_hosts;
  std::vector<int> gt_comms;                // comm indexes
  int64_t resolved_sn = -1;
  Op resolved_op = Op::kAllReduce;
  int resolved_step = -1;
  double down_at_us = kInf;                 // link_down: when the link dies

  bool HasStepWindow() const { return start_step >= 0 || end_step >= 0; }
  bool HasTimeWindow() const { return start_off_us >= 0 || end_off_us >= 0; }
  // Active for `step` and true time `t_off` (microseconds since job start).
  bool Active(int step, double t_off) const {
    if (HasStepWindow()) {
      if (start_step >= 0 && step < start_step) return false;
      if (end_step >= 0 && step >= end_step) return false;
    }
    if (HasTimeWindow()) {
      if (start_off_us >= 0 && t_off < start_off_us) return false;
      if (end_off_us >= 0 && t_off >= end_off_us) return false;
    }
    return true;
  }
  void Touch(double t) {
    triggered = true;
    if (t < first_us) first_us = t;
    if (t > last_us) last_us = t;
  }
};

// Converts and checks every FaultSpec of the config against the layout dimensions.
Status ResolveFaults(const SimConfig& config, int world, std::vector<Fault>* out);

struct CommInfo {
  CommKind kind = CommKind::kWorld;
  std::string name;      // Megatron/PyTorch process-group description
  uint64_t id = 0;       // commHash
  std::string id_text;   // "0x%lx"
  std::vector<int> ranks;  // global ranks, index = comm rank
  std::vector<int> hosts;  // distinct hosts, ascending
  std::vector<std::pair<int, int>> host_rails;  // distinct (host, rail)
  int max_per_host = 0;
  bool multi_host = false;
  int pg_index = 0;      // PyTorch process group name ("0", "1", ...), in creation order
};

struct RankInfo {
  int host = 0, local = 0, rail = 0;
  int64_t pid = 0;
  int tp = 0, cp = 0, dp = 0, pp = 0, ep = 0;
  int comm[static_cast<int>(CommKind::kCount)];       // comm index or -1
  int comm_rank[static_cast<int>(CommKind::kCount)];  // rank within that comm
};

struct Layout {
  int world = 0, hosts = 0, gpus_per_host = 0;
  int tp = 1, pp = 1, cp = 1, dp = 1, ep = 1;
  std::vector<std::string> hostnames;
  std::vector<double> clock_offset_us;  // per host
  std::vector<RankInfo> ranks;
  std::vector<CommInfo> comms;
  int RankOf(int tp_i, int cp_i, int dp_i, int pp_i) const {
    return tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i));
  }
};

Status BuildLayout(const SimConfig& config, Layout* layout);

}  // namespace collscope::sim
