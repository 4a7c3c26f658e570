#include "analysis/diagnose/kernel_detect.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <set>

#include "analysis/diagnose/duck.h"
#include "analysis/diagnose/steps.h"
#include "core/readers/kineto.h"
#include "core/statistics.h"

namespace collscope::diagnose {
namespace {

double SeriesTime(const KernelSeries& s) {
  if (s.total_us >= 0) return s.total_us;
  double t = 0;
  for (double v : s.dur_us) t += v;
  return t;
}

bool IsDataParallel(std::string_view desc) {
  std::string d(desc);
  for (char& c : d) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (d.find("EXPERT") != std::string::npos || d.find("WITH_CP") != std::string::npos ||
      d.find("MODEL") != std::string::npos)
    return false;
  return d.find("DATA_PARALLEL") != std::string::npos || d == "DP" || d.ends_with("_DP") ||
         d.starts_with("DP_");
}

struct Group {
  std::string desc;
  std::vector<int> ranks;
};

// pg_config: [{"pg_name": ..., "pg_desc": ..., "ranks": [...]}, ...]
std::vector<Group> ParsePgConfig(const std::string& json) {
  std::vector<Group> out;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json).get(root)) return out;
  simdjson::dom::array arr;
  if (root.get_array().get(arr)) return out;
  for (simdjson::dom::element e : arr) {
    simdjson::dom::object o;
    if (e.get_object().get(o)) continue;
    Group g;
    std::string_view s;
    if (o.at_key("pg_desc").get_string().get(s) == simdjson::SUCCESS) g.desc = s;
    simdjson::dom::array rk;
    if (o.at_key("ranks").get_array().get(rk) == simdjson::SUCCESS) {
      for (simdjson::dom::element r : rk) {
        int64_t v;
        if (r.get_int64().get(v) == simdjson::SUCCESS) g.ranks.push_back(static_cast<int>(v));
      }
    }
    if (!g.ranks.empty()) out.push_back(std::move(g));
  }
  return out;
}

std::string ShortName(const std::string& name) {
  std::string s = name;
  if (s.starts_with("void ")) s = s.substr(5);
  const size_t cut = s.find_first_of("<(");
  if (cut != std::string::npos && cut > 0) s = s.substr(0, cut);
  if (s.size() > 64) s = s.substr(0, 61) + "...";
  return s;
}

std::string ModesText(const std::vector<Mode>& modes) {
  std::string s;
  for (const Mode& m : modes) {
    if (!s.empty()) s += ", ";
    s += Fmt("%.1f us", m.center) + Fmt(" (%.0f%%)", 100 * m.weight);
  }
  return s;
}

// The synchronisation trap, as evidence: a rank that arrives late at every collective waits the
// least, so its NCCL kernels are the shortest. Weighted median over collective keys of (the rank's
// median NCCL kernel time / the other ranks' median) in steps [s0, s1]; 0 when not measurable.
double NcclRatio(const KernelData& d, int rank, int64_t s0, int64_t s1) {
  std::map<int, std::map<int, std::vector<double>>> by_key;  // key -> rank -> durations
  for (const KernelData::Nccl& n : d.nccl)
    if (n.step >= s0 && n.step <= s1) by_key[n.key][n.rank].push_back(n.dur_us);
  std::vector<std::pair<double, double>> ratios;  // (ratio, the rank's kernels of the key)
  double total = 0;
  for (auto& [key, ranks] : by_key) {
    auto mine = ranks.find(rank);
    if (mine == ranks.end() || ranks.size() < 2) continue;
    std::vector<double> others;
    for (auto& [r, v] : ranks)
      if (r != rank) others.push_back(Median(v));
    const double o = Median(others);
    if (!(o > 0)) continue;
    const double w = static_cast<double>(mine->second.size());
    ratios.push_back({Median(mine->second) / o, w});
    total += w;
  }
  // Weighted by how many such kernels the rank ran: frequent collectives (tensor parallel) count
  // more than a per-step gradient bucket.
  std::sort(ratios.begin(), ratios.end());
  double acc = 0;
  for (const auto& [r, w] : ratios)
    if ((acc += w) >= total / 2) return r;
  return 0;
}

}  // namespace

