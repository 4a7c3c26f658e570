#include "analysis/diagnose/eval.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/steps.h"
#include "core/ingest.h"
#include "sim/sim.h"

namespace collscope::diagnose {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool Apply(sim::SimConfig* c, const std::string& kv, std::string* err) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos) { *err = "bad scenario setting " + kv; return false; }
  const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
  const double d = std::atof(v.c_str());
  const int i = std::atoi(v.c_str());
  if (k == "hosts") c->cluster.hosts = i;
  else if (k == "gpus_per_host") { c->cluster.gpus_per_host = i; c->cluster.nics_per_host = i; }
  else if (k == "tp") c->parallel.tp = i;
  else if (k == "pp") c->parallel.pp = i;
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
  else if (k == "ring_size") c->inspector.ring_size = i;
  else if (k == "hang_timeout_s") c->hang_timeout_s = d;
  else { *err = "unknown scenario setting " + k; return false; }
  return true;
}

struct Truth {
  std::string kind;  // finding kind
  std::set<std::string> hosts, comms;
  std::set<int> ranks;
  int64_t start = 0, end = 0;
  bool found = false, located = false;
};

bool Overlap(const Finding& f, const Truth& t, int64_t slack) {
  if (f.end_us + slack < t.start || f.start_us - slack > t.end) return false;
  for (const auto& h : f.hosts) if (t.hosts.count(h)) return true;
  for (int r : f.ranks) if (t.ranks.count(r)) return true;
  for (const auto& c : f.comms) if (t.comms.count(c)) return true;
  return false;
}

bool Located(const Finding& f, const Truth& t) {
  for (int r : f.ranks) if (t.ranks.count(r)) return true;
  if (!f.ranks.empty() && !t.ranks.empty()) return false;  // names ranks, none of them the cause
  for (const auto& h : f.hosts) if (t.hosts.count(h)) return true;
  return false;
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

Status ScoreFindings(const std::string& gt_path, const std::vector<Finding>& findings,
                     EvalReport* report, ScenarioResult* sr) {
  simdjson::dom::parser parser;
  simdjson::dom::element gt;
  if (auto e = parser.load(gt_path).get(gt)) return Status::Error(gt_path + ": " + simdjson::error_message(e));
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
  simdjson::dom::array faults;
  if (!gt["faults"].get_array().get(faults))
    for (auto f : faults) {
      bool trig = false;
      if (f["triggered"].get_bool().get(trig)) {}
      if (!trig) continue;
      Truth t;
      std::string_view k;
      if (f["kind"].get_string().get(k)) {}
      t.kind = FindingKindForFault(std::string(k));
      simdjson::dom::array a;
      if (!f["hosts"].get_array().get(a)) for (auto x : a) t.hosts.insert(std::string(x.get_string().value_unsafe()));
      if (!f["comms"].get_array().get(a)) for (auto x : a) t.comms.insert(std::string(x.get_string().value_unsafe()));
      if (!f["ranks"].get_array().get(a)) for (auto x : a) t.ranks.insert(static_cast<int>(x.get_int64().value_unsafe()));
      if (f["start_us"].get_int64().get(t.start)) {}
      if (f["end_us"].get_int64().get(t.end)) {}
      truths.push_back(std::move(t));
    }
  sr->healthy = truths.empty();
  sr->faults = static_cast<int>(truths.size());
  for (Truth& t : truths) report->kinds[t.kind].faults++;
  for (const Finding& f : findings) {
    const std::string kind(KindName(f.kind));
    KindScore& ks = report->kinds[kind];
    ks.findings++;
    sr->findings++;
    bool ok = false;
    for (Truth& t : truths) {
      // Step-level findings are symptoms: true when they coincide with any labelled fault.
      const bool symptom = f.kind == Kind::kStepRegression || f.kind == Kind::kStepJitter;
      if (symptom ? !(f.end_us + slack < t.start || f.start_us - slack > t.end)
                  : (t.kind == kind && Overlap(f, t, slack))) {
        ok = true;
        if (!symptom) {
          t.found = true;
          t.located = t.located || Located(f, t);
        }
      }
    }
    if (ok) ks.true_findings++;
    else sr->false_findings++;
  }
  for (Truth& t : truths) {
    KindScore& ks = report->kinds[t.kind];
    if (t.found) { ks.found_faults++; sr->found++; }
    if (t.located) {
      ks.located_faults++;
      ks.localize_s_sum += sr->ingest_s + sr->analysis_s;
    }
  }
  if (sr->healthy) {
    report->healthy_steps += static_cast<int>(steps);
    report->healthy_findings += sr->findings;
  }
  return Status::Ok();
}

namespace {

// Deterministic draws for scenario parameters (splitmix64): scenarios vary sizes, severities,
// locations and windows with the seed, and no detector threshold is chosen per scenario.
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
};

struct Shape {
  std::string tag;
  std::vector<std::string> args;
  int hosts, gpus, tp, pp;
  int world() const { return hosts * gpus; }
};

std::string Num(double x, int prec = 2) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", prec, x);
  return b;
}

