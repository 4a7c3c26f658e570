// Megatron-style rank layout (order tp-cp-ep-dp-pp, TP innermost) and communicators.
#include <algorithm>
#include <cstdio>
#include <set>

#include "sim/internal.h"

namespace collscope::sim {

namespace {

std::string HexId(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(id));
  return buf;
}

void AddComm(const SimConfig& config, Layout* L, CommKind kind, std::string name,
             std::vector<int> members) {
  if (members.size() < 2 && kind != CommKind::kWorld) return;  // no NCCL traffic in size-1 groups
  CommInfo c;
  c.kind = kind;
  c.name = std::move(name);
  uint64_t h = Hash(config.seed, 0xC0FFEEULL, static_cast<uint64_t>(kind) + 1);
  for (int r : members) h = Hash(h, static_cast<uint64_t>(r));
  h &= 0x00ffffffffffffffULL;  // NCCL commHashes print as up to 14 hex digits in practice
  if (h == 0) h = 1;
  c.id = h;
  c.id_text = HexId(h);
  c.ranks = std::move(members);
  std::set<int> hosts;
  std::set<std::pair<int, int>> hr;
  std::vector<int> per_host(L->hosts, 0);
  for (int r : c.ranks) {
    const RankInfo& ri = L->ranks[r];
    hosts.insert(ri.host);
    hr.insert({ri.host, ri.rail});
    c.max_per_host = std::max(c.max_per_host, ++per_host[ri.host]);
  }
  c.hosts.assign(hosts.begin(), hosts.end());
  c.host_rails.assign(hr.begin(), hr.end());
  c.multi_host = c.hosts.size() > 1;
  c.pg_index = static_cast<int>(L->comms.size());
  const int idx = static_cast<int>(L->comms.size());
  for (size_t i = 0; i < c.ranks.size(); ++i) {
    RankInfo& ri = L->ranks[c.ranks[i]];
    ri.comm[static_cast<int>(kind)] = idx;
    ri.comm_rank[static_cast<int>(kind)] = static_cast<int>(i);
  }
  L->comms.push_back(std::move(c));
}

}  // namespace

