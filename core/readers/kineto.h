// PyTorch profiler (Kineto) Chrome traces: one JSON object per rank (optionally gzip-compressed),
// `traceEvents` of mostly complete ("X") events with microsecond `ts`/`dur` relative to
// `baseTimeNanoseconds` (absent in older traces, whose `ts` is already wall-clock).
//
// Extracted per trace: the rank (`distributedInfo.rank`), the process groups
// (`distributedInfo.pg_config`), `ProfilerStep#N` boundaries, GPU activities (kernels, memcpy,
// memset) with name, stream, start and duration, and the NCCL collective metadata PyTorch attaches
// to NCCL kernels (`Collective name`, `In/Out msg nelems`, `Group size`, `dtype`,
// `Process Group Name/Description/Ranks`). Every kernel is attributed to a step: the ProfilerStep
// whose CPU range holds its launch (the `cuda_runtime` event with the same correlation id), else
// the last step that started before it ran.
//
// IngestKineto stores traces in the `kineto_traces`, `steps` and `kernels` tables of the store
// (docs/schema.md); LoadKinetoSteps turns the `steps` table into the L1 detector input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/readers/steps.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::readers {

enum class KernelKind : uint8_t { kCompute, kNccl, kMemcpy, kMemset };
std::string_view KernelKindName(KernelKind k);  // compute | nccl | memcpy | memset

struct KinetoPg {
  std::string name, desc;
  std::vector<int> ranks;  // global ranks
};

struct KinetoStep {
  int64_t step = 0;       // N of ProfilerStep#N
  double start_us = 0;    // wall clock, microseconds since the epoch (CPU range)
  double dur_us = 0;
  int32_t n_kernels = 0;  // GPU activities attributed to the step
  double compute_us = 0, nccl_us = 0;  // summed kernel time by kind
  double gpu_end_us = 0;  // end of the last activity attributed to the step (0: none)
};

// Interned strings are indexes into KinetoTrace::strings; -1 is "absent".
struct KinetoKernel {
  int32_t name = -1;
  KernelKind kind = KernelKind::kCompute;
  int32_t device = -1, stream = -1;
  int64_t step = -1;  // -1: outside every ProfilerStep
  double start_us = 0, dur_us = 0;  // wall clock
  int64_t correlation = -1;
  // NCCL kernels only:
  int32_t coll = -1, dtype = -1, pg_name = -1, pg_desc = -1, pg_ranks = -1;
  int64_t in_nelems = -1, out_nelems = -1;
  int32_t group_size = -1;
};

struct KinetoTrace {
  std::string path;
  std::string hostname;  // from a "<host>_<pid>.<ms>.pt.trace.json" file name, else empty
  int64_t pid = -1;      // CPU process of the trace (the ProfilerStep events' pid)
  int rank = -1, world_size = -1;
  std::string rank_source;  // "distributedInfo", or set by the caller ("file order")
  int64_t base_time_ns = 0;
  std::string nccl_version, device_name;
  std::string pg_config_json;  // distributedInfo.pg_config, minified; empty when absent
  std::vector<KinetoPg> pgs;
  std::vector<KinetoStep> steps;      // sorted by start
  std::vector<std::string> strings;   // interned kernel names and NCCL fields
  std::vector<KinetoKernel> kernels;  // sorted by start
  uint64_t events = 0;                // traceEvents entries
  uint64_t bytes = 0;                 // uncompressed JSON bytes

  const std::string& Str(int32_t i) const;  // "" for -1
};

// *.pt.trace.json and *.pt.trace.json.gz.
bool IsKinetoTraceName(std::string_view path);

// The ranks of a process group as Kineto writes them ("[0, 1, 2]" or "0,1,2").
std::vector<int> RankList(std::string_view s);
// Kineto traces under `paths`, sorted: directories are searched recursively for
// *.pt.trace.json(.gz) and for other *.json(.gz) files that start like a Kineto trace
// ("schemaVersion" with deviceProperties, distributedInfo or traceEvents in the first 4 KB);
// a file given explicitly is taken on the same terms.
Result<std::vector<std::string>> FindKinetoTraces(const std::vector<std::string>& paths);

Result<KinetoTrace> ParseKinetoTrace(std::string_view json, const std::string& path);
// Reads (gunzipping *.gz) and parses one trace.
Result<KinetoTrace> ReadKinetoTrace(const std::string& path);

struct KinetoIngestReport {
  int32_t run_id = 0;
  uint64_t files_seen = 0, files_read = 0, files_unchanged = 0;
  uint64_t steps = 0, kernels = 0, nccl_kernels = 0, bytes = 0;
  double seconds = 0;
  std::vector<std::string> failed;  // "path: reason" of each trace that could not be read
};

// Creates the Kineto tables in a store made before they existed (no-op otherwise).
Status EnsureKinetoTables(Store& store);
// True when the store has the Kineto tables (a read-only store may predate them).
bool HasKinetoTables(Store& store);

// Stores every Kineto trace found under `paths` (FindKinetoTraces) into run `run` (created when
// missing). A trace whose path is already in the run is skipped. Traces without a rank get
// ranks after the highest known one, in path order. `threads` parse in parallel (0: up to 4).
Result<KinetoIngestReport> IngestKineto(Store& store, const std::vector<std::string>& paths,
                                        const std::string& run, int threads = 0);

// The `steps` table of run `run` (empty: the first run that has steps) as the L1 detector's
// input, source "kineto", with per-step phases "compute" and "nccl" (summed kernel time).
Result<StepSeries> LoadKinetoSteps(Store& store, const std::string& run);

}  // namespace collscope::readers
