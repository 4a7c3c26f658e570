// Kernel-summary files of collscope's CUPTI injection library (capture/cupti/; the format is
// docs/cupti.md, "The summary file"): JSON lines of one process, gzip-compressed when the name
// ends in .gz (the library's default, <host>-pid<pid>.kernels.jsonl.gz),
//   {"type":"process","format":"collscope-kernels","format_version":1,"host":H,"pid":P,"rank":R,
//    "local_rank":L,"world_size":W,"window":"step"|"time","window_ms":M,"clock":"realtime"}
//   {"type":"kernel","id":I,"name":S,"kind":"compute"|"nccl"|"memcpy"|"memset",
//    ["grid":[x,y,z],"block":[x,y,z]]}
//   {"type":"summary","step":N|null,"start_ns":T,"end_ns":T,"kernel":I,"device":D,"stream":S,
//    "count":C,"total_ns":T,"min_ns":T,"max_ns":T,"modes":[[count,centre_ns,spread],...]}
//   {"type":"stats","records":N,"kernels":N,["untimed":N,]"dropped_by_cupti":N,"buffers_refused":N,
//    "invalid_records":N,"late":N}
// An id stands for a kernel name and its launch configuration: two ids may share a name.
//
// Contract:
// - A file is one of these by content, whatever its name: its first line is a process line of
//   format "collscope-kernels" (IsKernelSummaryFile, core/input_files.h, so that the Inspector
//   reader can pass such files by too). A format_version other than 1 refuses the file as a whole,
//   with a message naming both versions; so does a process line without host, pid or rank.
// - Every other line is stored or rejected with its file, line number and reason: bad JSON, a
//   summary whose kernel id no earlier kernel line defined, modes whose counts do not add up to
//   its count, min above max, a total outside [count x min, count x max], a negative or missing
//   field. A line of an unknown type is counted (a later writer may add types), not rejected.
// - Summary lines of the same window, kernel, device and stream (kernels that arrived after the
//   window was written) are added up into one row, as the format asks of readers.
// - A last line without its newline is still being written (or was cut): it is rejected with
//   that reason, and a later ingest reads the file again whole. A gzip stream without its
//   trailer (a job that died: the library sync-flushes every tick) reads up to where it ends; a
//   corrupt gzip stream keeps the lines LineReader returned before the damage (core/line_reader.h)
//   and rejects the rest as one line with the reason, or refuses the file when there were none.
// - IngestKernelSummaries stores into kernel_summary_files and kernel_summaries (docs/schema.md);
//   a file stored before under the same path is replaced, with its ingest_log lines.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/input_files.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::readers {

struct KernelSummaryProcess {
  std::string host, window_kind, clock;
  int64_t pid = -1, window_ms = -1;  // window_ms -1: not given
  int32_t rank = -1, local_rank = -1, world_size = -1;  // -1: unknown
};

struct KernelDefinition {
  int64_t id = -1;
  std::string name, kind;
  std::array<int32_t, 3> grid{-1, -1, -1}, block{-1, -1, -1};  // -1: not given (memcpy, memset)
};

struct SummaryMode {
  uint64_t count = 0;
  double centre_ns = 0, spread = 0;
};

struct KernelSummaryRow {
  uint64_t line = 0;      // the window's first summary line
  size_t kernel = 0;      // index into KernelSummaryFile::kernels
  int32_t device = 0, stream = 0;
  int64_t step = -1;      // -1: a time window
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
  std::vector<SummaryMode> modes;
};

struct KernelSummaryStats {
  bool seen = false;         // a stats line was read (its counters are the last one's)
  bool has_untimed = false;  // it had "untimed" (later writers)
  uint64_t records = 0, kernels = 0, untimed = 0, dropped_by_cupti = 0, buffers_refused = 0, invalid_records = 0,
           late = 0;
};

struct KernelSummaryFile {
  std::string path;
  uint64_t bytes = 0, lines = 0, lines_unknown = 0;
  KernelSummaryProcess process;
  std::vector<KernelDefinition> kernels;
  std::vector<KernelSummaryRow> rows;  // in order of their first line
  KernelSummaryStats stats;
  struct Rejection {
    uint64_t line;
    std::string reason, excerpt;
  };
  std::vector<Rejection> rejected;
};

Result<KernelSummaryFile> ReadKernelSummaryFile(const std::string& path);

struct KernelSummaryIngestReport {
  uint64_t files_seen = 0, files_read = 0, summaries = 0, lines_rejected = 0, lines_unknown = 0;
  std::vector<std::string> first_rejections;  // "path:line: reason", at most 10
  std::vector<std::string> failed;            // "path: why" for files not stored
};

// Stores the kernel-summary files among `paths` into run `run` (created when new).
Result<KernelSummaryIngestReport> IngestKernelSummaries(Store& store, const std::vector<std::string>& paths,
                                                        const std::string& run);

// True when the store has the kernel-summary tables (a read-only store may predate them).
bool HasKernelSummaryTables(Store& store);

}  // namespace collscope::readers
