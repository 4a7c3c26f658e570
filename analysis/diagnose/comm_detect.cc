// Communication-level detectors over collective instances (see comm_data.h, docs/diagnosis.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/late_arrival.h"

namespace collscope::diagnose {
namespace {

struct KeyStats {
  double base = 0;   // median transfer time (tmin)
  double noise = 0;  // median arrival wait (tmed - tmin)
};


double Wait(const Inst& x) { return (x.n == 2 ? x.tmax : x.tmed) - x.tmin; }

std::unordered_map<uint64_t, KeyStats> KeyBaselines(const CommData& d) {
  std::unordered_map<uint64_t, std::pair<std::vector<double>, std::vector<double>>> acc;
  for (const Inst& x : d.insts) {
    auto& a = acc[KernelKey(d, x)];
    a.first.push_back(x.tmin);
    if (x.n >= 2) a.second.push_back(Wait(x));
  }
  std::unordered_map<uint64_t, KeyStats> out;
  for (auto& [k, v] : acc) out[k] = {Median(std::move(v.first)), Median(std::move(v.second))};
  return out;
}

// Merges sorted window indexes into [first, last] runs allowing one missing window between.
std::vector<std::pair<int, int>> Runs(std::vector<int> w) {
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  std::vector<std::pair<int, int>> r;
  for (int x : w) {
    if (!r.empty() && x <= r.back().second + 2) r.back().second = x;
    else r.push_back({x, x});
  }
  return r;
}

}  // namespace

double WindowUs(const CommData& d, const CommOptions& o) {
  if (o.window_us > 0) return o.window_us;
  return std::max(2e5, static_cast<double>(d.t1 - d.t0) / 40.0);
}

namespace {

// A channel of DetectSlowLink: a multi-host communicator, or a pair of processes on two hosts that
// exchange point-to-point messages.
struct Chan {
  int comm;
  std::vector<int> hosts, procs;
};
using ChannelRatios = std::map<std::pair<int, int>, std::vector<double>>;  // (channel, window)
// What DetectSlowLink found slow through one set of hosts: in which windows, which channels, and
// their transfer-time ratios.
struct SlowHosts {
  std::vector<int> windows;
  std::set<int> comms;
  std::vector<double> ratio;
  bool ambiguous = false;
};

// An instance that only some members recorded (sampled dumps), by its shortest record.
struct SampledRatio {
  int w, proc;
  double ratio;
};

// A complete instance's shortest time is its transfer (its last member waited for no one); an
// instance that only some members recorded (sampled dumps) has their wait in it as well. A slow
// link holds every member of a communicator, the last to arrive too, so where one member's
// records run at the usual speed while the others' nearest in time are slow, they are waiting for
// it, and the communicator is not slow then: over a run of 3 or more such records of one member,
// widened by its longest gap between two (its dumps' reach), the records are left out; the rest go
// into `ratios`. (A 256-GPU job with 1 s 2.29 dumps named a data-parallel group's 8 hosts as a
// slow network: one member, late at every collective, recorded 4.3x shorter times than the other
// seven.) Nearest in time, not over the member's whole span: a member whose dumps fell mostly
// outside a NIC's window has a fast median beside the others' slow one, and hid the window.
void AddSampledRatios(const std::map<int, std::vector<SampledRatio>>& sampled, double link_ratio,
                      ChannelRatios* ratios) {
  for (const auto& [comm, recs] : sampled) {
    std::map<int, std::vector<const SampledRatio*>> by_proc;  // member -> its records
    for (const SampledRatio& r : recs) by_proc[r.proc].push_back(&r);
    auto by_window = [](const SampledRatio* a, const SampledRatio* b) { return a->w < b->w; };
    std::vector<std::pair<int, int>> waited;  // spans where the others waited for a member
    for (auto& [proc, own] : by_proc) {
      if (own.size() < 3) continue;
      std::vector<const SampledRatio*> others;
      for (const SampledRatio& r : recs)
        if (r.proc != proc) others.push_back(&r);
      const size_t k = std::max<size_t>(3, by_proc.size() - 1);  // a record of each other member
      if (others.size() < k) continue;
      std::sort(own.begin(), own.end(), by_window);
      std::sort(others.begin(), others.end(), by_window);
      std::vector<double> near;
      auto waited_for = [&](const SampledRatio* r) {
        if (r->ratio >= link_ratio) return false;
        near.clear();
        size_t hi = static_cast<size_t>(
            std::lower_bound(others.begin(), others.end(), r, by_window) - others.begin());
        size_t lo = hi;  // the next candidates are others[lo - 1] and others[hi]
        while (near.size() < k) {
          const bool take_lo =
              hi == others.size() || (lo > 0 && r->w - others[lo - 1]->w <= others[hi]->w - r->w);
          near.push_back((take_lo ? others[--lo] : others[hi++])->ratio);
        }
        return Median(near) >= link_ratio;
      };
      for (size_t i = 0; i < own.size();) {
        size_t j = i;
        while (j < own.size() && waited_for(own[j])) ++j;
        if (j - i >= 3) {
          int reach = 1;
          for (size_t t = i + 1; t < j; ++t) reach = std::max(reach, own[t]->w - own[t - 1]->w);
          waited.push_back({own[i]->w - reach, own[j - 1]->w + reach});
        }
        i = std::max(j, i + 1);
      }
    }
    for (const SampledRatio& r : recs) {
      bool wait = false;
      for (auto [a, b] : waited) wait = wait || (r.w >= a && r.w <= b);
      if (!wait) (*ratios)[{comm, r.w}].push_back(r.ratio);
    }
  }
}

// The point-to-point channels (an all-to-all as one; a pipeline pair by its wire time) and their
// transfer-time ratios per window, added to `chans` and `ratios`.
void AddP2pRatios(const CommData& d, double W, int nw, std::vector<Chan>* chans_out, ChannelRatios* ratios_out) {
  std::vector<Chan>& chans = *chans_out;
  ChannelRatios& ratios = *ratios_out;
  // Point-to-point: the transfer time is what the quicker transfers of a window show: their
  // 25th percentile, against the job's.
  const std::vector<bool> all_to_all = AllToAllComms(d);
  std::map<std::tuple<int, int, int>, int> pair_chan;
  // chan -> (window, host, time); host -1 for the channel's, and an all-to-all's records also
  // under each of their hosts (the sender's and the receiver's NIC).
  std::map<int, std::vector<std::tuple<int, int, double>>> samples;
  auto sample = [&](int comm, int a, int b, int64_t ts, double t, int host = -1) {
    auto [it, added] = pair_chan.try_emplace({comm, a, b}, static_cast<int>(chans.size()));
    if (added) {
      const Comm& c = d.comms[static_cast<size_t>(comm)];
      std::vector<int> hs = a < 0 ? c.hosts : std::vector<int>{d.procs[a].host, d.procs[b].host};
      SortUnique(&hs);
      chans.push_back({comm, hs, a < 0 ? c.procs : std::vector<int>{a, b}});
    }
    samples[it->second].push_back(
        {std::min(nw - 1, static_cast<int>(std::max<int64_t>(0, ts - d.t0) / W)), host, t});
  };
  // A pair's transfers by their wire time, the shorter of Send and Recv: a pipeline held
  // upstream (a degraded NIC's expert group stalls its stage) stretches both sides' records
  // of its healthy pairs, never the later side's.
  // An all-to-all's transfers, the same way. Where each waits for the group, each is as slow as
  // the group; where each is timed on its own, those of a slow host are: the group is as slow as
  // its slowest host's transfers (below), whose sender's or receiver's NIC each crosses.
  for (const P2pTransfer& t : CrossHostP2pTransfers(d)) {
    if (t.bytes < (1 << 20)) continue;
    if (!all_to_all[static_cast<size_t>(t.comm)]) {
      sample(t.comm, std::min(t.from, t.to), std::max(t.from, t.to), t.ts, t.Wire());
      continue;
    }
    sample(t.comm, -1, -1, t.ts, t.Wire());
    sample(t.comm, -1, -1, t.ts, t.Wire(), d.procs[static_cast<size_t>(t.from)].host);
    sample(t.comm, -1, -1, t.ts, t.Wire(), d.procs[static_cast<size_t>(t.to)].host);
  }
  auto q25 = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 4, v.end());
    return v[v.size() / 4];
  };
  // The usual level is the better quarter of the windows (a degraded link slows the steps, so
  // its windows can be most of a job), or the sibling pairs' (same communicator name and
  // size) when lower: a link degraded for the whole job has no good window of its own.
  std::map<int, std::map<int, double>> lw;  // chan -> window -> level
  std::map<int, double> own;
  std::map<std::pair<std::string, int>, std::vector<double>> sibling_levels;
  for (auto& [ch, v] : samples) {
    std::map<int, std::map<int, std::vector<double>>> per_w;  // window -> host -> times
    for (auto [w, h, e] : v) per_w[w][h].push_back(e);
    std::vector<double> levels;
    for (auto& [w, hosts] : per_w) {
      // The slowest host's, of the hosts with 4 transfers; else the group's.
      double level = -1;
      for (auto& [h, e] : hosts)
        if (h >= 0 && e.size() >= 4) level = std::max(level, q25(e));
      if (auto all = hosts.find(-1); level < 0 && all != hosts.end() && all->second.size() >= 4)
        level = q25(all->second);
      if (level >= 0) {
        lw[ch][w] = level;
        levels.push_back(level);
      }
    }
    if (levels.size() < 4) { lw.erase(ch); continue; }
    own[ch] = q25(levels);
    const Comm& c = d.comms[static_cast<size_t>(chans[static_cast<size_t>(ch)].comm)];
    sibling_levels[{c.name, c.n_ranks}].push_back(Median(levels));
  }
  for (auto& [ch, levels] : lw) {
    const Comm& c = d.comms[static_cast<size_t>(chans[static_cast<size_t>(ch)].comm)];
    std::vector<double>& sib = sibling_levels[{c.name, c.n_ranks}];
    std::sort(sib.begin(), sib.end());
    const double base = std::min(own[ch], sib[(sib.size() - 1) / 4]);
    if (base < 20) continue;
    for (auto& [w, l] : levels) ratios[{ch, w}] = {l / base, l / base};
  }
}