// One scenario per fault kind on a job shape, with parameters drawn from `seed`.
void AddFaultScenarios(const Shape& sh, int seed, int steps, std::vector<Scenario>* out) {
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = sh.args;
    a.push_back("seed=" + std::to_string(seed));
    a.push_back("steps=" + std::to_string(steps));
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::string sfx = "-" + sh.tag + "-s" + std::to_string(seed);
  Draw r(static_cast<uint64_t>(seed) * 1000003ULL + static_cast<uint64_t>(sh.world()));
  auto window = [&](int min_len) {
    const int a = r.Int(steps / 6, steps / 3);
    const int len = r.Int(min_len, steps / 2);
    return ",start_step=" + std::to_string(a) + ",end_step=" + std::to_string(std::min(steps - 2, a + len));
  };
  const int stage_ranks = sh.world() / sh.pp;
  out->push_back({"healthy" + sfx, with({}), {}});
  out->push_back({"nic_degrade" + sfx, with({}),
                  {"kind=nic_degrade,host=" + std::to_string(r.Int(0, sh.hosts - 1)) +
                   ",factor=" + Num(r.Real(0.2, 0.5)) + window(steps / 4)}});
  out->push_back({"gpu_straggler" + sfx, with({}),
                  {"kind=gpu_straggler,rank=" + std::to_string(r.Int(0, sh.world() - 1)) +
                   ",factor=" + Num(r.Real(1.3, 2.5)) + window(steps / 4)}});
  out->push_back({"host_slowdown" + sfx, with({}),
                  {"kind=host_slowdown,host=" + std::to_string(r.Int(0, sh.hosts - 1)) +
                   ",factor=" + Num(r.Real(1.3, 2.0)) + window(steps / 4)}});
  out->push_back({"masked_straggler" + sfx, with({}),
                  {"kind=masked_straggler,rank=" + std::to_string(r.Int(0, sh.world() - 1)) +
                   ",factor=" + Num(r.Real(2.0, 3.0)) + window(steps / 4)}});
  {
    const int a = r.Int(steps / 4, steps / 2);
    out->push_back({"host_stall" + sfx, with({}),
                    {"kind=host_stall,rank=" + std::to_string(r.Int(0, sh.world() - 1)) +
                     ",stall_us=" + std::to_string(r.Int(15, 40) * 100000) + ",start_step=" +
                     std::to_string(a) + ",end_step=" + std::to_string(a + 1)}});
  }
  out->push_back({"hang" + sfx, with({"hang_timeout_s=30"}),
                  {"kind=hang,rank=" + std::to_string(r.Int(0, sh.world() - 1)) + ",comm=" +
                   (r.Int(0, 1) ? "dp" : "tp") + ",start_step=" + std::to_string(r.Int(steps / 4, steps / 2))}});
  out->push_back({"mismatch" + sfx, with({}),
                  {"kind=mismatch,rank=" + std::to_string(r.Int(0, sh.world() - 1)) + ",comm=" +
                   (r.Int(0, 1) ? "dp" : "tp") + ",start_step=" + std::to_string(r.Int(steps / 4, steps / 2)) +
                   ",size_factor=" + (r.Int(0, 1) ? "2" : "0.5") + ",effect=complete"}});
  out->push_back({"pipeline_bubble" + sfx, with({}),
                  {"kind=pipeline_bubble,stage=" + std::to_string(r.Int(0, sh.pp - 2)) +
                   ",delay_us=" + std::to_string(r.Int(5, 20) * 1000) + window(steps / 4)}});
  {
    // Two overlapping faults: a degraded NIC and a compute straggler on another host.
    const int h = r.Int(0, sh.hosts - 1);
    int rank = r.Int(0, sh.world() - 1);
    if (rank / sh.gpus == h) rank = (rank + sh.gpus) % sh.world();
    const int a = r.Int(steps / 8, steps / 4);
    out->push_back({"two_faults" + sfx, with({}),
                    {"kind=nic_degrade,host=" + std::to_string(h) + ",factor=" + Num(r.Real(0.2, 0.4)) +
                         ",start_step=" + std::to_string(a) + ",end_step=" + std::to_string(a + steps / 2),
                     "kind=gpu_straggler,rank=" + std::to_string(rank) + ",factor=" + Num(r.Real(1.5, 2.5)) +
                         ",start_step=" + std::to_string(a + steps / 4) + ",end_step=" + std::to_string(steps - 2)}});
  }
  // A dead link (last, so that adding it left every earlier scenario's draws as they were).
  out->push_back({"link_down" + sfx, with({"hang_timeout_s=30"}),
                  {"kind=link_down,host=" + std::to_string(r.Int(0, sh.hosts - 1)) + ",start_step=" +
                   std::to_string(r.Int(steps / 4, steps / 2))}});
  (void)stage_ranks;
}

}  // namespace

