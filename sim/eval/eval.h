// `collscope eval`: simulated jobs with labelled faults, diagnosed per evidence tier and scored
// strictly against ground truth (docs/diagnosis.md, "Evaluation").
//
// Strict scoring: a finding is true only when it has the fault's kind, overlaps its window, and
// its root-cause set (ranks; hosts for host-level faults) is non-empty and contained in the
// fault's. It is exact when the two sets are equal. Each further finding about a fault already
// credited is a false duplicate; victims and shared communicators never earn credit.
//
// Evidence tiers: what a real user has decides the tier, and a simulator-only input never goes
// into a score (every file the simulator writes is in a format a real producer writes).
//   A: stock NCCL Inspector logs only.
//   B: A plus the collscope plugin's in-flight state files.
//   C: B plus per-rank step/phase series in the annotation API's format (capture/annotate/ writes
//      it in training processes; the simulator writes the same files).
//   D: C plus kernel data (the CUPTI library's kernel summaries), only when asked
//      (EvalOptions::kernel_max_ranks).
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/status.h"

namespace collscope::diagnose {

struct Scenario {
  std::string name;
  std::vector<std::string> args;    // simulator settings as key=value (hosts=4, tp=4, ...)
  std::vector<std::string> faults;  // fault specs (kind=...,...); empty: healthy
  // Damage done to the logs after simulating (what real jobs lose): "missing:R" deletes global
  // rank R's Inspector file, "cut:R" keeps only its first half. The ground truth is unchanged.
  std::string damage;
};

// "small" (CI: development seeds), "heldout" (seeds no detector work looks at; run at the end),
// "explore" (seeds 2001-2016, each CI shape twice: more development jobs to find failures in),
// "large" (bench: more seeds, up to 4,096 GPUs, and a 10,240-GPU job).
// Empty for any other name.
std::vector<Scenario> BuiltinSuite(const std::string& name);

// A suite written out, for jobs drawn outside the built-in suites (bench/sweep.py): one scenario
// a line, its name first, then simulator settings as key=value (those of the built-in suites),
// fault=SPEC (SPEC as `simulate --fault` takes it; repeatable) and at most one damage=missing:R or
// damage=cut:R. Blank lines and lines from '#' are skipped. Every setting and fault is checked
// here: the error names the file and line.
Result<std::vector<Scenario>> ReadSuiteFile(const std::string& path);

struct KindScore {
  int findings = 0, true_findings = 0, exact_findings = 0, duplicates = 0;
  int faults = 0, found_faults = 0, exact_faults = 0;
  // Time to localize: seconds from the job's logs being on disk to the findings (ingest +
  // analysis), summed over found faults.
  double localize_s_sum = 0;
  double precision() const { return findings ? static_cast<double>(true_findings) / findings : 1.0; }
  double recall() const { return faults ? static_cast<double>(found_faults) / faults : 1.0; }
  double exact_rate() const { return faults ? static_cast<double>(exact_faults) / faults : 1.0; }
  double f1() const { double p = precision(), r = recall(); return p + r > 0 ? 2 * p * r / (p + r) : 0; }
  double time_to_localize_s() const { return found_faults ? localize_s_sum / found_faults : 0; }
};

// One fault's severity (in its kind's own unit: slowdown factor, bandwidth loss, stall seconds,
// ...) and whether the tier found it; recall against severity and detection limits come from it.
struct SeverityPoint {
  double severity = 0;
  bool found = false;
};

struct CalibrationBin {
  int findings = 0, true_findings = 0;
  double confidence_sum = 0;
};

struct TierScore {
  std::map<std::string, KindScore> kinds;                          // by finding kind
  std::map<std::string, std::vector<SeverityPoint>> severity;      // by simulator fault kind
  std::array<CalibrationBin, 5> calibration{};                     // confidence [0,.2) ... [.8,1]
  int healthy_steps = 0, healthy_findings = 0;
  double false_per_1000_healthy_steps() const {
    return healthy_steps ? 1000.0 * healthy_findings / healthy_steps : 0;
  }
  // Smallest severity above which at least `share` of the faults of `fault_kind` are found
  // (every fault at or above it counted); NaN when no such severity exists.
  double DetectionLimit(const std::string& fault_kind, double share) const;
};

struct TierRun {
  int findings = 0, false_findings = 0, found = 0, exact = 0;
  int false_symptoms = 0;  // of the false findings, those naming no culprit by design (IsSymptom)
  std::vector<bool> fault_found;  // per fault, in ScenarioResult::fault_labels' order
};

// A triggered fault as the ground truth states it, so a miss can be read with its severity.
struct FaultLabel {
  std::string fault_kind;
  double severity = 0;  // NaN for all-or-nothing kinds (see SeverityPoint)
};

struct ScenarioResult {
  std::string name;
  std::string flavor;  // the Inspector's, as the job's logs were written ("2.29", "2.30")
  int steps = 0, world = 0;
  bool healthy = false;
  int faults = 0;
  std::vector<FaultLabel> fault_labels;
  std::map<std::string, TierRun> tiers;  // by tier letter
  double sim_s = 0, ingest_s = 0, analysis_s = 0;  // analysis_s: tier A
};

struct EvalReport {
  std::map<std::string, TierScore> tiers;  // "A", "B", "D"
  // The same scores split by the jobs' Inspector flavour ("2.29": latest-snapshot sampling and no
  // point-to-point records; "2.30"): flavour -> tier -> scores. Where a tier falls short, this says
  // whether it is the logs' content or the detectors.
  std::map<std::string, std::map<std::string, TierScore>> by_flavor;
  std::vector<ScenarioResult> scenarios;
  bool inspector_proxy = false;  // the 2.30 jobs' logs carried proxy_trace records
  std::string ToText() const;
  std::string ToJson() const;
};

// Scores one tier's findings against a ground_truth.json (docs/ground_truth.md).
Status ScoreFindings(const std::string& ground_truth_path, const std::vector<Finding>& findings,
                     double localize_s, TierScore* tier, ScenarioResult* sr, TierRun* run);

struct EvalOptions {
  std::string work_dir;  // scenario outputs go here (created); empty: a temporary directory
  bool keep = false;     // keep the simulated outputs
  int threads = 0;
  std::string only;      // run only scenarios whose name contains this
  int kernel_max_ranks = 0;  // also write kernel summaries of jobs up to this many ranks: tier D
  // The 2.30 jobs' Inspector ran with NCCL_INSPECTOR_ENABLE_PROXY=1 (dev-line v4.4): their logs,
  // in every tier, carry proxy_trace records. A separate run: most users' logs have none.
  bool inspector_proxy = false;
};
Result<EvalReport> RunEval(const std::vector<Scenario>& suite, const EvalOptions& o);

// Floors file: lines "TIER kind precision recall [exact]" and
// "TIER false_per_1000_healthy_steps MAX" (# comments). Returns the violations.
Result<std::vector<std::string>> CheckFloors(const EvalReport& r, const std::string& floors_path);

// Maps a simulator fault kind to the finding kind that should report it, and says whether its
// culprit is a host (a NIC, a whole host) rather than ranks.
std::string FindingKindForFault(const std::string& fault_kind);
bool HostLevelFault(const std::string& fault_kind);

}  // namespace collscope::diagnose