// The finding of one run of windows [w0, w1] (nwin of them slow) of the hosts `hosts`.
Finding SlowLinkFinding(const CommData& d, const std::vector<Chan>& chans, const std::vector<int>& hosts,
                        const SlowHosts& a, int w0, int w1, int nwin, double W) {
  Finding f;
  // Hosts the data cannot tell apart are suspects, not a culprit: naming them all would
  // send someone to drain healthy hosts. A late host among them can still name the link's
  // host (registry.cc, LocalizeLink).
  f.kind = a.ambiguous ? Kind::kSlowNetwork : Kind::kSlowLink;
  f.detector = "comm.slow_link";
  for (int h : hosts) f.hosts.push_back(d.hosts[h]);
  std::vector<int> comm_list(a.comms.begin(), a.comms.end());
  std::set<int> victims;
  for (int c : comm_list) {
    f.comms.push_back(d.comms[chans[c].comm].id);
    for (int p : chans[c].procs) {
      const int gr = d.procs[p].global_rank;
      if (std::find(hosts.begin(), hosts.end(), d.procs[p].host) != hosts.end()) {
        if (!a.ambiguous) f.ranks.push_back(gr);
      } else {
        victims.insert(gr);
      }
    }
  }
  SortUnique(&f.ranks);
  f.victims.assign(victims.begin(), victims.end());
  SortUnique(&f.comms);
  f.start_us = d.t0 + static_cast<int64_t>(w0 * W);
  f.end_us = d.t0 + static_cast<int64_t>((w1 + 1) * W);
  const double r = Median(a.ratio);
  // Sure of a degraded link; when the data cannot tell its hosts apart, the chance that the
  // hosts named are the culprit is about one in their number.
  f.confidence = std::min(1.0, 0.5 + 0.1 * nwin) * std::min(1.0, (r - 1) / 1.0) /
                 (a.ambiguous ? static_cast<double>(hosts.size()) : 1.0);
  f.Add("transfer_time_ratio", r);
  f.Add("bandwidth_share", 1.0 / r);
  f.Add("slow_comms", static_cast<double>(f.comms.size()));
  f.Add("windows", nwin);
  f.AddText("ambiguous", a.ambiguous ? "yes: every slow communicator spans all these hosts" : "no");
  std::string hs = f.hosts.size() == 1 ? "host " + f.hosts[0] : std::to_string(f.hosts.size()) + " hosts (" + f.hosts[0] + ", ...)";
  // Which kinds of communicator are slow, as users name them (comm_name).
  std::set<std::string> names;
  for (int c : comm_list) names.insert(CommLabel(d, chans[static_cast<size_t>(c)].comm));
  std::string kinds;
  size_t listed = 0;
  for (const std::string& n : names)
    if (listed++ < 4) kinds += (kinds.empty() ? "" : ", ") + n;
  if (names.size() > 4) kinds += " and " + std::to_string(names.size() - 4) + " more";
  f.AddText("slow_in", kinds);
  std::string all_hosts;
  for (const std::string& h : f.hosts) all_hosts += (all_hosts.empty() ? "" : ", ") + h;
  f.summary = (a.ambiguous ? "The network among " + std::to_string(f.hosts.size()) + " hosts (" + all_hosts + ")"
                           : "The network link of " + hs) +
              " is degraded: the " + std::to_string(f.comms.size()) + " communicators spanning " +
              (a.ambiguous ? "them" : "it") + " (" + kinds + ") run at " + Fmt("%.0f", 100.0 / r) +
              "% of their usual bus bandwidth since " + FormatTimeUs(f.start_us) +
              (a.ambiguous ? std::string(kUnlocalized) : "; check its NICs, cables and switch ports.");
  return f;
}

}  // namespace