Result<KernelData> LoadKernelData(Store& store, const std::string& run) {
  KernelData d;
  if (!readers::HasKinetoTables(store)) return d;
  duckdb_connection conn = store.connection();
  std::string rid;
  {
    const std::string q = run.empty()
        ? "SELECT CAST(min(run_id) AS BIGINT) FROM kineto_traces"
        : "SELECT CAST(run_id AS BIGINT) FROM runs WHERE name = " + SqlString(run);
    auto r = Fetch(conn, q, "i");
    if (!r.ok()) return r.status();
    if (r->rows == 0 || r->null_i[0][0]) return d;
    rid = std::to_string(r->i[0][0]);
  }
  auto names = Fetch(conn,
                     "SELECT DISTINCT name FROM kernels WHERE run_id = " + rid +
                         " AND kind = 'compute' AND name IS NOT NULL ORDER BY name",
                     "s");
  if (!names.ok()) return names.status();
  d.names = names->s[0];
  auto k = Fetch(conn,
                 "WITH n AS (SELECT name, CAST(row_number() OVER (ORDER BY name) - 1 AS BIGINT) AS nid "
                 "FROM (SELECT DISTINCT name FROM kernels WHERE run_id = " + rid +
                     " AND kind = 'compute' AND name IS NOT NULL)) "
                 "SELECT CAST(k.rank AS BIGINT), n.nid, CAST(k.step AS BIGINT), "
                 "CAST(k.start_us AS DOUBLE), CAST(k.dur_us AS DOUBLE) "
                 "FROM kernels k JOIN n USING (name) WHERE k.run_id = " + rid +
                     " AND k.kind = 'compute' ORDER BY 1, 2, 4",
                 "iiidd");
  if (!k.ok()) return k.status();
  std::set<int> ranks;
  for (size_t i = 0; i < k->rows; ++i) {
    const int rank = static_cast<int>(k->i[0][i]);
    const int name = static_cast<int>(k->i[1][i]);
    if (d.series.empty() || d.series.back().rank != rank || d.series.back().name != name) {
      KernelSeries s;
      s.rank = rank;
      s.name = name;
      d.series.push_back(std::move(s));
    }
    KernelSeries& s = d.series.back();
    s.dur_us.push_back(k->d[1][i]);
    s.start_us.push_back(k->d[0][i]);
    s.step.push_back(k->null_i[2][i] ? -1 : k->i[2][i]);
    ranks.insert(rank);
  }
  auto sc = Fetch(conn,
                  "SELECT CAST(rank AS BIGINT), CAST(sum(dur_us) AS DOUBLE) FROM kernels WHERE run_id = " +
                      rid + " AND kind = 'compute' AND step IS NOT NULL GROUP BY rank, step",
                  "id");
  if (!sc.ok()) return sc.status();
  for (size_t i = 0; i < sc->rows; ++i)
    d.step_compute.push_back({static_cast<int>(sc->i[0][i]), sc->d[0][i]});
  auto nc = Fetch(conn,
                  "SELECT CAST(rank AS BIGINT), CAST(dense_rank() OVER (ORDER BY coalesce(pg_name, ''), coalesce(pg_ranks, ''), "
                  "coalesce(coll, ''), name, coalesce(in_nelems, -1)) AS BIGINT), CAST(step AS BIGINT), "
                  "CAST(dur_us AS DOUBLE) FROM kernels WHERE run_id = " + rid +
                      " AND kind = 'nccl' AND step IS NOT NULL",
                  "iiid");
  if (!nc.ok()) return nc.status();
  d.nccl.reserve(nc->rows);
  for (size_t i = 0; i < nc->rows; ++i)
    d.nccl.push_back({static_cast<int>(nc->i[0][i]), static_cast<int>(nc->i[1][i]), nc->i[2][i], nc->d[0][i]});
  // Process groups: the traces' pg_config, and the NCCL kernels' own metadata.
  std::vector<Group> groups;
  auto tr = Fetch(conn,
                  "SELECT CAST(rank AS BIGINT), coalesce(hostname, ''), coalesce(pg_config, ''), "
                  "CAST(coalesce(world_size, 0) AS BIGINT) FROM kineto_traces WHERE run_id = " +
                      rid + " ORDER BY trace_id",
                  "issi");
  if (!tr.ok()) return tr.status();
  size_t world_size = 0;
  for (size_t i = 0; i < tr->rows; ++i) {
    const int rank = static_cast<int>(tr->i[0][i]);
    world_size = std::max(world_size, static_cast<size_t>(std::max<int64_t>(0, tr->i[1][i])));
    ranks.insert(rank);
    if (!tr->s[0][i].empty()) d.hosts[rank] = tr->s[0][i];
    if (!tr->s[1][i].empty())
      for (Group& g : ParsePgConfig(tr->s[1][i])) groups.push_back(std::move(g));
  }
  auto pg = Fetch(conn,
                  "SELECT DISTINCT coalesce(pg_desc, ''), pg_ranks FROM kernels WHERE run_id = " + rid +
                      " AND kind = 'nccl' AND pg_ranks IS NOT NULL",
                  "ss");
  if (!pg.ok()) return pg.status();
  for (size_t i = 0; i < pg->rows; ++i) {
    Group g;
    g.desc = pg->s[0][i];
    g.ranks = readers::RankList(pg->s[1][i]);
    if (!g.ranks.empty()) groups.push_back(std::move(g));
  }
  d.ranks.assign(ranks.begin(), ranks.end());
  const size_t world = std::max(world_size, d.ranks.size());
  std::set<std::vector<int>> dp_seen;
  std::map<int, std::set<int>> peers, world_peers;
  for (const Group& g : groups) {
    if (IsDataParallel(g.desc) && dp_seen.insert(g.ranks).second) d.dp_groups.push_back(g.ranks);
    const bool whole = g.desc == "default_pg" || g.ranks.size() >= std::max<size_t>(world, 2);
    for (int r : g.ranks)
      for (int q : g.ranks)
        if (q != r) (whole ? world_peers : peers)[r].insert(q);
  }
  std::sort(d.dp_groups.begin(), d.dp_groups.end());
  for (int r : d.ranks) {
    const std::set<int>& p = peers.count(r) ? peers[r] : world_peers[r];
    d.peers[r].assign(p.begin(), p.end());
  }
  return d;
}

