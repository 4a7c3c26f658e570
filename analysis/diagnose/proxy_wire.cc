// slow_link from proxy wire times (proxy.wire): which end of a link is slow.
//
// NCCL's proxy thread splits each network send into the time it waited for its GPU to produce
// the data, for the receiver's credit, and on the wire (Inspector v4.4 proxy_trace steps). Only
// the wire is the link's: in a ring slowed by one NIC every member waits, but only the transfers
// that cross that NIC, sent from it or to it, are slow *on the wire*. Durations are measured on
// one host's clock, so no clock skew enters (CCL-D's rate-based signal).
//
// A send is slow when its wire rate (bytes / wire time) is under its peers' by the slow-link ratio
// (CommOptions::link_ratio), its peers being the job's sends of the same size class (rates fall
// with size where latency dominates). In each time bin the culprits are the fewest NIC ends
// (processes) that every slow send touches, each mostly slow (a process whose only slow sends
// are with a culprit is covered by it: the smallest set that explains every slow wire). A host's
// culprit processes over consecutive bins make one finding, naming the host and the ranks whose
// NICs are slow; the other ends are victims.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "analysis/diagnose/comm_data.h"

namespace collscope::diagnose {
namespace {

constexpr double kMinBytes = 64 * 1024;  // below, a send's time is latency, not the wire
constexpr double kMostlySlow = 0.75;     // share of a culprit's sends in a bin that are slow
constexpr int kMinSlowInBin = 3;

struct Send {
  const ProxySend* x;
  double ratio;  // rate / its size class's median rate
  int bin;
};

int SizeClass(double bytes) { return static_cast<int>(std::floor(std::log2(bytes) / 2)); }

struct Episode {
  int first_bin, last_bin;
  std::set<int> procs;  // culprit NIC ends on the host
};

}  // namespace

std::vector<Finding> DetectSlowWire(const CommData& d, const CommOptions& o) {
  std::vector<Finding> out;
  // Peers' rates per size class, over the whole job: one NIC among many cannot move the median.
  std::map<int, std::vector<double>> rates;
  for (const ProxySend& x : d.proxy_sends) {
    if (x.from < 0 || x.to < 0 || x.wire_us <= 0 || x.bytes < kMinBytes) continue;
    if (d.procs[static_cast<size_t>(x.from)].host == d.procs[static_cast<size_t>(x.to)].host) continue;
    rates[SizeClass(x.bytes)].push_back(x.bytes / x.wire_us);
  }
  std::map<int, double> usual;
  for (auto& [cls, v] : rates)
    if (v.size() >= 8) usual[cls] = Median(v);
  if (usual.empty()) return out;

  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (const ProxySend& x : d.proxy_sends) {
    t0 = std::min(t0, x.ts);
    t1 = std::max(t1, x.ts);
  }
  const double width = o.window_us > 0 ? o.window_us : std::max(200e3, static_cast<double>(t1 - t0) / 40);
  std::vector<Send> sends;
  for (const ProxySend& x : d.proxy_sends) {
    if (x.from < 0 || x.to < 0 || x.wire_us <= 0 || x.bytes < kMinBytes) continue;
    if (d.procs[static_cast<size_t>(x.from)].host == d.procs[static_cast<size_t>(x.to)].host) continue;
    auto u = usual.find(SizeClass(x.bytes));
    if (u == usual.end()) continue;
    sends.push_back({&x, x.bytes / x.wire_us / u->second, static_cast<int>(static_cast<double>(x.ts - t0) / width)});
  }
  const double slow_ratio = 1.0 / o.link_ratio;
  const int bins = sends.empty() ? 0 : sends.back().bin + 1;

  // Per bin: the fewest mostly-slow NIC ends that every slow send touches (greedy cover).
  std::map<int, std::vector<int>> culprit_bins;  // process -> bins it is a culprit in
  std::vector<std::vector<const Send*>> by_bin(static_cast<size_t>(std::max(bins, 0)));
  for (const Send& s : sends) by_bin[static_cast<size_t>(s.bin)].push_back(&s);
  for (int b = 0; b < bins; ++b) {
    std::map<int, int> all, slow;
    std::vector<const Send*> uncovered;
    for (const Send* s : by_bin[static_cast<size_t>(b)]) {
      for (int p : {s->x->from, s->x->to}) ++all[p];
      if (s->ratio < slow_ratio) {
        for (int p : {s->x->from, s->x->to}) ++slow[p];
        uncovered.push_back(s);
      }
    }
    while (static_cast<int>(uncovered.size()) >= kMinSlowInBin) {
      int best = -1, best_n = 0;
      std::map<int, int> touch;
      for (const Send* s : uncovered)
        for (int p : {s->x->from, s->x->to}) ++touch[p];
      for (auto [p, n] : touch) {
        if (n < kMinSlowInBin || slow[p] < kMostlySlow * all[p]) continue;
        if (n > best_n) best = p, best_n = n;
      }
      if (best < 0) break;
      culprit_bins[best].push_back(b);
      std::erase_if(uncovered, [&](const Send* s) { return s->x->from == best || s->x->to == best; });
    }
  }

  // A host's culprit ends over consecutive bins (one quiet bin allowed) make one episode.
  std::map<int, std::vector<std::pair<int, int>>> host_bins;  // host -> (bin, process)
  for (auto& [p, bs] : culprit_bins)
    for (int b : bs) host_bins[d.procs[static_cast<size_t>(p)].host].push_back({b, p});
  for (auto& [h, v] : host_bins) {
    std::sort(v.begin(), v.end());
    std::vector<Episode> episodes;
    for (auto [b, p] : v) {
      if (episodes.empty() || b > episodes.back().last_bin + 2) episodes.push_back({b, b, {}});
      episodes.back().last_bin = std::max(episodes.back().last_bin, b);
      episodes.back().procs.insert(p);
    }
    for (const Episode& e : episodes) {
      std::vector<double> mine, peers_rate, slow_rates;
      int from_culprit = 0, to_culprit = 0, slow_n = 0, n = 0;
      Finding f;
      f.kind = Kind::kSlowLink;
      f.detector = "proxy.wire";
      f.hosts = {d.hosts[static_cast<size_t>(h)]};
      std::set<int> comms;
      int64_t start = INT64_MAX, end = INT64_MIN;
      for (int b = e.first_bin; b <= e.last_bin; ++b) {
        for (const Send* s : by_bin[static_cast<size_t>(b)]) {
          const bool from = e.procs.count(s->x->from) > 0, to = e.procs.count(s->x->to) > 0;
          if (!from && !to) continue;
          ++n;
          if (s->ratio >= slow_ratio) continue;
          ++slow_n;
          from_culprit += from;
          to_culprit += to;
          mine.push_back(s->ratio);
          slow_rates.push_back(s->x->bytes / s->x->wire_us);
          comms.insert(s->x->comm);
          start = std::min(start, s->x->ts - static_cast<int64_t>(s->x->wire_us));
          end = std::max(end, s->x->ts);
          const int other = from ? s->x->to : s->x->from;
          if (!e.procs.count(other)) f.victims.push_back(d.procs[static_cast<size_t>(other)].global_rank);
        }
      }
      if (slow_n < kMinSlowInBin) continue;
      for (int p : e.procs) f.ranks.push_back(d.procs[static_cast<size_t>(p)].global_rank);
      SortUnique(&f.ranks);
      SortUnique(&f.victims);
      for (int c : comms) f.comms.push_back(d.comms[static_cast<size_t>(c)].id);
      f.start_us = start;
      f.end_us = end;
      const double share = static_cast<double>(slow_n) / n;
      const double slowdown = 1.0 / Median(mine);
      // Every slow send explained, mostly slow, over several bins: a degraded NIC, not a blip.
      f.confidence = std::min(0.95, 0.55 + 0.1 * std::log2(static_cast<double>(slow_n) / kMinSlowInBin)) *
                     std::min(1.0, share / kMostlySlow);
      const std::string dir = from_culprit && to_culprit ? "both directions"
                              : from_culprit           ? "its sends only (transmit side)"
                                                       : "sends to it only (receive side)";
      int host_procs = 0;
      for (const Proc& p : d.procs) host_procs += p.host == h;
      const bool whole_host = static_cast<int>(e.procs.size()) == host_procs;
      f.Add("slow_sends", slow_n);
      f.Add("slow_share", share);
      f.Add("wire_slowdown", slowdown);
      f.Add("wire_gbs", Median(slow_rates) / 1e3);
      f.AddText("direction", dir);
      f.AddText("nic_ends", whole_host ? "every rank of the host" : "ranks " + RankList(f.ranks));
      f.summary = "The network link of host " + f.hosts[0] +
                  (whole_host ? ""
                   : f.ranks.size() == 1 ? " (the NIC of rank " + RankList(f.ranks) + ")"
                                         : " (the NICs of ranks " + RankList(f.ranks) + ")") +
                  " is degraded: its transfers spend " + Fmt("%.1f", slowdown) +
                  "x their peers' time on the wire (proxy wire times of " + std::to_string(slow_n) +
                  " sends, " + dir + ", since " + FormatTimeUs(f.start_us) +
                  "), while the ranks around it only wait; check its NICs, cables and switch ports.";
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace collscope::diagnose
