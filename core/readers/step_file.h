// Step/phase series files: the format the annotation API (capture/annotate/) and the simulator
// write, version 1 (docs/capture.md, "Step/phase series"). JSON lines:
//   {"collscope_steps_version":1,"type":"process","hostname":H,"pid":P,"rank":R,"world_size":W,
//    ["local_rank":L,] ["parallel":{"dp":[r,s],"tp":[r,s],"pp":[r,s],"ep":[r,s],"cp":[r,s]}]}
//   {"type":"step","rank":R,"step":N,"start_us":T,"wall_us":D,["micro_batches":M,]
//    ["unmatched_phase_ends":U,] "phases":[{"name":S,"start_us":T,"wall_us":D,"count":C},...]}
//   {"type":"gpu","rank":R,"step":N,"phase":S,"gpu_us":G}
//   {"type":"dropped","events":E}
// The first line is a process line; it makes the file one of these (any name: detected by
// content). A file may hold several processes; a step or gpu line with rank -1 belongs to the
// last process line before it.
//
// Contract: every line is stored or rejected with its file, line number and reason; a file whose
// first line is no version-1 process line is refused as a whole. Values the analyses cannot hold
// (times past 2^53 us, durations past 2^40 us, negative or non-finite times) are rejected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/input_files.h"
#include "core/readers/steps.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::readers {

struct StepFileProcess {
  int32_t rank = -1, world_size = -1, local_rank = -1;
  std::string hostname;
  int64_t pid = -1;
  int32_t parallel[10] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};  // (rank, size) of dp, tp, pp, ep, cp
};

struct StepFilePhase {
  int32_t rank = -1;
  int64_t step = 0;
  std::string phase;
  double start_us = 0, wall_us = -1, gpu_us = -1;  // -1: not given
  int32_t count = 0;
};

struct StepFileStep {
  int32_t rank = -1;
  int64_t step = 0;
  double start_us = 0, wall_us = 0;  // start_us < 0: unknown (stored as NULL)
};

struct StepFile {
  std::string path;
  std::string source = "annotation";  // steps.source: "annotation", "megatron", "nemo"
  uint64_t bytes = 0, lines = 0, dropped_events = 0;
  std::vector<StepFileProcess> procs;
  std::vector<StepFileStep> steps;
  std::vector<StepFilePhase> phases;  // gpu lines merged into their (rank, step, phase)
  struct Rejection {
    uint64_t line;
    std::string reason, excerpt;
  };
  std::vector<Rejection> rejected;
};

// The step/phase series files under `paths` (content-detected: this format, and the frameworks'
// iteration logs of core/readers/iteration_log.h) and what could not be looked at.
Result<InputFiles> FindStepFiles(const std::vector<std::string>& paths);

Result<StepFile> ReadStepFile(const std::string& path);

struct StepIngestReport {
  uint64_t files_seen = 0, files_read = 0, steps = 0, phases = 0, lines_rejected = 0, dropped_events = 0;
  std::vector<std::string> first_rejections;  // "path:line: reason", at most 10
  std::vector<std::string> failed;            // "path: why" for files not stored
};

// Stores the step files among `paths` into run `run` (created when new): step_files, step_ranks,
// steps (source 'annotation', or the framework of an iteration log) and step_phases. A file
// stored before is replaced.
Result<StepIngestReport> IngestStepFiles(Store& store, const std::vector<std::string>& paths, const std::string& run);

// The run's step series as detector input (every source but Kineto's): one row per (rank, step),
// rank -1 for a framework's job-level iteration times, phases by their wall time, GPU times where
// measured; `host_of` (when given) gets each rank's host.
Result<StepSeries> LoadStepSeries(Store& store, const std::string& run, std::map<int, std::string>* host_of = nullptr);

}  // namespace collscope::readers