std::vector<Finding> DetectSlowLink(const CommData& d, const CommOptions& o) {
  std::vector<Finding> out;
  if (d.insts.empty()) return out;
  // The usual transfer time of a kernel key is its peers', not its own history: the lower
  // quartile of the medians of the communicators running it (a NIC degraded for the whole job
  // slows every one of its communicators from the first step, and may slow half of a key's).
  std::unordered_map<uint64_t, double> peer_base;
  {
    std::unordered_map<uint64_t, std::map<int, std::vector<double>>> by;
    for (const Inst& x : d.insts) by[KernelKey(d, x)][x.comm].push_back(x.tmin);
    for (auto& [k, comms] : by) {
      std::vector<double> med;
      for (auto& [c, v] : comms) med.push_back(Median(std::move(v)));
      std::sort(med.begin(), med.end());
      peer_base[k] = med[(med.size() - 1) / 4];
    }
  }
  const double W = WindowUs(d, o);
  const int nw = static_cast<int>((d.t1 - d.t0) / W) + 1;
  // Channels: every multi-host communicator (collective transfer times), and every pair of
  // processes on different hosts that exchange point-to-point messages (pipeline links, whose
  // only cross-host traffic may be these).
  std::vector<Chan> chans;
  for (size_t c = 0; c < d.comms.size(); ++c) chans.push_back({static_cast<int>(c), d.comms[c].hosts, d.comms[c].procs});
  // A communicator's own usual time is its better quarter of windows (the windows' medians), for
  // when its key's peers are no baseline: a stage's own message size makes the key of its
  // data-parallel groups, and they all span the same hosts, so one degraded NIC slows them all.
  std::map<std::pair<int, uint64_t>, double> own_base;  // (comm, key)
  {
    std::map<std::pair<int, uint64_t>, std::map<int, std::vector<double>>> by;
    for (const Inst& x : d.insts)
      if (d.comms[x.comm].hosts.size() >= 2 && x.bytes >= (1 << 20))
        by[{x.comm, KernelKey(d, x)}][static_cast<int>((x.ts - d.t0) / W)].push_back(x.tmin);
    for (auto& [ck, per_w] : by) {
      std::vector<double> levels;
      for (auto& [w, v] : per_w) levels.push_back(Median(std::move(v)));
      if (levels.size() < 4) continue;
      std::sort(levels.begin(), levels.end());
      own_base[ck] = levels[(levels.size() - 1) / 4];
    }
  }
  // Per (channel, window): transfer-time ratios.
  ChannelRatios ratios;
  std::map<int, std::vector<SampledRatio>> sampled;  // comm -> instances not every member recorded
  for (const Inst& x : d.insts) {
    const Comm& c = d.comms[x.comm];
    if (c.hosts.size() < 2) continue;
    const uint64_t key = KernelKey(d, x);
    double base = peer_base.at(key);
    if (auto it = own_base.find({x.comm, key}); it != own_base.end()) base = std::min(base, it->second);
    if (base < 20 || x.bytes < (1 << 20)) continue;  // latency-bound: says nothing about bandwidth
    const int w = static_cast<int>((x.ts - d.t0) / W);
    if (static_cast<size_t>(x.n) < c.procs.size())
      sampled[x.comm].push_back({w, x.pmin, x.tmin / base});
    else
      ratios[{x.comm, w}].push_back(x.tmin / base);
  }
  AddSampledRatios(sampled, o.link_ratio, &ratios);
  AddP2pRatios(d, W, nw, &chans, &ratios);
  // Per window: slow comms, per host counts.
  std::vector<std::vector<int>> slow_by_w(nw), data_by_w(nw);
  std::map<std::pair<int, int>, double> med;
  for (auto& [cw, v] : ratios) {
    if (v.size() < 2) continue;
    const double m = Median(v);
    med[cw] = m;
    data_by_w[cw.second].push_back(cw.first);
    if (m >= o.link_ratio) slow_by_w[cw.second].push_back(cw.first);
  }
  std::map<std::vector<int>, SlowHosts> acc, congested;
  for (int w = 0; w < nw; ++w) {
    if (slow_by_w[w].empty()) continue;
    std::map<int, int> S, T;
    for (int c : data_by_w[w])
      for (int h : chans[c].hosts) T[h]++;
    for (int c : slow_by_w[w])
      for (int h : chans[c].hosts) S[h]++;
    // Greedy cover: the host that the most uncovered slow channels span, with every host that
    // spans exactly the same ones (the data cannot tell those apart: one ambiguous culprit).
    // Hosts that cover as many but other channels are other culprits, each found in its turn.
    std::set<int> uncovered(slow_by_w[w].begin(), slow_by_w[w].end());
    struct Culprit { std::vector<int> hosts, comms; };
    std::vector<Culprit> culprits;
    std::set<int> chosen;
    bool ambiguous = false;
    while (!uncovered.empty()) {
      std::map<int, std::vector<int>> covers;  // host -> the uncovered channels spanning it
      for (auto [h, s] : S) {
        if (static_cast<double>(s) / T[h] < o.host_cover) continue;
        if (chosen.count(h)) continue;
        for (int c : uncovered)
          if (std::binary_search(chans[c].hosts.begin(), chans[c].hosts.end(), h)) covers[h].push_back(c);
      }
      if (covers.empty()) break;
      auto best = std::max_element(covers.begin(), covers.end(),
                                   [](const auto& x, const auto& y) { return x.second.size() < y.second.size(); });
      Culprit u;
      u.comms = best->second;
      for (auto& [h, cs] : covers)
        if (cs == u.comms) u.hosts.push_back(h);
      ambiguous |= u.hosts.size() > 1;
      for (int h : u.hosts) chosen.insert(h);
      for (int c : u.comms) uncovered.erase(c);
      culprits.push_back(std::move(u));
    }
    if (culprits.empty()) continue;
    // Many hosts slow at once with no common host is contention across the fabric, not a link:
    // kept apart, as one set, for the suppressed list.
    const bool contention = chosen.size() > std::max<size_t>(2, d.hosts.size() / 4) && !ambiguous;
    if (contention) {
      Culprit all{{chosen.begin(), chosen.end()}, {}};
      for (const Culprit& u : culprits) all.comms.insert(all.comms.end(), u.comms.begin(), u.comms.end());
      culprits = {std::move(all)};
    }
    for (const Culprit& u : culprits) {
      SlowHosts& a = (contention ? congested : acc)[u.hosts];
      a.windows.push_back(w);
      a.ambiguous |= !contention && u.hosts.size() > 1;
      for (int c : u.comms) {
        a.comms.insert(c);
        a.ratio.push_back(med[{c, w}]);
      }
    }
  }
  for (auto* group : {&acc, &congested}) {
    if (group == &congested && o.suppressed == nullptr) break;
    for (auto& [hosts, a] : *group) {
      for (auto [w0, w1] : Runs(a.windows)) {
        int nwin = 0;
        for (int w : a.windows) nwin += (w >= w0 && w <= w1);
        if (nwin < 2) continue;  // one window: contention, not a lasting degradation
        Finding f = SlowLinkFinding(d, chans, hosts, a, w0, w1, nwin, W);
        if (group == &congested) {
          o.suppressed->push_back({std::move(f), std::to_string(hosts.size()) +
                                                     " hosts slow at once with no host in common: contention across the "
                                                     "fabric, not one link"});
          continue;
        }
        out.push_back(std::move(f));
      }
    }
  }
  return out;
}