std::vector<Scenario> BuiltinSuite(const std::string& name) {
  // Small jobs (16 and 8 GPUs; TP inside a host, PP 2 or 4), ~80 ms steps, 200 ms dumps.
  const std::vector<std::string> model = {"layers=4", "hidden=4096", "seq_len=2048", "micro_batches=4",
                                          "dump_interval_us=200000"};
  auto shape = [&](std::string tag, int hosts, int gpus, int tp, int pp) {
    Shape s{std::move(tag), model, hosts, gpus, tp, pp};
    s.args.insert(s.args.end(), {"hosts=" + std::to_string(hosts), "gpus_per_host=" + std::to_string(gpus),
                                 "tp=" + std::to_string(tp), "pp=" + std::to_string(pp)});
    return s;
  };
  const std::vector<Shape> small = {shape("16g", 4, 4, 2, 2), shape("16g-pp4", 4, 4, 2, 4),
                                    shape("8g", 4, 2, 2, 2)};
  std::vector<Scenario> s;
  for (int seed = 1; seed <= 3; ++seed) AddFaultScenarios(small[(seed - 1) % small.size()], seed, 50, &s);
  // A long healthy job (>= 1,000 steps) on a tiny model: no finding may appear.
  s.push_back({"healthy-1000steps-8g",
               {"hosts=4", "gpus_per_host=2", "tp=2", "pp=2", "layers=2", "hidden=1024", "seq_len=1024",
                "micro_batches=2", "dump_interval_us=200000", "steps=1000", "seed=11"},
               {}});
  if (name == "small") return s;
  // large: more seeds of the small shapes, 512-GPU jobs, a long healthy job and a 10,240-GPU job.
  for (int seed = 4; seed <= 9; ++seed) AddFaultScenarios(small[(seed - 1) % small.size()], seed, 50, &s);
  const std::vector<std::string> mid = {"hosts=64", "gpus_per_host=8", "tp=8", "pp=4", "layers=8",
                                        "hidden=4096", "seq_len=4096", "micro_batches=4",
                                        "dump_interval_us=1000000"};
  Shape m{"512g", mid, 64, 8, 8, 4};
  AddFaultScenarios(m, 21, 40, &s);
  s.push_back({"healthy-2000steps-64g",
               {"hosts=8", "gpus_per_host=8", "tp=4", "pp=2", "layers=2", "hidden=1024", "seq_len=1024",
                "micro_batches=2", "dump_interval_us=500000", "steps=2000", "seed=12"},
               {}});
  const std::vector<std::string> huge = {"hosts=1280", "gpus_per_host=8", "tp=8", "pp=8", "layers=16",
                                         "hidden=8192", "seq_len=4096", "micro_batches=8",
                                         "steps=12", "dump_interval_us=2000000"};
  s.push_back({"10240-gpu_straggler", huge, {"kind=gpu_straggler,rank=5000,factor=1.5,start_step=4,end_step=10"}});
  return s;
}

Result<EvalReport> RunEval(const std::vector<Scenario>& suite, const EvalOptions& o) {
  namespace fs = std::filesystem;
  EvalReport rep;
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
    // Kineto traces cost more to write and read than the Inspector logs of these jobs (the
    // small suite would take twice as long); L3 takes part only when asked.
    cfg.output.kineto_max_ranks = o.kineto_max_ranks;
    fs::remove_all(cfg.output.dir, ec);
    std::string err;
    bool ok = true;
    for (const auto& a : sc.args) ok = ok && Apply(&cfg, a, &err);
    for (const auto& f : sc.faults) {
      sim::FaultSpec spec;
      ok = ok && sim::ParseFaultSpec(f, &spec, &err);
      if (ok) cfg.faults.push_back(spec);
    }
    if (!ok) return Status::Error(sc.name + ": " + err);
    double t = Now();
    sim::SimStats stats;
    if (sim::Simulate(cfg, &stats, &err) != 0) return Status::Error(sc.name + ": simulate: " + err);
    sr.sim_s = Now() - t;
    DiagnoseOptions dopt;
    dopt.threads = o.threads;
    DiagnoseTiming tm;
    t = Now();
    std::vector<std::string> inputs = {cfg.output.dir + "/nccl-inspector", cfg.output.dir + "/step_summary.csv"};
    if (fs::exists(cfg.output.dir + "/kineto", ec)) inputs.push_back(cfg.output.dir + "/kineto");  // L3
    auto fnd = DiagnosePaths(inputs, dopt, &tm);
    if (!fnd.ok()) return Status::Error(sc.name + ": diagnose: " + fnd.status().message());
    sr.ingest_s = tm.ingest_s;
    sr.analysis_s = Now() - t - tm.ingest_s;
    Status st = ScoreFindings(cfg.output.dir + "/ground_truth.json", *fnd, &rep, &sr);
    if (!st.ok()) return st;
    if (!o.keep) fs::remove_all(cfg.output.dir, ec);
    rep.scenarios.push_back(sr);
  }
  if (!o.keep && o.work_dir.empty()) fs::remove_all(base, ec);
  return rep;
}

