#include "sim/eval/eval.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/steps.h"
#include "core/ingest.h"
#include "core/store.h"
#include "sim/sim.h"

namespace collscope::diagnose {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Truth {
  std::string fault_kind, kind;  // simulator fault kind; the finding kind that reports it
  bool host_level = false;
  std::set<std::string> hosts;
  std::set<int> ranks;
  int64_t start = 0, end = 0;
  double severity = std::nan("");
  bool found = false, exact = false;
};

template <class T>
bool Contained(const std::set<T>& a, const std::set<T>& b) {
  if (a.empty()) return false;
  for (const T& x : a)
    if (!b.count(x)) return false;
  return true;
}

double Param(simdjson::dom::element f, const char* key, double fallback) {
  std::string_view v;
  if (f["params"][key].get_string().get(v)) return fallback;
  return std::atof(std::string(v).c_str());
}

// A fault's severity in its kind's own unit (docs/diagnosis.md): how much slower (compute
// factor, bandwidth loss), how long (stall s, bubble ms), or what share of time a flapping link
// is down. NaN for faults that are all-or-nothing (hang, mismatch, link_down).
double Severity(const std::string& k, simdjson::dom::element f) {
  if (k == "gpu_straggler" || k == "host_slowdown" || k == "masked_straggler") return Param(f, "factor", 1.5);
  if (k == "nic_degrade") return 1.0 / std::max(1e-3, Param(f, "factor", 0.25));
  if (k == "link_flap") return Param(f, "down_us", 5e4) / Param(f, "period_us", 2e6);
  if (k == "host_stall") return Param(f, "stall_us", 5e6) / 1e6;
  if (k == "pipeline_bubble") return Param(f, "delay_us", 2e4) / 1e3;
  return std::nan("");
}

}  // namespace

std::string FindingKindForFault(const std::string& k) {
  if (k == "nic_degrade" || k == "link_flap") return "slow_link";
  if (k == "gpu_straggler" || k == "host_slowdown" || k == "masked_straggler") return "slow_compute";
  if (k == "host_stall") return "host_stall";
  if (k == "hang" || k == "link_down") return "hang";
  if (k == "mismatch") return "collective_mismatch";
  if (k == "pipeline_bubble") return "pipeline_bubble";
  return k;
}

bool HostLevelFault(const std::string& k) {
  return k == "nic_degrade" || k == "link_flap" || k == "host_slowdown" || k == "link_down";
}

Status ScoreFindings(const std::string& gt_path, const std::vector<Finding>& findings, double localize_s,
                     TierScore* tier, ScenarioResult* sr, TierRun* run) {
  simdjson::dom::parser parser;
  simdjson::dom::element gt;
  if (auto e = parser.load(gt_path).get(gt)) return Status::Corruption(gt_path + ": " + simdjson::error_message(e));
  std::vector<Truth> truths;
  int64_t dump_us = 1000000;
  if (gt["inspector"]["dump_interval_us"].get_int64().get(dump_us)) {}
  const int64_t slack = std::max<int64_t>(2000000, 2 * dump_us);
  int64_t steps = 0;
  if (gt["job"]["steps_completed"].get_int64().get(steps)) {}
  int64_t world = 0;
  if (gt["job"]["world"].get_int64().get(world)) {}
  sr->steps = static_cast<int>(steps);
  sr->world = static_cast<int>(world);
  std::map<int, std::string> host_of_rank;
  simdjson::dom::array arr;
  if (!gt["ranks"].get_array().get(arr))
    for (auto r : arr) {
      int64_t rank = -1;
      std::string_view h;
      if (!r["rank"].get_int64().get(rank) && !r["hostname"].get_string().get(h))
        host_of_rank[static_cast<int>(rank)] = std::string(h);
    }
  if (!gt["faults"].get_array().get(arr))
    for (auto f : arr) {
      bool trig = false;
      if (f["triggered"].get_bool().get(trig)) {}
      if (!trig) continue;
      Truth t;
      std::string_view k;
      if (f["kind"].get_string().get(k)) {}
      t.fault_kind = std::string(k);
      t.kind = FindingKindForFault(t.fault_kind);
      t.host_level = HostLevelFault(t.fault_kind);
      t.severity = Severity(t.fault_kind, f);
      simdjson::dom::array a;
      if (!f["hosts"].get_array().get(a)) for (auto x : a) t.hosts.insert(std::string(x.get_string().value_unsafe()));
      if (!f["ranks"].get_array().get(a)) for (auto x : a) t.ranks.insert(static_cast<int>(x.get_int64().value_unsafe()));
      if (f["start_us"].get_int64().get(t.start)) {}
      if (f["end_us"].get_int64().get(t.end)) {}
      truths.push_back(std::move(t));
    }
  sr->healthy = truths.empty();
  sr->faults = static_cast<int>(truths.size());
  sr->fault_labels.clear();
  for (const Truth& t : truths) sr->fault_labels.push_back({t.fault_kind, t.severity});
  for (Truth& t : truths) tier->kinds[t.kind].faults++;
  for (const Finding& f : findings) {
    const std::string kind(KindName(f.kind));
    KindScore& ks = tier->kinds[kind];
    ks.findings++;
    run->findings++;
    // The finding's root causes: its ranks; for host-level faults the hosts those ranks run on
    // (or the hosts it names when it names no rank).
    const std::set<int> ranks(f.ranks.begin(), f.ranks.end());
    std::set<std::string> hosts;
    for (int r : f.ranks) {
      auto it = host_of_rank.find(r);
      hosts.insert(it == host_of_rank.end() ? "rank " + std::to_string(r) : it->second);
    }
    if (f.ranks.empty()) hosts.insert(f.hosts.begin(), f.hosts.end());
    Truth* credit = nullptr;
    bool credit_exact = false, duplicate = false;
    for (Truth& t : truths) {
      if (t.kind != kind || f.end_us + slack < t.start || f.start_us - slack > t.end) continue;
      const bool in = t.host_level ? Contained(hosts, t.hosts) : Contained(ranks, t.ranks);
      if (!in) continue;
      if (t.found) { duplicate = true; continue; }
      const bool exact = t.host_level ? hosts == t.hosts : ranks == t.ranks;
      if (!credit || (exact && !credit_exact)) {
        credit = &t;
        credit_exact = exact;
      }
    }
    // Symptoms name no culprit by design (step_regression, step_jitter: the step time moved;
    // slow_network: a network the data cannot localise): they stay out of the culprit
    // calibration, and each one still counts as a false finding of its job.
    const bool symptom = IsSymptom(f.kind);
    CalibrationBin unused;
    CalibrationBin& cb = symptom ? unused
                                 : tier->calibration[std::clamp(static_cast<size_t>(f.confidence * 5), size_t{0}, size_t{4})];
    cb.findings++;
    cb.confidence_sum += f.confidence;
    if (credit) {
      credit->found = true;
      credit->exact = credit_exact;
      ks.true_findings++;
      cb.true_findings++;
      if (credit->exact) { ks.exact_findings++; run->exact++; }
    } else {
      if (duplicate) ks.duplicates++;
      run->false_findings++;
      if (symptom) run->false_symptoms++;
    }
  }
  run->fault_found.clear();
  for (Truth& t : truths) {
    run->fault_found.push_back(t.found);
    KindScore& ks = tier->kinds[t.kind];
    if (t.found) {
      ks.found_faults++;
      run->found++;
      ks.localize_s_sum += localize_s;
      if (t.exact) ks.exact_faults++;
    }
    if (!std::isnan(t.severity)) tier->severity[t.fault_kind].push_back({t.severity, t.found});
  }
  if (sr->healthy) {
    tier->healthy_steps += static_cast<int>(steps);
    tier->healthy_findings += run->findings;
  }
  return Status::Ok();
}