namespace {

uint64_t Cell(size_t p, size_t c, int w) {
  return (static_cast<uint64_t>(p) << 40) ^ (static_cast<uint64_t>(c) << 16) ^ static_cast<uint64_t>(w);
}
uint64_t Cell(size_t p, int w) { return Cell(p, 0xFFFFFF, w); }

// Time each process spent waiting on its peers, per window: in collectives (as a member that
// was not the last to arrive) and in point-to-point receives (beyond the usual time of that
// transfer). A rank that arrives late because it was itself waiting is a victim of propagation.
struct WaitLedger {
  std::unordered_map<uint64_t, double> by_comm;  // (proc, comm, window)
  std::unordered_map<uint64_t, double> total;    // (proc, window): collectives + p2p
  // Who waited for whom: a wait whose awaited member is known (the last arriver of a
  // collective; a Recv's sender). comm < 0: point-to-point.
  struct Edge {
    size_t waiter, on;
    int comm, w;
    double amount;
  };
  std::vector<Edge> edges;
  std::map<int, std::vector<size_t>> edges_in_window;
  void AddEdge(size_t waiter, size_t on, int comm, int w, double amount) {
    edges_in_window[w].push_back(edges.size());
    edges.push_back({waiter, on, comm, w, amount});
  }
  // What `p` waited in windows [w0, w1], outside `comm`, on ranks that waited on p at least as
  // long there: the echo of p's stall. Held by p, its peers arrive late in other communicators
  // p is already waiting in (one it posted before stalling); that wait is p's own stall coming
  // back, not a cause of it. Of two ranks that waited on each other, the one waited on more
  // held the other first (amounts, not times: with dump times only, when a wait began is known
  // only to a dump interval).
  double EchoOf(size_t p, int comm, int w0, int w1) const {
    std::map<size_t, double> p_on, on_p;  // p waited on r (outside comm); r waited on p
    for (auto it = edges_in_window.lower_bound(w0); it != edges_in_window.end() && it->first <= w1; ++it)
      for (size_t i : it->second) {
        const Edge& e = edges[i];
        if (e.waiter == p && e.on != p && e.comm != comm) p_on[e.on] += e.amount;
        if (e.on == p && e.waiter != p) on_p[e.waiter] += e.amount;
      }
    double echo = 0;
    for (auto [r, amount] : p_on) {
      auto it = on_p.find(r);
      if (it != on_p.end() && it->second >= amount) echo += amount;
    }
    return echo;
  }
  double Comm(size_t p, size_t c, int w) const {
    auto it = by_comm.find(Cell(p, c, w));
    return it == by_comm.end() ? 0 : it->second;
  }
  double Total(size_t p, int w) const {
    auto it = total.find(Cell(p, w));
    return it == total.end() ? 0 : it->second;
  }
};

void AddP2pWaits(const CommData& d, double W, WaitLedger* led) {
  // Usual time per (comm, size, direction): the median.
  std::unordered_map<uint64_t, std::vector<double>> acc;
  auto key = [](const P2p& x) {
    return (static_cast<uint64_t>(x.comm) << 40) ^ (static_cast<uint64_t>(x.bytes) * 0x9E3779B97F4A7C15ULL) ^ x.send;
  };
  for (const P2p& x : d.p2p)
    if (!x.send) acc[key(x)].push_back(x.exec);
  std::unordered_map<uint64_t, double> base;
  for (auto& [k, v] : acc) base[k] = Median(std::move(v));
  for (const P2p& x : d.p2p) {
    if (x.send) continue;
    const double b = base[key(x)];
    const double extra = x.exec - b - 20;
    if (extra <= 0) continue;
    const int w = static_cast<int>(std::max<int64_t>(0, x.ts - d.t0) / W);
    led->total[Cell(static_cast<size_t>(x.proc), w)] += extra;
    if (x.peer >= 0) led->AddEdge(static_cast<size_t>(x.proc), static_cast<size_t>(x.peer), -1, w, extra);
  }
}

// A host-side stall (JIT, garbage collection, data loading) is one process's own: ranks on
// different hosts do not stall alike at the same moment by chance. When they seem to, either one
// stalled and the others are its echo (they waited on others around then, if less than half of
// their stall, e.g. through the pipeline), or all were held by one cause the records do not show
// (an expert all-to-all through a slow NIC, where the 2.29 Inspector records no Send/Recv, made
// one rank of each data-parallel group "stall" 1.7 s at once in a 256-GPU sweep job). The one
// that waited least on others, by half, is the stall, where the others' waits are an echo's: a
// material share of their stall (a quarter, the bound on alike above). Waits of a few percent
// of it are the pipeline's usual ones over the seconds around a stall, and which rank had fewer
// of them says nothing (a 192-GPU PP 8 sweep job named the echo that waited 6 ms of its 2 s, not
// the stall that waited 70). When none stands out, naming any of them would send someone to a
// healthy host.
void DropCoincidentStalls(std::vector<Finding>* out, std::vector<Suppressed>* suppressed) {
  auto stall = [](const Finding& f) { return f.kind == Kind::kHostStall && f.detector == "comm.stall"; };
  auto value = [](const Finding& f, const char* key) {
    for (const Evidence& e : f.evidence)
      if (e.key == key) return e.value;
    return 0.0;
  };
  const size_t n = out->size();
  std::vector<size_t> group(n);  // union-find over coincident pairs
  for (size_t i = 0; i < n; ++i) group[i] = i;
  std::function<size_t(size_t)> root = [&](size_t i) { return group[i] == i ? i : group[i] = root(group[i]); };
  std::vector<bool> coincident(n, false);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const Finding &a = (*out)[i], &b = (*out)[j];
      if (!stall(a) || !stall(b) || a.hosts == b.hosts) continue;
      const bool overlap = a.start_us <= b.end_us && b.start_us <= a.end_us;
      // Alike: the same wait within the spread of one collective's arrivals (a quarter).
      const double wa = value(a, "max_wait_us"), wb = value(b, "max_wait_us");
      if (overlap && std::fabs(wa - wb) <= 0.25 * std::max(wa, wb)) {
        coincident[i] = coincident[j] = true;
        group[root(i)] = root(j);
      }
    }
  std::map<size_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < n; ++i)
    if (coincident[i]) groups[root(i)].push_back(i);
  std::vector<bool> drop(n, false);
  std::vector<std::string> why(n);
  for (auto& [g, members] : groups) {
    std::sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return value((*out)[a], "waited_on_others_us") < value((*out)[b], "waited_on_others_us");
    });
    const double least = value((*out)[members[0]], "waited_on_others_us");
    const double next = value((*out)[members[1]], "waited_on_others_us");
    const bool one_stands_out =
        least < 0.5 * next && next >= 0.25 * value((*out)[members[1]], "max_wait_us");
    for (size_t k = one_stands_out ? 1 : 0; k < members.size(); ++k) {
      drop[members[k]] = true;
      why[members[k]] = one_stands_out
                            ? "echo of rank " + std::to_string((*out)[members[0]].ranks[0]) +
                                  "'s stall: it stalled as long at the same time, but waited on others around then and that rank did not"
                            : "coincident stall: ranks on other hosts stalled as long at the same time, so a cause shared by "
                              "them (network, a transfer the records lack), not this host";
    }
  }
  std::vector<Finding> kept;
  for (size_t i = 0; i < n; ++i) {
    if (!drop[i]) {
      kept.push_back(std::move((*out)[i]));
    } else if (suppressed) {
      suppressed->push_back({std::move((*out)[i]), why[i]});
    }
  }
  *out = std::move(kept);
}

}  // namespace

