// What `collscope diagnose` runs and how it consolidates: every detector with the finding kinds
// it emits and the inputs it needs (so the evidence tier it serves is known), and the merge
// rules, one (kind, relation) entry each. `collscope diagnose --list-detectors` prints both.
#pragma once

#include <string>
#include <vector>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/finding.h"

namespace collscope::diagnose {

struct DetectorInfo {
  std::string name;          // the findings' `detector`
  std::vector<Kind> kinds;   // what it can emit
  std::string inputs;        // what it reads
  char tier = 'A';           // the lowest evidence tier (docs/diagnosis.md) that has its inputs
  // Detectors over the communication records run through this; the others (dumps, state
  // files, step series, kernels) are run by DiagnosePaths on their own inputs.
  std::vector<Finding> (*run)(const CommData&, const CommOptions&) = nullptr;
  // It reads the end of the data as where the job stopped, so it does not run on a window the
  // job went on writing after (TimeWindow::job_continues).
  bool needs_job_end = false;
};
const std::vector<DetectorInfo>& Detectors();

// Findings of `kind` that `same(a, b)` relates describe one root cause: b (the less confident)
// is folded into a. With `absorb`, b adds only its detector and victims (a located finding
// absorbing an unlocated guess about the same fault); otherwise its location is added too.
struct MergeRule {
  Kind kind;
  const char* relation;
  bool (*same)(const Finding& a, const Finding& b);
  bool absorb = false;
  // Cross-kind rules: b is of kind `absorbs` (when not `kind`), and the rule applies only when
  // exactly one such b relates to a. `fold` (when set, in either kind of rule) folds b into a in
  // place of the plain union.
  Kind absorbs = Kind::kCount;
  void (*fold)(Finding* a, const Finding& b) = nullptr;
  // Symptom rules: `kind` names no culprit (a job-level step finding). Each finding of it that
  // `same(culprit, symptom)` relates to one or more findings naming a culprit is their impact:
  // `fold` adds it to each of them and the symptom is suppressed.
  bool symptom = false;
};
const std::vector<MergeRule>& MergeRules();

// The registry and the rules as text (--list-detectors).
std::string RegistryToText();

}  // namespace collscope::diagnose
