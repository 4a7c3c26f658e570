// slow_link from link flaps (comm.link_flap): a link that goes down for tens of milliseconds
// now and then stalls whatever crosses it at that moment, and the transfer completes after the
// retry. The windowed slow-link detector does not see it (a few transfers per period leave
// every window's median as it was); single transfers do.
//
// A transfer *collapsed* when its wire time is at least 4x its peers' usual: for a collective,
// its shortest member time (the member that arrived last waited for nobody) against the lower
// quartile of the medians of the communicators running its kernel key; for a point-to-point
// transfer, the shorter of its Send and its Recv (the side that posted last), against its
// sibling pairs' median. The culprit hosts are the fewest that every collapsed transfer crosses
// (greedy cover, as for slow links), a host's fast transfers clearing it. Its collapses cluster
// in time into bursts (a degraded link's make one long burst, left to comm.slow_link); three
// bursts or more make one finding per host, with their count and period.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "analysis/diagnose/comm_data.h"

namespace collscope::diagnose {
namespace {

constexpr double kCollapse = 4;  // wire time / usual: under a quarter of the bandwidth

struct Transfer {
  // When it completed: in [earliest, ts] (one instant when start times are known; between the
  // dump passes of its processes when only dump times are).
  int64_t ts = 0;
  std::vector<int> hosts;  // sorted, distinct, at least two
  std::vector<int> procs;
  double ratio = 0;
  double excess_us = 0;    // wire time beyond the usual: about the outage it sat through
  int64_t bytes = 0;
  int64_t earliest = 0;
  // The channel it crossed (a communicator's operation, or one direction of a point-to-point
  // pair) and its place in that channel's order (sequence number, or the pair's ordinal).
  uint64_t channel = 0;
  int64_t order = 0;
  int64_t At() const { return earliest > 0 ? earliest + (ts - earliest) / 2 : ts; }
};

// Every member recorded it: its shortest time is the transfer's (a member missing may be the one
// that waited for nobody).
bool AllMembers(const CommData& d, const Inst& x) {
  return x.n >= 2 && x.n == static_cast<int>(d.comms[static_cast<size_t>(x.comm)].procs.size());
}

// Every cross-host transfer whose wire time is known, with its ratio to its peers' usual.
std::vector<Transfer> CrossHostTransfers(const CommData& d) {
  std::vector<Transfer> out;
  std::unordered_map<uint64_t, std::map<int, std::vector<double>>> by;
  for (const Inst& x : d.insts)
    if (AllMembers(d, x)) by[KernelKey(d, x)][x.comm].push_back(x.tmin);
  std::unordered_map<uint64_t, double> base;
  for (auto& [k, comms] : by) {
    std::vector<double> med;
    for (auto& [c, v] : comms) med.push_back(Median(std::move(v)));
    std::sort(med.begin(), med.end());
    base[k] = med[(med.size() - 1) / 4];
  }
  for (const Inst& x : d.insts) {
    const Comm& c = d.comms[static_cast<size_t>(x.comm)];
    if (c.hosts.size() < 2 || !AllMembers(d, x)) continue;
    const double b = base[KernelKey(d, x)];
    if (b <= 0) continue;
    out.push_back({x.ts, c.hosts, c.procs, x.tmin / b, x.tmin - b, x.bytes, x.earliest_ts,
                   (static_cast<uint64_t>(x.comm) << 8) | static_cast<uint64_t>(x.op), x.sn});
  }
  const std::vector<P2pTransfer> pairs = CrossHostP2pTransfers(d);
  const std::vector<double> usual = UsualWireOfSiblings(d, pairs);
  for (size_t k = 0; k < pairs.size(); ++k) {
    const P2pTransfer& p = pairs[k];
    const double b = usual[k];
    if (b <= 0) continue;
    const int from = p.from, to = p.to;
    std::vector<int> hs = {d.procs[static_cast<size_t>(from)].host, d.procs[static_cast<size_t>(to)].host};
    SortUnique(&hs);
    const double wire = p.Wire();
    const uint64_t channel = (1ULL << 63) | (static_cast<uint64_t>(p.comm) << 42) |
                             (static_cast<uint64_t>(from) << 21) | static_cast<uint64_t>(to);
    out.push_back({p.ts, hs, {from, to}, wire / b, wire - b, p.bytes, std::min(p.earliest, p.ts), channel,
                   p.order});
  }
  return out;
}

}  // namespace

std::vector<Finding> DetectLinkFlaps(const CommData& d, const CommOptions& o) {
  std::vector<Finding> out;
  const std::vector<Transfer> all = CrossHostTransfers(d);
  std::vector<int> total(d.hosts.size(), 0), collapsed(d.hosts.size(), 0);
  std::vector<const Transfer*> bad;
  for (const Transfer& t : all) {
    for (int h : t.hosts) total[static_cast<size_t>(h)]++;
    if (t.ratio < kCollapse) continue;
    bad.push_back(&t);
    for (int h : t.hosts) collapsed[static_cast<size_t>(h)]++;
  }
  if (bad.empty()) return out;
  // Greedy cover: the host that the most remaining collapses cross, while it explains nearly all
  // of them (o.host_cover of the rest) and its own transfers collapse only now and then.
  std::vector<const Transfer*> left = bad;
  while (!left.empty()) {
    std::map<int, int> cover;
    for (const Transfer* t : left)
      for (int h : t->hosts) cover[h]++;
    auto best = std::max_element(cover.begin(), cover.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    const int h = best->first;
    if (best->second < o.host_cover * static_cast<double>(left.size())) break;
    std::vector<const Transfer*> mine;
    std::vector<const Transfer*> rest;
    for (const Transfer* t : left)
      (std::binary_search(t->hosts.begin(), t->hosts.end(), h) ? mine : rest).push_back(t);
    left = std::move(rest);
    const double share = static_cast<double>(collapsed[static_cast<size_t>(h)]) / std::max(1, total[static_cast<size_t>(h)]);
    // Collapses less than an outage apart (their median excess time), or that may have completed
    // at the same time (with dump times, their completion intervals overlap), sat through the
    // same outage: one burst.
    std::sort(mine.begin(), mine.end(), [](const Transfer* a, const Transfer* b) { return a->At() < b->At(); });
    std::vector<double> excess;
    for (const Transfer* t : mine) excess.push_back(t->excess_us);
    // A new burst also needs the link to have worked in between: a transfer of at least 1 MiB
    // through the host at its usual speed (under the slow-link ratio) since the last collapse
    // (a degraded link's collapses, however sparsely sampled, are one burst; latency-bound
    // messages cross it unharmed).
    const double gap = 1.5 * Median(excess);
    std::vector<int64_t> healthy;
    for (const Transfer& t : all)
      if (t.ratio < o.link_ratio && t.bytes >= (1 << 20) && std::binary_search(t.hosts.begin(), t.hosts.end(), h))
        healthy.push_back(t.At());
    std::sort(healthy.begin(), healthy.end());
    std::vector<int64_t> burst_start;
    const Transfer* last = nullptr;
    for (const Transfer* t : mine) {
      const bool apart = last == nullptr || (static_cast<double>(t->At() - last->At()) > gap && t->earliest > last->ts);
      const bool worked = last == nullptr || std::upper_bound(healthy.begin(), healthy.end(), last->At()) !=
                                                 std::lower_bound(healthy.begin(), healthy.end(), t->At());
      if (apart && worked) burst_start.push_back(t->At());
      last = t;
    }
    // With dump times the completions of one pass blur together, but each channel's order does
    // not: on one channel, collapses with a transfer at its usual speed between them sat through
    // different outages. The channel that saw most such runs counts them.
    {
      std::map<uint64_t, std::vector<const Transfer*>> by_channel;
      for (const Transfer& t : all)
        if (t.bytes >= (1 << 20) && std::binary_search(t.hosts.begin(), t.hosts.end(), h)) by_channel[t.channel].push_back(&t);
      size_t most = 0;
      int64_t first = 0;
      for (auto& [ch, v] : by_channel) {
        std::sort(v.begin(), v.end(), [](const Transfer* a, const Transfer* b) { return a->order < b->order; });
        size_t runs = 0;
        bool in_run = false, worked = true;
        int64_t start = 0;
        for (const Transfer* t : v) {
          if (t->ratio >= kCollapse) {
            if (!in_run && worked) { if (runs++ == 0) start = t->At(); }
            in_run = true;
            worked = false;
          } else {
            in_run = false;
            worked |= t->ratio < o.link_ratio;
          }
        }
        if (runs > most) { most = runs; first = start; }
      }
      if (most > burst_start.size()) {
        // The count, from the channel's order; the times, from its first collapse on.
        const int64_t span = mine.back()->At() - first;
        burst_start.assign(most, first);
        for (size_t i = 0; i < most; ++i) burst_start[i] = first + static_cast<int64_t>(span * static_cast<double>(i) / std::max<size_t>(1, most - 1));
      }
    }
    if (burst_start.size() < 3) continue;
    std::vector<double> gaps, ratios;
    for (size_t i = 1; i < burst_start.size(); ++i) gaps.push_back(static_cast<double>(burst_start[i] - burst_start[i - 1]));
    for (const Transfer* t : mine) ratios.push_back(t->ratio);
    const double period = Median(gaps), ratio = Median(ratios);
    Finding f;
    f.kind = Kind::kSlowLink;
    f.detector = "comm.link_flap";
    f.hosts = {d.hosts[static_cast<size_t>(h)]};
    std::set<int> victims;
    for (const Transfer* t : mine)
      for (int p : t->procs) {
        const int r = d.procs[static_cast<size_t>(p)].global_rank;
        (d.procs[static_cast<size_t>(p)].host == h ? f.ranks : f.victims).push_back(r);
      }
    SortUnique(&f.ranks);
    SortUnique(&f.victims);
    f.start_us = burst_start.front();
    f.end_us = mine.back()->ts;
    f.confidence = std::min(0.95, 0.5 + 0.05 * static_cast<double>(burst_start.size()));
    f.Add("bursts", static_cast<double>(burst_start.size()));
    f.Add("period_s", period / 1e6);
    f.Add("collapsed_transfers", static_cast<double>(mine.size()));
    f.Add("collapsed_share", share);
    f.Add("median_slowdown", ratio);
    f.summary = "The network link of host " + f.hosts[0] + " flaps: " + std::to_string(burst_start.size()) +
                " bursts about every " + Fmt("%.2f", period / 1e6) + " s since " + FormatTimeUs(f.start_us) +
                ", in which " + std::to_string(mine.size()) + " transfers through it took a median " +
                Fmt("%.0f", ratio) + "x their usual time; check its NIC, cable and switch port for link "
                "down/up events.";
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace collscope::diagnose