double TierScore::DetectionLimit(const std::string& fault_kind, double share) const {
  auto it = severity.find(fault_kind);
  if (it == severity.end()) return std::nan("");
  std::vector<SeverityPoint> v = it->second;
  std::sort(v.begin(), v.end(), [](const SeverityPoint& a, const SeverityPoint& b) { return a.severity < b.severity; });
  // The detection probability is taken to grow with severity: a monotone (isotonic) fit of
  // found against severity, by pooling adjacent violators. The limit is the weakest severity
  // whose fitted probability reaches `share`.
  struct Block { double found, n; size_t last; };
  std::vector<Block> blocks;
  for (size_t i = 0; i < v.size(); ++i) {
    blocks.push_back({v[i].found ? 1.0 : 0.0, 1.0, i});
    while (blocks.size() >= 2 && blocks[blocks.size() - 2].found / blocks[blocks.size() - 2].n >
                                     blocks.back().found / blocks.back().n) {
      Block b = blocks.back();
      blocks.pop_back();
      blocks.back().found += b.found;
      blocks.back().n += b.n;
      blocks.back().last = b.last;
    }
  }
  size_t first = 0;
  for (const Block& b : blocks) {
    if (b.found / b.n + 1e-12 >= share) return v[first].severity;
    first = b.last + 1;
  }
  return std::nan("");
}

namespace {

// Deterministic draws for scenario parameters (splitmix64): scenarios vary shapes, noise,
// severities, locations and windows with the seed, and no detector threshold is chosen per
// scenario.
struct Draw {
  uint64_t s;
  explicit Draw(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL) {}
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int Int(int lo, int hi) { return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1)); }  // [lo, hi]
  double Real(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(Next() >> 11) / 9007199254740992.0; }
  double LogReal(double lo, double hi) { return std::exp(Real(std::log(lo), std::log(hi))); }
};

struct Shape {
  std::string tag;
  int hosts, gpus, tp, pp, cp = 1, ep = 1;
  int world() const { return hosts * gpus; }
  int dp() const { return world() / (tp * pp * cp); }
};

std::string Num(double x, int prec = 2) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", prec, x);
  return b;
}

// Job shapes drawn by seed: TP inside a host, PP stages across hosts, DP/EP/CP groups across
// hosts (the layouts of the jobs users run), 8-256 GPUs for CI.
const std::vector<Shape>& CiShapes() {
  static const std::vector<Shape> s = {
      {"16g", 4, 4, 2, 2},          {"32g-ep", 8, 4, 4, 2, 1, 2}, {"64g", 8, 8, 8, 2},
      {"8g", 4, 2, 2, 2},           {"64g-cp", 8, 8, 4, 2, 2},    {"128g-ep", 16, 8, 8, 4, 1, 2},
      {"256g-ep", 32, 8, 8, 4, 1, 4}, {"32g-pp4", 8, 4, 2, 4},
  };
  return s;
}

