// Finding a command's input files in the paths a user names, and naming files in the store.
//
// The walk's contract, shared by every reader (ingest, diagnose, Kineto):
//   - folders are walked recursively, and symlinks are followed once: a linked folder is entered
//     unless it was entered already (no loops), and a file reached by two paths is listed once;
//   - a named path that does not exist is an error; everything else that cannot be used is
//     listed in `skipped` with its reason (an unreadable folder, a broken or looping link, a FIFO,
//     socket or device, a path the system cannot open), never dropped in silence.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace collscope {

struct InputFiles {
  std::vector<std::string> files;    // absolute and normalised, sorted, one per file
  std::vector<std::string> skipped;  // "path: reason"
};

// `wanted(path, named)` picks the regular files to list (it is never called on anything else,
// so it may open the file): `named` is true for a file given as one of `paths`.
using WantedFile = std::function<bool(const std::string& path, bool named)>;

Result<InputFiles> FindInputFiles(const std::vector<std::string>& paths, const WantedFile& wanted);

// True when the file opens with a step/phase series header (core/readers/step_file.h): such files
// are found by content, whatever their name, and are no Inspector log.
bool IsStepSeriesFile(const std::string& path);

// True when the file's first line (decompressed when its name ends in .gz, as the library writes
// it by default) is the process line of a kernel-summary file of collscope's CUPTI library
// (core/readers/kernel_summary.h): a JSON object with "type":"process" and
// "format":"collscope-kernels", whatever its format_version (another version is refused by the
// reader, with its reason, rather than read as an Inspector log). Found by content, whatever the
// file's name; such files are no Inspector log.
bool IsKernelSummaryFile(const std::string& path);

// True when the file's first line (decompressed when its name ends in .gz) is the process line of
// a stack file of `collscope stacks --out` (core/readers/stacks.h): a JSON object with a
// "collscope_stacks" key, whatever its version (another version is refused by the reader, with
// its reason, rather than read as an Inspector log). Found by content, whatever the file's name
// (<host>-pid<pid>.stacks.jsonl by default); such files are no Inspector log.
bool IsStackFile(const std::string& path);

// Both questions above with one read of the first line, for callers that ask each file both.
enum class CollscopeLinesFormat { kNone, kKernelSummaries, kStacks };
CollscopeLinesFormat CollscopeLinesFormatOf(const std::string& path);

// True for a training framework's iteration line (core/readers/iteration_log.h): Megatron's
// "iteration N/ M | ... elapsed time per iteration (ms): X" or NeMo's "train_step_timing in s=X".
bool IsIterationLogLine(std::string_view line);

// True when the file is a training framework's iteration log: no JSON document or gzip, and an
// iteration line within its first 16 MiB (a launcher's preamble and argument dump come first).
// Such files are found by content, whatever their name, and are no Inspector log.
bool IsIterationLog(const std::string& path);

// True when `head` (a file's first bytes) opens a saved NCCL RAS status report
// (core/readers/ras.h): text that starts with "NCCL version" and has a "Communicators" section,
// or a JSON object with "nccl_version" and "communicators" keys.
bool LooksLikeRasReport(std::string_view head);
// The start of an `ncclras -m` MONITOR log: its banner, or a first event in text or JSON form.
bool LooksLikeRasMonitorLog(std::string_view head);
// The same for a plain file, reading at most its first MiB (a non-uniform job's summary comes
// before the Communicators section). Found by content, whatever the name; no Inspector log.
bool IsRasReportFile(const std::string& path);

// True when `head` (a file's first bytes) opens like an NCCL Inspector Prometheus textfile
// (core/readers/prom_textfile.h): its first line that is no comment or blank is an `nccl_`
// metric name followed by `{`.
bool LooksLikePromTextfile(std::string_view head);
// True for a plain file named *.prom, or whose first 64 KiB look like one, unless it is an OTLP
// export (below). No Inspector log.
bool IsPromTextfile(const std::string& path);

// True when `head` (a file's first bytes) opens an OTLP JSON metrics export
// (core/readers/otlp_metrics.h): a JSON object, after blanks and a byte-order mark, whose first
// 4 KiB hold a "resourceMetrics" key.
bool LooksLikeOtlpMetrics(std::string_view head);
// The same for a plain file. Found by content, whatever the name; no Inspector log.
bool IsOtlpMetricsFile(const std::string& path);
// Both questions with one read of the file's first 64 KiB, for callers that ask every file.
enum class MetricsFileFormat { kNone, kPromText, kOtlp };
MetricsFileFormat MetricsFileFormatOf(const std::string& path);

// A file's path as stored (a DuckDB VARCHAR must be UTF-8): valid UTF-8 as it is, a backslash
// doubled, every byte of an invalid sequence as \xHH. Distinct paths stay distinct.
std::string StorablePath(const std::string& path);

}  // namespace collscope
