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
// (greedy cover, as for slow links), a host's fast transfers clearing it. Its collapses count as
// separate outages only where they surely are (a degraded link's make one long burst, left to
// comm.slow_link); three outages or more make one finding per host, with their count and period,
// and one or two a finding that the link went down, where one host is singled out.
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
  // pair) and its place in that channel's order (sequence number, or the pair's ordinal): what
  // orders transfers that completed at once, so that the outages counted do not vary run to run.
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
  const std::vector<P2pTransfer>& pairs = CrossHostP2pTransfers(d);
  const std::vector<double> usual = UsualWireOfSiblings(d, pairs);
  const std::vector<bool> all_to_all = AllToAllComms(d);
  // An all-to-all completes as one operation: each of its pairs waits for the slowest link and
  // for the last member to arrive, so a pair's shorter side measures the group, not its wire.
  // The k-th transfer of each pair (of one size) is the k-th call; the call's wire time is the
  // shortest over its pairs (the last member's), as a collective's, where every pair recorded it.
  struct Call {
    double wire = 0, usual = 0;
    int64_t ts = 0, earliest = 0;
    int pairs = 0;
  };
  std::map<std::tuple<int, int64_t, int64_t>, Call> calls;  // (comm, bytes, k)
  for (size_t k = 0; k < pairs.size(); ++k) {
    const P2pTransfer& p = pairs[k];
    const double b = usual[k];
    if (b <= 0) continue;
    const double wire = p.Wire();
    const int64_t earliest = std::min(p.earliest, p.ts);
    if (all_to_all[static_cast<size_t>(p.comm)]) {
      auto [it, added] = calls.try_emplace({p.comm, p.bytes, p.order}, Call{wire, b, p.ts, earliest, 0});
      Call& c = it->second;
      if (wire < c.wire) c.wire = wire, c.usual = b;
      // Every pair's record brackets the same completion.
      c.ts = std::min(c.ts, p.ts);
      c.earliest = std::max(c.earliest, earliest);
      c.pairs++;
      continue;
    }
    std::vector<int> hs = {d.procs[static_cast<size_t>(p.from)].host, d.procs[static_cast<size_t>(p.to)].host};
    SortUnique(&hs);
    const uint64_t channel = (1ULL << 63) | (static_cast<uint64_t>(p.comm) << 42) |
                             (static_cast<uint64_t>(p.from) << 21) | static_cast<uint64_t>(p.to);
    out.push_back({p.ts, hs, {p.from, p.to}, wire / b, wire - b, p.bytes, earliest, channel, p.order});
  }
  std::map<int, int> whole;  // per communicator, the pairs of a call every pair recorded
  for (const auto& [key, c] : calls) whole[std::get<0>(key)] = std::max(whole[std::get<0>(key)], c.pairs);
  for (const auto& [key, c] : calls) {
    const auto [comm, bytes, k] = key;
    if (c.pairs < whole[comm]) continue;
    const Comm& cm = d.comms[static_cast<size_t>(comm)];
    const uint64_t channel = (1ULL << 62) | (static_cast<uint64_t>(comm) << 32) | static_cast<uint64_t>(bytes & 0xffffffff);
    out.push_back({std::max(c.ts, c.earliest), cm.hosts, cm.procs, c.wire / c.usual, c.wire - c.usual, bytes,
                   c.earliest, channel, k});
  }
  return out;
}