// One job shape and seed: a healthy job, one scenario per fault kind, and jobs with two and
// three unrelated faults; every job draws its noise, clock skew and Inspector flavour, and each
// fault its window (the whole job, or any length down to about two dump intervals) and a
// severity spanning its detector's limit.
void AddFaultScenarios(const Shape& sh, int seed, int steps, std::vector<Scenario>* out) {
  Draw r(static_cast<uint64_t>(seed) * 1000003ULL + static_cast<uint64_t>(sh.world()));
  std::vector<std::string> base = {"layers=4", "hidden=4096", "seq_len=2048", "micro_batches=4",
                                   "dump_interval_us=200000", "hosts=" + std::to_string(sh.hosts),
                                   "gpus_per_host=" + std::to_string(sh.gpus), "tp=" + std::to_string(sh.tp),
                                   "pp=" + std::to_string(sh.pp), "cp=" + std::to_string(sh.cp),
                                   "ep=" + std::to_string(sh.ep), "seed=" + std::to_string(seed),
                                   "steps=" + std::to_string(steps)};
  auto job = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.push_back("compute_sigma=" + Num(r.Real(0.01, 0.05), 3));
    a.push_back("comm_sigma=" + Num(r.Real(0.02, 0.10), 3));
    a.push_back("contention_prob=" + Num(r.Real(0.0, 0.3), 3));
    a.push_back("clock_skew_us=" + std::to_string(r.Int(100, 3000)));
    a.push_back(std::string("flavor=") + (r.Int(0, 2) == 0 ? "2.29" : "2.30"));
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::string sfx = "-" + sh.tag + "-s" + std::to_string(seed);
  const int world = sh.world();
  // A window in steps: a third of the faults last the whole job (no history to compare with).
  auto window = [&]() {
    if (r.Int(0, 2) == 0) return ",start_step=0,end_step=" + std::to_string(steps);
    const int len = r.Int(5, steps / 2);
    const int a = r.Int(0, steps - len);
    return ",start_step=" + std::to_string(a) + ",end_step=" + std::to_string(a + len);
  };
  auto host = [&]() { return r.Int(0, sh.hosts - 1); };
  auto rank_off = [&](int h) {  // a rank on another host than h
    int x = r.Int(0, world - 1);
    if (x / sh.gpus == h) x = (x + sh.gpus) % world;
    return x;
  };
  auto nic = [&](int h) {
    return "kind=nic_degrade,host=" + std::to_string(h) + ",factor=" + Num(r.LogReal(0.08, 0.8), 3) + window();
  };
  auto straggler = [&](int rank) {
    return "kind=gpu_straggler,rank=" + std::to_string(rank) + ",factor=" + Num(r.LogReal(1.02, 2.0), 3) + window();
  };
  auto slow_host = [&](int h) {
    return "kind=host_slowdown,host=" + std::to_string(h) + ",factor=" + Num(r.LogReal(1.02, 2.0), 3) + window();
  };
  out->push_back({"healthy" + sfx, job({}), {}, ""});
  out->push_back({"healthy-missing" + sfx, job({}), {}, "missing:" + std::to_string(r.Int(0, world - 1))});
  out->push_back({"nic_degrade" + sfx, job({}), {nic(host())}, ""});
  {
    // Flaps recur: 2-8 outages in the fault's window (these jobs run about 65 ms a step), 10-100
    // ms each; two outages are below what can be told from a transient.
    const std::string w = window();
    const int s0 = std::atoi(w.c_str() + w.find("start_step=") + 11), s1 = std::atoi(w.c_str() + w.find("end_step=") + 9);
    const int period = std::max(150000, (s1 - s0) * 65000 / r.Int(2, 8));
    const int down = std::min(period / 3, r.Int(10, 100) * 1000);
    out->push_back({"link_flap" + sfx, job({}),
                    {"kind=link_flap,host=" + std::to_string(host()) + ",period_us=" + std::to_string(period) +
                     ",down_us=" + std::to_string(down) + w}, ""});
  }
  {
    const int rank = r.Int(0, world - 1);
    const int other = (rank + 1 + r.Int(0, world - 2)) % world;
    out->push_back({"gpu_straggler" + sfx, job({}), {straggler(rank)}, "cut:" + std::to_string(other)});
  }
  out->push_back({"host_slowdown" + sfx, job({}), {slow_host(host())}, ""});
  out->push_back({"masked_straggler" + sfx, job({}),
                  {"kind=masked_straggler,rank=" + std::to_string(r.Int(0, world - 1)) + ",factor=" +
                   Num(r.LogReal(1.2, 3.0)) + window()}, ""});
  {
    const int a = r.Int(1, steps - 3);
    out->push_back({"host_stall" + sfx, job({}),
                    {"kind=host_stall,rank=" + std::to_string(r.Int(0, world - 1)) + ",stall_us=" +
                     std::to_string(static_cast<int>(r.LogReal(2e5, 4e6))) + ",start_step=" + std::to_string(a) +
                     ",end_step=" + std::to_string(a + 1)}, ""});
  }
  out->push_back({"hang" + sfx, job({"hang_timeout_s=30"}),
                  {"kind=hang,rank=" + std::to_string(r.Int(0, world - 1)) + ",comm=" +
                   (r.Int(0, 1) ? "dp" : "tp") + ",start_step=" + std::to_string(r.Int(1, steps - 2))}, ""});
  out->push_back({"mismatch" + sfx, job({}),
                  {"kind=mismatch,rank=" + std::to_string(r.Int(0, world - 1)) + ",comm=" +
                   (r.Int(0, 1) ? "dp" : "tp") + ",start_step=" + std::to_string(r.Int(1, steps - 2)) +
                   ",size_factor=" + (r.Int(0, 1) ? "2" : "0.5") + ",effect=complete"}, ""});
  out->push_back({"pipeline_bubble" + sfx, job({}),
                  {"kind=pipeline_bubble,stage=" + std::to_string(r.Int(0, sh.pp - 2)) + ",delay_us=" +
                   std::to_string(static_cast<int>(r.LogReal(1e3, 2e4))) + window()}, ""});
  out->push_back({"link_down" + sfx, job({"hang_timeout_s=30"}),
                  {"kind=link_down,host=" + std::to_string(host()) + ",start_step=" + std::to_string(r.Int(1, steps - 2))},
                  ""});
  {
    const int h = host();
    out->push_back({"two_faults" + sfx, job({}), {nic(h), straggler(rank_off(h))}, ""});
  }
  if (sh.hosts >= 3) {
    const int h1 = host();
    const int h2 = (h1 + 1 + r.Int(0, sh.hosts - 2)) % sh.hosts;
    int h3 = (h2 + 1 + r.Int(0, sh.hosts - 2)) % sh.hosts;
    if (h3 == h1) h3 = (h3 + 1) % sh.hosts == h2 ? (h3 + 2) % sh.hosts : (h3 + 1) % sh.hosts;
    int rank = r.Int(0, sh.gpus - 1) + h3 * sh.gpus;
    out->push_back({"three_faults" + sfx, job({}), {nic(h1), slow_host(h2), straggler(rank)}, ""});
  }
}

}  // namespace

