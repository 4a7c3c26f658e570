// pipeline_bubble from point-to-point records (docs/diagnosis.md).
//
// A pipeline communicator carries Send/Recv between neighbouring stages; its communicator rank is
// the stage. For every forward link (stage s -> s+1) the receiver's Recv time minus the sender's
// Send time is what the receiver waited for the activations (the synchronisation trap again: the
// side that posted last shows the shorter time, so a transfer slowed by the network raises both
// and cancels out). Per window that wait, averaged over the window's receives and times the link's
// receives per second over the whole job, is the receiver's idle share. (Not the wait summed over
// the window's receives: records fall into windows by when they were dumped, so a window holds one,
// two or no dumps' worth of receives, and that sum swung between 0% and 19% from window to window
// on a steady link, 200 ms dumps in 200 ms windows, until a quarter of windows made any stage look
// late.) A stage whose forward links (at least `bubble_links` of them) all idle their receivers
// `bubble_idle_share` more than usual, in 2+ windows, delivers late: a bubble. One rank of the
// stage straggling delays only its own links (and shows up as a late arrival in its
// tensor-parallel group instead).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "analysis/diagnose/comm_data.h"

namespace collscope::diagnose {

namespace {

// Pipeline-like communicators: every member talks to at most two peers.
std::set<int> PipelineComms(const CommData& d) {
  std::map<int, std::map<int, std::set<int>>> peers;  // comm -> proc -> peers
  for (const P2p& x : d.p2p)
    if (x.peer >= 0) peers[x.comm][x.proc].insert(x.peer);
  std::set<int> pipe;
  for (auto& [c, m] : peers) {
    bool ok = d.comms[c].procs.size() >= 2;
    for (auto& [p, s] : m) ok = ok && s.size() <= 2;
    if (ok) pipe.insert(c);
  }
  return pipe;
}

}  // namespace

std::map<int, int> PipelineStageOfRank(const CommData& d) {
  std::map<int, int> out;
  for (int c : PipelineComms(d)) {
    const auto& v = d.comms[c].procs;
    for (size_t i = 0; i < v.size(); ++i)
      if (d.procs[v[i]].global_rank >= 0) out[d.procs[v[i]].global_rank] = static_cast<int>(i);
  }
  return out;
}

std::vector<Finding> DetectPipelineBubble(const CommData& d, const CommOptions& o) {
  std::vector<Finding> out;
  if (d.p2p.empty() || d.t1 <= d.t0) return out;
  const double W = WindowUs(d, o);
  const int nw = static_cast<int>((d.t1 - d.t0) / W) + 1;
  const std::set<int> pipe = PipelineComms(d);
  if (pipe.empty()) return out;
  auto stage_of = [&](int c, int p) {
    const auto& v = d.comms[c].procs;
    return static_cast<int>(std::find(v.begin(), v.end(), p) - v.begin());
  };
  // Forward links: (comm, sender proc, receiver proc) -> per window sums.
  struct Acc { double recv = 0, send = 0; int nr = 0, ns = 0; };
  struct Link { int comm, from, to, stage; std::vector<Acc> w; int receives = 0; };
  std::map<std::tuple<int, int, int>, Link> links;
  for (const P2p& x : d.p2p) {
    if (x.peer < 0 || !pipe.count(x.comm)) continue;
    const int me = stage_of(x.comm, x.proc), other = stage_of(x.comm, x.peer);
    const int from = x.send ? x.proc : x.peer, to = x.send ? x.peer : x.proc;
    const bool forward = x.send ? other == me + 1 : other == me - 1;
    if (!forward) continue;
    auto [it, added] = links.try_emplace({x.comm, from, to});
    Link& l = it->second;
    if (added) { l.comm = x.comm; l.from = from; l.to = to; l.stage = stage_of(x.comm, from); l.w.resize(nw); }
    const int w = std::clamp(static_cast<int>((x.ts - d.t0) / W), 0, nw - 1);
    Acc& a = l.w[w];
    if (x.send) { a.send += x.exec; a.ns++; } else { a.recv += x.exec; a.nr++; l.receives++; }
  }
  const double span_us = static_cast<double>(d.t1 - d.t0);
  // The receiver's wait less the sender's, as a share of the job's time: negative where the
  // sender waited the longer.
  auto wait_share = [&](const Link& l, const Acc& a) {
    return (a.recv / a.nr - a.send / a.ns) * l.receives / span_us;
  };
  auto idle_share = [&](const Link& l, const Acc& a) { return std::max(0.0, wait_share(l, a)); };
  // Per link and window: the receiver's idle share in excess of the link's usual one.
  std::map<int, std::vector<const Link*>> by_stage;
  // Usual wait of a link: its 25th percentile over windows (a bubble makes steps longer, so it
  // can fill most windows of a job; the better quarter still shows the usual level). Its usual idle
  // share is that, clipped at 0 (clipping keeps the order, so the quantile is the same).
  std::map<const Link*, double> wait_base;
  for (auto& [k, l] : links) {
    by_stage[l.stage].push_back(&l);
    std::vector<double> waits;
    for (const Acc& b : l.w)
      if (b.nr && b.ns) waits.push_back(wait_share(l, b));
    if (waits.empty()) {
      wait_base[&l] = 0;
      continue;
    }
    std::nth_element(waits.begin(), waits.begin() + waits.size() / 4, waits.end());
    wait_base[&l] = waits[waits.size() / 4];
  }
  auto base = [&](const Link* l) { return std::max(0.0, wait_base[l]); };
  // How much longer than usual a stage's receivers waited for their activations over windows
  // w0..w1 (the median over its incoming links of their mean excess wait): 0 for the first stage.
  auto waited_for_upstream = [&](int stage, int w0, int w1) {
    auto it = by_stage.find(stage - 1);
    if (it == by_stage.end()) return 0.0;
    std::vector<double> per_link;
    for (const Link* l : it->second) {
      double sum = 0;
      int n = 0;
      for (int w = w0; w <= w1; ++w)
        if (l->w[w].nr && l->w[w].ns) sum += wait_share(*l, l->w[w]) - wait_base[l], ++n;
      if (n) per_link.push_back(sum / n);
    }
    return per_link.empty() ? 0.0 : Median(per_link);
  };
  for (auto& [stage, ls] : by_stage) {
    std::vector<int> flagged_w;
    std::vector<double> excess_w(nw, 0);
    for (int w = 0; w < nw; ++w) {
      int with_data = 0, high = 0;
      std::vector<double> exs;
      for (const Link* l : ls) {
        const Acc& a = l->w[w];
        if (a.nr == 0 || a.ns == 0) continue;
        ++with_data;
        const double idle = idle_share(*l, a);
        exs.push_back(idle - base(l));
        if (idle - base(l) >= o.bubble_idle_share) ++high;
      }
      if (with_data == 0) continue;
      if (high >= o.bubble_links * static_cast<double>(ls.size()) && high >= o.bubble_links * with_data) {
        flagged_w.push_back(w);
        excess_w[w] = Median(exs);
      }
    }
    // Runs of windows (one missing window allowed), at least two windows.
    std::vector<std::pair<int, int>> runs;
    for (int w : flagged_w) {
      if (!runs.empty() && w <= runs.back().second + 2) runs.back().second = w;
      else runs.push_back({w, w});
    }
    for (auto [w0, w1] : runs) {
      std::vector<double> exs;
      for (int w : flagged_w)
        if (w >= w0 && w <= w1) exs.push_back(excess_w[w]);
      if (exs.size() < 2) continue;
      const double e = Median(exs);
      Finding f;
      f.kind = Kind::kPipelineBubble;
      f.detector = "comm.pipeline_bubble";
      std::set<int> ranks, victims, hosts, comms;
      for (const Link* l : ls) {
        ranks.insert(d.procs[l->from].global_rank);
        victims.insert(d.procs[l->to].global_rank);
        hosts.insert(d.procs[l->from].host);
        comms.insert(l->comm);
      }
      f.ranks.assign(ranks.begin(), ranks.end());
      f.victims.assign(victims.begin(), victims.end());
      for (int h : hosts) f.hosts.push_back(d.hosts[h]);
      for (int c : comms) f.comms.push_back(d.comms[c].id);
      SortUnique(&f.comms);
      f.start_us = d.t0 + static_cast<int64_t>(w0 * W);
      f.end_us = d.t0 + static_cast<int64_t>((w1 + 1) * W);
      f.confidence = std::min(1.0, 0.5 + 0.05 * static_cast<double>(exs.size())) * std::min(1.0, 0.5 + e);
      f.Add("stage", stage);
      f.Add("extra_idle_share", e);
      f.Add("links", static_cast<double>(ls.size()));
      f.Add("windows", static_cast<double>(exs.size()));
      char b[96];
      std::snprintf(b, sizeof b, "%.0f%%", 100 * e);
      f.summary = "Pipeline stage " + std::to_string(stage) + " (ranks " + RankList(f.ranks) +
                  ") hands its activations to stage " + std::to_string(stage + 1) +
                  " late: the next stage idles " + b + " more of the time since " +
                  FormatTimeUs(f.start_us) +
                  " (a pipeline bubble); check that stage's work between micro-batches (host-side "
                  "code, data loading) and its layer balance.";
      // A stage whose own activations arrived as much later than usual passes a delay on: the
      // pipeline upstream of it is slow (a bubble before it, or a degraded NIC two stages up
      // whose stage idled its successor too little to be flagged), not its work between
      // micro-batches. A bubble of its own makes its predecessor wait instead, which shortens
      // its receives.
      const double upstream = waited_for_upstream(stage, w0, w1);
      if (upstream >= 0.5 * e) {
        if (o.suppressed) {
          std::snprintf(b, sizeof b, "%.0f%%", 100 * upstream);
          o.suppressed->push_back(
              {f, std::string("its own activations arrived late as well: its receivers waited ") +
                      b + " of the time more over the same windows, and it passed the delay on"});
        }
        continue;
      }
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace collscope::diagnose
