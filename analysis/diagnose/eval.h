// `collscope eval`: simulated jobs with labelled faults, diagnosed and scored against ground truth.
#pragma once

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
};

// "small" (CI), "large" (bench; includes a 10,240-GPU job).
std::vector<Scenario> BuiltinSuite(const std::string& name);

struct KindScore {
  int findings = 0, true_findings = 0;
  int faults = 0, found_faults = 0;
  // Found faults whose finding names the root cause itself: one of its ranks, or its host when
  // the finding is host-level (names no rank). A finding that overlaps only through a shared
  // communicator, or names other ranks of the right host, is found but not located.
  int located_faults = 0;
  // Time to localize: seconds from the job's logs being on disk to the findings (ingest +
  // analysis), summed over located faults.
  double localize_s_sum = 0;
  double located() const { return faults ? static_cast<double>(located_faults) / faults : 1.0; }
  double time_to_localize_s() const { return located_faults ? localize_s_sum / located_faults : 0; }
  double precision() const { return findings ? static_cast<double>(true_findings) / findings : 1.0; }
  double recall() const { return faults ? static_cast<double>(found_faults) / faults : 1.0; }
  double f1() const { double p = precision(), r = recall(); return p + r > 0 ? 2 * p * r / (p + r) : 0; }
};

struct ScenarioResult {
  std::string name;
  int steps = 0, world = 0;
  bool healthy = false;
  int findings = 0, false_findings = 0, faults = 0, found = 0;
  double sim_s = 0, ingest_s = 0, analysis_s = 0;
  std::string error;
};

struct EvalReport {
  std::map<std::string, KindScore> kinds;  // by finding kind
  std::vector<ScenarioResult> scenarios;
  int healthy_steps = 0, healthy_findings = 0;
  double false_per_1000_healthy_steps() const {
    return healthy_steps ? 1000.0 * healthy_findings / healthy_steps : 0;
  }
  std::string ToText() const;
  std::string ToJson() const;
};

// Scores findings against a ground_truth.json (docs/ground_truth.md). Adds to *report.
Status ScoreFindings(const std::string& ground_truth_path, const std::vector<Finding>& findings,
                     EvalReport* report, ScenarioResult* sr);

struct EvalOptions {
  std::string work_dir;  // scenario outputs go here (created); empty: a temporary directory
  bool keep = false;     // keep the simulated outputs
  int threads = 0;
  std::string only;      // run only scenarios whose name contains this
  int kineto_max_ranks = 0;  // also write Kineto traces of jobs up to this many ranks, run L3 on them
};
Result<EvalReport> RunEval(const std::vector<Scenario>& suite, const EvalOptions& o);

// Floors file: lines "kind precision recall" (# comments). Returns the violations.
Result<std::vector<std::string>> CheckFloors(const EvalReport& r, const std::string& floors_path);

// Maps a simulator fault kind to the finding kind that should report it.
std::string FindingKindForFault(const std::string& fault_kind);

}  // namespace collscope::diagnose