std::vector<Scenario> BuiltinSuite(const std::string& name) {
  std::vector<Scenario> s;
  if (name != "small" && name != "heldout" && name != "explore" && name != "large") return s;
  const auto& shapes = CiShapes();
  // Development seeds 1-8 (one CI shape each), held-out seeds 1001-1008 (the same shapes), and
  // exploration seeds 2001-2016 (each shape twice): fresh jobs for detector work to fail on, so
  // that the development seeds are not the only failures it learns from and held-out stays unseen.
  const int first = name == "heldout" ? 1001 : name == "explore" ? 2001 : 1;
  const int n = name == "large" ? 24 : name == "explore" ? 2 * static_cast<int>(shapes.size())
                                                         : static_cast<int>(shapes.size());
  for (int i = 0; i < n; ++i) AddFaultScenarios(shapes[static_cast<size_t>(i) % shapes.size()], first + i, 40, &s);
  if (name == "explore") {
    // `collscope simulate`'s own defaults (8 layers, 4k sequences, 1 s dumps, moderate noise): a
    // dump interval of several diagnosis windows, which every shape above (200 ms dumps, one
    // window) leaves undrawn; there the pipeline partners of a degraded NIC once became compute
    // stragglers. One NIC, one GPU and a healthy job per shape, faults for steps 8-20 of 24.
    // And a deep pipeline (PP 8, a host of 4 GPUs per stage and replica), where a slowed stage's
    // later stages were once compute stragglers.
    const std::vector<Shape> cli = {{"128g-pp4", 16, 8, 8, 4}, {"256g-pp2", 32, 8, 8, 2},
                                    {"256g-pp4", 32, 8, 8, 4}, {"512g-pp4", 64, 8, 8, 4},
                                    {"128g-pp8", 32, 4, 4, 8}};
    for (size_t i = 0; i < cli.size(); ++i) {
      const Shape& sh = cli[i];
      const int seed = 2001 + static_cast<int>(i);
      const std::vector<std::string> args = {
          "layers=8", "hidden=4096", "seq_len=4096", "micro_batches=4", "dump_interval_us=1000000",
          "hosts=" + std::to_string(sh.hosts), "gpus_per_host=" + std::to_string(sh.gpus),
          "tp=" + std::to_string(sh.tp), "pp=" + std::to_string(sh.pp), "seed=" + std::to_string(seed),
          "steps=24", "compute_sigma=0.03", "comm_sigma=0.05", "flavor=2.30"};
      const std::string sfx = "-" + sh.tag + "-1s-s" + std::to_string(seed);
      const int host = (seed * 7) % sh.hosts, rank = (seed * 37) % sh.world();
      s.push_back({"cli-healthy" + sfx, args, {}, ""});
      s.push_back({"cli-nic_degrade" + sfx, args,
                   {"kind=nic_degrade,host=" + std::to_string(host) + ",factor=0.3,start_step=8,end_step=20"}, ""});
      s.push_back({"cli-gpu_straggler" + sfx, args,
                   {"kind=gpu_straggler,rank=" + std::to_string(rank) + ",factor=1.15,start_step=8,end_step=20"}, ""});
    }
  }
  // A long healthy job (>= 1,000 steps) at the highest noise: no finding may appear.
  s.push_back({"healthy-1000steps-8g",
               {"hosts=4", "gpus_per_host=2", "tp=2", "pp=2", "layers=2", "hidden=1024", "seq_len=1024",
                "micro_batches=2", "dump_interval_us=200000", "steps=1000", "compute_sigma=0.05",
                "comm_sigma=0.1", "contention_prob=0.3", "clock_skew_us=3000", "seed=" + std::to_string(first + 10)},
               {}, ""});
  if (name != "large") return s;
  // large: jobs up to 4,096 GPUs, a long healthy job and a 10,240-GPU job.
  const std::vector<Shape> big = {{"512g", 64, 8, 8, 4}, {"1024g-ep", 128, 8, 8, 4, 1, 4}, {"4096g", 512, 8, 8, 8}};
  for (size_t i = 0; i < big.size(); ++i) AddFaultScenarios(big[i], 21 + static_cast<int>(i), 30, &s);
  s.push_back({"healthy-2000steps-64g",
               {"hosts=8", "gpus_per_host=8", "tp=4", "pp=2", "layers=2", "hidden=1024", "seq_len=1024",
                "micro_batches=2", "dump_interval_us=500000", "steps=2000", "compute_sigma=0.05",
                "comm_sigma=0.1", "seed=12"},
               {}, ""});
  const std::vector<std::string> huge = {"hosts=1280", "gpus_per_host=8", "tp=8", "pp=8", "layers=16",
                                         "hidden=8192", "seq_len=4096", "micro_batches=8",
                                         "steps=12", "dump_interval_us=2000000"};
  s.push_back({"10240-gpu_straggler", huge, {"kind=gpu_straggler,rank=5000,factor=1.5,start_step=4,end_step=10"}, ""});
  return s;
}