namespace {

// The samples in [lo, hi] date the shift, except those at a mode the peers share: a kernel name
// that runs at two sizes (the loss kernel's forward and backward) can have its slowed short mode
// next to its usual long one, and the usual samples would date the shift back to the start.
// False when there are none.
bool DateShift(const KernelSeries& s, double tolerance, KernelShift* ks) {
  ks->start_us = std::numeric_limits<double>::infinity();
  ks->end_us = -ks->start_us;
  for (size_t x = 0; x < s.dur_us.size(); ++x) {
    if (s.dur_us[x] < ks->lo || s.dur_us[x] > ks->hi) continue;
    bool usual = false;
    for (const Mode& m : ks->peer_modes) usual |= std::fabs(s.dur_us[x] / m.center - 1) <= tolerance;
    if (usual) continue;
    ks->start_us = std::min(ks->start_us, s.start_us[x]);
    ks->end_us = std::max(ks->end_us, s.start_us[x] + s.dur_us[x]);
    if (s.step[x] >= 0) {
      ks->first_step = ks->first_step < 0 ? s.step[x] : std::min(ks->first_step, s.step[x]);
      ks->last_step = std::max(ks->last_step, s.step[x]);
    }
  }
  return std::isfinite(ks->start_us);
}

// A host-level shift is a change over time: the rank ran steps before the first shifted one. A
// slower mode present from its first step on is a shape it always runs (a longer last
// micro-batch, say), not a slowdown. Without step numbers the times cannot say, and it stands.
bool ChangedOverTime(const KernelSeries& s, const KernelShift& ks) {
  if (ks.first_step < 0) return true;
  for (int64_t step : s.step)
    if (step >= 0 && step < ks.first_step) return true;
  return false;
}

// A host slowdown hides from the nearest-peer test: the host's ranks share their slow mode. Here
// only ranks on *other* hosts count as peers, and the rank must also have the usual mode those
// peers run in (it changed over time: its own history is the reference). A rank that is
// different all along (a pipeline stage doing other work under the same kernel name, alone on
// its host) has no such usual mode and is left alone.
bool HostShift(const std::vector<KernelProfile>& profs, size_t i, size_t kk,
               const std::function<std::string(size_t)>& host_of, const KernelOptions& o,
               KernelShift* ks) {
  const std::string h = host_of(i);
  if (h.empty()) return false;
  std::vector<size_t> others;
  for (size_t j = 0; j < profs.size(); ++j)
    if (j != i && !host_of(j).empty() && host_of(j) != h) others.push_back(j);
  if (others.size() < std::max(kk, o.min_ranks - 1)) return false;
  auto supported = [&](double c) {
    size_t n = 0;
    for (size_t j : others)
      for (const Mode& q : profs[j].modes)
        if (std::fabs(q.center / c - 1) <= o.mode_tolerance) { ++n; break; }
    return n >= kk;
  };
  const KernelProfile& p = profs[i];
  const Mode* usual = nullptr;
  for (const Mode& md : p.modes)
    if (md.weight >= o.min_mode_weight && supported(md.center) && (!usual || md.weight > usual->weight)) usual = &md;
  if (!usual) return false;
  std::vector<const Mode*> shifted;
  for (const Mode& md : p.modes)
    if (md.weight >= o.min_mode_weight && md.center > usual->center * (1 + o.mode_tolerance) && !supported(md.center))
      shifted.push_back(&md);
  if (shifted.empty()) return false;
  ks->rank = p.rank;
  ks->modes = p.modes;
  for (const Mode& md : p.modes)  // its usual modes: those the other hosts share
    if (supported(md.center)) ks->peer_modes.push_back(md);
  ks->time_us = p.total_us;
  double w = 0, c = 0;
  for (const Mode* md : shifted) { w += md->weight; c += md->weight * md->median; }
  ks->slowdown = c / w / usual->median;
  ks->lo = shifted.front()->lo;
  ks->hi = shifted.back()->hi;
  ks->host_level = true;
  return true;
}

// The shifted ranks of one kernel name (`named`: the name and its ranks' profiles): a rank far
// from its peers (W1) whose slow modes they do not share, or whose whole host shifted with it.
void ShiftsOfKernel(const KernelData& d, const KernelOptions& o,
                    const std::pair<const int, std::vector<KernelProfile>>& named,
                    const std::map<std::pair<int, int>, const KernelSeries*>& series_of, KernelAnalysis* analysis,
                    std::vector<KernelShift>* shifts_out) {
  std::vector<KernelShift>& shifts = *shifts_out;
  // Plain references, not structured bindings: lambdas below capture them (Clang 14 cannot).
  const auto& name = named.first;
  auto& profs = named.second;
  const size_t m = profs.size();
  if (m < o.min_ranks) return;
  std::vector<const KernelProfile*> ptr;
  for (const KernelProfile& p : profs) ptr.push_back(&p);
  const auto D = DistanceMatrix(ptr);
  if (analysis) {
    KernelAnalysis::Matrix mx;
    mx.name = name;
    for (const KernelProfile& p : profs) mx.ranks.push_back(p.rank);
    mx.w1 = D;
    analysis->matrices.push_back(std::move(mx));
  }
  const size_t kk = std::max<size_t>(1, (m - 1) / 4);
  std::vector<double> nn(m);
  for (size_t i = 0; i < m; ++i) {
    std::vector<double> row;
    for (size_t j = 0; j < m; ++j)
      if (j != i) row.push_back(D[i][j]);
    std::nth_element(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(kk - 1), row.end());
    nn[i] = row[kk - 1];
  }
  const double typical = Median(nn);
  auto host_of = [&](size_t j) {
    auto it = d.hosts.find(profs[j].rank);
    return it == d.hosts.end() ? std::string() : it->second;
  };
  for (size_t i = 0; i < m; ++i) {
    if (nn[i] < o.outlier_factor * typical || nn[i] < o.rel_w1 / 2) {
      // Near its peers, but maybe only because its host mates slowed down with it (a host
      // slowdown: every rank of the host shares the slow mode).
      KernelShift hs;
      if (HostShift(profs, i, kk, host_of, o, &hs)) {
        hs.w1_rel = nn[i];
        hs.typical = typical;
        hs.name = name;
        const KernelSeries& s = *series_of.at({profs[i].rank, name});
        if (s.total_us >= 0) hs.time_us = s.total_us;
        if (DateShift(s, o.mode_tolerance, &hs) && ChangedOverTime(s, hs)) shifts.push_back(std::move(hs));
      }
      continue;
    }
    const KernelProfile& p = profs[i];
    // The reference: the medians of the rank's nearest peers (by W1), so that ranks doing other
    // work under the same kernel name (pipeline stages) do not count as its norm.
    std::vector<size_t> order;
    for (size_t j = 0; j < m; ++j)
      if (j != i) order.push_back(j);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return D[i][a] < D[i][b]; });
    const size_t n_ref = std::max(kk, std::min<size_t>(3, order.size()));
    std::vector<double> near_medians;
    for (size_t x = 0; x < n_ref; ++x) near_medians.push_back(profs[order[x]].median_us);
    const double ref = Median(near_medians);
    if (!(ref > 0)) continue;
    // Common modes: shared (within tolerance) by at least kk other ranks.
    auto supported = [&](double c) {
      size_t n = 0;
      for (size_t j = 0; j < m; ++j) {
        if (j == i) continue;
        for (const Mode& q : profs[j].modes)
          if (std::fabs(q.center / c - 1) <= o.mode_tolerance) { ++n; break; }
      }
      return n >= kk;
    };
    std::vector<Mode> shifted;
    for (const Mode& md : p.modes)
      if (md.weight >= o.min_mode_weight && md.center > ref * (1 + o.mode_tolerance) &&
          !supported(md.center))
        shifted.push_back(md);
    const bool median_shift = p.median_us > ref * (1 + o.mode_tolerance) && nn[i] >= o.rel_w1;
    if (shifted.empty() && !median_shift) continue;
    KernelShift ks;
    ks.rank = p.rank;
    ks.name = name;
    ks.w1_rel = nn[i];
    ks.typical = typical;
    ks.modes = p.modes;
    // The peers' modes: those of the nearest peer.
    ks.peer_modes = profs[order.front()].modes;
    const KernelSeries& s = *series_of.at({p.rank, name});
    ks.time_us = s.total_us >= 0 ? s.total_us : p.total_us;
    // The samples of the shifted modes (or above the tolerance) date the shift.
    double lo = std::numeric_limits<double>::infinity(), hi = lo;
    if (!shifted.empty()) {
      lo = shifted.front().lo;
      hi = shifted.back().hi;
      double w = 0, c = 0;
      for (const Mode& md : shifted) { w += md.weight; c += md.weight * md.median; }
      ks.slowdown = c / w / ref;
    } else {
      lo = ref * (1 + o.mode_tolerance);
      hi = std::numeric_limits<double>::infinity();
      ks.slowdown = p.median_us / ref;
    }
    ks.lo = lo;
    ks.hi = hi;
    if (DateShift(s, o.mode_tolerance, &ks)) shifts.push_back(std::move(ks));
  }
}

}  // namespace