std::vector<Finding> DetectSlowCompute(const CommData& d, const CommOptions& o) {
  std::vector<Finding> out;
  if (d.insts.empty()) return out;
  {
    LateOptions lo;
    lo.window_us = WindowUs(d, o);
    lo.explained_share = o.explained_share;
    lo.suppressed = o.suppressed;
    out = DetectLateArrivals(d, lo);
  }
  const auto keys = KeyBaselines(d);
  const double W = WindowUs(d, o);
  const size_t P = d.procs.size();
  struct Stall { int64_t ts; double wait; int comm; double waited = 0; };
  std::vector<std::vector<Stall>> stalls(P);
  WaitLedger led;
  for (const Inst& x : d.insts) {
    if (x.n < 2) continue;
    const int w = static_cast<int>((x.ts - d.t0) / W);
    if (x.pmin < 0) continue;
    const KeyStats& k = keys.at(KernelKey(d, x));
    const double wait = Wait(x);
    const bool stall = wait > std::max(o.stall_us, 20 * (k.noise + k.base));
    const bool is_late = wait > 4 * k.noise + 0.25 * k.base + 20;
    // A transfer that took much longer than usual (a slow link) kept every member busy: that
    // delay, too, makes them late elsewhere without being their fault.
    if (x.tmin > 1.5 * k.base + 20)
      for (int q : d.comms[x.comm].procs) led.total[Cell(static_cast<size_t>(q), w)] += x.tmin - k.base;
    if (!stall && !is_late) continue;
    // Every other member waited for the last one (n == 2: exactly; else about the median wait).
    for (int q : d.comms[x.comm].procs) {
      if (q == x.pmin) continue;
      led.by_comm[Cell(static_cast<size_t>(q), static_cast<size_t>(x.comm), w)] += wait;
      led.total[Cell(static_cast<size_t>(q), w)] += wait;
      led.AddEdge(static_cast<size_t>(q), static_cast<size_t>(x.pmin), x.comm, w, wait);
    }
    if (stall) stalls[x.pmin].push_back({x.ts, wait, x.comm});
  }
  AddP2pWaits(d, W, &led);
  // Host stalls: one or two huge waits for one rank, unless that rank was itself waiting as long
  // (a stall propagates: its peers arrive late elsewhere by about as much, and the next
  // pipeline stages receive late, against their sibling pipelines).
  const std::vector<std::vector<double>> sibling_wait = SiblingP2pWaits(d, W);
  for (size_t p = 0; p < P; ++p) {
    if (stalls[p].empty()) continue;
    std::vector<Stall> own;
    for (const Stall& s : stalls[p]) {
      const int w1 = static_cast<int>((s.ts - d.t0) / W);
      const int w0 = static_cast<int>(std::max<int64_t>(0, s.ts - d.t0 - static_cast<int64_t>(s.wait)) / W);
      double waited = 0;
      for (int w = std::max(0, w0 - 1); w <= w1 + 1; ++w) {
        waited += led.Total(p, w) - led.Comm(p, static_cast<size_t>(s.comm), w);
        if (static_cast<size_t>(w) < sibling_wait[p].size()) waited += sibling_wait[p][static_cast<size_t>(w)];
      }
      waited -= led.EchoOf(p, s.comm, std::max(0, w0 - 1), w1 + 1);
      if (waited < o.explained_share * s.wait) {
        own.push_back(s);
        own.back().waited = std::max(0.0, waited);
      } else if (o.suppressed) {
        Finding f;
        f.kind = Kind::kHostStall;
        f.detector = "comm.stall";
        f.ranks = {d.procs[p].global_rank};
        f.hosts = {d.hosts[d.procs[p].host]};
        f.comms = {d.comms[s.comm].id};
        f.start_us = std::max(d.t0, s.ts - static_cast<int64_t>(s.wait));
        f.end_us = s.ts;
        f.Add("wait_us", s.wait);
        f.summary = "Rank " + std::to_string(f.ranks[0]) + " arrived " + Fmt("%.1f", s.wait / 1e6) + " s late";
        o.suppressed->push_back({std::move(f), "propagated stall: it was itself waiting " + Fmt("%.1f", waited / 1e6) +
                                                   " s on other ranks (collectives, pipeline peers) around then"});
      }
    }
    if (own.empty()) continue;
    std::set<int> wins;
    for (const Stall& s : own) wins.insert(static_cast<int>((s.ts - d.t0) / W));
    Finding f;
    const bool repeated = Runs(std::vector<int>(wins.begin(), wins.end())).size() >= 3;
    f.kind = repeated ? Kind::kSlowCompute : Kind::kHostStall;
    f.detector = "comm.stall";
    f.ranks = {d.procs[p].global_rank};
    f.hosts = {d.hosts[d.procs[p].host]};
    std::set<int> victims, comms;
    double mx = 0, waited = 0;
    int64_t first = INT64_MAX, last = 0;
    for (const Stall& s : own) {
      comms.insert(s.comm);
      mx = std::max(mx, s.wait);
      waited = std::max(waited, s.waited);
      first = std::min(first, s.ts);
      last = std::max(last, s.ts);
      for (int q : d.comms[s.comm].procs)
        if (q != static_cast<int>(p)) victims.insert(d.procs[q].global_rank);
    }
    for (int c : comms) f.comms.push_back(d.comms[c].id);
    f.victims.assign(victims.begin(), victims.end());
    f.start_us = std::max(d.t0, first - static_cast<int64_t>(mx) - static_cast<int64_t>(W));
    f.end_us = last + static_cast<int64_t>(W);
    f.confidence = 0.8;
    f.Add("max_wait_us", mx);
    f.Add("waited_on_others_us", waited);
    f.Add("stalls", static_cast<double>(own.size()));
    f.summary = "Rank " + std::to_string(f.ranks[0]) + " on " + f.hosts[0] + " blocked for " +
                Fmt("%.1f", mx / 1e6) + " s before a collective while " +
                std::to_string(f.victims.size()) + " peers waited: " +
                (repeated ? "a severe compute straggler; check the GPU." :
                            "a host-side stall (JIT compilation, garbage collection, data loading, I/O); check that rank's Python stack at that time.");
    out.push_back(std::move(f));
  }
  DropCoincidentStalls(&out, o.suppressed);
  return out;
}