// Two collapses surely sat through different outages, the first one earlier, when the link worked
// in between (a transfer of at least 1 MiB through the host, or through every host the collapses
// cannot tell apart, at its usual speed: latency-bound messages cross a degraded link unharmed)
// and the first completed before the second can have completed, more than an outage (1.5 times
// the collapses' median excess time) earlier; with dump times a pass's completions blur together.
// The outages counted are the longest chain of that relation, over every channel through the
// host: one channel rarely sees every outage. Returns when each outage happened.
std::vector<int64_t> Outages(const std::vector<Transfer>& all, std::vector<const Transfer*> mine,
                             const std::vector<int>& hosts, const CommOptions& o) {
  std::vector<double> excess;
  for (const Transfer* t : mine) excess.push_back(t->excess_us);
  const double gap = 1.5 * Median(excess);
  std::vector<int64_t> healthy;  // when the link worked
  for (const Transfer& t : all)
    if (t.ratio < o.link_ratio && t.bytes >= (1 << 20) && std::includes(t.hosts.begin(), t.hosts.end(), hosts.begin(), hosts.end()))
      healthy.push_back(t.At());
  std::sort(healthy.begin(), healthy.end());
  // In order of completion (a channel's order breaking ties), so that whatever surely came
  // before a collapse has its chain already.
  std::sort(mine.begin(), mine.end(), [](const Transfer* a, const Transfer* b) {
    return std::tie(a->ts, a->channel, a->order) < std::tie(b->ts, b->channel, b->order);
  });
  const size_t n = mine.size();
  std::vector<int> chain(n, 1), parent(n, -1);
  // best[i]: the longest chain among mine[0..i] and where it ends (prefix maxima in completion
  // order).
  std::vector<std::pair<int, int>> best(n);
  for (size_t i = 0; i < n; ++i) {
    const Transfer& b = *mine[i];
    // A collapse that completed before min(b's earliest completion, an outage before
    // b, the last time the link worked before b).
    auto worked = std::lower_bound(healthy.begin(), healthy.end(), b.At());
    if (worked != healthy.begin()) {
      const int64_t before = std::min({b.earliest > 0 ? b.earliest : b.ts,
                                       b.At() - static_cast<int64_t>(gap), *std::prev(worked)});
      // Completion times are sorted: the collapses that completed before `before` are a prefix.
      const auto end = std::partition_point(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(i),
                                            [&](const Transfer* a) { return a->ts < before; });
      if (end != mine.begin()) {
        const auto [len, at] = best[static_cast<size_t>(end - mine.begin()) - 1];
        if (len + 1 > chain[i]) { chain[i] = len + 1; parent[i] = at; }
      }
    }
    best[i] = i > 0 && best[i - 1].first >= chain[i] ? best[i - 1] : std::make_pair(chain[i], static_cast<int>(i));
  }
  std::vector<int64_t> when;
  if (n == 0) return when;
  for (int at = best[n - 1].second; at >= 0; at = parent[static_cast<size_t>(at)]) when.push_back(mine[static_cast<size_t>(at)]->At());
  std::reverse(when.begin(), when.end());
  return when;
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
    // Other hosts that as many of these collapses cross (the two ends of the only pairs that
    // collapsed, an all-to-all's group): the data cannot tell whose link flapped. They are
    // suspects of a slow_network symptom, and the collapses left are nobody's.
    std::vector<int> tied;
    for (const auto& [x, n] : cover)
      if (n == best->second) tied.push_back(x);
    std::vector<const Transfer*> mine;
    std::vector<const Transfer*> rest;
    for (const Transfer* t : left)
      (std::binary_search(t->hosts.begin(), t->hosts.end(), h) ? mine : rest).push_back(t);
    left = tied.size() > 1 ? std::vector<const Transfer*>{} : std::move(rest);
    const double share = static_cast<double>(collapsed[static_cast<size_t>(h)]) / std::max(1, total[static_cast<size_t>(h)]);
    std::vector<double> ratios;
    for (const Transfer* t : mine) ratios.push_back(t->ratio);
    const double ratio = Median(ratios);
    // An outage stalls a transfer for its whole length, tens of milliseconds against a transfer's
    // few: its collapses stand far above the collapse bar. A link degraded to about a quarter of
    // its bandwidth puts the tail of its transfers just over it, interleaved with transfers just
    // under it; those are no outages.
    if (ratio < 2 * kCollapse) continue;
    const std::vector<int64_t> burst_start = Outages(all, mine, tied, o);
    if (burst_start.empty()) continue;
    // One or two outages are no flapping yet, but each is a link that went down: the same
    // collapses of transfers through one host, tens of milliseconds each.
    const bool flaps = burst_start.size() >= 3;
    std::vector<double> gaps;
    for (size_t i = 1; i < burst_start.size(); ++i) gaps.push_back(static_cast<double>(burst_start[i] - burst_start[i - 1]));
    const double period = gaps.empty() ? 0 : Median(gaps);
    Finding f;
    const bool ambiguous = tied.size() > 1;
    f.kind = ambiguous ? Kind::kSlowNetwork : Kind::kSlowLink;
    f.detector = "comm.link_flap";
    for (int x : tied) f.hosts.push_back(d.hosts[static_cast<size_t>(x)]);
    for (const Transfer* t : mine)
      for (int p : t->procs) {
        const int r = d.procs[static_cast<size_t>(p)].global_rank;
        (!ambiguous && d.procs[static_cast<size_t>(p)].host == h ? f.ranks : f.victims).push_back(r);
      }
    SortUnique(&f.ranks);
    SortUnique(&f.victims);
    f.start_us = burst_start.front();
    f.end_us = (*std::max_element(mine.begin(), mine.end(), [](const Transfer* a, const Transfer* b) { return a->ts < b->ts; }))->ts;
    // Where the data cannot tell the hosts apart, about one in their number is the culprit.
    f.confidence = std::min(0.95, 0.5 + 0.05 * static_cast<double>(burst_start.size())) / static_cast<double>(tied.size());
    f.Add("bursts", static_cast<double>(burst_start.size()));
    if (flaps) f.Add("period_s", period / 1e6);
    f.Add("collapsed_transfers", static_cast<double>(mine.size()));
    f.Add("collapsed_share", share);
    f.Add("median_slowdown", ratio);
    std::string all_hosts;
    for (const std::string& x : f.hosts) all_hosts += (all_hosts.empty() ? "" : ", ") + x;
    f.summary = (ambiguous ? "The network among " + std::to_string(f.hosts.size()) + " hosts (" + all_hosts + ")"
                           : "The network link of host " + f.hosts[0]) +
                (flaps ? " flaps: " + std::to_string(burst_start.size()) + " bursts about every " + Fmt("%.2f", period / 1e6) +
                             " s since " + FormatTimeUs(f.start_us)
                       : std::string(" went down ") + (burst_start.size() == 1 ? "once, at " : "twice, first at ") +
                             FormatTimeUs(f.start_us)) +
                ", in which " + std::to_string(mine.size()) +
                " transfers through " + (ambiguous ? "them" : "it") + " took a median " + Fmt("%.0f", ratio) +
                "x their usual time" +
                (ambiguous ? "; every collapsed transfer crosses all of these hosts, so the data cannot tell whose NIC or "
                             "link it is, and none is named as the cause; check their NICs, cables and switch ports for "
                             "link down/up events."
                           : "; check its NIC, cable and switch port for link down/up events.");
    // Named only where one host is singled out: an outage or two that the data cannot place is
    // too little to report, even as a symptom.
    if (!flaps && ambiguous) {
      if (o.suppressed)
        o.suppressed->push_back({std::move(f), "one or two outages whose collapsed transfers cross all of these hosts "
                                               "alike: too little to report, even as a symptom"});
      continue;
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace collscope::diagnose
