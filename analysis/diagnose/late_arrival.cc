// slow_compute from who waits for whom (comm.late_arrival): peers, not history, are the baseline.
//
// Every member of a collective finishes together, so the member that arrived last shows the
// shortest time (Inst::pmin) and the others waited for it. Under no fault, which member arrives
// last is chance: 1/n for n members. A rank that is last far more often than chance, over a run
// of windows, is late in that communicator; a fault that lasts the whole job is then as visible
// as a short one, since nothing is compared with the job's own past.
//
// Lateness propagates: a straggler's tensor-parallel partner waits for it there and then arrives
// late in its own data-parallel group; the next pipeline stage receives its activations late. A
// late rank is therefore a root cause only when it waited on nobody over the same windows:
//   - in a collective of another communicator where another member was significantly late, or
//   - in point-to-point sends and receives, longer than the same transfers of its sibling
//     pipelines, or
//   - in collectives of another communicator whose transfers took longer than usual (a slow
//     link, not a slow rank), by more than they held its peers,
// by at least half of what it made its own peers wait. Root ranks of one host whose windows
// overlap make one finding (a slowed host), a root alone a rank finding.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/late_arrival.h"

namespace collscope::diagnose {
namespace {

double WaitOf(const Inst& x) { return (x.n == 2 ? x.tmax : x.tmed) - x.tmin; }

uint64_t Key(size_t a, size_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b); }

}  // namespace

namespace {

// The job's windows of W: how many, and which one a timestamp falls in (clamped to the job).
struct Windows {
  Windows(const CommData& d, double W)
      : t0(d.t0), W(W), n(static_cast<int>((d.t1 - d.t0) / W) + 1) {}
  int operator()(int64_t ts) const { return std::clamp(static_cast<int>((ts - t0) / W), 0, n - 1); }
  int64_t t0;
  double W;
  int n;
};

// Per kernel key, the wait below which an instance says nothing of who arrived last: most
// instances end with every member within noise of each other, and which of them was last is then
// chance. The noise is how far apart the members that waited arrived (the longest time against
// the median, which the last member does not move), not the wait itself: when one slow host is in
// every instance of a key (a whole-job fault; a stage's own message size) the usual wait is its.
// Two members have no such spread; their wait stands for it.
std::unordered_map<uint64_t, double> MaterialWaits(const CommData& d, const LateOptions& o) {
  std::unordered_map<uint64_t, std::vector<double>> acc;
  for (const Inst& x : d.insts)
    if (Complete(d, x)) acc[KernelKey(d, x)].push_back(std::max(0.0, x.n == 2 ? WaitOf(x) : x.tmax - x.tmed));
  std::unordered_map<uint64_t, double> material;
  for (auto& [k, v] : acc) material[k] = std::max(o.min_wait_us, 3 * Median(std::move(v)));
  return material;
}

// `chance`: the sum over the counted instances of each one's chance of showing the rank last;
// `sampled`: how many of them are sampled records (below).
struct Cell { int total = 0, last = 0, sampled = 0; double chance = 0, wait = 0; };

// The number of ways to choose k of n.
double Choose(int n, int k) {
  return std::round(
      std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0)));
}

// log P(X >= k) for X ~ Binomial(n, p): the exact tail, since the normal approximation is far too
// generous for a handful of instances at a small chance (6 of 8 at 1/8 reads z = 5.3, p = 8e-5).
double LogBinomialTail(int n, int k, double p) {
  if (k <= 0) return 0;
  if (k > n) return -INFINITY;
  const double lp = std::log(p), lq = std::log1p(-p);
  std::vector<double> terms;
  double m = -INFINITY;
  for (int i = k; i <= n; ++i) {
    terms.push_back(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) + i * lp + (n - i) * lq);
    m = std::max(m, terms.back());
  }
  double acc = 0;
  for (double t : terms) acc += std::exp(t - m);
  return m + std::log(acc);
}
using Cells = std::unordered_map<uint64_t, std::vector<Cell>>;  // (proc, comm) -> per window

// Per window, a communicator's trials and the sum of their chances of showing a given member last.
struct Trials {
  std::vector<int> total;
  std::vector<double> chance;
  void Add(int w, int nw, double p) {
    if (total.empty())
      total.assign(static_cast<size_t>(nw), 0), chance.assign(static_cast<size_t>(nw), 0);
    total[static_cast<size_t>(w)]++;
    chance[static_cast<size_t>(w)] += p;
  }
};

// Every member's cells count its communicator's trials (`of`: the comm's, or null for none, whose
// cells are dropped).
template <typename TrialsOf>
void CountTrials(Cells* cells, TrialsOf of) {
  for (auto it = cells->begin(); it != cells->end();) {
    const Trials* t = of(static_cast<int>(it->first & 0xFFFFFFFF));
    if (!t || t->total.empty()) {
      it = cells->erase(it);
      continue;
    }
    for (size_t w = 0; w < it->second.size(); ++w) {
      it->second[w].total += t->total[w];
      it->second[w].chance += t->chance[w];
    }
    ++it;
  }
}

// The best-scoring run of windows where `cells` shows the rank last clearly more often than
// chance (maximum-sum segment of last - theta * total), tested against chance, for every member
// of every communicator and every run of windows it could have been picked from. Instances may
// differ in their chance; the binomial at their mean chance bounds the tail of their sum from
// above (Hoeffding 1956), so the test stays conservative. Sampled records are tested twice (below),
// so their tail must be half as small; `sampled_only`: the second test, of those cells alone.
// `tests`: every member of every communicator (and every host of several members, below) could
// have been last that often by luck: the tail must be small against their number (Bonferroni),
// not just against one test. An event's `proc` is the key's first half: a host for host cells.
// `distinct_runs`: charge the run search only for runs between windows with trials (below).
void Scan(const Cells& cells, size_t tests, double W, const LateOptions& o, bool sampled_only,
          bool distinct_runs, std::vector<LateEvent>* events) {
  const double log_alpha = std::log(o.alpha / static_cast<double>(std::max<size_t>(1, tests)));
  for (const auto& [key, v] : cells) {
    const int p = static_cast<int>(key >> 32), c = static_cast<int>(key & 0xFFFFFFFF);
    double best = 0, run = 0;
    int a = 0, best_a = -1, best_b = -1;
    for (int w = 0; w < static_cast<int>(v.size()); ++w) {
      const Cell& x = v[static_cast<size_t>(w)];
      const double theta_total = x.chance + (x.total - x.chance) / 3;
      const double s = x.last - theta_total;
      if (run <= 0) { run = 0; a = w; }
      run += s;
      if (run > best) { best = run; best_a = a; best_b = w; }
    }
    if (best_a < 0) continue;
    int sampled_cells = 0;
    for (const Cell& x : v) sampled_cells += x.sampled;
    if (sampled_only && sampled_cells == 0) continue;
    LateEvent e;
    e.proc = p;
    e.comm = c;
    e.w0 = best_a;
    e.w1 = best_b;
    double chance_sum = 0;
    int sampled = 0;
    for (int w = best_a; w <= best_b; ++w) {
      e.instances += v[static_cast<size_t>(w)].total;
      e.last += v[static_cast<size_t>(w)].last;
      e.wait_us += v[static_cast<size_t>(w)].wait;
      e.last_by_w.push_back(v[static_cast<size_t>(w)].last);
      e.wait_by_w.push_back(v[static_cast<size_t>(w)].wait);
      e.instances_by_w.push_back(v[static_cast<size_t>(w)].total);
      e.chance_by_w.push_back(v[static_cast<size_t>(w)].chance);
      chance_sum += v[static_cast<size_t>(w)].chance;
      sampled += v[static_cast<size_t>(w)].sampled;
    }
    e.sampled = sampled;
    // Consecutive complete instances are not independent trials (one transient makes several
    // late arrivals in a row): a handful of them is no evidence. Sampled records come one per
    // dump pass, an interval apart, and the test below alone decides on them.
    if (sampled == 0 && e.instances < o.min_instances) continue;
    const double chance = chance_sum / e.instances;
    // How far from chance (binomial z-score), and what it cost: the share of its peers' time
    // spent waiting for it over the run.
    const double n = e.instances;
    e.z = (e.last - n * chance) / std::sqrt(n * chance * (1 - chance));
    e.wait_share = e.wait_us / (static_cast<double>(e.w1 - e.w0 + 1) * W);
    e.log_p = LogBinomialTail(e.instances, e.last, chance);
    // The run was picked as the best of every run of windows: its tail is charged for that search
    // (Bonferroni over the runs) as well. Unpicked, one transient (a CPU hiccup, a queue draining
    // after a slow link) makes a handful of consecutive late arrivals that look impossible as
    // independent trials (7 of 8 in a healthy 128-GPU job from another generator).
    // `distinct_runs`: runs that differ only in windows without trials test the same trials, so
    // only runs between windows with trials count (a sampled log's member has records in few).
    // Only communicators whose records wait are tested so (FindLateEvents): in every one, it let
    // a healthy GPU's speed spread through where that costs its partner about 1% of its time,
    // which the peer-time floor passes (a 32-GPU job's tensor-parallel pair on 200 ms dumps, 6 of
    // 6 records 30 us shorter).
    double windows = static_cast<double>(v.size());
    if (distinct_runs) {
      windows = 0;
      for (const Cell& x : v) windows += x.total > 0;
    }
    const double runs = 0.5 * windows * (windows + 1);
    e.log_runs = std::log(runs);
    e.log_bar = log_alpha - (sampled_cells ? std::log(2.0) : 0);
    if (e.z < o.min_z || e.log_p + e.log_runs > e.log_bar) continue;
    events->push_back(e);
  }
}

// A complete instance's last member, in its window, and what the others waited for it.
struct Late {
  int comm, w, proc;
  double wait;
  bool host_late;  // all the last member's host's members arrived after every other member
};

// How many collectives one sampled record stands for: the median step of its sequence number
// between two records of one process (what its peers waited is scaled by it).
std::map<std::pair<int, int>, double> RecordsRepresented(const CommData& d) {
  std::map<std::pair<int, int>, double> represents;  // (comm, op)
  std::map<std::tuple<int, int, int>, std::vector<int64_t>> sns;
  for (const Inst& x : d.insts)
    if (!Complete(d, x) && x.pmin >= 0) sns[{x.comm, x.op, x.pmin}].push_back(x.sn);
  std::map<std::pair<int, int>, std::vector<double>> steps;
  for (auto& [k, v] : sns) {
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] > v[i - 1]) steps[{std::get<0>(k), std::get<1>(k)}].push_back(static_cast<double>(v[i] - v[i - 1]));
  }
  for (auto& [k, v] : steps) represents[k] = std::max(1.0, Median(std::move(v)));
  return represents;
}