std::vector<Finding> DetectMismatch(const CommData& d) {
  std::vector<Finding> out;
  // (comm, op, sn) -> instances (different sizes split a collective into several instances)
  std::map<std::tuple<int, int, int64_t>, std::vector<const Inst*>> by;
  std::map<std::pair<int, int>, int> op_max_n;  // (comm, op) -> most ranks seen in one instance
  std::map<std::pair<int, int>, std::set<int>> op_procs;  // (comm, op) -> ranks that recorded it
  for (const Inst& x : d.insts) {
    op_procs[{x.comm, x.op}].insert(x.pmin);
    by[{x.comm, x.op, x.sn}].push_back(&x);
    int& m = op_max_n[{x.comm, x.op}];
    m = std::max(m, x.n);
  }
  std::set<std::pair<int, int>> reported;  // (comm, proc)
  auto report = [&](const Inst& odd, const std::string& why, int64_t expect_bytes) {
    if (odd.pmin < 0 || !reported.insert({odd.comm, odd.pmin}).second) return;
    const Comm& c = d.comms[odd.comm];
    Finding f;
    f.kind = Kind::kCollectiveMismatch;
    f.detector = "comm.mismatch";
    f.ranks = {d.procs[odd.pmin].global_rank};
    f.hosts = {d.hosts[d.procs[odd.pmin].host]};
    f.comms = {c.id};
    for (int p : c.procs)
      if (p != odd.pmin) f.victims.push_back(d.procs[p].global_rank);
    SortUnique(&f.victims);
    f.start_us = odd.ts;
    f.end_us = odd.ts + static_cast<int64_t>(odd.tmax) + 1;
    f.confidence = 0.9;
    f.Add("sn", static_cast<double>(odd.sn));
    f.Add("bytes", static_cast<double>(odd.bytes));
    if (expect_bytes >= 0) f.Add("peer_bytes", static_cast<double>(expect_bytes));
    f.summary = "Rank " + std::to_string(f.ranks[0]) + " issued " + why + " in communicator " +
                CommIdAndLabel(d, odd.comm) + " at sequence number " +
                std::to_string(odd.sn) + " than its " + std::to_string(f.victims.size()) +
                " peers: a code-path divergence; compare that rank's program order.";
    out.push_back(std::move(f));
  };
  // How usual each message size is for its (comm, op): the odd one out of a split is the rarer.
  std::map<std::tuple<int, int, int64_t>, int64_t> size_freq;
  for (const Inst& x : d.insts) size_freq[{x.comm, x.op, x.bytes}] += x.n;
  for (auto& [key, v] : by) {
    if (v.size() < 2) continue;
    const Inst* big = v[0];
    for (const Inst* x : v)
      if (x->n > big->n || (x->n == big->n && size_freq[{x->comm, x->op, x->bytes}] >
                                                  size_freq[{big->comm, big->op, big->bytes}]))
        big = x;
    for (const Inst* x : v)
      if (x != big && x->n <= std::max(1, big->n / 2)) report(*x, "a different message size (" + std::to_string(x->bytes) + " vs " + std::to_string(big->bytes) + " bytes)", big->bytes);
  }
  // An op that only one rank of a communicator ever issued. Only the others' records say that they
  // never issued it, and only where they recorded everything they did: Inspector numbers each
  // collective type on its own (coll_sn is NCCL's per-type counter), so no record of another type
  // sits at "the same" sequence number to compare with. The others must have recorded another op
  // of the communicator without a gap over the odd record's time: consecutive instances, each
  // recorded by all members but at most one (the odd rank's own count of it lags), from the
  // communicator's first (sn 0) or an instance no later than the odd record, through one no earlier.
  // Sampled records (the 2.29 Inspector's latest-snapshot dumps) leave gaps, and a dump pass every
  // member's records share (the job's last op, caught by every final dump) covers no earlier time.
  auto covered = [&](int comm, int odd_op, int64_t ts) {
    const size_t full = d.comms[comm].procs.size();
    std::map<int, std::map<int64_t, const Inst*>> by_op;  // op -> sn -> an instance of it
    for (const Inst& x : d.insts)
      if (x.comm == comm && x.op != odd_op && static_cast<size_t>(x.n) + 1 >= full) by_op[x.op].emplace(x.sn, &x);
    for (const auto& [op, sns] : by_op) {
      bool open = false;  // a gap-free run that began no later than ts is going on
      int64_t prev = -2;
      for (const auto& [sn, x] : sns) {
        if (sn != prev + 1) open = false;
        prev = sn;
        if (!open) open = sn == 0 || x->ts <= ts;
        if (open && x->ts >= ts) return true;
      }
    }
    return false;
  };
  for (auto& [key, v] : by) {
    const Inst& x = *v[0];
    const Comm& c = d.comms[x.comm];
    if (v.size() != 1 || x.n != 1 || c.procs.size() < 3) continue;
    if (op_max_n[{x.comm, x.op}] > 1 || op_procs[{x.comm, x.op}].size() > 1) continue;
    if (covered(x.comm, x.op, x.ts)) report(x, "a different collective (op code " + std::to_string(x.op) + ")", -1);
  }
  return out;
}