Status BuildLayout(const SimConfig& config, Layout* L) {
  const ClusterConfig& cl = config.cluster;
  const ParallelConfig& pc = config.parallel;
  if (cl.hosts < 1 || cl.gpus_per_host < 1 || cl.nics_per_host < 1)
    return Status::InvalidArgument("hosts, gpus-per-host and nics-per-host must be >= 1");
  const int64_t world64 = int64_t{cl.hosts} * cl.gpus_per_host;
  if (world64 > (1 << 22)) return Status::InvalidArgument("world too large");
  const int world = static_cast<int>(world64);
  if (pc.tp < 1 || pc.pp < 1 || pc.cp < 1 || pc.ep < 1)
    return Status::InvalidArgument("tp, pp, cp and ep must be >= 1");
  const int64_t mp = int64_t{pc.tp} * pc.pp * pc.cp;
  if (world % mp != 0)
    return Status::InvalidArgument("world size (" + std::to_string(world) +
                                   ") is not divisible by tp*pp*cp (" + std::to_string(mp) + ")");
  const int dp = static_cast<int>(world / mp);
  if (pc.dp > 0 && pc.dp != dp)
    return Status::InvalidArgument("--dp " + std::to_string(pc.dp) +
                                   " does not match world/(tp*pp*cp) = " + std::to_string(dp));
  if (dp % pc.ep != 0)
    return Status::InvalidArgument("ep (" + std::to_string(pc.ep) + ") must divide dp (" +
                                   std::to_string(dp) + ")");
  L->world = world;
  L->hosts = cl.hosts;
  L->gpus_per_host = cl.gpus_per_host;
  L->tp = pc.tp; L->pp = pc.pp; L->cp = pc.cp; L->dp = dp; L->ep = pc.ep;
  const int width = std::max(3, static_cast<int>(std::to_string(cl.hosts - 1).size()));
  L->hostnames.resize(cl.hosts);
  L->clock_offset_us.resize(cl.hosts);
  for (int h = 0; h < cl.hosts; ++h) {
    std::string num = std::to_string(h);
    if (static_cast<int>(num.size()) < width) num.insert(0, width - num.size(), '0');
    L->hostnames[h] = cl.host_prefix + "-" + num;
    L->clock_offset_us[h] =
        std::round((Uniform(Hash(config.seed, 0xC10CCULL, h)) * 2 - 1) * cl.clock_skew_us);
  }
  L->ranks.resize(world);
  for (int r = 0; r < world; ++r) {
    RankInfo& ri = L->ranks[r];
    ri.host = r / cl.gpus_per_host;
    ri.local = r % cl.gpus_per_host;
    ri.rail = static_cast<int>(int64_t{ri.local} * cl.nics_per_host / cl.gpus_per_host);
    const uint64_t hb = Hash(config.seed, 0x91DULL, ri.host);
    ri.pid = 20000 + static_cast<int64_t>(hb % 3000000) + ri.local * 17 + (hb >> 40) % 7;
    ri.tp = r % pc.tp;
    ri.cp = (r / pc.tp) % pc.cp;
    ri.dp = static_cast<int>((r / (pc.tp * pc.cp)) % dp);
    ri.pp = static_cast<int>(r / (int64_t{pc.tp} * pc.cp * dp));
    ri.ep = ri.dp % pc.ep;
    for (int k = 0; k < static_cast<int>(CommKind::kCount); ++k) { ri.comm[k] = -1; ri.comm_rank[k] = -1; }
  }
  // Creation order as in PyTorch + Megatron initialize_model_parallel: world, dp, cp, tp, pp, ep.
  {
    std::vector<int> all(world);
    for (int r = 0; r < world; ++r) all[r] = r;
    AddComm(config, L, CommKind::kWorld, "default_pg", std::move(all));
  }
  for (int p = 0; p < pc.pp; ++p)
    for (int c = 0; c < pc.cp; ++c)
      for (int t = 0; t < pc.tp; ++t) {
        std::vector<int> m;
        for (int d = 0; d < dp; ++d) m.push_back(L->RankOf(t, c, d, p));
        AddComm(config, L, CommKind::kDp, "DATA_PARALLEL_GROUP", std::move(m));
      }
  for (int p = 0; p < pc.pp; ++p)
    for (int d = 0; d < dp; ++d)
      for (int t = 0; t < pc.tp; ++t) {
        std::vector<int> m;
        for (int c = 0; c < pc.cp; ++c) m.push_back(L->RankOf(t, c, d, p));
        AddComm(config, L, CommKind::kCp, "CONTEXT_PARALLEL_GROUP", std::move(m));
      }
  for (int p = 0; p < pc.pp; ++p)
    for (int d = 0; d < dp; ++d)
      for (int c = 0; c < pc.cp; ++c) {
        std::vector<int> m;
        for (int t = 0; t < pc.tp; ++t) m.push_back(L->RankOf(t, c, d, p));
        AddComm(config, L, CommKind::kTp, "TENSOR_MODEL_PARALLEL_GROUP", std::move(m));
      }
  for (int d = 0; d < dp; ++d)
    for (int c = 0; c < pc.cp; ++c)
      for (int t = 0; t < pc.tp; ++t) {
        std::vector<int> m;
        for (int p = 0; p < pc.pp; ++p) m.push_back(L->RankOf(t, c, d, p));
        AddComm(config, L, CommKind::kPp, "PIPELINE_MODEL_PARALLEL_GROUP", std::move(m));
      }
  if (pc.ep > 1) {
    for (int p = 0; p < pc.pp; ++p)
      for (int blk = 0; blk < dp / pc.ep; ++blk)
        for (int c = 0; c < pc.cp; ++c)
          for (int t = 0; t < pc.tp; ++t) {
            std::vector<int> m;
            for (int e = 0; e < pc.ep; ++e) m.push_back(L->RankOf(t, c, blk * pc.ep + e, p));
            AddComm(config, L, CommKind::kEp, "EXPERT_MODEL_PARALLEL_GROUP", std::move(m));
          }
  }
  return Status::Ok();
}

}  // namespace collscope::sim
