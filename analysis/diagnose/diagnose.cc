#include "analysis/diagnose/diagnose.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "analysis/diagnose/bubble_steps.h"
#include "analysis/diagnose/compute_growth.h"
#include "analysis/diagnose/finding_coverage.h"
#include "analysis/diagnose/finding_phases.h"
#include "analysis/diagnose/hang.h"
#include "analysis/diagnose/kernel_detect.h"
#include "analysis/diagnose/kernel_summaries.h"
#include "analysis/diagnose/registry.h"
#include "analysis/diagnose/stack_evidence.h"
#include "analysis/diagnose/steps.h"
#include "core/coverage.h"
#include "core/ingest.h"
#include "core/readers/hang_evidence.h"
#include "core/readers/kernel_summary.h"
#include "core/readers/kineto.h"
#include "core/readers/prom_textfile.h"
#include "core/readers/stacks.h"
#include "core/readers/step_file.h"

namespace collscope::diagnose {
namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

namespace {

// Folds `b` into `a` (the more confident finding of the two keeps its summary and evidence).
void Fold(Finding* a, const Finding& b) {
  a->ranks.insert(a->ranks.end(), b.ranks.begin(), b.ranks.end());
  SortUnique(&a->ranks);
  a->victims.insert(a->victims.end(), b.victims.begin(), b.victims.end());
  SortUnique(&a->victims);
  std::vector<int> v;
  std::set_difference(a->victims.begin(), a->victims.end(), a->ranks.begin(), a->ranks.end(), std::back_inserter(v));
  a->victims = std::move(v);
  a->hosts.insert(a->hosts.end(), b.hosts.begin(), b.hosts.end());
  SortUnique(&a->hosts);
  a->comms.insert(a->comms.end(), b.comms.begin(), b.comms.end());
  SortUnique(&a->comms);
  // 0 is an unknown time (a RAS report's): it does not widen the other's window.
  a->start_us = a->start_us == 0 ? b.start_us : b.start_us == 0 ? a->start_us : std::min(a->start_us, b.start_us);
  a->end_us = std::max(a->end_us, b.end_us);
  a->confidence = std::max(a->confidence, b.confidence);
  if (b.detector != a->detector) {
    std::string also = b.detector;
    for (const Evidence& e : b.evidence)
      if (e.key == "also_detected_by") also += ", " + e.text;
    for (Evidence& e : a->evidence)
      if (e.key == "also_detected_by") { e.text += ", " + also; also.clear(); }
    if (!also.empty()) a->AddText("also_detected_by", also);
  }
}

bool NamesACulprit(const Finding& f) { return !IsSymptom(f.kind) && (!f.ranks.empty() || !f.hosts.empty()); }

// Folds every finding that `rule` relates to an earlier (more confident) one into it; after a
// merge the grown finding is compared again with all later ones.
void MergeSame(std::vector<Finding>* fs, const MergeRule& rule, std::vector<Suppressed>* suppressed) {
  if (rule.symptom) {
    for (size_t j = 0; j < fs->size();) {
      const Finding symptom = (*fs)[j];
      std::vector<size_t> causes;
      if (symptom.kind == rule.kind && symptom.ranks.empty() && symptom.hosts.empty())
        for (size_t i = 0; i < fs->size(); ++i)
          if (NamesACulprit((*fs)[i]) && rule.same((*fs)[i], symptom)) causes.push_back(i);
      if (causes.empty()) {
        ++j;
        continue;
      }
      std::string into;
      for (size_t i : causes) {
        rule.fold(&(*fs)[i], symptom);
        into += (into.empty() ? "" : ", ") + std::string(KindName((*fs)[i].kind)) + " (" + (*fs)[i].detector + ")";
      }
      if (suppressed) suppressed->push_back({symptom, "the impact of the " + into + " finding: " + rule.relation});
      fs->erase(fs->begin() + static_cast<std::ptrdiff_t>(j));
    }
    return;
  }
  if (rule.absorbs != Kind::kCount) {
    // Cross-kind: only an unambiguous partner is folded in.
    for (size_t i = 0; i < fs->size(); ++i) {
      if ((*fs)[i].kind != rule.kind) continue;
      std::vector<size_t> partners;
      for (size_t j = 0; j < fs->size(); ++j)
        if ((*fs)[j].kind == rule.absorbs && rule.same((*fs)[i], (*fs)[j])) partners.push_back(j);
      if (partners.size() != 1) continue;
      const size_t j = partners[0];
      const Finding b = (*fs)[j];
      if (suppressed) suppressed->push_back({b, "folded into the " + (*fs)[i].detector + " finding: " + rule.relation});
      (rule.fold ? rule.fold : Fold)(&(*fs)[i], b);
      fs->erase(fs->begin() + static_cast<std::ptrdiff_t>(j));
      if (j < i) --i;
    }
    return;
  }
  for (size_t i = 0; i < fs->size(); ++i) {
    if ((*fs)[i].kind != rule.kind) continue;
    for (size_t j = i + 1; j < fs->size();) {
      Finding& a = (*fs)[i];
      const Finding& b = (*fs)[j];
      if (b.kind == rule.kind && rule.same(a, b)) {
        if (suppressed) suppressed->push_back({b, "merged into the " + a.detector + " finding: " + rule.relation});
        if (rule.fold) {
          rule.fold(&a, b);
        } else if (rule.absorb) {
          Finding only_who = b;
          only_who.ranks.clear();
          only_who.hosts.clear();
          only_who.comms.clear();
          only_who.start_us = a.start_us;
          only_who.end_us = a.end_us;
          Fold(&a, only_who);
        } else {
          Fold(&a, b);
        }
        fs->erase(fs->begin() + static_cast<std::ptrdiff_t>(j));
        j = i + 1;
      } else {
        ++j;
      }
    }
  }
}

}  // namespace

void Consolidate(std::vector<Finding>* fs, std::vector<Suppressed>* suppressed) {
  // Hangs first, symptoms that name no culprit (step-level ones, a network not localised) last: an on-call engineer reads
  // the cause before the symptom, however sure the symptom is.
  auto order = [](Kind k) {
    return k == Kind::kHang ? 0 : IsSymptom(k) ? 2 : 1;
  };
  std::stable_sort(fs->begin(), fs->end(), [&](const Finding& a, const Finding& b) {
    if (order(a.kind) != order(b.kind)) return order(a.kind) < order(b.kind);
    return a.confidence > b.confidence;
  });
  for (const MergeRule& rule : MergeRules()) MergeSame(fs, rule, suppressed);
}

namespace {

// The id of run `run`; with no run named, LoadCommData's: the first.
Result<int32_t> RunIdOf(Store& store, const std::string& run) {
  if (!run.empty()) return store.RunId(run, false);
  auto first = store.QueryInt("SELECT min(run_id) FROM runs");
  if (!first.ok()) return first.status();
  return static_cast<int32_t>(*first);
}

// Every communication-level detector over loaded records.
std::vector<Finding> DetectAll(const CommData& data, const DiagnoseOptions& o) {
  std::vector<Finding> out;
  CommOptions comm = o.comm;
  comm.suppressed = o.suppressed;
  for (const DetectorInfo& det : Detectors()) {
    if (!det.run) continue;
    if (o.window.job_continues && det.needs_job_end) continue;
    auto f = det.run(data, comm);
    // Detectors count time in windows, so a fault that lasts to the end of the records would end
    // at its last window's end, after anything was observed: a finding ends at the data's end.
    for (Finding& x : f)
      if (data.t1 > data.t0 && x.end_us > data.t1) x.end_us = std::max(x.start_us, data.t1);
    out.insert(out.end(), f.begin(), f.end());
  }
  Consolidate(&out, o.suppressed);
  return out;
}

}  // namespace

namespace {

void SummarizeRecords(const CommData& d, const std::string& run, InputSummary* read) {
  if (!read) return;
  read->run = run;
  for (const Inst& x : d.insts) read->records += x.n;
  read->records += static_cast<int64_t>(d.p2p.size());
  read->ranks = static_cast<int>(d.procs.size());
  read->hosts = static_cast<int>(d.hosts.size());
  read->t0 = d.t0;
  read->t1 = d.t1;
  read->rank_source = d.rank_source;
  read->tp = d.tp;
  read->pp = d.pp;
  read->proxy_sends = static_cast<int64_t>(d.proxy_sends.size());
}

}  // namespace

std::string InputSummary::Tier() const {
  if (records == 0) return usable() ? "-" : "";
  if (kineto_traces > 0 || stored_kernels || kernel_summaries > 0) return "D";
  if (step_series > 0) return "C";
  if (state_files > 0) return "B";
  return "A";
}

std::string InputSummary::ToText() const {
  std::string o = "read:";
  auto add = [&](const std::string& s) { o += (o.size() > 5 ? ", " : " ") + s; };
  if (records > 0) {
    add(std::to_string(records) + " NCCL records of " + std::to_string(ranks) + " ranks on " + std::to_string(hosts) +
        " hosts, " + FormatTimeUs(t0) + " .. " + FormatTimeUs(t1) + (run.empty() ? "" : " (run " + run + ")") +
        (rank_source.empty() ? "" : "; global ranks from " + rank_source));
  }
  if (proxy_sends)
    add("wire times of " + std::to_string(proxy_sends) + " network sends (Inspector proxy_trace)");
  if (state_files) add(std::to_string(state_files) + " in-flight state files");
  if (flight_recorder_dumps) add(std::to_string(flight_recorder_dumps) + " Flight Recorder dumps");
  if (ras_reports > ras_monitor_logs) {
    const int n = ras_reports - ras_monitor_logs;
    add(std::to_string(n) + " NCCL RAS status report" + (n > 1 ? "s" : ""));
  }
  if (ras_monitor_logs)
    add(std::to_string(ras_monitor_logs) + " NCCL RAS MONITOR log" + (ras_monitor_logs > 1 ? "s" : ""));
  if (step_series) add(std::to_string(step_series) + " step series");
  if (iteration_logs)
    add(std::to_string(iteration_logs) + " framework iteration log" + (iteration_logs > 1 ? "s" : "") +
        " (job-level step times: they name no rank)");
  if (kineto_traces) add(std::to_string(kineto_traces) + " Kineto traces");
  if (stored_kernels) add("the store's Kineto kernels");
  if (kernel_summaries)
    add(std::to_string(kernel_summaries) + " CUPTI kernel-summary file" + (kernel_summaries > 1 ? "s" : ""));
  if (stack_processes)
    add(std::to_string(stack_samples) + " sampled call stacks of " + std::to_string(stack_processes) + " process" +
        (stack_processes > 1 ? "es" : "") + " (collscope stacks)");
  if (!usable()) add("nothing usable");
  const std::string tier = Tier();
  if (tier.size() == 1 && tier != "-") o += "; evidence tier " + tier;
  o += "\n";
  if (lines_rejected) o += "could not use: " + std::to_string(lines_rejected) + " malformed lines (collscope ingest lists them)\n";
  if (records_dropped)
    o += "could not use: " + std::to_string(records_dropped) +
         " records NCCL Inspector dropped from its rings before they were dumped (dump_stats; collscope summary "
         "shows whose)\n";
  // The first ten by name, then how many more: a folder of unrelated files is named, not dumped.
  for (size_t i = 0; i < unusable.size() && i < 10; ++i) o += "could not use: " + unusable[i] + "\n";
  if (unusable.size() > 10) o += "could not use: " + std::to_string(unusable.size() - 10) + " more\n";
  return o;
}

namespace {

// L1/L2 over the run's step/phase series (when it has any), checked against the communication
// findings in *out: step-level anomalies, per-rank compute growth, stage idling, and the
// demotions of bubbles, stalls and late arrivals that the ranks' own compute explains.
Status DetectFromSteps(Store& store, const std::string& run, const CommData* data, const CommOptions& comm,
                       std::vector<Finding>* out, InputSummary* read) {
  std::map<int, std::string> host_of;
  auto series = readers::LoadStepSeries(store, run, &host_of);
  if (!series.ok()) return series.status();
  if (read) {
    auto rid = store.RunId(run, false);
    const std::string r = rid.ok() ? std::to_string(*rid) : "NULL";
    auto n = store.QueryInt("SELECT count(*) FROM step_files WHERE run_id = " + r);
    // Frameworks' iteration logs are job-level: the rest is per-rank series (tier C).
    auto logs = store.QueryInt("SELECT count(DISTINCT file_id) FROM steps WHERE run_id = " + r +
                               " AND source IN ('megatron', 'nemo')");
    if (n.ok() && logs.ok()) {
      read->iteration_logs += static_cast<int>(*logs);
      read->step_series += static_cast<int>(*n - *logs);
    }
  }
  if (series->rows.empty()) return Status::Ok();
  // The records know the hosts of their ranks best (a step file may name a container's host).
  std::map<int, int> stage_of;
  int64_t window_us = 0;
  if (data) {
    for (const Proc& p : data->procs)
      if (p.global_rank >= 0 && p.host >= 0) host_of[p.global_rank] = data->hosts[static_cast<size_t>(p.host)];
    window_us = static_cast<int64_t>(WindowUs(*data, comm));
    stage_of = PipelineStageOfRank(*data);
  }
  // Without pipeline records (the 2.29 Inspector writes no Send/Recv) the stages are those the
  // ranks' step series declare (their "parallel.pp"), when the framework gave them.
  if (stage_of.empty()) stage_of = series->declared_stage;
  auto f = DetectStepAnomalies(*series, StepOptions{}, host_of);
  out->insert(out->end(), f.begin(), f.end());
  // L2 per-rank compute phases: names slow GPUs and hosts that communication records cannot
  // tell from waiting (a slow pipeline stage vs a bubble), and refutes late arrivals whose own
  // compute did not grow (propagated lateness).
  const ComputeProfile prof = AnalyzeComputeGrowth(*series, ComputeOptions{});
  auto c = DetectComputeGrowth(prof, host_of);
  out->insert(out->end(), c.begin(), c.end());
  const SameWork same_work = data ? SameWorkGroups(*data) : SameWork{};
  auto above = DetectComputeAbovePeers(prof, same_work, host_of);
  out->insert(out->end(), above.begin(), above.end());
  // Bubbles shorter than the records' windows show in the stage's own step phases.
  auto b = DetectStageIdle(*series, stage_of, host_of, StageIdleOptions{});
  out->insert(out->end(), b.begin(), b.end());
  const int64_t slack = std::max<int64_t>(window_us, static_cast<int64_t>(2 * prof.step_us));
  DemoteBubbles(prof, slack, out, comm.suppressed);
  DemotePropagatedStalls(prof, slack, out, comm.suppressed);
  DemoteFlatLateArrivals(prof, slack, out, same_work, comm.suppressed);
  return Status::Ok();
}

// The run's records (when it has any) through every communication detector.
Status DetectFromRecords(Store& store, const std::string& run, const DiagnoseOptions& o, DiagnoseTiming* timing,
                         InputSummary* read, std::vector<Finding>* out, std::optional<CommData>* loaded) {
  double t = Now();
  auto data = LoadCommData(store, run, o.window);
  if (!data.ok()) return data.status();
  SummarizeRecords(*data, run, read);
  if (read && !data->procs.empty()) {
    auto run_id = RunIdOf(store, run);
    if (!run_id.ok()) return run_id.status();
    RunCoverage drops;
    COLLSCOPE_RETURN_IF_ERROR(CountDrops(store, *run_id, &drops));
    read->records_dropped = drops.coll_dropped + drops.p2p_dropped;
  }
  if (timing) timing->load_s = Now() - t;
  t = Now();
  auto f = DetectAll(*data, o);
  out->insert(out->end(), f.begin(), f.end());
  if (timing) timing->detect_s = Now() - t;
  *loaded = std::move(*data);
  return Status::Ok();
}

}  // namespace

namespace {

// The records' processes, for joining RAS's nodes and pids to ranks and host names.
std::vector<JobProcess> JobProcesses(const CommData* records) {
  std::vector<JobProcess> job;
  if (!records) return job;
  std::vector<int> at(records->procs.size(), -1);  // process index -> its entry in job
  for (size_t i = 0; i < records->procs.size(); ++i) {
    const Proc& p = records->procs[i];
    if (p.pid < 0) continue;
    at[i] = static_cast<int>(job.size());
    job.push_back({records->hosts[static_cast<size_t>(p.host)], p.pid, p.global_rank, {}});
  }
  for (const Comm& c : records->comms)
    for (size_t k = 0; k < c.procs.size() && k < c.ranks.size(); ++k)
      if (at[static_cast<size_t>(c.procs[k])] >= 0 && c.ranks[k] >= 0)
        job[static_cast<size_t>(at[static_cast<size_t>(c.procs[k])])].comm_ranks.emplace_back(c.id, c.ranks[k]);
  return job;
}

// The run's stored hang evidence (Flight Recorder dumps, in-flight state files) through the
// wait-graph analyses, and its NCCL RAS status reports through theirs (joined to `records`'
// processes where given).
Status DetectFromHangEvidence(Store& store, const std::string& run, const CommData* records, std::vector<Finding>* out,
                              InputSummary* read) {
  auto dumps = readers::LoadFlightRecorderDumps(store, run);
  if (!dumps.ok()) return dumps.status();
  auto states = readers::LoadInflightStates(store, run);
  if (!states.ok()) return states.status();
  auto ras = readers::LoadRasReports(store, run);
  if (!ras.ok()) return ras.status();
  if (read) {
    read->flight_recorder_dumps += static_cast<int>(dumps->size());
    read->state_files += static_cast<int>(states->size());
    read->ras_reports += static_cast<int>(ras->size());
    for (const readers::RasReport& r : *ras) read->ras_monitor_logs += r.format.starts_with("monitor") ? 1 : 0;
    for (const readers::RasReport& r : *ras)
      if (r.unused) read->unusable.push_back(r.path + ": " + std::to_string(r.unused) + " lines or values of this RAS report not understood (collscope ingest names them)");
  }
  if (!ras->empty()) {
    auto f = AnalyzeRasReports(*ras, JobProcesses(records));
    out->insert(out->end(), f.begin(), f.end());
  }
  // Consolidate folds the records' hang guess into a hang finding that names the root cause.
  if (!dumps->empty()) {
    auto f = AnalyzeFlightRecorder(*dumps);
    out->insert(out->end(), f.begin(), f.end());
  }
  if (!states->empty()) {
    auto f = AnalyzeInflight(*states);
    out->insert(out->end(), f.begin(), f.end());
  }
  return Status::Ok();
}

// The run's kernel summaries (L3 kernel modes); `hosts` gets the hosts of the ranks they name.
Status DetectFromKernelSummaries(Store& store, const std::string& run, std::vector<Finding>* out, InputSummary* read,
                                 std::map<int, std::string>* hosts) {
  SummarySource source;
  auto d = LoadKernelSummaryData(store, run, &source);
  if (!d.ok()) return d.status();
  if (read) {
    read->kernel_summaries += source.files;
    read->unusable.insert(read->unusable.end(), source.unusable.begin(), source.unusable.end());
  }
  *hosts = d->hosts;
  auto f = DetectSummaryAnomalies(*d);
  out->insert(out->end(), f.begin(), f.end());
  return Status::Ok();
}

// The run's kernels: the CUPTI library's summaries first, then Kineto's stored kernels (L3 kernel
// modes) and steps (L1); only a run that holds kernels is tier D. A straggler both sources see is
// one finding: Kineto ranks whose traces name no host get the summaries' hosts, and the
// same-host merge (registry.cc) folds the two.
Status DetectFromStoredKernels(Store& store, const std::string& run, std::vector<Finding>* out, InputSummary* read) {
  std::map<int, std::string> summary_hosts;
  COLLSCOPE_RETURN_IF_ERROR(DetectFromKernelSummaries(store, run, out, read, &summary_hosts));
  if (!readers::HasKinetoTables(store)) return Status::Ok();
  auto kernels = store.QueryInt("SELECT count(*) FROM kernels WHERE run_id = (SELECT run_id FROM runs WHERE name = " +
                                 SqlString(run) + ")");
  if (read) read->stored_kernels = kernels.ok() && *kernels > 0;
  auto k = DiagnoseKineto(store, run, true, KernelOptions{}, summary_hosts);
  if (!k.ok()) return k.status();
  out->insert(out->end(), k->begin(), k->end());
  return Status::Ok();
}

}  // namespace

namespace {

// What the records say of the findings they found: the confidence weighed by the coverage of the
// ranks they name (finding_coverage.h), and the annotated phase their collectives ran in
// (finding_phases.h).
Status AddRecordEvidence(Store& store, const std::string& run, const std::optional<CommData>& data,
                         std::vector<Finding>* out) {
  if (!data || data->procs.empty()) return Status::Ok();
  auto run_id = RunIdOf(store, run);
  if (!run_id.ok()) return run_id.status();
  COLLSCOPE_RETURN_IF_ERROR(WeighByCoverage(store, *run_id, *data, out));
  return AddAnnotatedPhases(store, *run_id, *data, out);
}

// What the run's sampled call stacks (collscope stacks) say of its hang findings.
Status AddStoredStackEvidence(Store& store, const std::string& run, std::vector<Finding>* out, InputSummary* read) {
  if (!readers::HasStackTables(store)) return Status::Ok();
  // The agent diagnoses every tick and always-on sampling keeps adding stacks: they are read only
  // when a finding can use them, and only counted otherwise.
  const bool wanted = std::any_of(out->begin(), out->end(), [](const Finding& f) {
    return f.kind == Kind::kHang || f.kind == Kind::kHostStall || f.kind == Kind::kSlowCompute;
  });
  if (!wanted) {
    if (read) {
      auto n = store.Query("SELECT count(DISTINCT (s.host, s.pid)), coalesce(sum(s.count), 0) FROM stack_samples s "
                           "JOIN runs r USING (run_id) WHERE r.name = " + SqlString(run));
      if (!n.ok()) return n.status();
      read->stack_processes += std::stoi(n->rows[0][0].value_or("0"));
      read->stack_samples += std::stoll(n->rows[0][1].value_or("0"));
    }
    return Status::Ok();
  }
  auto stacks = readers::ReadStoredStacks(store, run);
  if (!stacks.ok()) return stacks.status();
  if (stacks->empty()) return Status::Ok();
  if (read) {
    std::set<std::pair<std::string, int64_t>> processes;
    for (const FoldedStack& s : *stacks) processes.emplace(s.host, s.pid);
    read->stack_processes += static_cast<int>(processes.size());
    for (const FoldedStack& s : *stacks) read->stack_samples += s.count;
  }
  AddStackEvidence(*stacks, out);
  return Status::Ok();
}

}  // namespace

Result<std::vector<Finding>> DiagnoseStore(Store& store, const DiagnoseOptions& o,
                                           DiagnoseTiming* timing, InputSummary* read) {
  DiagnoseOptions with_run = o;
  if (with_run.run.empty()) {
    auto r = store.DefaultRun();
    if (!r.ok()) return r.status();
    with_run.run = *r;
  }
  const std::string& run = with_run.run;
  std::vector<Finding> out;
  std::optional<CommData> data;
  COLLSCOPE_RETURN_IF_ERROR(DetectFromRecords(store, run, with_run, timing, read, &out, &data));
  COLLSCOPE_RETURN_IF_ERROR(DetectFromSteps(store, run, data->procs.empty() ? nullptr : &*data, o.comm, &out, read));
  COLLSCOPE_RETURN_IF_ERROR(DetectFromHangEvidence(store, run, data->procs.empty() ? nullptr : &*data, &out, read));
  COLLSCOPE_RETURN_IF_ERROR(DetectFromStoredKernels(store, run, &out, read));
  if (read) {
    auto prom = store.Query("SELECT count(*), coalesce(sum(samples), 0) FROM prom_files WHERE run_id = "
                            "(SELECT run_id FROM runs WHERE name = " + SqlString(run) + ")");
    if (!prom.ok()) return prom.status();
    if (*prom->rows[0][0] != "0")
      read->unusable.push_back("the store's " + *prom->rows[0][0] +
                               " NCCL Inspector metric files (" + *prom->rows[0][1] +
                               " samples): " + readers::kPromNotComparable +
                               ", so no detector reads them (collscope summary shows them)");
  }
  Consolidate(&out, o.suppressed);
  COLLSCOPE_RETURN_IF_ERROR(AddRecordEvidence(store, run, data, &out));
  COLLSCOPE_RETURN_IF_ERROR(AddStoredStackEvidence(store, run, &out, read));
  return out;
}

Result<std::vector<Finding>> DiagnosePaths(const std::vector<std::string>& paths,
                                           const DiagnoseOptions& o, DiagnoseTiming* timing,
                                           Store* records, InputSummary* read) {
  namespace fs = std::filesystem;
  std::vector<std::string> logs, step_files, hang_files, kernel_files, prom_files, stack_files;
  // Every regular file under the paths, once (core/input_files.h: links followed once, FIFOs
  // and devices skipped with a reason, never opened).
  auto found = FindInputFiles(paths, [](const std::string&, bool) { return true; });
  if (!found.ok()) return found.status();
  if (read)
    for (const std::string& s : found->skipped) read->unusable.push_back(s);
  for (const std::string& f : found->files) {
    const std::string name = fs::path(f).filename().string();
    const CollscopeLinesFormat lines = CollscopeLinesFormatOf(f);
    if (IsStepSeriesFile(f) || IsIterationLog(f)) step_files.push_back(f);
    else if (lines == CollscopeLinesFormat::kKernelSummaries) kernel_files.push_back(f);
    else if (lines == CollscopeLinesFormat::kStacks) stack_files.push_back(f);
    else if (IsRasReportFile(f)) hang_files.push_back(f);  // found by content, whatever its name
    else if (MetricsFileFormatOf(f) != MetricsFileFormat::kNone)
      prom_files.push_back(f);
    else if (IsInspectorLogName(name)) logs.push_back(f);
    else if (readers::IsHangEvidenceFile(f)) hang_files.push_back(f);
    else if (!readers::IsKinetoTraceName(f) && read)
      read->unusable.push_back(f + ": not a format collscope diagnose reads");
  }
  // One line for all of them: a job writes one per GPU.
  if (read && !prom_files.empty())
    read->unusable.push_back(
        prom_files[0] +
        (prom_files.size() > 1 ? " and " + std::to_string(prom_files.size() - 1) + " more"
                               : std::string()) +
        ": NCCL Inspector metric files (Prometheus textfiles, OTLP JSON): " +
        readers::kPromNotComparable +
        ", so no detector reads them (collscope ingest stores them, collscope summary shows them)");
  if (records && !logs.empty())
    return Status::InvalidArgument(logs[0] + ": Inspector logs among the paths and a store: ingest them into the store first");
  // Every input goes into a temporary store first, so that `diagnose PATHS` and `diagnose --db`
  // read the same tables the same way. With a store (`--db`), its run holds the records, and the
  // paths' step series, dumps, state files and kernel summaries are checked against them.
  std::vector<Finding> out;
  const std::string temp_run = "diagnose";
  std::unique_ptr<Store> temp;
  if (!logs.empty() || !step_files.empty() || !hang_files.empty() || !kernel_files.empty() || !stack_files.empty()) {
    auto store = Store::Open(":memory:");
    if (!store.ok()) return store.status();
    temp = std::move(*store);
    auto note = [&](uint64_t rejected, const std::vector<std::string>& first, const std::vector<std::string>& failed) {
      if (!read) return;
      read->lines_rejected += rejected;
      for (const std::string& r : first) read->unusable.push_back(r);
      for (const std::string& r : failed) read->unusable.push_back(r);
    };
    const double t = Now();
    if (!logs.empty()) {
      IngestOptions io;
      io.run = temp_run;
      io.threads = o.threads;
      auto rep = Ingest(*temp, logs, io);
      if (!rep.ok()) return rep.status();
      note(rep->lines_rejected, rep->first_rejections, {});
    }
    if (!step_files.empty()) {
      auto rep = readers::IngestStepFiles(*temp, step_files, temp_run);
      if (!rep.ok()) return rep.status();
      note(rep->lines_rejected, rep->first_rejections, rep->failed);
    }
    if (!hang_files.empty()) {
      auto rep = readers::IngestHangEvidence(*temp, hang_files, temp_run);
      if (!rep.ok()) return rep.status();
      note(0, {}, rep->failed);
    }
    if (!kernel_files.empty()) {
      auto rep = readers::IngestKernelSummaries(*temp, kernel_files, temp_run);
      if (!rep.ok()) return rep.status();
      note(rep->lines_rejected, rep->first_rejections, rep->failed);
    }
    if (!stack_files.empty()) {
      auto rep = readers::IngestStackFiles(*temp, stack_files, temp_run);
      if (!rep.ok()) return rep.status();
      note(rep->lines_rejected, rep->first_rejections, rep->failed);
    }
    if (timing) timing->ingest_s = Now() - t;
  }
  Store* records_store = records ? records : !logs.empty() ? temp.get() : nullptr;
  const std::string run = records ? o.run : temp_run;
  std::optional<CommData> data;
  if (records_store) COLLSCOPE_RETURN_IF_ERROR(DetectFromRecords(*records_store, run, o, timing, read, &out, &data));
  const CommData* comm = data && !data->procs.empty() ? &*data : nullptr;
  // Step series among the paths are checked against the records wherever those are; without
  // any among the paths, a store's own.
  Store* steps_store = !step_files.empty() ? temp.get() : records;
  const std::string steps_run = !step_files.empty() ? temp_run : run;
  if (steps_store) COLLSCOPE_RETURN_IF_ERROR(DetectFromSteps(*steps_store, steps_run, comm, o.comm, &out, read));
  if (temp) COLLSCOPE_RETURN_IF_ERROR(DetectFromHangEvidence(*temp, temp_run, comm, &out, read));
  std::map<int, std::string> summary_hosts;
  if (!kernel_files.empty())
    COLLSCOPE_RETURN_IF_ERROR(DetectFromKernelSummaries(*temp, temp_run, &out, read, &summary_hosts));
  if (records) {
    COLLSCOPE_RETURN_IF_ERROR(DetectFromHangEvidence(*records, run, comm, &out, read));
    COLLSCOPE_RETURN_IF_ERROR(DetectFromStoredKernels(*records, run, &out, read));
  }
  // The Kineto traces among the paths, found once (walking the folders again for L3 would read
  // every directory twice).
  auto traces = readers::FindKinetoTraces(paths);
  if (!traces.ok()) return traces.status();
  if (read) read->kineto_traces += static_cast<int>(traces->size());
  // PyTorch profiler (Kineto) traces among the paths: L3 kernel modes, and L1 on their
  // ProfilerStep times unless step/phase series already gave the steps.
  auto k = DiagnoseKinetoPaths(*traces, step_files.empty(), KernelOptions{}, summary_hosts);
  if (!k.ok()) return k.status();
  out.insert(out.end(), k->begin(), k->end());
  Consolidate(&out, o.suppressed);
  if (records_store) COLLSCOPE_RETURN_IF_ERROR(AddRecordEvidence(*records_store, run, data, &out));
  // The paths' stacks, else a store's own.
  if (!stack_files.empty()) COLLSCOPE_RETURN_IF_ERROR(AddStoredStackEvidence(*temp, temp_run, &out, read));
  else if (records) COLLSCOPE_RETURN_IF_ERROR(AddStoredStackEvidence(*records, run, &out, read));
  return out;
}

}  // namespace collscope::diagnose