std::vector<Finding> DetectKernelAnomalies(const KernelData& d, const KernelOptions& o,
                                           KernelAnalysis* analysis) {
  std::vector<Finding> out;
  // Profiles per kernel name.
  std::map<int, std::vector<KernelProfile>> by_name;
  std::map<std::pair<int, int>, const KernelSeries*> series_of;
  std::map<int, double> rank_total;
  for (const KernelSeries& s : d.series) {
    rank_total[s.rank] += SeriesTime(s);
    series_of[{s.rank, s.name}] = &s;
    if (s.dur_us.size() < o.min_samples) continue;
    by_name[s.name].push_back(MakeProfile(s.rank, s.name, s.dur_us, o.kde));
  }
  std::vector<KernelShift> shifts;
  for (const auto& named : by_name) ShiftsOfKernel(d, o, named, series_of, analysis, &shifts);
  // Grid of per-step compute maxima per (DP, TP/PP).
  Grid grid = MaxGrid(d.dp_groups, d.step_compute);
  std::vector<HotCell> hot = HotCells(grid, o.grid_ratio);
  // Per rank: the share of its compute time in shifted kernels.
  std::map<int, std::vector<const KernelShift*>> by_rank;
  for (const KernelShift& s : shifts) by_rank[s.rank].push_back(&s);
  std::map<int, size_t> compared;  // kernel names compared per rank
  for (const auto& [name, profs] : by_name)
    if (profs.size() >= o.min_ranks)
      for (const KernelProfile& p : profs) compared[p.rank]++;
  for (const auto& [rank, ks] : by_rank) {
    double t = 0;
    std::vector<double> slow;
    double start = std::numeric_limits<double>::infinity(), end = -start;
    int64_t s0 = -1, s1 = -1;
    const KernelShift* worst = ks.front();
    for (const KernelShift* s : ks) {
      t += s->time_us;
      slow.push_back(s->slowdown);
      start = std::min(start, s->start_us);
      end = std::max(end, s->end_us);
      if (s->first_step >= 0) s0 = s0 < 0 ? s->first_step : std::min(s0, s->first_step);
      s1 = std::max(s1, s->last_step);
      if (s->time_us * (s->slowdown - 1) > worst->time_us * (worst->slowdown - 1)) worst = s;
    }
    const double total = rank_total.count(rank) ? rank_total[rank] : 0;
    const double share = total > 0 ? t / total : 0;
    if (share < o.min_time_share) continue;
    const double slowdown = Median(slow);
    const HotCell* cell = nullptr;
    for (const HotCell& h : hot)
      if (h.rank == rank) cell = &h;
    Finding f;
    f.kind = Kind::kSlowCompute;
    f.detector = "kernel.modes";
    f.ranks = {rank};
    auto host = d.hosts.find(rank);
    if (host != d.hosts.end()) f.hosts = {host->second};
    auto pe = d.peers.find(rank);
    if (pe != d.peers.end()) f.victims = pe->second;
    else
      for (int r : d.ranks)
        if (r != rank) f.victims.push_back(r);
    f.start_us = static_cast<int64_t>(std::floor(start));
    f.end_us = static_cast<int64_t>(std::ceil(end));
    f.confidence = std::min(0.95, 0.55 + 0.25 * std::min(1.0, share) + (cell ? 0.15 : 0.0));
    const std::string wname = ShortName(d.names[worst->name]);
    double wpeer = 0;
    for (const Mode& md : worst->peer_modes) wpeer = std::max(wpeer, md.weight > 0.5 ? md.center : wpeer);
    if (wpeer == 0 && !worst->peer_modes.empty()) wpeer = worst->peer_modes.front().center;
    f.Add("slowdown", slowdown);
    f.Add("kernels_shifted", static_cast<double>(ks.size()));
    f.Add("kernels_compared", static_cast<double>(compared[rank]));
    f.Add("compute_time_share", share);
    f.AddText("worst_kernel", d.names[worst->name]);
    f.Add("worst_kernel_w1_rel", worst->w1_rel);
    f.Add("worst_kernel_typical_w1_rel", worst->typical);
    f.AddText("worst_kernel_modes", ModesText(worst->modes));
    f.AddText("worst_kernel_peer_modes", ModesText(worst->peer_modes));
    if (s0 >= 0) { f.Add("first_step", static_cast<double>(s0)); f.Add("last_step", static_cast<double>(s1)); }
    bool host_level = false;
    for (const KernelShift* s : ks) host_level |= s->host_level;
    if (host_level)
      f.AddText("compared_with", "ranks on other hosts and its own usual mode (its host mates share the slow mode)");
    const double nccl_ratio = s0 >= 0 ? NcclRatio(d, rank, s0, s1) : 0;
    if (nccl_ratio > 0) {
      f.Add("nccl_kernel_time_ratio", nccl_ratio);
      if (nccl_ratio < 0.9)
        f.AddText("synchronisation_trap",
                  "its NCCL kernels are the shortest: it arrives last and its peers wait");
    }
    if (cell) {
      f.Add("grid_ratio", cell->ratio);
      f.AddText("grid_cell", "dp " + std::to_string(cell->row) + ", model-parallel " + std::to_string(cell->col));
    }
    std::string who = "Rank " + std::to_string(rank) + (f.hosts.empty() ? "" : " (" + f.hosts[0] + ")");
    std::string when = s0 >= 0 ? (s0 == s1 ? " in step " + std::to_string(s0)
                                           : " from step " + std::to_string(s0) + " to " + std::to_string(s1))
                               : "";
    f.summary = who + ": GPU kernels run " + Fmt("%.2fx", slowdown) + " slower than on its peers (" +
                std::to_string(ks.size()) + " of " + std::to_string(compared[rank]) +
                " compared kernels shifted, " + Fmt("%.0f%%", 100 * share) + " of its compute time; " +
                wname + Fmt(" %.1f us", worst->modes.empty() ? 0 : worst->modes.back().center) +
                Fmt(" vs %.1f us", wpeer) + ")" + when +
                "; check this GPU (clocks, thermals, power, ECC): its " +
                std::to_string(f.victims.size()) + " peers wait for it in every collective.";
    out.push_back(std::move(f));
  }
  if (analysis) {
    analysis->shifts = std::move(shifts);
    analysis->grid = std::move(grid);
    analysis->hot = std::move(hot);
  }
  return out;
}