std::string EvalReport::ToText() const {
  std::ostringstream o;
  char b[256];
  o << "scenario                        world steps faults found findings false  sim_s ingest_s analysis_s\n";
  for (const auto& s : scenarios) {
    std::snprintf(b, sizeof b, "%-30s %6d %5d %6d %5d %8d %5d %6.2f %8.2f %10.2f\n", s.name.c_str(), s.world,
                  s.steps, s.faults, s.found, s.findings, s.false_findings, s.sim_s, s.ingest_s, s.analysis_s);
    o << b;
  }
  o << "\nkind                  findings  true  faults found  precision recall   F1  located  localize_s\n";
  for (const auto& [k, v] : kinds) {
    std::snprintf(b, sizeof b, "%-20s %9d %5d %7d %5d %10.3f %6.3f %6.3f %8.3f %11.2f\n", k.c_str(),
                  v.findings, v.true_findings, v.faults, v.found_faults, v.precision(), v.recall(), v.f1(),
                  v.located(), v.time_to_localize_s());
    o << b;
  }
  std::snprintf(b, sizeof b, "\nfalse findings per 1,000 healthy steps: %.2f (%d findings in %d healthy steps)\n",
                false_per_1000_healthy_steps(), healthy_findings, healthy_steps);
  o << b;
  return o.str();
}

std::string EvalReport::ToJson() const {
  std::ostringstream o;
  o << "{\"kinds\": {";
  bool first = true;
  for (const auto& [k, v] : kinds) {
    o << (first ? "" : ", ") << "\"" << k << "\": {\"findings\": " << v.findings << ", \"true\": " << v.true_findings
      << ", \"faults\": " << v.faults << ", \"found\": " << v.found_faults << ", \"precision\": " << v.precision()
      << ", \"recall\": " << v.recall() << ", \"f1\": " << v.f1() << ", \"located\": " << v.located()
      << ", \"time_to_localize_s\": " << v.time_to_localize_s() << "}";
    first = false;
  }
  o << "}, \"false_per_1000_healthy_steps\": " << false_per_1000_healthy_steps() << ", \"scenarios\": [";
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const auto& s = scenarios[i];
    o << (i ? ", " : "") << "{\"name\": \"" << s.name << "\", \"world\": " << s.world << ", \"steps\": " << s.steps
      << ", \"faults\": " << s.faults << ", \"found\": " << s.found << ", \"findings\": " << s.findings
      << ", \"false_findings\": " << s.false_findings << ", \"sim_s\": " << s.sim_s << ", \"ingest_s\": " << s.ingest_s
      << ", \"analysis_s\": " << s.analysis_s << "}";
  }
  o << "]}\n";
  return o.str();
}

Result<std::vector<std::string>> CheckFloors(const EvalReport& r, const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Error("cannot open floors file " + path);
  std::vector<std::string> bad;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind;
    double p = 0, rc = 0, loc = 0;
    if (!(in >> kind >> p >> rc)) continue;
    if (!(in >> loc)) loc = 0;  // the located floor is optional
    if (kind == "false_per_1000_healthy_steps") {
      if (r.false_per_1000_healthy_steps() > p) bad.push_back("false findings per 1,000 healthy steps above " + std::to_string(p));
      continue;
    }
    auto it = r.kinds.find(kind);
    if (it == r.kinds.end()) {
      if (rc > 0) bad.push_back(kind + ": no faults or findings of this kind in the suite");
      continue;
    }
    if (it->second.precision() + 1e-9 < p) bad.push_back(kind + ": precision " + std::to_string(it->second.precision()) + " < floor " + std::to_string(p));
    if (it->second.recall() + 1e-9 < rc) bad.push_back(kind + ": recall " + std::to_string(it->second.recall()) + " < floor " + std::to_string(rc));
    if (it->second.located() + 1e-9 < loc) bad.push_back(kind + ": located " + std::to_string(it->second.located()) + " < floor " + std::to_string(loc));
  }
  return bad;
}

}  // namespace collscope::diagnose
