// L4: the anomalous steps of a diagnosis as a Chrome trace-event JSON file, which the Perfetto UI
// (ui.perfetto.dev) and chrome://tracing open. One process per global rank (the implicated ranks
// and their peers), with tracks for the training steps (Kineto's, else the rank's step/phase
// series') and GPU kernels (Kineto tables), NCCL collectives (store records with start/stop
// times: verbose Inspector or collscope plugin), and
// the findings: a global instant event (a line across every track) at each finding's start, a
// slice on the "findings" track of every root-cause rank ("root cause") and victim ("victim").
// A rank whose process was sampled by `collscope stacks` (stack_samples, joined by global rank)
// gets a "main thread stacks" track: one slice per stored stack of its main thread (tid = pid)
// that overlaps the windows, named by its position, from its first to its last sample. Slices
// of one track never half-overlap (Perfetto shows a track as a call stack and drops such a slice):
// a stack that overlaps the previous ones goes to the next free lane, "main thread stacks (2)",
// ... (at most kMaxStackLanes; a stack that finds none free is left out and counted); any other
// slice that would overlap one on its track (a rank's overlapping findings, its concurrent
// collectives) goes to the track's next lane, "findings (2)", and one starting under 1 us before
// its lane's last ends (rounded times) starts where that one ends.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::diagnose {

struct PerfettoOptions {
  std::string run;              // store run; empty: the first
  size_t max_peers = 16;        // victims shown per finding
  int max_steps = 6;            // anomalous steps shown per finding
  int context_steps = 1;        // healthy steps shown before them
  double max_window_us = 2e6;   // without step markers: the first this much of a finding
  size_t max_events = 2000000;  // stop adding kernels and collectives beyond this
};

inline constexpr size_t kMaxStackLanes = 16;  // "main thread stacks" tracks per rank

struct PerfettoReport {
  size_t events = 0, ranks = 0, windows = 0;
  size_t steps = 0, kernels = 0, collectives = 0, findings = 0;
  size_t stack_slices = 0;           // slices on the "main thread stacks" tracks
  size_t stack_slices_left_out = 0;  // stacks that overlapped kMaxStackLanes others of their rank
  size_t flows = 0;                  // arrows from a finding's root cause to its victims
  size_t interval_slices = 0;        // records without start times, one slice per dump interval
  std::string note;                  // what the trace shows otherwise than asked, for stderr too
  bool truncated = false;            // max_events reached
};

// Writes the trace to *json.
Result<PerfettoReport> ExportPerfetto(Store& store, const std::vector<Finding>& findings,
                                      const PerfettoOptions& o, std::string* json);

}  // namespace collscope::diagnose