namespace {

Status Apply(sim::SimConfig* c, const std::string& kv) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos) return Status::InvalidArgument("bad scenario setting " + kv);
  const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
  const double d = std::atof(v.c_str());
  const int i = std::atoi(v.c_str());
  if (k == "hosts") c->cluster.hosts = i;
  else if (k == "gpus_per_host") { c->cluster.gpus_per_host = i; c->cluster.nics_per_host = i; }
  else if (k == "tp") c->parallel.tp = i;
  else if (k == "pp") c->parallel.pp = i;
  else if (k == "cp") c->parallel.cp = i;
  else if (k == "ep") c->parallel.ep = i;
  else if (k == "layers") c->workload.layers = i;
  else if (k == "hidden") c->workload.hidden = i;
  else if (k == "seq_len") c->workload.seq_len = i;
  else if (k == "micro_batches") c->workload.micro_batches = i;
  else if (k == "bucket_mparams") c->workload.bucket_mparams = d;
  else if (k == "steps") c->workload.steps = i;
  else if (k == "seed") c->seed = static_cast<uint64_t>(i);
  else if (k == "dump_interval_us") c->inspector.dump_interval_us = static_cast<int64_t>(d);
  else if (k == "verbose") c->inspector.verbose = i != 0;
  else if (k == "flavor") c->inspector.flavor = v;
  else if (k == "ring_size") c->inspector.ring_size = i;
  else if (k == "hang_timeout_s") c->hang_timeout_s = d;
  else if (k == "compute_sigma") c->noise.compute_sigma = d;
  else if (k == "comm_sigma") c->noise.comm_sigma = d;
  else if (k == "contention_prob") c->noise.contention_prob = d;
  else if (k == "gpu_speed_sigma") c->noise.gpu_speed_sigma = d;
  else if (k == "clock_skew_us") c->cluster.clock_skew_us = d;
  else
    return Status::InvalidArgument("unknown scenario setting " + k);
  return Status::Ok();
}

// Damages one rank's Inspector file as real jobs lose logs (docs/diagnosis.md).
Status Damage(const std::string& dir, const std::string& damage) {
  namespace fs = std::filesystem;
  const size_t colon = damage.find(':');
  if (colon == std::string::npos) return Status::InvalidArgument("bad damage " + damage);
  const std::string what = damage.substr(0, colon);
  const int rank = std::atoi(damage.c_str() + colon + 1);
  simdjson::dom::parser parser;
  simdjson::dom::element gt;
  if (auto e = parser.load(dir + "/ground_truth.json").get(gt)) return Status::Corruption(simdjson::error_message(e));
  simdjson::dom::array ranks;
  if (gt["ranks"].get_array().get(ranks)) return Status::Corruption("ground truth without ranks");
  for (auto r : ranks) {
    int64_t x = -1;
    std::string_view file;
    if (r["rank"].get_int64().get(x) || x != rank || r["inspector_file"].get_string().get(file) || file.empty()) continue;
    const std::string path = dir + "/nccl-inspector/" + std::string(file);
    std::error_code ec;
    if (what == "missing") {
      fs::remove(path, ec);
    } else if (what == "cut") {
      // Whole lines only up to half the file: a process killed between two dumps.
      const auto size = fs::file_size(path, ec);
      if (ec) return Status::IOError(path + ": " + ec.message());
      std::ifstream in(path, std::ios::binary);
      std::string text(static_cast<size_t>(size), '\0');
      in.read(text.data(), static_cast<std::streamsize>(size));
      const size_t nl = text.rfind('\n', text.size() / 2);
      text.resize(nl == std::string::npos ? 0 : nl + 1);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    } else {
      return Status::InvalidArgument("bad damage " + damage);
    }
    return Status::Ok();
  }
  return Status::Ok();  // the rank wrote no Inspector file: nothing to damage
}

}  // namespace

Result<std::vector<Scenario>> ReadSuiteFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError(path + ": cannot read");
  std::vector<Scenario> suite;
  std::set<std::string> names;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    Scenario sc;
    if (!(words >> sc.name)) continue;
    const std::string at = path + ":" + std::to_string(lineno) + ": ";
    // The name is a directory under the work dir and a JSON string: letters, digits and ._+- only.
    const bool plain = sc.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-") ==
                       std::string::npos;
    if (!plain || sc.name == "." || sc.name == "..")
      return Status::InvalidArgument(at + "a line starts with the scenario's name (letters, digits and ._+- only), not '" + sc.name + "'");
    if (!names.insert(sc.name).second) return Status::InvalidArgument(at + "scenario " + sc.name + " named twice");
    sim::SimConfig check;
    check.output.dir = "unused";  // checked as a job, not written
    std::string word;
    while (words >> word) {
      if (word.starts_with("fault=")) {
        sim::FaultSpec spec;
        COLLSCOPE_RETURN_IF_ERROR(sim::ParseFaultSpec(word.substr(6), &spec).WithPrefix(at));
        check.faults.push_back(spec);
        sc.faults.push_back(word.substr(6));
      } else if (word.starts_with("damage=")) {
        const std::string d = word.substr(7);
        const bool known = (d.starts_with("missing:") || d.starts_with("cut:")) &&
                           d.find_first_not_of("0123456789", d.find(':') + 1) == std::string::npos && d.back() != ':';
        if (!known) return Status::InvalidArgument(at + "damage is missing:RANK or cut:RANK, not '" + d + "'");
        if (!sc.damage.empty()) return Status::InvalidArgument(at + "one damage a scenario");
        sc.damage = d;
      } else {
        COLLSCOPE_RETURN_IF_ERROR(Apply(&check, word).WithPrefix(at));
        sc.args.push_back(word);
      }
    }
    // The job as a whole (its shape, and each fault against it), as `simulate` would check it.
    COLLSCOPE_RETURN_IF_ERROR(sim::ValidateConfig(check).WithPrefix(at));
    suite.push_back(std::move(sc));
  }
  if (suite.empty()) return Status::InvalidArgument(path + ": no scenario");
  return suite;
}