// The members of each late host (`host_events`) that share its late arrivals, as events of their
// own (LateEvent::host_test), added to `events`. The events from `late_host_tests` on are late as
// a whole host (Late::host_late), and count only such late arrivals.
void AddLateHostsMembers(const CommData& d, const std::vector<LateEvent>& host_events,
                         size_t late_host_tests, const std::vector<Late>& complete_lasts,
                         const std::vector<std::map<int, int>>& host_members, double log_alpha,
                         std::vector<LateEvent>* events_out) {
  std::vector<LateEvent>& events = *events_out;
  for (const LateEvent& he : host_events) {
    const int h = he.proc, c = he.comm;
    const bool host_late = static_cast<size_t>(&he - host_events.data()) >= late_host_tests;
    std::map<int, int> host_lasts;        // host -> last arrivals over the run
    std::map<int, std::pair<int, double>> own;  // the host's members -> (last arrivals, wait)
    std::map<int, std::pair<std::vector<int>, std::vector<double>>> own_by_w;  // ... per window of the run
    for (const Late& l : complete_lasts) {
      if (l.comm != c || l.w < he.w0 || l.w > he.w1 || (host_late && !l.host_late)) continue;
      const int lh = d.procs[static_cast<size_t>(l.proc)].host;
      host_lasts[lh]++;
      if (lh == h) {
        own[l.proc].first++;
        own[l.proc].second += l.wait;
        auto& [lasts, waits] = own_by_w[l.proc];
        if (lasts.empty()) {
          lasts.assign(static_cast<size_t>(he.w1 - he.w0 + 1), 0);
          waits.assign(static_cast<size_t>(he.w1 - he.w0 + 1), 0);
        }
        lasts[static_cast<size_t>(l.w - he.w0)]++;
        waits[static_cast<size_t>(l.w - he.w0)] += l.wait;
      }
    }
    // A host that is one of a late group (a pipeline's first stage in a communicator of every
    // stage) shares its late arrivals with the group's other hosts: a slowed host is last
    // clearly more often than each other host, against their numbers of members, as unlikely by
    // chance as its own test must be (a first-stage host last at 28 of the 40 collectives its
    // stage ended last is chance 0.008 against its partner host).
    const auto& hm = host_members[static_cast<size_t>(c)];
    bool alone = true;  // (a host late as a whole is late alone)
    for (const auto& [h2, n2] : host_lasts) {
      if (h2 == h) continue;
      const double p = static_cast<double>(hm.at(h)) / (hm.at(h) + hm.at(h2));
      alone = alone && LogBinomialTail(host_lasts[h] + n2, host_lasts[h], p) <= log_alpha;
    }
    if (!alone) continue;
    // The host's late members: those last at least half as often as their equal share of it
    // (a lone straggler among its host's members is the host's event alone); of a host late as a
    // whole, every member is late, and which of them arrived last is chance.
    for (const auto& [p, lw] : own) {
      if (!host_late && 2.0 * hm.at(h) * lw.first < he.last) continue;
      LateEvent e = he;
      e.proc = p;
      e.last = lw.first;
      e.wait_us = lw.second;  // what it made its peers wait; what it costs is the host's (he)
      e.last_by_w = own_by_w[p].first;
      e.wait_by_w = own_by_w[p].second;
      e.instances_by_w.clear();
      e.chance_by_w.clear();
      e.host_test = static_cast<int>(&he - host_events.data());
      e.host_as_whole = host_late;
      events.push_back(e);
    }
  }
}

}  // namespace

int LateEvent::LastIn(int a, int b) const {
  int s = 0;
  for (int w = std::max(a, w0); w <= std::min(b, w1); ++w) s += last_by_w[static_cast<size_t>(w - w0)];
  return s;
}

double LateEvent::WaitIn(int a, int b) const {
  double s = 0;
  for (int w = std::max(a, w0); w <= std::min(b, w1); ++w) s += wait_by_w[static_cast<size_t>(w - w0)];
  return s;
}

namespace {

// A record a dump sampled (a member alone, or some of them), by (communicator, op, size).
struct SampledRecord {
  int64_t ts;
  int proc;
  double exec;
};
using SampledRecords = std::map<std::tuple<int, int, int64_t>, std::vector<SampledRecord>>;

// Each record against the k records nearest in time of the other members: shorter than all of
// them means it arrived later than they usually did, which one of k + 1 exchangeable records is
// by chance 1 / (k + 1). Not within noise of their median as well is rarer by chance still. k is
// at least kMinNeighbours even in small communicators: with its one partner's nearest record
// only, a tensor-parallel pair's straggler would be last by chance 1/2 in every record, and the
// few records a sampled dump leaves could never tell it from chance: at k = 16, a rank last in
// each of five dumps passes the test (5 ln 17 = 14 against the about 10 of the memberships' and
// 3 of the windows' correction); at 8 it takes seven.
// `material`, where given: per key of `sampled`, how far short of its neighbours' median a record
// must be (else o.min_wait_us).
template <typename WindowOf, typename CellOf>
void CountSampledRecords(
    const CommData& d, const LateOptions& o,
    const std::map<std::pair<int, int>, double>& represents, WindowOf win, CellOf cell,
    SampledRecords* sampled, Cells cells[2],
    const std::map<std::tuple<int, int, int64_t>, double>* material = nullptr) {
  constexpr size_t kMinNeighbours = 16;
  // The second trial's cells, only where there are sampled records, start from the complete
  // instances that the first's hold so far.
  for (const auto& [key, recs] : *sampled)
    for (const SampledRecord& r : recs) {
      const uint64_t k = Key(static_cast<size_t>(r.proc), static_cast<size_t>(std::get<0>(key)));
      auto it = cells[0].find(k);
      if (it != cells[0].end()) cells[1].try_emplace(k, it->second);
    }
  for (auto& [key, recs] : *sampled) {
    const int c = std::get<0>(key);
    const size_t k = std::max(d.comms[static_cast<size_t>(c)].procs.size(), kMinNeighbours + 1) - 1;
    const double short_by = material ? material->at(key) : o.min_wait_us;
    std::sort(recs.begin(), recs.end(), [](const SampledRecord& x, const SampledRecord& y) { return x.ts < y.ts; });
    std::vector<double> near;
    for (size_t i = 0; i < recs.size(); ++i) {
      near.clear();
      size_t lo = i, hi = i + 1;  // the next candidates are recs[lo - 1] and recs[hi]
      // A bounded look around: where the others' records are missing (a member's lost log),
      // scanning on through the process's own records would cost the square of their number.
      for (size_t looked = 0; near.size() < k && (lo > 0 || hi < recs.size()) && looked < 8 * (k + 1); ++looked) {
        const bool take_lo = hi >= recs.size() || (lo > 0 && recs[i].ts - recs[lo - 1].ts <= recs[hi].ts - recs[i].ts);
        const SampledRecord& q = take_lo ? recs[--lo] : recs[hi++];
        if (q.proc != recs[i].proc) near.push_back(q.exec);
      }
      if (near.empty()) continue;
      std::sort(near.begin(), near.end());
      const double med = Median(near);
      // Its neighbours ran other collectives than it (a dump samples one), each with its own noise:
      // one of them may end up shorter than a straggler's record. Shorter than all of them is the
      // stronger trial where a rank is that consistent, shorter than all but one (chance
      // 2 / (k + 1)) where it is not; both are tested, each at half the error rate.
      for (size_t ahead = 0; ahead < 2; ++ahead) {
        if (ahead >= near.size()) break;
        Cell& ce = cell(cells[ahead], recs[i].proc, c, win(recs[i].ts));
        ce.total++;
        ce.sampled++;
        ce.chance += static_cast<double>(ahead + 1) / static_cast<double>(near.size() + 1);
        if (recs[i].exec < std::min(near[ahead], med - short_by)) {
          ce.last++;
          auto rp = represents.find({c, std::get<1>(key)});
          ce.wait += (med - recs[i].exec) * (rp == represents.end() ? 1.0 : rp->second);
        }
      }
    }
  }
}

// What sampled records say of waiting, by the same collective (op, size, communicator shape) in
// every communicator and window. Which member had which record plays no part in either, so where
// no member is late each record's place among its neighbours stays chance.
struct SampledWaiting {
  // Per communicator: in some window, the median of its records stands out from the collective's
  // in every communicator and window, as a late arrival's wait does in DetectSlowCompute: its
  // members wait for someone. Its members are a smaller family of tests than every membership of
  // the job: a sampled log's few records (one a dump) can show a late rank there. A straggler in
  // a tensor-parallel group dumped every second is last in its 5 records of a 6-second fault:
  // against every membership of a 128-GPU job (about 400) and every run of windows it could be
  // picked from, no evidence (e^-14 against e^-18); against its group's 8 members and the runs
  // between its records' windows, it is (e^-12).
  std::vector<bool> comms;
  // Per key of SampledRecords: how far short of its neighbours' median a record must be to say
  // who its communicator waits for there: 3x the median deviation of the collective's records
  // (the spread of healthy records, a healthy GPU's speed among them), as a complete instance's
  // wait counts only beyond 3x its kernel key's arrival spread.
  std::map<std::tuple<int, int, int64_t>, double> material;
};

template <typename WindowOf>
SampledWaiting WaitingOfSampled(const CommData& d, const SampledRecords& sampled, WindowOf win,
                                const LateOptions& o) {
  SampledWaiting out;
  out.comms.assign(d.comms.size(), false);
  struct Collective {
    std::map<std::pair<int, int>, std::vector<double>> cells;  // (communicator, window) -> times
    std::vector<double> all;
    std::vector<std::tuple<int, int, int64_t>> keys;  // its keys in `sampled`
  };
  std::map<std::tuple<int, int64_t, int, int>, Collective> by;  // (op, size, shape)
  for (const auto& [key, recs] : sampled) {
    const auto [c, op, bytes] = key;
    const Comm& cm = d.comms[static_cast<size_t>(c)];
    Collective& col = by[{op, bytes, cm.n_ranks, cm.nnodes}];
    col.keys.push_back(key);
    for (const SampledRecord& r : recs) {
      col.cells[{c, win(r.ts)}].push_back(r.exec);
      col.all.push_back(r.exec);
    }
  }
  auto deviation = [](const std::vector<double>& v, double center) {
    std::vector<double> dev;
    for (double x : v) dev.push_back(std::abs(x - center));
    return Median(std::move(dev));
  };
  for (auto& [shape, col] : by) {
    const double spread = deviation(col.all, Median(col.all));
    for (const auto& key : col.keys) out.material[key] = std::max(o.min_wait_us, 3 * spread);
    std::vector<std::pair<int, double>> medians;  // (communicator, its median in the window)
    for (auto& [cw, v] : col.cells)
      if (v.size() >= 2) medians.emplace_back(cw.first, Median(std::move(v)));
    if (medians.size() < 2) continue;
    std::vector<double> m;
    for (const auto& [c, x] : medians) m.push_back(x);
    const double base = Median(m), noise = deviation(m, base);
    for (const auto& [c, x] : medians)
      if (x - base > 4 * noise + 0.25 * base + o.min_wait_us)
        out.comms[static_cast<size_t>(c)] = true;
  }
  return out;
}

// The cell of (proc, comm) in window w of nw, made on first use.
Cell& CellAt(Cells* cells, int proc, int comm, int w, int nw) {
  auto& v = (*cells)[Key(static_cast<size_t>(proc), static_cast<size_t>(comm))];
  if (v.empty()) v.resize(static_cast<size_t>(nw));
  return v[static_cast<size_t>(w)];
}

// A host's cells count its communicator's complete instances (`total`, per window) at the host's
// chance of each: m / n that the last member is one of its m members of n, and 1 / C(n, m) that
// its m members all came after every other member.
void CountHostTrials(const CommData& d, const std::vector<std::vector<int>>& total,
                     const std::vector<std::map<int, int>>& host_members, Cells* host_cells,
                     Cells* late_host_cells) {
  for (Cells* cells : {host_cells, late_host_cells})
    for (auto& [key, v] : *cells) {
      const int h = static_cast<int>(key >> 32), c = static_cast<int>(key & 0xFFFFFFFF);
      const int n = static_cast<int>(d.comms[static_cast<size_t>(c)].procs.size());
      const int m = host_members[static_cast<size_t>(c)].at(h);
      const double chance = cells == host_cells ? static_cast<double>(m) / n : 1 / Choose(n, m);
      for (size_t w = 0; w < v.size(); ++w) {
        const int t = total[static_cast<size_t>(c)][w];
        v[w].total += t;
        v[w].chance += t * chance;
      }
    }
}

// A rank late in a communicator hides who else is: the member last but one is tested where the
// last is late there over a run of its own, among the members but that one (chance 1 / (n - 1)),
// for the members that are not late there themselves: a family of tests of its own, at the same
// bar. A host slowed 1.09x for 15 of 40 steps, whose data-parallel groups held a rank late by 1.3
// ms at every collective, was never last in them and went unnamed beside it (an independent
// generator's x37012). What the others waited for it is taken against the median of all the
// members, the last one's included, which can only understate it (for three members, to
// nothing: their communicators are not tested so).
std::vector<LateEvent> LateBehindTheLate(const CommData& d, const LateOptions& o,
                                         const std::unordered_map<uint64_t, double>& material,
                                         const std::vector<LateEvent>& events, size_t tests) {
  const double W = o.window_us;
  const Windows win(d, W);
  const int nw = win.n;
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> runs;  // (proc, comm) -> runs
  for (const LateEvent& e : events) runs[{e.proc, e.comm}].push_back({e.w0, e.w1});
  auto late_at = [&](int proc, int comm, int w) {
    auto it = runs.find({proc, comm});
    if (it == runs.end()) return false;
    for (auto [a, b] : it->second)
      if (a <= w && w <= b) return true;
    return false;
  };
  Cells behind;
  std::vector<Trials> behind_trials(d.comms.size());
  for (const Inst& x : d.insts) {
    if (!Complete(d, x) || x.n < 3 || x.p2 < 0) continue;
    const int w = win(x.ts);
    if (!late_at(x.pmin, x.comm, w)) continue;
    const double wait = x.tmed - x.t2, bar = material.at(KernelKey(d, x));
    if (wait < bar) continue;
    behind_trials[static_cast<size_t>(x.comm)].Add(w, nw, 1.0 / (x.n - 1));
    if (runs.count({x.p2, x.comm})) continue;
    Cell& c = CellAt(&behind, x.p2, x.comm, w, nw);
    c.last++;
    c.wait += wait;
  }
  CountTrials(&behind, [&](int c) { return &behind_trials[static_cast<size_t>(c)]; });
  std::vector<LateEvent> hidden;
  Scan(behind, tests, W, o, false, false, &hidden);
  return hidden;
}

}  // namespace