Result<std::vector<Finding>> DiagnoseKineto(Store& store, const std::string& run, bool with_steps,
                                            const KernelOptions& o, const std::map<int, std::string>& known_hosts) {
  std::vector<Finding> out;
  auto d = LoadKernelData(store, run);
  if (!d.ok()) return d.status();
  for (const auto& [rank, host] : known_hosts) d->hosts.try_emplace(rank, host);
  out = DetectKernelAnomalies(*d, o);
  if (with_steps) {
    auto s = readers::LoadKinetoSteps(store, run);
    if (!s.ok()) return s.status();
    if (!s->rows.empty()) {
      auto f = DetectStepAnomalies(*s, StepOptions{}, known_hosts);
      out.insert(out.end(), f.begin(), f.end());
    }
  }
  return out;
}

Result<std::vector<Finding>> DiagnoseKinetoPaths(const std::vector<std::string>& paths,
                                                 bool with_steps, const KernelOptions& o,
                                                 const std::map<int, std::string>& known_hosts) {
  auto files = readers::FindKinetoTraces(paths);
  if (!files.ok()) return files.status();
  if (files->empty()) return std::vector<Finding>{};
  auto store = Store::Open(":memory:");
  if (!store.ok()) return store.status();
  auto rep = readers::IngestKineto(**store, *files, "kineto");
  if (!rep.ok()) return rep.status();
  return DiagnoseKineto(**store, "kineto", with_steps, o, known_hosts);
}

}  // namespace collscope::diagnose
