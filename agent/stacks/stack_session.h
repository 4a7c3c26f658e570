// One sampling session over one or more processes: `collscope stacks` is this plus its arguments.
// Each process is sampled at a fixed rate for a duration (or until it exits, or until `stop` is
// set); samples are folded per window, optionally written as stack files (one per process,
// <dir>/<host>-pid<pid>.stacks.jsonl, read by `collscope ingest`), and the processes' main threads
// are compared (CompareProcesses) to name a process stuck apart from its peers.
//
// Stack file, one JSON object a line (version 1):
//   {"collscope_stacks":1,"type":"process","host":..,"pid":..,"rank":..,"exe":..,"command":..,
//    "python":"3.11.2"|null,"python_unread":..,"interval_us":..,"native":true}
//   {"type":"stacks","tid":..,"thread":..,"window_start_us":..,"window_end_us":..,
//    ["step_first":..,"step_last":..,]
//    "first_us":..,"last_us":..,"count":..,"frames":"root;...;leaf"}
//   {"type":"end","samples":..,"failed":..,"dropped":..,"mean_sample_us":..,"mean_stopped_us":..,
//    "max_stopped_us":..,
//    "exited":bool}
// Windows are written when they close, so a file read mid-session holds every closed window.
// With steps_dir, a process's windows end at its training steps' ends (step_windows.h), read
// from the step file the annotation API writes for it, and name their steps.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "agent/stacks/sampler.h"
#include "core/stack_profile.h"
#include "core/status.h"

namespace collscope::stacks {

struct StackSessionOptions {
  std::vector<pid_t> pids;
  double rate_hz = 10;
  double duration_s = 2;  // 0: until every process exits or `stop` is set
  int64_t window_us = 10'000'000;  // with steps_dir: the least a window spans
  std::string steps_dir;           // "" cuts windows by time only
  std::string out_dir;   // "" writes no files
  std::string file_tag;  // files are <host>-pid<pid>[-<tag>].stacks.jsonl
  SamplerOptions sampler;
  const std::atomic<bool>* stop = nullptr;
};

struct ProcessSession {
  ProcessFacts facts;
  int64_t samples = 0, failed = 0, dropped = 0;
  int64_t sample_us_total = 0, stopped_us_total = 0, max_stopped_us = 0;
  bool exited = false;
  std::string last_error;
  std::string file;  // the stack file written, if any
  std::string steps_file;   // with steps_dir: the step file looked for
  int64_t steps_read = -1;  // its steps read; -1 when it was never found
};

struct StackSessionResult {
  std::vector<ProcessSession> processes;
  std::vector<std::string> not_sampled;  // "pid N: why", for pids that could not be attached
  std::vector<FoldedStack> stacks;       // every window of every process
  StackComparison comparison;
};

// Fails only when no process could be sampled at all (each reason in the message).
Result<StackSessionResult> SampleProcesses(const StackSessionOptions& options);

// The session for people: what was sampled and what could not be, each process's most frequent
// stacks (top `top` per thread, root first, as folded lines), and the comparison.
void PrintStackSession(const StackSessionResult& result, size_t top, FILE* out);
std::string StackSessionJson(const StackSessionResult& result);

}  // namespace collscope::stacks