Result<EvalReport> RunEval(const std::vector<Scenario>& suite, const EvalOptions& o) {
  namespace fs = std::filesystem;
  EvalReport rep;
  rep.inspector_proxy = o.inspector_proxy;
  std::string base = o.work_dir;
  if (base.empty()) {
    base = (fs::temp_directory_path() / ("collscope-eval-" + std::to_string(::getpid()))).string();
  }
  std::error_code ec;
  fs::create_directories(base, ec);
  for (const Scenario& sc : suite) {
    if (!o.only.empty() && sc.name.find(o.only) == std::string::npos) continue;
    ScenarioResult sr;
    sr.name = sc.name;
    sim::SimConfig cfg;
    cfg.output.dir = base + "/" + sc.name;
    // Tier D reads kernel data as production jobs leave it: the CUPTI library's summaries (the
    // simulator writes them through the library's own Summarizer), not profiler traces, which
    // nobody leaves on. Scored only when asked: they cost more to write and read than the logs.
    cfg.output.kineto_max_ranks = o.kernel_max_ranks;
    cfg.output.kineto_traces = false;
    fs::remove_all(cfg.output.dir, ec);
    for (const auto& a : sc.args)
      COLLSCOPE_RETURN_IF_ERROR(Apply(&cfg, a).WithPrefix(sc.name + ": "));
    for (const auto& f : sc.faults) {
      sim::FaultSpec spec;
      COLLSCOPE_RETURN_IF_ERROR(sim::ParseFaultSpec(f, &spec).WithPrefix(sc.name + ": "));
      cfg.faults.push_back(spec);
    }
    cfg.inspector.proxy = o.inspector_proxy;  // the 2.29 flavour writes none
    sr.flavor = cfg.inspector.flavor;
    double t = Now();
    sim::SimStats stats;
    COLLSCOPE_RETURN_IF_ERROR(sim::Simulate(cfg, &stats).WithPrefix(sc.name + ": simulate: "));
    sr.sim_s = Now() - t;
    if (!sc.damage.empty()) {
      Status st = Damage(cfg.output.dir, sc.damage);
      if (!st.ok()) return st.WithPrefix(sc.name + ": ");
    }
    // Tier A: the Inspector logs alone, ingested once into a store that every tier reads.
    const std::string logs = cfg.output.dir + "/nccl-inspector";
    std::vector<std::string> state_files;
    for (auto it = fs::directory_iterator(logs, ec); !ec && it != fs::directory_iterator(); ++it)
      if (it->path().filename().string().ends_with(".inflight.json")) state_files.push_back(it->path().string());
    std::sort(state_files.begin(), state_files.end());
    t = Now();
    auto store = Store::Open(":memory:");
    if (!store.ok()) return store.status();
    auto files = DiscoverInputs({logs});
    if (!files.ok()) return files.status().WithPrefix(sc.name + ": ");
    IngestOptions io;
    io.run = "eval";
    io.threads = o.threads;
    auto ing = Ingest(**store, files->files, io);
    if (!ing.ok()) return ing.status().WithPrefix(sc.name + ": ingest: ");
    sr.ingest_s = Now() - t;
    const std::string gt = cfg.output.dir + "/ground_truth.json";
    DiagnoseOptions dopt;
    dopt.threads = o.threads;
    dopt.run = "eval";
    auto score = [&](const std::string& tier, const std::vector<std::string>& extra, double* took) -> Status {
      const double t0 = Now();
      auto fnd = DiagnosePaths(extra, dopt, nullptr, store->get());
      if (!fnd.ok()) return fnd.status().WithPrefix(sc.name + ": diagnose (tier " + tier + "): ");
      const double dt = Now() - t0;
      if (took) *took = dt;
      ScenarioResult by_flavor_sr;
      TierRun by_flavor_run;
      Status scored = ScoreFindings(gt, *fnd, sr.ingest_s + dt, &rep.by_flavor[cfg.inspector.flavor][tier],
                                    &by_flavor_sr, &by_flavor_run);
      if (!scored.ok()) return scored;
      return ScoreFindings(gt, *fnd, sr.ingest_s + dt, &rep.tiers[tier], &sr, &sr.tiers[tier]);
    };
    Status st = score("A", {}, &sr.analysis_s);
    if (st.ok()) st = score("B", state_files, nullptr);
    // Tier C: the per-rank step/phase series, in the format the annotation API writes.
    std::vector<std::string> c = state_files;
    if (fs::exists(cfg.output.dir + "/steps", ec)) {
      c.push_back(cfg.output.dir + "/steps");
      if (st.ok()) st = score("C", c, nullptr);
    }
    if (st.ok() && fs::exists(cfg.output.dir + "/kernels", ec)) {
      std::vector<std::string> d = c;
      d.push_back(cfg.output.dir + "/kernels");
      st = score("D", d, nullptr);
    }
    if (!st.ok()) return st;
    if (!o.keep) fs::remove_all(cfg.output.dir, ec);
    rep.scenarios.push_back(sr);
  }
  if (!o.keep && o.work_dir.empty()) fs::remove_all(base, ec);
  return rep;
}

namespace {

const char* kTierText[] = {"A", "stock NCCL Inspector logs only", "B", "A + collscope in-flight state files",
                           "C", "B + per-rank step/phase series (the annotation API's format)",
                           "D", "C + kernel summaries (the CUPTI library's format)"};

std::string TierTitle(const std::string& t) {
  for (size_t i = 0; i + 1 < std::size(kTierText); i += 2)
    if (t == kTierText[i]) return t + ": " + kTierText[i + 1];
  return t;
}

std::string Limit(double x) { return std::isnan(x) ? "-" : Num(x, 3); }

}  // namespace

