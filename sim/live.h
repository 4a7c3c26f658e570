// Live mode of the simulator: the job's files are written at the pace of the job's own clock
// (optionally accelerated), so that a consumer watching the output directory (the live agent)
// sees them grow as during a real job. `collscope simulate --live [--speed X]`.
//
// Contract:
// - The job clock is config.start_time_us + (wall time since pacing began) x speed (speed >= 1).
//   Every line of a line-oriented output (sim/line_times.h: Inspector logs, step series, kernel
//   summaries, all plain) appears in its file once the job clock has passed the line's time, in
//   the file's order, whole: each batch of a file is complete lines written by one writev, and
//   nothing is buffered in user space between batches.
// - Documents valid only whole (Kineto traces, in-flight state files, nccl-tests.out, and
//   ground_truth.json last) appear at the job end (ground truth job.end_us; a hung job's
//   watchdog kill included), each renamed into place whole.
// - The final output is byte-identical to a normal run with the same config, except that the
//   kernel summaries are plain (.kernels.jsonl, not .kernels.jsonl.gz).
// - <out>/live_events.ndjson is the timeline, one JSON object per line, each written whole
//   once what it reports is on disk: `started` (pacing began: wall_us, job_time_us = the start
//   time, speed), per fault of the ground truth (`fault` = its id, `kind`, `job_time_us` = its
//   start_us or end_us) `fault_first_record` when the first line whose time is at or after the
//   fault's start is written and `fault_last_record` when the first line at or after its end is
//   (so every line of the window is out; `line_time_us` and `file` name that line, null when no
//   line comes that late: then the event follows the last line), and last `finished` (after the
//   ground truth) or `stopped`. wall_us is the system clock (us since the epoch). The name is
//   none of the input names of `collscope ingest` / `diagnose` (*.log, *.jsonl, their .gz,
//   *.json), so a consumer of <out> never takes it as input.
// - Stop: when *stop becomes true (the CLI sets it on SIGINT/SIGTERM) the run ends within about
//   one wall tick, between steps while staging or between batches while pacing: the files keep
//   the whole lines already written, `stopped` is the last event, the staging dir is removed, and
//   the result is ok with stopped = true.
//
// Design (why staging and a merge): the engine runs rank by rank within a step, not in global
// time order, and kernel summaries are known only at the end, so the job is first simulated
// whole, unchanged, into a hidden staging directory beside the output (same file system:
// documents move by rename; outside <out>: a consumer never sees staged files). Then one
// thread merges the staged line files by line time (each is already in time order; a heap of
// one entry per file) and, every tick, appends what became due to the output files, grouped per
// file. Memory is bounded independently of the job's length: one read chunk per staged file
// (TimedLineReader, no descriptor held) plus one batch (batch_bytes; a batch that fills is written
// at once). Output descriptors: the first `max_open_files` files stay open, the others are opened
// and closed per batch, so thousands of files never exhaust descriptors. The cost of staging is
// paid before pacing starts (the 16,384-GPU benchmark stages in ~20 s); the job clock starts
// after it, so no line appears early and none bursts out late.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"  // header-only: the simulator still links no collscope_core
#include "sim/sim.h"

namespace collscope::sim {

struct LiveOptions {
  double speed = 1.0;           // job seconds per wall second, >= 1
  std::string staging_dir;      // empty: <parent of out>/.<name of out>.live-staging-<pid>
  int64_t tick_us = 20000;      // shortest wall time between two batches
  size_t read_chunk_bytes = 0;  // per staged file; 0: 64 MiB over the files, 4-64 KiB
  size_t batch_bytes = size_t{32} << 20;
  int max_open_files = 0;  // output descriptors kept open; 0: a quarter of RLIMIT_NOFILE
  const std::atomic<bool>* stop = nullptr;
};

struct LiveStats {
  SimStats sim;             // of the staged run (zero when stopped while staging)
  double staging_s = 0;     // wall time to stage
  double pacing_s = 0;      // wall time from `started` to the last line / document
  uint64_t lines = 0;       // lines paced out
  uint64_t bytes = 0;       // bytes paced out
  uint64_t line_files = 0;  // line-oriented files
  uint64_t documents = 0;   // documents moved into place at the end
  uint64_t batches = 0;     // write rounds
  int64_t max_late_us = 0;  // the latest a line was written after it was due (wall us)
  bool stopped = false;
};

// Simulates `config` into config.output.dir at the job clock's pace (see above). Errors: the
// configuration, the staging run, or a file that cannot be written.
Result<LiveStats> SimulateLive(const SimConfig& config, const LiveOptions& options);

}  // namespace collscope::sim
