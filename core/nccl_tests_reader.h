// Reader for the text output of NVIDIA nccl-tests (`all_reduce_perf`, `all_gather_perf`, ... every
// `*_perf`): the `#` preamble (devices, sweep parameters), the three-line table header, one data
// row per message size with an out-of-place and an in-place block, and the footer. Rows are stored
// as a baseline run (tables nccl_tests_runs and nccl_tests_results, docs/schema.md) so production
// runs can be compared against them per (op, message size, n_ranks) (docs/analysis.md).
//
// Facts about the format: ../shared/reference/nccl-inspector.md section 4. Quirks handled: columns
// that differ per test (no redop for all_gather, root for broadcast, redop+root for reduce), an
// alltoall header that names a redop column its rows lack, interleaved `NCCL INFO` lines, numbers
// printed as %.2f/%.1f/%.0f or in exponent notation, "N/A" in #wrong, the -I (i_min i_max i_p99
// i_cv%) and -S (timestamp) extra columns, and several tests appended to one file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/store.h"

namespace collscope {

// One block (out-of-place or in-place) of one data row.
struct NcclTestsResult {
  int line = 0;                 // 1-based line in the file
  std::string op;               // NCCL name: AllReduce, AllGather, ... (coll_op enum)
  uint64_t size_bytes = 0;      // the `size` column: max(send, recv) bytes, the total for AG/RS
  uint64_t count = 0;           // the `count` column (elements)
  std::string dtype;            // float, half, bfloat16, ...
  std::string redop;            // sum, prod, ..., empty when the test has no redop column
  std::optional<int> root;      // rooted tests (broadcast, reduce)
  bool in_place = false;
  double time_us = 0;           // average time per operation (or cputime with -C 1)
  double algbw_gbs = 0, busbw_gbs = 0;
  std::optional<int64_t> n_wrong;  // NULL when printed as N/A (no validation)
  int n_ranks = 0;              // ranks of the test (device lines of the preamble)
  int nnodes = 0;               // distinct hosts of those lines
  // The size as Inspector records it (coll_msg_size_bytes): per rank for AllGather,
  // ReduceScatter and AlltoAll (size / n_ranks), else the size.
  uint64_t msg_size_bytes = 0;
};

struct NcclTestsDevice {
  int rank = 0;
  int64_t pid = 0;
  std::string host;
  int device = 0;
  std::string gpu;  // the GPU name printed at the end of the line
};

struct NcclTestsLog {
  std::string test;             // e.g. all_reduce_perf, from the preamble or the file name
  std::string op;               // NCCL op of the first test in the file
  int n_threads = 0, n_gpus = 0;
  uint64_t min_bytes = 0, max_bytes = 0;
  int warmup_iters = 0, iters = 0;
  std::vector<NcclTestsDevice> devices;
  int n_ranks = 0, nnodes = 0;
  std::optional<double> avg_busbw_gbs;  // `# Avg bus bandwidth : X`
  std::optional<int64_t> out_of_bounds;  // `# Out of bounds values : N OK`
  std::vector<NcclTestsResult> results;  // two per data row (out-of-place, then in-place)
  int skipped_lines = 0;         // non-'#' lines that are not data rows (NCCL INFO, blank)
};

// Maps a test or file name ("all_reduce_perf", "nccl_allgather.log", "alltoall") to the NCCL op
// name, or "" when it names none.
std::string NcclTestsOpFromName(std::string_view name);

// Parses the text of one log. `name_hint` (usually the file name) and `op_override` tell which
// collective ran when the preamble does not say ("# Collective test starting: ..." is missing
// from older versions); `op_override` wins. Fails with a message naming the line when a data
// row cannot be read, or when the collective cannot be told.
Result<NcclTestsLog> ParseNcclTestsOutput(std::string_view text, std::string_view name_hint,
                                          std::string_view op_override = "");
Result<NcclTestsLog> ReadNcclTestsFile(const std::string& path, std::string_view op_override = "");

// Creates nccl_tests_files and nccl_tests_results when the store predates them.
Status EnsureNcclTestsTables(Store& store);

// Stores a parsed log as (part of) run `run_name`, creating the run if needed. Re-storing the same
// path replaces its rows. Returns the number of result rows stored.
Result<int64_t> StoreNcclTestsLog(Store& store, const std::string& run_name,
                                  const std::string& path, const NcclTestsLog& log);

}  // namespace collscope