std::string EvalReport::ToText() const {
  std::ostringstream o;
  char b[320];
  o << "scenario                               world steps faults";
  for (const auto& [t, ts] : tiers) o << "  " << t << ":found/false";
  o << "  sim_s ingest_s analysis_s\n";
  for (const auto& s : scenarios) {
    std::snprintf(b, sizeof b, "%-38s %5d %5d %6d", s.name.c_str(), s.world, s.steps, s.faults);
    o << b;
    for (const auto& [t, ts] : tiers) {
      auto it = s.tiers.find(t);
      if (it == s.tiers.end()) { o << "            -"; continue; }
      std::snprintf(b, sizeof b, "  %6d/%-5d", it->second.found, it->second.false_findings);
      o << b;
    }
    std::snprintf(b, sizeof b, " %6.2f %8.2f %10.2f\n", s.sim_s, s.ingest_s, s.analysis_s);
    o << b;
  }
  for (const auto& [t, ts] : tiers) {
    o << "\n== tier " << TierTitle(t)
      << (inspector_proxy ? ", the 2.30 jobs' logs with proxy_trace records (NCCL_INSPECTOR_ENABLE_PROXY=1)" : "")
      << " (strict: the finding must name the culprit rank, or host for host-level faults)\n";
    o << "kind                  findings  true exact dupl  faults found  precision recall  exact     F1  localize_s\n";
    for (const auto& [k, v] : ts.kinds) {
      if (v.faults == 0 && (k == "step_regression" || k == "step_jitter" || k == "slow_network")) {
        std::snprintf(b, sizeof b, "%-20s %9d  (a symptom: names no culprit, not scored per kind)\n", k.c_str(), v.findings);
        o << b;
        continue;
      }
      std::snprintf(b, sizeof b, "%-20s %9d %5d %5d %4d %7d %5d %10.3f %6.3f %6.3f %6.3f %11.2f\n", k.c_str(),
                    v.findings, v.true_findings, v.exact_findings, v.duplicates, v.faults, v.found_faults,
                    v.precision(), v.recall(), v.exact_rate(), v.f1(), v.time_to_localize_s());
      o << b;
    }
    o << "\nrecall against severity (fault kind: severity range -> found/faults; limits: weakest severity\n"
         "above which 50% / 95% are found)\n";
    for (const auto& [fk, pts] : ts.severity) {
      std::vector<SeverityPoint> v = pts;
      std::sort(v.begin(), v.end(), [](const SeverityPoint& a, const SeverityPoint& b2) { return a.severity < b2.severity; });
      std::snprintf(b, sizeof b, "  %-17s", fk.c_str());
      o << b;
      const size_t bins = std::min<size_t>(4, v.size());
      for (size_t i = 0; i < bins; ++i) {
        const size_t lo = i * v.size() / bins, hi = (i + 1) * v.size() / bins;
        int found = 0;
        for (size_t j = lo; j < hi; ++j) found += v[j].found;
        std::snprintf(b, sizeof b, " [%s-%s] %d/%zu", Num(v[lo].severity, 3).c_str(), Num(v[hi - 1].severity, 3).c_str(),
                      found, hi - lo);
        o << b;
      }
      o << "  limit50 " << Limit(ts.DetectionLimit(fk, 0.5)) << " limit95 " << Limit(ts.DetectionLimit(fk, 0.95)) << "\n";
    }
    o << "\ncalibration of culprit findings (confidence bin: findings, mean confidence, measured precision)\n";
    for (size_t i = 0; i < ts.calibration.size(); ++i) {
      const CalibrationBin& c = ts.calibration[i];
      if (!c.findings) continue;
      std::snprintf(b, sizeof b, "  [%.1f, %.1f%s %5d  %.2f  %.2f\n", 0.2 * static_cast<double>(i),
                    0.2 * static_cast<double>(i + 1), i == 4 ? "]" : ")", c.findings, c.confidence_sum / c.findings,
                    static_cast<double>(c.true_findings) / c.findings);
      o << b;
    }
    std::snprintf(b, sizeof b, "false findings per 1,000 healthy steps: %.2f (%d findings in %d healthy steps)\n",
                  ts.false_per_1000_healthy_steps(), ts.healthy_findings, ts.healthy_steps);
    o << b;
  }
  o << "\n== by Inspector flavour (the same strict scores; per tier: found/faults, then false findings)\n";
  o << "flavour  kind                ";
  for (const auto& [t, ts] : tiers) o << "  " << t << ":found/faults false";
  o << "\n";
  for (const auto& [flavor, by_tier] : by_flavor) {
    std::set<std::string> kinds;
    for (const auto& [t, ts] : by_tier)
      for (const auto& [k, v] : ts.kinds)
        if (v.faults) kinds.insert(k);
    for (const std::string& k : kinds) {
      std::snprintf(b, sizeof b, "%-8s %-20s", flavor.c_str(), k.c_str());
      o << b;
      for (const auto& [t, unused] : tiers) {
        auto ts = by_tier.find(t);
        const KindScore* v = nullptr;
        if (ts != by_tier.end()) {
          auto it = ts->second.kinds.find(k);
          if (it != ts->second.kinds.end()) v = &it->second;
        }
        if (!v) {
          o << "                   -";
          continue;
        }
        std::snprintf(b, sizeof b, "  %8d/%-4d %5d", v->found_faults, v->faults, v->findings - v->true_findings);
        o << b;
      }
      o << "\n";
    }
  }
  return o.str();
}