std::vector<Finding> DetectHangFromRecords(const CommData& d) {
  std::vector<Finding> out;
  if (d.insts.empty()) return out;
  // Completed instances per (comm, op); communicators of one class (name, size, op) should agree.
  std::map<std::pair<int, int>, int64_t> done;  // (comm, op) -> completed instances
  std::map<std::pair<int, int>, int64_t> last_ts;
  // Only complete records say how far a communicator got: sampled ones (the 2.29 Inspector's
  // latest-snapshot dumps) lag by whatever the last dump happened to catch.
  std::map<std::pair<int, int>, std::pair<int, int>> complete;  // (comm, op) -> (instances, complete)
  for (const Inst& x : d.insts) {
    auto& c = complete[{x.comm, x.op}];
    c.first++;
    c.second += x.n == static_cast<int>(d.comms[static_cast<size_t>(x.comm)].procs.size());
  }
  for (const Inst& x : d.insts) {
    const auto& c = complete[{x.comm, x.op}];
    if (2 * c.second <= c.first) continue;
    auto& dn = done[{x.comm, x.op}];
    dn = std::max(dn, x.sn + 1);
    auto& t = last_ts[{x.comm, x.op}];
    t = std::max(t, x.ts);
  }
  // Nor do records that skip instances: a two-member communicator's 2.29 dumps, taken together,
  // catch the same latest instance complete on both, every few instances. Such a series says
  // how far the communicator got only to within its widest skip, so a lag no longer than that
  // is the dumps', not the job's.
  std::map<std::pair<int, int>, std::set<int64_t>> seen;  // (comm, op) -> recorded instances
  for (const Inst& x : d.insts) seen[{x.comm, x.op}].insert(x.sn);
  // (comm, op) -> most instances between two records
  std::map<std::pair<int, int>, int64_t> skipped;
  for (const auto& [k, sns] : seen)
    for (auto it = sns.begin(); std::next(it) != sns.end(); ++it)
      skipped[k] = std::max(skipped[k], *std::next(it) - *it - 1);
  // Siblings do the same work: same name, size, op and message sizes (pipeline stages differ in
  // their bucket sizes and counts, so their communicators are not siblings).
  std::map<std::pair<int, int>, std::set<int64_t>> sizes;
  for (const Inst& x : d.insts) sizes[{x.comm, x.op}].insert(x.bytes);
  std::map<std::tuple<std::string, int, int, std::set<int64_t>>, std::vector<int>> classes;
  for (auto& [k, n] : done) {
    const Comm& c = d.comms[k.first];
    classes[{c.name, c.n_ranks, k.second, sizes[k]}].push_back(k.first);
  }
  // A communicator runs its collectives in order, so a hung one stops every op. One op's series
  // behind its siblings' while another op of the same communicator is level with its siblings',
  // and recorded later, is the dumps': 2.29 keeps one record per communicator per dump, and an op
  // that was never the latest at a dump shows no progress (a pipeline pair's reduce-scatters
  // stopped at 31 of 39 in a 1 s-dumped job whose all-gathers, dumped a second later, were at 39).
  std::map<std::pair<int, int>, bool> level;  // (comm, op) -> level with its siblings
  for (auto& [cls, comms] : classes) {
    if (comms.size() < 2) continue;
    const int op = std::get<2>(cls);
    int64_t mx = 0;
    for (int c : comms) mx = std::max(mx, done[{c, op}]);
    for (int c : comms) level[{c, op}] = done[{c, op}] == mx;
  }
  auto moved_on = [&](int c, int op) {
    for (auto it = level.lower_bound({c, std::numeric_limits<int>::min()});
         it != level.end() && it->first.first == c; ++it)
      if (it->first.second != op && it->second && last_ts[it->first] > last_ts[{c, op}])
        return true;
    return false;
  };
  std::set<int> behind;
  std::map<int, int64_t> deficit, stop_ts;
  for (auto& [cls, comms] : classes) {
    if (comms.size() < 2) continue;
    const int op = std::get<2>(cls);
    int64_t mx = 0;
    for (int c : comms) mx = std::max(mx, done[{c, op}]);
    std::vector<int> lag;
    size_t lagging = 0;
    for (int c : comms) {
      lagging += done[{c, op}] < mx;
      if (done[{c, op}] < mx - skipped[{c, op}] && !moved_on(c, op)) lag.push_back(c);
    }
    // A hang leaves a few communicators behind their siblings; ring-buffer drops would leave
    // many behind by varying amounts.
    if (lag.empty() || lagging * 2 > comms.size()) continue;
    for (int c : lag) {
      behind.insert(c);
      deficit[c] = std::max(deficit[c], mx - done[{c, op}]);
      stop_ts[c] = std::max(stop_ts[c], last_ts[{c, op}]);
    }
  }
  // One hang stops the whole job: a communicator that depends on the stuck one (the next
  // pipeline stage, say) falls behind its siblings too. Completion records cannot tell which of
  // them holds the member that never joined, so they make one finding.
  if (behind.empty()) return out;
  Finding f;
  f.kind = Kind::kHang;
  f.detector = "comm.progress";
  // Every member of a stopped communicator is a suspect, none a victim: one of them never joined.
  std::set<int> suspects;
  int64_t first_stop = INT64_MAX, most = 0;
  std::string names;
  for (int c : behind) {
    const Comm& cm = d.comms[c];
    f.comms.push_back(cm.id);
    for (int p : cm.procs) suspects.insert(d.procs[p].global_rank);
    first_stop = std::min(first_stop, stop_ts[c]);
    most = std::max(most, deficit[c]);
    if (names.size() < 200) names += (names.empty() ? "" : ", ") + CommIdAndLabel(d, c);
  }
  SortUnique(&f.comms);
  // No hosts either: its ranks' hosts are where the victims run, and naming them as the finding's
  // hosts would point the agent's alerts and the report at every host of the job.
  const std::vector<int> suspect_ranks(suspects.begin(), suspects.end());
  f.start_us = first_stop;
  f.end_us = d.t1;
  // Sure that the job stopped, not of who stopped it: it names no root cause, so as a
  // localization it is rarely right.
  f.confidence = 0.2;
  f.Add("collectives_behind_siblings", static_cast<double>(most));
  f.Add("communicators_behind", static_cast<double>(behind.size()));
  f.AddText("suspects", RankList(suspect_ranks, 64));
  f.summary = std::string(behind.size() == 1 ? "Communicator " : "Communicators ") + names + " of ranks " +
              RankList(suspect_ranks) + " stopped up to " + std::to_string(most) +
              " collective(s) behind their sibling communicators: a hang; completion records cannot "
              "tell which member never joined, so read the Flight Recorder dumps or collscope "
              "in-flight state files of these ranks.";
  out.push_back(std::move(f));
  return out;
}

}  // namespace collscope::diagnose