std::vector<LateEvent> FindLateEvents(const CommData& d, const LateOptions& o) {
  std::vector<LateEvent> events;
  if (d.insts.empty()) return events;
  const double W = o.window_us;
  const Windows win(d, W);
  const int nw = win.n;
  const std::unordered_map<uint64_t, double> material = MaterialWaits(d, o);
  auto cell = [&](Cells& cells, int proc, int comm, int w) -> Cell& {
    return CellAt(&cells, proc, comm, w, nw);
  };
  // Complete instances: the member with the shortest time arrived last (chance 1/n). Per
  // communicator and window the material instances are counted once, for every member. Both kinds
  // of evidence are trials of known chance, counted in the same cells: a 2.29 log's snapshots
  // leave a few of each (the last collective before the job ended is in every member's last dump).
  // cells[j]: a sampled record counts as last when at most j of its neighbours are shorter (below).
  Cells cells[2];
  std::vector<std::vector<int>> total(d.comms.size(), std::vector<int>(static_cast<size_t>(nw), 0));
  // A slowed host with several members in one communicator (a data-parallel group over two hosts)
  // is last as often as it is slow, but which of its members is last is chance between them, so
  // that none of them need be last far more often than 1/n. Where a host has several members its
  // own trial is "the last member is on this host" (chance m/n for m of the n members).
  std::vector<std::map<int, int>> host_members(d.comms.size());  // comm -> host -> members
  for (size_t c = 0; c < d.comms.size(); ++c)
    for (int p : d.comms[c].procs)
      if (d.procs[static_cast<size_t>(p)].host >= 0) host_members[c][d.procs[static_cast<size_t>(p)].host]++;
  auto host_tested = [&](int comm, int host) {
    const auto& hm = host_members[static_cast<size_t>(comm)];
    auto it = hm.find(host);
    return hm.size() > 1 && it != hm.end() && it->second > 1;
  };
  Cells host_cells;
  // ... and, as a second test of each such host, "every member of this host arrived after every
  // other member" (chance 1 / C(n, m)): a host slowed as a whole is late so at every collective,
  // each of its members the last only by chance among them (a data-parallel group of two members
  // on each of two hosts, whose slowed host was last at 19 of 22 instances, 1 in 2 by chance).
  Cells late_host_cells;
  std::vector<Late> complete_lasts;
  // ... and per operation of the communicator: each of its operations ends a different part of
  // the program, and a rank late before one of them can be masked at another by a later rank
  // (a host slowed 1.36x for a whole job was last at every material all-gather of its
  // data-parallel groups, 30 in each, but at their reduce-scatters a straggler's pipeline partner
  // host was last more often, and over both it was last no more often than chance).
  std::map<int, Cells> op_cells;                    // op -> (proc, comm) -> per window
  std::map<std::pair<int, int>, Trials> op_trials;  // (comm, op)
  // Sampled records (a member alone, or some of them): each record against the other members'
  // records of the same communicator, op and size nearest to it in time (below).
  SampledRecords sampled_recs;
  const std::map<std::pair<int, int>, double> represents = RecordsRepresented(d);  // (comm, op)
  for (const Inst& x : d.insts) {
    const int w = win(x.ts);
    if (Complete(d, x)) {
      const double wait = std::max(0.0, WaitOf(x));
      if (wait < material.at(KernelKey(d, x))) continue;
      total[static_cast<size_t>(x.comm)][static_cast<size_t>(w)]++;
      Cell& c = cell(cells[0], x.pmin, x.comm, w);
      c.last++;
      c.wait += wait;
      complete_lasts.push_back({x.comm, w, x.pmin, wait, x.host_late});
      Cell& oc = cell(op_cells[x.op], x.pmin, x.comm, w);
      oc.last++;
      oc.wait += wait;
      op_trials[{x.comm, x.op}].Add(
          w, nw, 1.0 / static_cast<double>(d.comms[static_cast<size_t>(x.comm)].procs.size()));
      const int h = d.procs[static_cast<size_t>(x.pmin)].host;
      if (host_tested(x.comm, h)) {
        Cell& hc = cell(host_cells, h, x.comm, w);
        hc.last++;
        hc.wait += wait;
        if (x.host_late) {
          Cell& lc = cell(late_host_cells, h, x.comm, w);
          lc.last++;
          lc.wait += wait;
        }
      }
    } else if (x.pmin >= 0 && x.members_logging) {
      sampled_recs[{x.comm, x.op, x.bytes}].push_back({x.ts, x.pmin, x.tmin});
    }
  }
  // The sampled records are counted twice: against every membership, and, where communicators'
  // records wait, against their members only, as trials that must fall further short (below).
  const SampledWaiting waiting = WaitingOfSampled(d, sampled_recs, win, o);
  Cells waiting_cells[2];
  SampledRecords waiting_recs;
  for (const auto& [key, recs] : sampled_recs)
    if (waiting.comms[static_cast<size_t>(std::get<0>(key))]) waiting_recs.emplace(key, recs);
  for (const auto& [key, v] : cells[0])
    if (waiting.comms[key & 0xFFFFFFFF]) waiting_cells[0].emplace(key, v);
  CountSampledRecords(d, o, represents, win, cell, &sampled_recs, cells);
  CountSampledRecords(d, o, represents, win, cell, &waiting_recs, waiting_cells, &waiting.material);
  // Every member's cells count the complete instances of its communicator's windows.
  for (Cells& cs : {std::ref(cells[0]), std::ref(cells[1]), std::ref(waiting_cells[0]),
                    std::ref(waiting_cells[1])}) {
    for (auto& [key, v] : cs) {
      const int c = static_cast<int>(key & 0xFFFFFFFF);
      const double n = static_cast<double>(d.comms[static_cast<size_t>(c)].procs.size());
      for (int w = 0; w < nw; ++w) {
        Cell& x = v[static_cast<size_t>(w)];
        const int t = total[static_cast<size_t>(c)][static_cast<size_t>(w)];
        x.total += t;
        x.chance += t / n;
      }
    }
  }
  // A communicator of one operation is tested once: per operation is the same test.
  std::vector<int> ops(d.comms.size(), 0);
  for (const auto& [key, t] : op_trials) ops[static_cast<size_t>(key.first)]++;
  size_t tests = 0;
  for (size_t c = 0; c < d.comms.size(); ++c) {
    tests += d.comms[c].procs.size();
    for (const auto& [h, m] : host_members[c]) tests += 2 * host_tested(static_cast<int>(c), h);
    if (ops[c] > 1) tests += d.comms[c].procs.size() * static_cast<size_t>(ops[c]);
  }
  for (auto& [op, cs] : op_cells)
    CountTrials(&cs, [&, op = op](int c) {
      return ops[static_cast<size_t>(c)] > 1 ? &op_trials.at({c, op}) : nullptr;
    });
  CountHostTrials(d, total, host_members, &host_cells, &late_host_cells);
  Scan(cells[0], tests, W, o, false, false, &events);
  for (const auto& [op, cs] : op_cells) Scan(cs, tests, W, o, false, false, &events);
  Scan(cells[1], tests, W, o, true, false, &events);
  // Sampled records again, in the communicators whose records show members waiting, against the
  // members of those communicators only.
  size_t waiting_tests = 0;
  for (size_t c = 0; c < d.comms.size(); ++c)
    if (waiting.comms[c]) waiting_tests += d.comms[c].procs.size();
  for (const Cells& cs : waiting_cells) Scan(cs, waiting_tests, W, o, true, true, &events);
  std::vector<LateEvent> host_events;
  Scan(host_cells, tests, W, o, false, false, &host_events);
  const size_t late_host_tests = host_events.size();
  Scan(late_host_cells, tests, W, o, false, false, &host_events);
  const double log_alpha = std::log(o.alpha / static_cast<double>(std::max<size_t>(1, tests)));
  AddLateHostsMembers(d, host_events, late_host_tests, complete_lasts, host_members, log_alpha,
                      &events);
  // One event per (proc, comm): the less likely by chance.
  std::sort(events.begin(), events.end(), [](const LateEvent& x, const LateEvent& y) {
    return std::tie(x.proc, x.comm, x.log_p) < std::tie(y.proc, y.comm, y.log_p);
  });
  events.erase(std::unique(events.begin(), events.end(),
                           [](const LateEvent& x, const LateEvent& y) { return x.proc == y.proc && x.comm == y.comm; }),
               events.end());
  const std::vector<LateEvent> hidden = LateBehindTheLate(d, o, material, events, tests);
  events.insert(events.end(), hidden.begin(), hidden.end());
  return events;
}