std::string EvalReport::ToJson() const {
  std::ostringstream o;
  o << "{\"tiers\": {";
  bool ft = true;
  for (const auto& [t, ts] : tiers) {
    o << (ft ? "" : ", ") << "\"" << t << "\": {\"kinds\": {";
    ft = false;
    bool first = true;
    for (const auto& [k, v] : ts.kinds) {
      o << (first ? "" : ", ") << "\"" << k << "\": {\"findings\": " << v.findings << ", \"true\": " << v.true_findings
        << ", \"exact\": " << v.exact_findings << ", \"duplicates\": " << v.duplicates << ", \"faults\": " << v.faults
        << ", \"found\": " << v.found_faults << ", \"precision\": " << v.precision() << ", \"recall\": " << v.recall()
        << ", \"exact_rate\": " << v.exact_rate() << ", \"f1\": " << v.f1()
        << ", \"time_to_localize_s\": " << v.time_to_localize_s() << "}";
      first = false;
    }
    o << "}, \"detection_limits\": {";
    first = true;
    for (const auto& [fk, pts] : ts.severity) {
      auto lim = [](double x) { return std::isnan(x) ? std::string("null") : Num(x, 4); };
      o << (first ? "" : ", ") << "\"" << fk << "\": {\"faults\": " << pts.size() << ", \"p50\": "
        << lim(ts.DetectionLimit(fk, 0.5)) << ", \"p95\": " << lim(ts.DetectionLimit(fk, 0.95)) << "}";
      first = false;
    }
    o << "}, \"calibration\": [";
    for (size_t i = 0; i < ts.calibration.size(); ++i)
      o << (i ? ", " : "") << "{\"findings\": " << ts.calibration[i].findings << ", \"true\": "
        << ts.calibration[i].true_findings << "}";
    o << "], \"false_per_1000_healthy_steps\": " << ts.false_per_1000_healthy_steps() << "}";
  }
  o << "}, \"by_inspector_flavor\": {";
  bool ff = true;
  for (const auto& [flavor, by_tier] : by_flavor) {
    o << (ff ? "" : ", ") << "\"" << flavor << "\": {";
    ff = false;
    bool first_tier = true;
    for (const auto& [t, ts] : by_tier) {
      o << (first_tier ? "" : ", ") << "\"" << t << "\": {";
      first_tier = false;
      bool first = true;
      for (const auto& [k, v] : ts.kinds) {
        o << (first ? "" : ", ") << "\"" << k << "\": {\"findings\": " << v.findings << ", \"true\": " << v.true_findings
          << ", \"faults\": " << v.faults << ", \"found\": " << v.found_faults << ", \"precision\": " << v.precision()
          << ", \"recall\": " << v.recall() << "}";
        first = false;
      }
      o << "}";
    }
    o << "}";
  }
  o << "}, \"scenarios\": [";
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const auto& s = scenarios[i];
    o << (i ? ", " : "") << "{\"name\": \"" << s.name << "\", \"flavor\": \"" << s.flavor
      << "\", \"world\": " << s.world << ", \"steps\": " << s.steps << ", \"faults\": " << s.faults
      << ", \"fault_labels\": [";
    for (size_t j = 0; j < s.fault_labels.size(); ++j)
      o << (j ? ", " : "") << "{\"kind\": \"" << s.fault_labels[j].fault_kind << "\", \"severity\": "
        << (std::isnan(s.fault_labels[j].severity) ? std::string("null") : Num(s.fault_labels[j].severity, 4)) << "}";
    o << "], \"tiers\": {";
    bool first = true;
    for (const auto& [t, r] : s.tiers) {
      o << (first ? "" : ", ") << "\"" << t << "\": {\"found\": " << r.found << ", \"exact\": " << r.exact
        << ", \"findings\": " << r.findings << ", \"false_findings\": " << r.false_findings
        << ", \"false_symptoms\": " << r.false_symptoms << ", \"fault_found\": [";
      for (size_t j = 0; j < r.fault_found.size(); ++j) o << (j ? ", " : "") << (r.fault_found[j] ? "true" : "false");
      o << "]}";
      first = false;
    }
    o << "}, \"sim_s\": " << s.sim_s << ", \"ingest_s\": " << s.ingest_s << ", \"analysis_s\": " << s.analysis_s << "}";
  }
  o << "]}\n";
  return o.str();
}

Result<std::vector<std::string>> CheckFloors(const EvalReport& r, const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::IOError("cannot open floors file " + path);
  std::vector<std::string> bad;
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string tier, kind;
    double p = 0, rc = 0, ex = 0;
    if (!(in >> tier >> kind >> p)) return Status::InvalidArgument(path + ":" + std::to_string(lineno) + ": expected TIER KIND ...");
    const std::string where = "tier " + tier + " " + kind;
    auto ts = r.tiers.find(tier);
    if (ts == r.tiers.end()) {
      bad.push_back(where + ": tier not scored");
      continue;
    }
    if (kind == "false_per_1000_healthy_steps") {
      if (ts->second.false_per_1000_healthy_steps() > p + 1e-9)
        bad.push_back(where + " " + std::to_string(ts->second.false_per_1000_healthy_steps()) + " above " + std::to_string(p));
      continue;
    }
    if (!(in >> rc)) return Status::InvalidArgument(path + ":" + std::to_string(lineno) + ": expected TIER KIND PRECISION RECALL [EXACT]");
    if (!(in >> ex)) ex = 0;  // the exact floor is optional
    auto it = ts->second.kinds.find(kind);
    if (it == ts->second.kinds.end()) {
      if (rc > 0) bad.push_back(where + ": no faults or findings of this kind in the suite");
      continue;
    }
    const KindScore& k = it->second;
    if (k.precision() + 1e-9 < p) bad.push_back(where + ": precision " + std::to_string(k.precision()) + " < floor " + std::to_string(p));
    if (k.recall() + 1e-9 < rc) bad.push_back(where + ": recall " + std::to_string(k.recall()) + " < floor " + std::to_string(rc));
    if (k.exact_rate() + 1e-9 < ex) bad.push_back(where + ": exact " + std::to_string(k.exact_rate()) + " < floor " + std::to_string(ex));
  }
  return bad;
}

}  // namespace collscope::diagnose