std::vector<std::vector<double>> SiblingP2pWaits(const CommData& d, double W,
                                                 PipelineSideWaits* sides, CommWaits* by_comm) {
  const Windows win(d, W);
  const int nw = win.n;
  std::vector<std::vector<double>> out(d.procs.size());
  auto pos = [&](int comm, int proc) {
    const auto& ps = d.comms[static_cast<size_t>(comm)].procs;
    return static_cast<int>(std::find(ps.begin(), ps.end(), proc) - ps.begin());
  };
  // A receive waits for its sender's data, and a send for its peer to post the receive (a
  // stalled stage holds both its neighbours). Sibling pipelines run the same program, so the
  // same sequence number on each is the same transfer (the same micro-batch of the same step):
  // that is what they are compared on. Not the window: a record without its start time sits at
  // its process's dump, and each process dumps in its own phase, so with dumps several windows
  // apart a window holds one sibling's transfer and not the others'. Records without a sequence
  // number are compared by window. Key: the transfer (comm name, size, own position, peer's
  // position, direction, bytes), then its sequence number (or -1 - window); sorted by key, then
  // process (one record per transfer: a map per key cost the 10,240-GPU job seconds). The transfer
  // is numbered densely so that the sort compares one 128-bit integer, not eight fields.
  struct Item {
    unsigned __int128 order;  // transfer id << 96 | (sequence + 2^62) << 32 | process
    int comm, w;
    double exec;
    int pos, peer_pos;
    int Proc() const { return static_cast<int>(static_cast<uint32_t>(order)); }
  };
  // An all-to-all's messages follow the tokens routed, a different size in each sibling group
  // (expert groups route apart): its transfers compare with their siblings' whatever their size,
  // as a wait for a partner that posted late dwarfs what the size moves.
  const std::vector<bool> all_to_all = AllToAllComms(d);
  std::unordered_map<std::string, int> name_ids;
  std::vector<int> comm_name(d.comms.size(), -1);
  struct TransferHash {
    size_t operator()(const std::tuple<int, int, int, int, bool, int64_t>& t) const {
      const auto& [a, b, c, e, f, g] = t;
      uint64_t h = static_cast<uint64_t>(g) * 0x9E3779B97F4A7C15ull;
      for (uint64_t v : {uint64_t(a), uint64_t(b), uint64_t(c), uint64_t(e), uint64_t(f)})
        h = (h ^ v) * 0x100000001B3ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::unordered_map<std::tuple<int, int, int, int, bool, int64_t>, uint32_t, TransferHash> transfer_ids;
  std::vector<Item> items;
  items.reserve(d.p2p.size());
  for (const P2p& x : d.p2p) {
    if (x.peer < 0) continue;
    const size_t ci = static_cast<size_t>(x.comm);
    const Comm& c = d.comms[ci];
    if (comm_name[ci] < 0)
      comm_name[ci] = name_ids.try_emplace(c.name, static_cast<int>(name_ids.size())).first->second;
    const int w = win(x.ts);
    const int own = pos(x.comm, x.proc), peer = pos(x.comm, x.peer);
    const uint32_t transfer =
        transfer_ids
            .try_emplace({comm_name[ci], c.n_ranks, own, peer, x.send, all_to_all[ci] ? -1 : x.bytes},
                         static_cast<uint32_t>(transfer_ids.size()))
            .first->second;
    // Sequence numbers are at most 2^62 (the reader refuses larger); -1 - window is above -2^31.
    const int64_t when = x.sn >= 0 ? x.sn : -1 - w;
    const unsigned __int128 order = (static_cast<unsigned __int128>(transfer) << 96) |
                                    (static_cast<unsigned __int128>(static_cast<uint64_t>(when + (int64_t{1} << 62))) << 32) |
                                    static_cast<uint32_t>(x.proc);
    items.push_back({order, x.comm, w, x.exec, own, peer});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.order < b.order; });
  struct Acc { int proc, comm, w; double sum; int n; };  // a process's records of one key
  std::vector<Acc> procs;
  std::vector<double> means;
  for (size_t i = 0; i < items.size();) {
    procs.clear();
    size_t j = i;
    for (; j < items.size() && (items[j].order >> 32) == (items[i].order >> 32); ++j) {
      const Item& x = items[j];
      if (procs.empty() || procs.back().proc != x.Proc()) procs.push_back({x.Proc(), x.comm, x.w, 0, 0});
      procs.back().sum += x.exec;
      procs.back().n++;
    }
    const bool upstream = items[i].peer_pos < items[i].pos;
    i = j;
    if (procs.size() < 2) continue;  // no sibling to compare with
    // The lower quartile of the siblings: a slow rank delays its tensor-parallel partners'
    // pipelines too, so half of the siblings can be waiting.
    means.clear();
    for (const Acc& a : procs) means.push_back(a.sum / a.n);
    std::sort(means.begin(), means.end());
    const double base = means[(means.size() - 1) / 4];
    for (const Acc& a : procs) {
      auto& v = out[static_cast<size_t>(a.proc)];
      if (v.empty()) v.assign(static_cast<size_t>(nw), 0);
      const double extra = (a.sum / a.n - base) * a.n;
      if (extra <= 0) continue;
      v[static_cast<size_t>(a.w)] += extra;
      if (by_comm) {
        auto& c = (*by_comm)[Key(static_cast<size_t>(a.proc), static_cast<size_t>(a.comm))];
        if (c.empty()) c.assign(static_cast<size_t>(nw), 0);
        c[static_cast<size_t>(a.w)] += extra;
      }
      // An all-to-all has no sides: each member waits on every other.
      if (!sides || all_to_all[static_cast<size_t>(a.comm)]) continue;
      auto& side = (*sides)[{a.proc, a.comm, upstream}];
      if (side.empty()) side.assign(static_cast<size_t>(nw), 0);
      side[static_cast<size_t>(a.w)] += extra;
    }
  }
  return out;
}

namespace {

// What each process waited on others, per window of `W`: the evidence that explains a rank's
// lateness as another's (DetectLateArrivals).
struct WaitsOnOthers {
  std::vector<std::vector<int>> comms_of;  // process -> its communicators
  PipelineSideWaits toward;                // which side of its pipelines it waited on
  // Per (proc, comm), and each communicator's kind of transfer (its name, size, and whether it
  // is an all-to-all): what a rank waited on each kind is weighed against what its peers waited
  // on the same kind.
  CommWaits p2p_by_comm;
  std::vector<int> p2p_kind;
  std::unordered_map<uint64_t, std::vector<double>> slow_transfer;  // (proc, comm) -> per window
  std::vector<std::vector<double>> slow_wire;
  int p2p_lag = 0;  // windows a dump-timed point-to-point record lags its wait
};

// How many windows of W a record without its start time sits after it completed: the median lag
// of its placement (its dump) after the earliest it can have completed; 0 with start times.
template <typename Record>
int PlacementLag(const std::vector<Record>& records, double W) {
  std::vector<double> lags;
  for (const Record& x : records)
    if (x.earliest_ts > 0 && x.earliest_ts < x.ts)
      lags.push_back(static_cast<double>(x.ts - x.earliest_ts));
  return lags.empty() ? 0 : static_cast<int>(std::ceil(Median(std::move(lags)) / W));
}

WaitsOnOthers MeasureWaitsOnOthers(const CommData& d, double W) {
  const Windows win(d, W);
  const int nw = win.n;
  WaitsOnOthers m;
  std::vector<std::vector<int>>& comms_of = m.comms_of;
  comms_of.resize(d.procs.size());
  for (size_t c = 0; c < d.comms.size(); ++c)
    for (int p : d.comms[c].procs) comms_of[static_cast<size_t>(p)].push_back(static_cast<int>(c));

  // What each process waited on others, per window: (a) point-to-point transfers beyond the same
  // transfers of its sibling pipelines, and (b) transfers of its collectives beyond their
  // kernel key's usual time.
  SiblingP2pWaits(d, W, &m.toward, &m.p2p_by_comm);
  {
    const std::vector<bool> all_to_all = AllToAllComms(d);
    std::map<std::tuple<std::string, int, bool>, int> kinds;
    for (size_t c = 0; c < d.comms.size(); ++c)
      m.p2p_kind.push_back(kinds
                               .try_emplace({d.comms[c].name, d.comms[c].n_ranks, all_to_all[c]},
                                            static_cast<int>(kinds.size()))
                               .first->second);
  }
  // (proc, comm) -> per window: what slow transfers of that communicator held the process.
  std::unordered_map<uint64_t, std::vector<double>>& slow_transfer = m.slow_transfer;
  {
    std::unordered_map<uint64_t, std::vector<double>> acc;
    // Only complete instances time the transfer itself: a sampled record's time includes its
    // wait for the others.
    for (const Inst& x : d.insts)
      if (Complete(d, x)) acc[KernelKey(d, x)].push_back(x.tmin);
    std::unordered_map<uint64_t, double> base;
    for (auto& [k, v] : acc) base[k] = Median(std::move(v));
    for (const Inst& x : d.insts) {
      if (!Complete(d, x)) continue;
      const double extra = x.tmin - 1.2 * base[KernelKey(d, x)];
      if (extra <= 0) continue;
      for (int p : d.comms[static_cast<size_t>(x.comm)].procs) {
        auto& v = slow_transfer[Key(static_cast<size_t>(p), static_cast<size_t>(x.comm))];
        if (v.empty()) v.assign(static_cast<size_t>(nw), 0);
        v[static_cast<size_t>(win(x.ts))] += extra;
      }
    }
  }
  // Per process and window: the cross-host point-to-point transfers (pipeline Send/Recv, grouped
  // all-to-alls) that held it beyond 1.2x their sibling pairs' usual wire time
  // (UsualWireOfSiblings, as the link-flap detector's).
  // Timed by the wire, the shorter side (the side that posted last waited for nobody), so a
  // straggler's own late sends never count, while both ends of a degraded NIC's transfers do:
  // the NIC's host and its pipeline partners arrive late in their data-parallel groups with
  // nothing else to show for it (a 128-GPU job from another generator named three of them).
  std::vector<std::vector<double>>& slow_wire = m.slow_wire;
  slow_wire.resize(d.procs.size());
  {
    const std::vector<P2pTransfer>& pairs = CrossHostP2pTransfers(d);
    const std::vector<double> usual = UsualWireOfSiblings(d, pairs);
    for (size_t k = 0; k < pairs.size(); ++k) {
      const P2pTransfer& t = pairs[k];
      const double extra = t.Wire() - 1.2 * usual[k];
      if (extra <= 0) continue;
      for (int p : {t.from, t.to}) {
        auto& v = slow_wire[static_cast<size_t>(p)];
        if (v.empty()) v.assign(static_cast<size_t>(nw), 0);
        v[static_cast<size_t>(win(t.ts))] += extra;
      }
    }
  }
  // Point-to-point waits sit in the windows of their records' times. A record without its start
  // time is placed at its dump, and it completed in the dump pass before: up to an interval
  // earlier, a different lag for each process (each dumps in its own phase), while a collective
  // instance is placed by its earliest member's dump. So what a late run waited on its pipeline
  // peers is summed over the run and the windows of one dump interval after it.
  m.p2p_lag = PlacementLag(d.p2p, W);

  return m;
}

// Why a late event is late, or not its own: what its rank waited on others (WaitsOnOthers),
// weighed where it was late, and whom it follows. DetectLateArrivals keeps the roots that no
// other rank explains and that follow no one; every other event goes to o.suppressed, with why.
struct LateExplainer {
  LateExplainer(const CommData& data, const LateOptions& options, const std::vector<LateEvent>& events)
      : d(data), o(options), ev(events), W(options.window_us), waits(MeasureWaitsOnOthers(data, options.window_us)) {}

  // Roots: late events whose rank waited on nobody as much as it made others wait.
  std::vector<const LateEvent*> Roots() const;
  // A wait explains lateness only where it happened: of a run that waits explain, the blocks
  // they explain less than half of are the rank's own lateness, where late enough alone, tested
  // as the run was (an independent generator's host slowed 1.21x for 12 steps, whose pipeline
  // partner host held a straggler for the whole job: summed over its run its waits on that
  // pipeline explained it, and it was found for the blocks of its slowdown, x5019). The most
  // significant such part, kept in own_parts; nullptr when none is.
  const LateEvent* OwnPart(const LateEvent& e, bool across_host) const;
  mutable std::deque<LateEvent> own_parts;
  // Per event: whether every rank of its host that a communicator tests alone (one member of the
  // host among members of several hosts) is late in such a communicator over a window this event
  // spans, more rarely by chance than alpha over the job's hosts.
  std::vector<bool> LateAcrossItsHost() const;
  // The roots that follow no other (below).
  std::vector<const LateEvent*> Leaders(std::vector<const LateEvent*> roots) const;

  // What a late event's rank waited on others over its run, each kind beyond its peers'.
  struct Owed {
    double others = 0, p2p = 0, xfer = 0;
    double Sum() const { return others + p2p + xfer; }
  };
  static double Sum(const std::vector<double>& v, int a, int b);
  void Suppress(const LateEvent& e, std::string why) const;
  // Over the windows [w0, w1] of e's run (all of it, or a block of it).
  Owed OwedIn(const LateEvent& e, int w0, int w1) const;
  std::vector<std::pair<int, int>> BlocksOf(int w0, int w1) const;
  // What e's rank waited on others block by block of its run (each kind summed over the blocks),
  // and how much of its lateness that explains: in each block, at most what it made others wait
  // there. The reason states these sums, never the whole run's: its excess over the peers can be
  // smaller than the blocks' (the peers waited as much, at other times), and a reason that says
  // it waited 0 ms yet explains 132 ms reads as nonsense.
  struct Weighed {
    Owed owed;
    double explained = 0;
  };
  Weighed ExplainedBlockwise(const LateEvent& e) const;
  // A host test's members share its late arrivals, so they are explained together: what they
  // waited on others against what they made their peers wait, summed over the members (a member
  // last at a few of them, that waited on nobody, is no root when the host's lateness is its other
  // member's, which waited on its pipeline: an independent generator's job named such a member).
  // The members are the host's ranks late in the same communicator over overlapping windows, in a
  // host test or on their own.
  // (owed, wait, the part of owed where a member was late inside the host) of the host's late
  // members, the owed part weighed block by block of e's run.
  std::array<double, 3> HostOwed(const LateEvent& e) const;
  // The same, over the host's ranks late at the same time each in a sibling of e's communicator
  // (a stage's data-parallel groups, one member per host): a host downstream of a
  // slow NIC is late in all of them at once, each member by its own share of the same waits,
  // and a member whose waits happened to explain a little less than half of its lateness is no
  // root when the host's members together are explained (an independent generator's job named
  // the one of four such members whose slow pipeline transfers explained 25 of its 52 ms, x49023).
  // (owed, wait) summed over e and those members, the owed part weighed block by block of e's
  // run; {0, 0} when e has no such member.
  std::pair<double, double> SiblingsOwed(const LateEvent& e) const;
  // What a process waited on one side of its pipelines, beyond its sibling pipelines.
  double SideWait(int proc, bool upstream, int w0, int w1) const;
  // Following a rank, the wait counts only beyond what the follower's peers where it is late
  // waited on the same side, as in (b): a straggler's tensor-parallel partners share its next
  // stage, and wait as long on it when that stage is held by a fault of its own (a degraded NIC in
  // its data-parallel group, a late rank in its tensor-parallel group); a straggler stays one.
  // Except where the pipeline peer is a root leader itself: its own late sends reach the follower
  // alone of its peers, and may go unrecorded (a late rank's next-stage partner was last in its
  // tensor-parallel group where its recorded pipeline waits were no longer than its mates').
  // Per side (downstream, upstream): the median of what r's peers where it is late waited there.
  std::array<double, 2> PeersSideWaits(const LateEvent& r) const;
  // y_root: y is a root, so a pipeline peer that is y itself counts without `peers`.
  const Comm* PipelineFollows(const LateEvent& r, const LateEvent& y, bool y_root,
                              const std::array<double, 2>& peers) const;
  // Whether r is late about as much where y (in y's communicator) is not late as where it is: at
  // least half as much in all, and at least half as densely. A wait delays only where it happens,
  // however it is passed on, so such lateness is r's own (the ranks of a host slowed 1.44x for a
  // whole job followed a member late in their tensor-parallel group for a third of it).
  // y_runs: the runs of windows of y's rank's events in y's communicator.
  bool LateWithout(const LateEvent& r, const std::vector<std::pair<int, int>>& y_runs) const;

  const CommData& d;
  const LateOptions& o;
  const std::vector<LateEvent>& ev;
  const double W;
  const WaitsOnOthers waits;
  const std::vector<std::vector<int>>& comms_of = waits.comms_of;
  const PipelineSideWaits& toward = waits.toward;
  const CommWaits& p2p_by_comm = waits.p2p_by_comm;
  const std::vector<int>& p2p_kind = waits.p2p_kind;
  const std::unordered_map<uint64_t, std::vector<double>>& slow_transfer = waits.slow_transfer;
  const std::vector<std::vector<double>>& slow_wire = waits.slow_wire;
  const int p2p_lag = waits.p2p_lag;
  // Per process: its events in groups of its host alone late enough to be roots (HostOwed).
  const std::unordered_map<int, std::vector<const LateEvent*>> late_inside_host = LateInsideHost();
  std::unordered_map<int, std::vector<const LateEvent*>> LateInsideHost() const;
  // What explains a run's lateness is weighed block by block, each block against what it made
  // others wait there: a wait in one part of a long run explains no lateness in another (a host
  // slowed for steps 8-23 whose NIC degraded from step 22 waited on its slow transfers late in
  // the run, and those waits had explained away the slowdown before them). Blocks are long
  // enough for a wait to show as lateness within them (a dump interval's lag, twice over); a run
  // shorter than two blocks is one.
  const int block = std::max(4, 2 * (p2p_lag + 1));
};

double LateExplainer::Sum(const std::vector<double>& v, int a, int b) {
  double s = 0;
  b = std::min(b, static_cast<int>(v.size()) - 1);
  for (int w = std::max(a, 0); w <= b; ++w) s += v[static_cast<size_t>(w)];
  return s;
}

void LateExplainer::Suppress(const LateEvent& e, std::string why) const {
  if (!o.suppressed) return;
  Finding f;
  f.kind = Kind::kSlowCompute;
  f.detector = "comm.late_arrival";
  f.ranks = {d.procs[static_cast<size_t>(e.proc)].global_rank};
  f.hosts = {d.hosts[static_cast<size_t>(d.procs[static_cast<size_t>(e.proc)].host)]};
  const Comm& c = d.comms[static_cast<size_t>(e.comm)];
  f.comms = {c.id};
  f.start_us = d.t0 + static_cast<int64_t>(e.w0 * W);
  f.end_us = d.t0 + static_cast<int64_t>((e.w1 + 1) * W);
  f.Add("last_arrivals", e.last);
  f.Add("instances", e.instances);
  f.Add("z_score", e.z);
  f.summary = "Rank " + std::to_string(f.ranks[0]) + " arrives last at " + std::to_string(e.last) + " of " +
              std::to_string(e.instances) + " collectives of " + CommLabel(d, e.comm);
  o.suppressed->push_back({std::move(f), std::move(why)});
}

LateExplainer::Owed LateExplainer::OwedIn(const LateEvent& e, int w0, int w1) const {
  double waited = 0, held_times = 0;
  for (const LateEvent& f : ev) {
    // Waiting for another member of the same communicator never makes it late there: it was
    // not last where the other was (two slowed members of one host in a data-parallel group).
    if (f.proc == e.proc || f.comm == e.comm || f.w1 < w0 || f.w0 > w1) continue;
    const auto& mine = comms_of[static_cast<size_t>(e.proc)];
    if (std::find(mine.begin(), mine.end(), f.comm) == mine.end()) continue;
    // e's rank is a member of f's communicator, where f's rank kept it waiting.
    const int a = std::max(w0, f.w0), b = std::min(w1, f.w1);
    const double overlap = static_cast<double>(b - a + 1) / (f.w1 - f.w0 + 1);
    waited += f.wait_us * overlap;
    held_times += f.last * overlap;
  }
  // One wait makes a rank late once, at its next collective: waits that held it a few times
  // cannot explain its being last hundreds of times (a straggler's world-allreduce wait for a
  // slow NIC does not make it a victim), so each holding explains at most one late arrival.
  waited = std::min(waited, e.WaitIn(w0, w1) * held_times / std::max(1, e.LastIn(w0, w1)));
  // Waiting on pipeline peers, too, explains lateness only by as much more as its peers in
  // this communicator waited (a slow wire under a whole tensor-parallel group delays none of
  // its members against the others), kind by kind: each member waits on its own pipeline and
  // its own expert all-to-all, and less waiting on one does not make up for more on another (an
  // expert group's all-to-all 10% slower for a second made its four members late in their
  // tensor-parallel groups, and one of them, whose pipeline receives happened to wait less than
  // its partners', was named a straggler).
  auto by_kind = [&](int proc) {
    std::map<int, double> out;
    for (int c : comms_of[static_cast<size_t>(proc)]) {
      auto it = p2p_by_comm.find(Key(static_cast<size_t>(proc), static_cast<size_t>(c)));
      if (it != p2p_by_comm.end())
        out[p2p_kind[static_cast<size_t>(c)]] += Sum(it->second, w0, w1 + p2p_lag);
    }
    return out;
  };
  const std::map<int, double> own_p2p = by_kind(e.proc);
  double p2p = 0;
  if (!own_p2p.empty()) {
    std::vector<std::map<int, double>> peers_p2p;
    for (int q : d.comms[static_cast<size_t>(e.comm)].procs)
      if (q != e.proc) peers_p2p.push_back(by_kind(q));
    std::vector<double> theirs;
    for (const auto& [kind, mine] : own_p2p) {
      theirs.clear();
      for (const auto& m : peers_p2p) {
        auto it = m.find(kind);
        theirs.push_back(it == m.end() ? 0 : it->second);
      }
      p2p += std::max(0.0, mine - Median(theirs));
    }
  }
  // A slow transfer in one communicator (or a slow pipeline wire) makes its members late in
  // the others, never in itself, and only by as much more as it held them than it held their
  // peers there (a slow link under every member of a tensor-parallel group makes none of them
  // late in it).
  auto held = [&](int proc) {
    double x = Sum(slow_wire[static_cast<size_t>(proc)], w0, w1);
    for (int c : comms_of[static_cast<size_t>(proc)]) {
      if (c == e.comm) continue;
      auto it = slow_transfer.find(Key(static_cast<size_t>(proc), static_cast<size_t>(c)));
      if (it != slow_transfer.end()) x += Sum(it->second, w0, w1);
    }
    return x;
  };
  std::vector<double> peers_held;
  for (int q : d.comms[static_cast<size_t>(e.comm)].procs)
    if (q != e.proc) peers_held.push_back(held(q));
  const double xfer = std::max(0.0, held(e.proc) - Median(peers_held));
  return Owed{waited, p2p, xfer};
}

std::vector<std::pair<int, int>> LateExplainer::BlocksOf(int w0, int w1) const {
  std::vector<std::pair<int, int>> out;
  const int n = std::max(1, (w1 - w0 + 1) / block);
  for (int k = 0; k < n; ++k) out.push_back({w0 + k * block, k + 1 == n ? w1 : w0 + (k + 1) * block - 1});
  return out;
}

LateExplainer::Weighed LateExplainer::ExplainedBlockwise(const LateEvent& e) const {
  Weighed x;
  for (auto [a, b] : BlocksOf(e.w0, e.w1)) {
    const Owed w = OwedIn(e, a, b);
    x.owed.others += w.others;
    x.owed.p2p += w.p2p;
    x.owed.xfer += w.xfer;
    x.explained += std::min(w.Sum(), e.WaitIn(a, b));
  }
  return x;
}

std::unordered_map<int, std::vector<const LateEvent*>> LateExplainer::LateInsideHost() const {
  std::unordered_map<int, std::vector<const LateEvent*>> out;
  for (const LateEvent& y : ev)
    if (d.comms[static_cast<size_t>(y.comm)].hosts.size() == 1 && y.wait_share >= o.min_wait_share)
      out[y.proc].push_back(&y);
  return out;
}

std::array<double, 3> LateExplainer::HostOwed(const LateEvent& e) const {
  const int host = d.procs[static_cast<size_t>(e.proc)].host;
  std::vector<size_t> members;
  std::array<double, 3> sum{0, 0, 0};
  for (size_t j = 0; j < ev.size(); ++j) {
    const LateEvent& x = ev[j];
    if (x.comm != e.comm || d.procs[static_cast<size_t>(x.proc)].host != host || x.w1 < e.w0 || x.w0 > e.w1) continue;
    members.push_back(j);
    sum[1] += x.wait_us;
  }
  // A member late inside its host over a block, in a group of the host alone and by enough to be
  // a root (not a slowed host's slowest GPU), made the host late there by its own lateness, which
  // is its own finding's: whatever slows a host slows its ranks alike (an independent generator's
  // 1.32x straggler for 6 steps made most of what its host, late for the whole job by its pipeline
  // waits, made its data-parallel group wait, which then read as a slow host, x58014).
  auto late_inside = [&](int proc, int a, int b) {
    auto it = late_inside_host.find(proc);
    return it != late_inside_host.end() &&
           std::any_of(it->second.begin(), it->second.end(),
                       [&](const LateEvent* y) { return y->LastIn(a, b) > 0; });
  };
  for (auto [a, b] : BlocksOf(e.w0, e.w1)) {
    double owed_here = 0, wait_here = 0, inside_here = 0;
    for (size_t j : members) {
      const LateEvent& x = ev[j];
      const int xa = std::max(a, x.w0), xb = std::min(b, x.w1);
      if (xa > xb) continue;
      const double wait = x.WaitIn(xa, xb);
      const bool inside = late_inside(x.proc, xa, xb);
      owed_here += inside ? wait : OwedIn(x, xa, xb).Sum();
      inside_here += inside ? wait : 0;
      wait_here += wait;
    }
    sum[0] += std::min(owed_here, wait_here);
    sum[2] += std::min(inside_here, wait_here);
  }
  return sum;
}

std::pair<double, double> LateExplainer::SiblingsOwed(const LateEvent& e) const {
  const int host = d.procs[static_cast<size_t>(e.proc)].host;
  // Siblings run the same program: the same kind of communicator (name, size, all-to-all or
  // not) over as many hosts (without names, a host's tensor-parallel group of 4 is no sibling of a
  // data-parallel group of 4 across hosts, x48009).
  auto sibling = [&](int c) {
    return p2p_kind[static_cast<size_t>(c)] == p2p_kind[static_cast<size_t>(e.comm)] &&
           d.comms[static_cast<size_t>(c)].nnodes == d.comms[static_cast<size_t>(e.comm)].nnodes;
  };
  // A sibling late about as much outside e's run as inside it is late for a steady cause of its
  // own, not for what made e late (an independent generator's host slowed 1.23x for 15 steps: its
  // ranks on a whole-job straggler's pipeline, late throughout by their waits on it, explained
  // away its other ranks, late only in the slowdown, x63017).
  const std::vector<std::pair<int, int>> e_run{{e.w0, e.w1}};
  std::vector<const LateEvent*> members{&e};
  for (const LateEvent& x : ev)
    if (x.proc != e.proc && x.comm != e.comm && sibling(x.comm) &&
        d.procs[static_cast<size_t>(x.proc)].host == host && x.w1 >= e.w0 && x.w0 <= e.w1 &&
        !LateWithout(x, e_run))
      members.push_back(&x);
  if (members.size() < 2) return {0, 0};
  std::pair<double, double> sum{0, 0};
  for (auto [a, b] : BlocksOf(e.w0, e.w1)) {
    double owed_here = 0, wait_here = 0;
    for (const LateEvent* x : members) {
      const int xa = std::max(a, x->w0), xb = std::min(b, x->w1);
      if (xa > xb) continue;
      // A member's waits on late members of its other communicators are left out: they may be
      // waits on e's rank itself (a straggler's tensor-parallel mates, late in their own
      // data-parallel groups because they waited for it, would explain it away).
      // Each member's waits explain at most its own lateness: a mate held far longer (on a
      // flapping NIC) explains nothing of a straggler's (x48009).
      const Owed w = OwedIn(*x, xa, xb);
      const double wait = x->WaitIn(xa, xb);
      owed_here += std::min(x == &e ? w.Sum() : w.p2p + w.xfer, wait);
      wait_here += wait;
    }
    sum.first += owed_here;
    sum.second += wait_here;
  }
  return sum;
}

std::vector<bool> LateExplainer::LateAcrossItsHost() const {
  std::vector<bool> out(ev.size(), false);
  // The communicators that test a host's ranks one at a time: spanning hosts, one member on it.
  std::vector<std::vector<int>> tested_in(d.procs.size());  // proc -> such communicators
  for (size_t c = 0; c < d.comms.size(); ++c) {
    const Comm& cm = d.comms[c];
    if (cm.hosts.size() < 2) continue;
    std::map<int, int> on_host;
    for (int p : cm.procs) ++on_host[d.procs[static_cast<size_t>(p)].host];
    for (int p : cm.procs)
      if (on_host[d.procs[static_cast<size_t>(p)].host] == 1)
        tested_in[static_cast<size_t>(p)].push_back(static_cast<int>(c));
  }
  std::map<int, std::vector<int>> tested_procs;  // host -> its procs some such communicator tests
  for (size_t p = 0; p < d.procs.size(); ++p)
    if (!tested_in[p].empty()) tested_procs[d.procs[p].host].push_back(static_cast<int>(p));
  // Per-GPU speed makes each communicator's slowest member one of its n at chance 1/n,
  // independently of the other communicators: every tested rank of one host last at once is
  // that unlikely, over every host of the job.
  const double log_hosts_over_alpha =
      std::log(static_cast<double>(std::max<size_t>(1, d.hosts.size())) / o.alpha);
  for (const auto& [h, procs] : tested_procs) {
    if (procs.size() < 2) continue;
    std::map<int, std::vector<size_t>> events_of;  // proc -> its events in such communicators
    for (size_t i = 0; i < ev.size(); ++i) {
      const LateEvent& e = ev[i];
      if (d.procs[static_cast<size_t>(e.proc)].host != h || e.host_test >= 0) continue;
      const auto& cs = tested_in[static_cast<size_t>(e.proc)];
      if (std::find(cs.begin(), cs.end(), e.comm) != cs.end()) events_of[e.proc].push_back(i);
    }
    if (events_of.size() < procs.size()) continue;
    int w_lo = std::numeric_limits<int>::max(), w_hi = -1;
    for (const auto& [p, is] : events_of)
      for (size_t i : is) w_lo = std::min(w_lo, ev[i].w0), w_hi = std::max(w_hi, ev[i].w1);
    for (int w = w_lo; w <= w_hi; ++w) {
      double log_inv_chance = 0;
      std::vector<size_t> covering;
      for (const auto& [p, is] : events_of) {
        double best = 0;
        for (size_t i : is)
          if (ev[i].w0 <= w && w <= ev[i].w1) {
            best = std::max(best, std::log(static_cast<double>(
                                      d.comms[static_cast<size_t>(ev[i].comm)].procs.size())));
            covering.push_back(i);
          }
        if (best == 0) {
          log_inv_chance = 0;
          break;
        }
        log_inv_chance += best;
      }
      if (log_inv_chance > log_hosts_over_alpha)
        for (size_t i : covering) out[i] = true;
    }
  }
  return out;
}

const LateEvent* LateExplainer::OwnPart(const LateEvent& e, bool across_host) const {
  if (e.instances_by_w.empty()) return nullptr;
  const auto blocks = BlocksOf(e.w0, e.w1);
  std::optional<LateEvent> best;
  int a = -1;  // the first window of the current run of blocks no wait explains
  for (size_t k = 0; k <= blocks.size(); ++k) {
    const bool own =
        k < blocks.size() && OwedIn(e, blocks[k].first, blocks[k].second).Sum() <
                                 o.explained_share * e.WaitIn(blocks[k].first, blocks[k].second);
    if (own && a < 0) a = blocks[k].first;
    if (own || a < 0) continue;
    const int b = blocks[k - 1].second;
    LateEvent part = e;
    part.w0 = a;
    part.w1 = b;
    const auto from = static_cast<size_t>(a - e.w0), to = static_cast<size_t>(b - e.w0 + 1);
    part.last_by_w.assign(e.last_by_w.begin() + from, e.last_by_w.begin() + to);
    part.wait_by_w.assign(e.wait_by_w.begin() + from, e.wait_by_w.begin() + to);
    part.instances_by_w.assign(e.instances_by_w.begin() + from, e.instances_by_w.begin() + to);
    part.chance_by_w.assign(e.chance_by_w.begin() + from, e.chance_by_w.begin() + to);
    a = -1;
    part.instances = part.last = 0;
    part.wait_us = 0;
    double chance_sum = 0;
    for (size_t w = 0; w < part.last_by_w.size(); ++w) {
      part.instances += part.instances_by_w[w];
      part.last += part.last_by_w[w];
      part.wait_us += part.wait_by_w[w];
      chance_sum += part.chance_by_w[w];
    }
    if (part.instances < o.min_instances) continue;
    const double chance = chance_sum / part.instances, n = part.instances;
    part.z = (part.last - n * chance) / std::sqrt(n * chance * (1 - chance));
    part.log_p = LogBinomialTail(part.instances, part.last, chance);
    part.wait_share = part.wait_us / (static_cast<double>(part.w1 - part.w0 + 1) * W);
    if (part.z < o.min_z || part.log_p + e.log_runs > e.log_bar) continue;
    if (part.wait_share < o.min_wait_share && !across_host) continue;
    if (ExplainedBlockwise(part).explained >= o.explained_share * part.wait_us) continue;
    if (!best || part.log_p < best->log_p) best = std::move(part);
  }
  if (!best) return nullptr;
  own_parts.push_back(std::move(*best));
  return &own_parts.back();
}

std::vector<const LateEvent*> LateExplainer::Roots() const {
  std::vector<const LateEvent*> roots;
  const std::vector<bool> across_host = LateAcrossItsHost();
  for (size_t i = 0; i < ev.size(); ++i) {
    const LateEvent& e = ev[i];
    // Too cheap to act on, though consistent: it still explains others and leads them. Unless
    // the whole host is late so: the floor stands for one healthy GPU's speed, which makes one
    // rank last, not every rank of a host in a group of its own.
    if (e.wait_share < o.min_wait_share && !across_host[i]) continue;
    if (e.host_test >= 0) {
      const auto [host_waited, host_wait, inside] = HostOwed(e);
      if (host_waited >= o.explained_share * host_wait) {
        Suppress(
            e,
            "propagated lateness of its host: its host's members late in " + CommLabel(d, e.comm) +
                " waited on others" +
                (inside > 0 ? " or were late inside the host on their own" : "") +
                ", weighed where they were late, " + Fmt("%.0f", host_waited / 1e3) + " ms" +
                (inside > 0 ? " (" + Fmt("%.0f", inside / 1e3) + " ms late inside the host)" : "") +
                ", at least half of the " + Fmt("%.0f", host_wait / 1e3) + " ms they made it wait");
        continue;
      }
    }
    if (const Weighed x = ExplainedBlockwise(e); x.explained >= o.explained_share * e.wait_us) {
      const Owed& w = x.owed;
      const LateEvent* own = OwnPart(e, across_host[i]);
      if (own) roots.push_back(own);
      Suppress(e, "propagated lateness: it waited " + Fmt("%.0f", w.Sum() / 1e3) +
                      " ms on others (late members of its other communicators " +
                      Fmt("%.0f", w.others / 1e3) + " ms, pipeline peers " +
                      Fmt("%.0f", w.p2p / 1e3) + " ms, slow transfers " +
                      Fmt("%.0f", w.xfer / 1e3) +
                      " ms, each beyond its peers' in the same stretch of its run); " +
                      "weighed where it was late, that explains " + Fmt("%.0f", x.explained / 1e3) +
                      " ms, at least half of the " + Fmt("%.0f", e.wait_us / 1e3) + " ms it made " +
                      CommLabel(d, e.comm) + " wait" +
                      (own ? "; its lateness from " +
                                 FormatTimeUs(d.t0 + static_cast<int64_t>(own->w0 * W)) + " to " +
                                 FormatTimeUs(d.t0 + static_cast<int64_t>((own->w1 + 1) * W)) +
                                 ", which no wait explains, stays its own"
                           : ""));
      continue;
    }
    if (const auto [owed, wait] = SiblingsOwed(e); wait > 0 && owed >= o.explained_share * wait) {
      Suppress(e, "propagated lateness of its host: its host's ranks late at the same time in " +
                      CommLabel(d, e.comm) +
                      " and its sibling groups waited on others, weighed where they were late, " +
                      Fmt("%.0f", owed / 1e3) + " ms, at least half of the " +
                      Fmt("%.0f", wait / 1e3) + " ms they made those groups wait");
      continue;
    }
    roots.push_back(&e);
  }
  return roots;
}

double LateExplainer::SideWait(int proc, bool upstream, int w0, int w1) const {
  double x = 0;
  for (auto it = toward.lower_bound({proc, std::numeric_limits<int>::min(), false});
       it != toward.end() && std::get<0>(it->first) == proc; ++it)
    if (std::get<2>(it->first) == upstream) x += Sum(it->second, w0, w1);
  return x;
}

std::array<double, 2> LateExplainer::PeersSideWaits(const LateEvent& r) const {
  std::array<double, 2> out{};
  for (bool upstream : {false, true}) {
    std::vector<double> v;
    for (int q : d.comms[static_cast<size_t>(r.comm)].procs)
      if (q != r.proc) v.push_back(SideWait(q, upstream, r.w0, r.w1 + p2p_lag));
    if (!v.empty()) out[upstream] = Median(std::move(v));
  }
  return out;
}

const Comm* LateExplainer::PipelineFollows(const LateEvent& r, const LateEvent& y, bool y_root,
                                           const std::array<double, 2>& peers) const {
  const auto& held = d.comms[static_cast<size_t>(y.comm)].procs;
  for (int c : comms_of[static_cast<size_t>(r.proc)]) {
    const auto& ps = d.comms[static_cast<size_t>(c)].procs;
    const auto rr = std::find(ps.begin(), ps.end(), r.proc);
    for (auto q = ps.begin(); q != ps.end(); ++q) {
      if (q == rr || std::find(held.begin(), held.end(), *q) == held.end()) continue;
      auto it = toward.find({r.proc, c, q < rr});
      if (it != toward.end() &&
          Sum(it->second, r.w0, r.w1 + p2p_lag) - (y_root && *q == y.proc ? 0.0 : peers[q < rr]) >=
              o.explained_share * r.wait_us)
        return &d.comms[static_cast<size_t>(c)];
    }
  }
  return nullptr;
}

bool LateExplainer::LateWithout(const LateEvent& r,
                                const std::vector<std::pair<int, int>>& y_runs) const {
  double in = 0, out = 0;
  int in_n = 0, out_n = 0;
  for (int w = r.w0; w <= r.w1; ++w) {
    bool held = false;
    for (auto [a, b] : y_runs) held = held || (w >= a && w <= b);
    (held ? in : out) += r.WaitIn(w, w);
    ++(held ? in_n : out_n);
  }
  return out_n > 0 && out >= o.explained_share * in &&
         out / out_n >= o.explained_share * in / std::max(1, in_n);
}

// A root that waits, in a communicator it shares with a stronger root, for that root (late
// there, while it is not) follows it: what couples them in between may be unrecorded (expert
// all-to-alls and pipeline sends without p2p records), so its own lateness elsewhere is the
// other's. So does one that waits there for a rank others explain, late at least as often as
// it (a straggler's expert partner waits for it in their all-to-all, and its tensor-parallel
// mates wait for that partner: a 64-GPU EP 2 CP 2 sweep job named them as a second straggler).
// Two independent stragglers of one group are each late in it, and stay. So does a root
// on the pipeline of a stronger root, or of a member it holds in a communicator where it is late
// (its tensor-parallel partner), that waited on its pipeline peers on their side, beyond its
// sibling pipelines, at least half of what it made its peers wait: a straggler's next stage
// waits for its activations and, as its siblings wait as long on the stage after them, its
// pipeline waits in all are no longer than theirs.
std::vector<const LateEvent*> LateExplainer::Leaders(std::vector<const LateEvent*> roots) const {
  std::map<int, int> lasts;  // proc -> late arrivals over its root events
  for (const LateEvent* r : roots) lasts[r->proc] += r->last;
  // A rank whose lateness others explain (a slow link under it, or its own pipeline) still
  // passes that lateness down its pipeline, so it can lead through the pipeline too: a degraded
  // NIC's stage delays the stages after it, late in their own data-parallel groups while their
  // upstream waits are beyond their siblings' (and the stages after them wait less than their
  // siblings on the way back, which can cancel those waits in their sum). Such a leader need
  // not be as often late as its follower: its lateness was caused elsewhere, and the
  // follower's wait on its side of the pipeline is the evidence. Its late arrivals over all its
  // events only rank it among other leaders.
  std::map<int, int> explained_lasts;  // proc -> late arrivals over all its events, for non-roots
  for (const LateEvent& x : ev)
    if (!lasts.count(x.proc)) explained_lasts[x.proc] += x.last;
  // (proc, comm) -> runs of windows of its significant events
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> late_in;
  for (const LateEvent& x : ev) late_in[{x.proc, x.comm}].push_back({x.w0, x.w1});
  std::vector<const LateEvent*> kept;
  for (const LateEvent* r : roots) {
    const LateEvent* leader = nullptr;
    const Comm* leader_pipe = nullptr;  // where the leader is followed through its pipeline
    int leader_strength = 0;
    const std::array<double, 2> peers = PeersSideWaits(*r);
    for (const LateEvent& yv : ev) {
      const LateEvent* y = &yv;
      const bool root = lasts.count(y->proc) > 0;
      const int strength = root ? lasts[y->proc] : explained_lasts[y->proc];
      if (y->proc == r->proc || (root && strength < lasts[r->proc]) || y->w1 < r->w0 || y->w0 > r->w1) continue;
      // A rank of a host late as a whole is late with its host's other ranks, not because of
      // them (the ranks of a slowed host, late by 95 ms at their data-parallel collectives,
      // waited 1 ms a step in their tensor-parallel groups for their slowest GPU).
      if (r->host_as_whole &&
          d.procs[static_cast<size_t>(y->proc)].host == d.procs[static_cast<size_t>(r->proc)].host)
        continue;
      const auto& members = d.comms[static_cast<size_t>(y->comm)].procs;
      const Comm* pipe = nullptr;
      // Waiting in a shared communicator for a rank that others explain follows it too, where
      // that rank is late at least as often: the wait came from elsewhere, through it.
      const bool waits_there =
          !late_in.count({r->proc, y->comm}) &&
          std::find(members.begin(), members.end(), r->proc) != members.end() &&
          !LateWithout(*r, late_in.at({y->proc, y->comm}));
      if (!waits_there || (!root && strength < lasts[r->proc])) {
        pipe = PipelineFollows(*r, *y, root, peers);
        if (!pipe) continue;
      }
      if (!leader || strength > leader_strength) {
        leader_strength = strength;
        leader = y;
        leader_pipe = pipe;
      }
    }
    if (!leader) { kept.push_back(r); continue; }
    const std::string how =
        leader_pipe ? "(or a rank it holds) on its pipeline, " + CommLabel(d, static_cast<int>(leader_pipe - d.comms.data())) +
                          ", beyond its sibling pipelines, and that rank "
                    : "in " + CommLabel(d, leader->comm) + ", where that rank ";
    Suppress(*r, "follows rank " + std::to_string(d.procs[static_cast<size_t>(leader->proc)].global_rank) +
                     ": it waits for that rank " + how + "arrives last at " + std::to_string(leader->last) +
                     " of " + std::to_string(leader->instances) + " collectives" +
                     (leader_pipe ? " of " + CommLabel(d, leader->comm) : " and it does not") +
                     (lasts.count(leader->proc) ? "" : " (itself late because of others: see its own entry)"));
  }
  return kept;
}

// One finding per host and overlapping run of windows of its root events. Where several of a
// host's ranks are late, one of them late inside the host (a tensor-parallel group there, whose
// members share whatever slows the host) is late on its own as well: that is a finding of its own.
std::vector<Finding> HostFindings(const CommData& d, const std::vector<const LateEvent*>& roots, double W) {
  std::vector<Finding> out;
  const int nw = Windows(d, W).n;
  // Runs of a host apart by less than its records' placement in time (an instance without start
  // times sits at its earliest member's dump, up to a dump interval after it ran) are one episode
  // (a host slowed for 10 steps of a job dumped every 2 s was late in two runs a window apart).
  const int lag = PlacementLag(d.insts, W);
  std::map<int, std::set<int>> late_procs;  // host -> its late ranks
  // rank -> its events in groups of its host alone
  std::map<int, std::vector<const LateEvent*>> inside;
  for (const LateEvent* e : roots) {
    late_procs[d.procs[static_cast<size_t>(e->proc)].host].insert(e->proc);
    if (d.comms[static_cast<size_t>(e->comm)].hosts.size() == 1) inside[e->proc].push_back(e);
  }
  // (host, the rank late on its own, or -1 for the host's) -> its root events
  std::map<std::pair<int, int>, std::vector<const LateEvent*>> by_host;
  for (const LateEvent* e : roots) {
    const int h = d.procs[static_cast<size_t>(e->proc)].host;
    const bool own =
        late_procs[h].size() > 1 && d.comms[static_cast<size_t>(e->comm)].hosts.size() == 1;
    by_host[{h, own ? e->proc : -1}].push_back(e);
  }
  // A host's lateness in groups across hosts is the host's unless every rank late there is late
  // inside the host on its own at the time: whatever slows a host slows its ranks alike, so that
  // lateness is those ranks' (an independent generator's host held a rank late by 2.3 ms at every
  // op and a 1.195x straggler: each was found, and a third finding named both as a slow host, for
  // their data-parallel groups, x55000).
  auto late_inside = [&](const LateEvent* e) {
    auto it = inside.find(e->proc);
    if (it == inside.end()) return false;
    for (const LateEvent* x : it->second)
      if (e->w0 <= x->w1 && x->w0 <= e->w1) return true;
    return false;
  };
  for (auto it = by_host.begin(); it != by_host.end();) {
    const auto [h, who] = it->first;
    if (who >= 0 || late_procs[h].size() < 2 ||
        !std::all_of(it->second.begin(), it->second.end(), late_inside)) {
      ++it;
      continue;
    }
    for (const LateEvent* e : it->second) by_host[{h, e->proc}].push_back(e);
    it = by_host.erase(it);
  }
  std::vector<int> host_size(d.hosts.size(), 0);
  for (const Proc& p : d.procs)
    if (p.host >= 0) host_size[static_cast<size_t>(p.host)]++;
  for (auto& [key, v] : by_host) {
    const int h = key.first;
    std::sort(v.begin(), v.end(), [](const LateEvent* a, const LateEvent* b) { return a->w0 < b->w0; });
    std::vector<std::vector<const LateEvent*>> groups;
    int end = -1;
    for (const LateEvent* e : v) {
      if (groups.empty() || e->w0 > end + 1 + lag) groups.emplace_back();
      groups.back().push_back(e);
      end = std::max(end, e->w1);
    }
    for (const auto& g : groups) {
      Finding f;
      f.kind = Kind::kSlowCompute;
      f.detector = "comm.late_arrival";
      f.hosts = {d.hosts[static_cast<size_t>(h)]};
      int w0 = nw, w1 = 0, last = 0, inst = 0, sampled = 0;
      double z = 0, share = 0, wait = 0;
      std::set<int> comms, victims, host_tests;
      for (const LateEvent* e : g) {
        f.ranks.push_back(d.procs[static_cast<size_t>(e->proc)].global_rank);
        w0 = std::min(w0, e->w0);
        w1 = std::max(w1, e->w1);
        last += e->last;
        // A host test's members were tested on the same instances.
        if (e->host_test < 0 || host_tests.insert(e->host_test).second) {
          inst += e->instances;
          sampled += e->sampled;
        }
        z = std::max(z, e->z);
        share = std::max(share, e->wait_share);
        wait += e->wait_us;
        comms.insert(e->comm);
        for (int q : d.comms[static_cast<size_t>(e->comm)].procs) victims.insert(d.procs[static_cast<size_t>(q)].global_rank);
      }
      SortUnique(&f.ranks);
      for (int r : f.ranks) victims.erase(r);
      f.victims.assign(victims.begin(), victims.end());
      for (int c : comms) f.comms.push_back(d.comms[static_cast<size_t>(c)].id);
      SortUnique(&f.comms);
      f.start_us = d.t0 + static_cast<int64_t>(w0 * W);
      f.end_us = d.t0 + static_cast<int64_t>((w1 + 1) * W);
      // Sure when far from chance and costly; a barely significant, cheap lateness is not.
      f.confidence = std::min(0.95, 0.3 + 0.05 * std::min(z, 10.0) + 10 * share);
      f.Add("last_arrivals", last);
      f.Add("instances", inst);
      f.Add("last_share", static_cast<double>(last) / std::max(1, inst));
      f.Add("z_score", z);
      f.Add("peer_wait_share", share);
      f.Add("median_wait_us", last ? wait / last : 0);
      f.Add("host_ranks_flagged", static_cast<double>(f.ranks.size()));
      // Late inside its own host (a tensor-parallel group there): no NIC is on that path, so the
      // lateness is the rank's own, whatever its network does.
      bool within_host = false;
      for (int c : comms) within_host = within_host || d.comms[static_cast<size_t>(c)].hosts.size() == 1;
      f.Add("late_within_its_host", within_host ? 1 : 0);
      f.AddText("synchronisation_trap", "root cause shows the shortest collective times; peers wait");
      const int hn = host_size[static_cast<size_t>(h)];
      const std::string who =
          f.ranks.size() == 1 ? "Rank " + std::to_string(f.ranks[0]) + " on " + f.hosts[0]
          : static_cast<int>(f.ranks.size()) == hn
              ? "All " + std::to_string(f.ranks.size()) + " ranks of host " + f.hosts[0] + " (" +
                    RankList(f.ranks) + ")"
              : std::to_string(f.ranks.size()) + " of the " + std::to_string(hn) +
                    " ranks of host " + f.hosts[0] + " (" + RankList(f.ranks) + ")";
      // Communicators as users name them (comm_name, else the id), with the global ranks of a
      // group so that a user can tell which one it is: "TENSOR_MODEL_PARALLEL_GROUP (ranks
      // 24-31)", or "DATA_PARALLEL_GROUP (8 groups)" for a host late in one group per rank.
      std::map<std::string, std::vector<int>> named;  // name -> communicators
      for (int c : comms) {
        const Comm& cm = d.comms[static_cast<size_t>(c)];
        named[cm.name.empty() || cm.name == "unknown" ? CommLabel(d, c) : cm.name].push_back(c);
      }
      std::string where;
      for (const auto& [n, cs] : named) {
        std::string label = n;
        if (cs.size() > 1) {
          label += " (" + std::to_string(cs.size()) + " groups)";
        } else if (label.find("ranks ") == std::string::npos) {
          std::vector<int> members;
          for (int p : d.comms[static_cast<size_t>(cs[0])].procs) members.push_back(d.procs[static_cast<size_t>(p)].global_rank);
          SortUnique(&members);
          label += " (ranks " + RankList(members) + ")";
        }
        where += (where.empty() ? "" : ", ") + label;
      }
      f.AddText("late_in", where);
      // A sampled record (a 2.29 dump's snapshot) is last when shorter than its peers' records
      // nearest in time, not in an instance of its own: say which the count is of.
      const std::string of = sampled == inst ? " sampled records"
                             : sampled       ? " collectives and sampled records"
                                             : " collectives";
      f.summary = who + (f.ranks.size() > 1 ? " arrive" : " arrives") + " last at " +
                  std::to_string(last) + " of " + std::to_string(inst) + of + " (" +
                  Fmt("%.0f", 100.0 * last / std::max(1, inst)) +
                  "%; chance would be far lower) of " + where + ", and its peers spend " +
                  Fmt("%.1f", 100 * share) +
                  "% of their time waiting for it: a compute straggler; check the GPU's clocks, "
                  "temperature "
                  "and ECC errors" +
                  std::string(f.ranks.size() > 1 ? " and the host's CPU load." : ".");
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace

std::vector<Finding> DetectLateArrivals(const CommData& d, const LateOptions& o) {
  const std::vector<LateEvent> ev = FindLateEvents(d, o);
  if (ev.empty()) return {};
  const LateExplainer why(d, o, ev);
  return HostFindings(d, why.Leaders(why.Roots()), o.window_us);
}

}  // namespace collscope::diagnose
