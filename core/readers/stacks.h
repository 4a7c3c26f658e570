// Stack files of `collscope stacks --out DIR` (agent/stacks/stack_session.h, the writer): sampled
// call stacks of one process, folded per window (core/stack_profile.h), as JSON lines,
// <host>-pid<pid>.stacks.jsonl by default:
//   {"collscope_stacks":1,"type":"process","host":H,"pid":P,"rank":R (-1: none),"exe":S,
//    "command":S,"python":"3.11.2"|null,"python_unread":S,"interval_us":N,"native":B}
//   {"type":"stacks","tid":T,"thread":S,"window_start_us":U,"window_end_us":U,
//    ["step_first":N,"step_last":N,] "first_us":U,"last_us":U,"count":N,"frames":"root;...;leaf"}
//   (step_first and step_last: a step window's training steps, `collscope stacks --steps-dir`)
//   {"type":"end","samples":N,"failed":N,"dropped":N,"mean_sample_us":N,"mean_stopped_us":N,
//    "max_stopped_us":N,"exited":B}
// Times are microseconds since the Unix epoch.
//
// Contract:
// - A file is one of these by content, whatever its name: its first line is a JSON object with
//   a "collscope_stacks" key (IsStackFile, core/input_files.h, so that the Inspector reader
//   passes such files by too). A version other than 1 refuses the file as a whole, with a
//   message naming both versions; so does a process line without one of its fields, and a file
//   over 1 GiB (uncompressed).
// - Every other line is stored or rejected with its file, line number and reason: bad JSON, a
//   missing or negative field, a count <= 0, first_us after last_us, a window that does not end
//   after it starts, one step bound without the other or step_first after step_last, empty frames
//   or frames over 64 KiB, a second process or end line. A line of an unknown type is counted (a
//   later writer may add types), not rejected. An empty line is no line of data and is passed by.
// - A NUL character in a string (JSON \u0000) is stored as the four characters \x00.
// - The writer writes a window when it closes and the end line last, so a file read while the
//   session runs holds every closed window and no end line (complete is false). A last line
//   without its newline is still being written (or was cut): it is rejected with that reason,
//   and a later ingest reads the file again whole.
// - Each stored stack gets its position (collscope::PositionOf of its frames split on ';'), so
//   that SQL can group threads by where they were.
// - IngestStackFiles stores into stack_files and stack_samples (docs/schema.md); a file stored
//   before under the same path is replaced, with its ingest_log lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/input_files.h"
#include "core/stack_profile.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::readers {

inline constexpr int64_t kStackFileVersion = 1;
inline constexpr uint64_t kMaxStackFileBytes = uint64_t{1} << 30;  // refused above (uncompressed)
inline constexpr size_t kMaxStackFramesBytes = size_t{64} << 10;   // a longer "frames" is rejected

struct StackFileProcess {
  std::string host, exe, command;
  std::string python_version;  // "" when Python frames were not read (null)
  bool python_read = false;    // "python" was a version, not null
  std::string python_unread;   // why Python frames were not read ("" when they were)
  int64_t pid = -1, rank = -1, interval_us = 0;
  bool native = false;
};

struct StackFileEnd {
  bool seen = false;  // an end line was read: the session finished writing the file
  int64_t samples = 0, failed = 0, dropped = 0, mean_sample_us = 0, mean_stopped_us = 0,
          max_stopped_us = 0;
  bool exited = false;
};

struct StackRow {
  uint64_t line = 0;
  FoldedStack stack;  // host, pid and rank from the process line; position computed at read
};

struct StackFile {
  std::string path;
  uint64_t bytes = 0, lines = 0, lines_unknown = 0;
  StackFileProcess process;
  std::vector<StackRow> rows;  // in line order
  StackFileEnd end;
  struct Rejection {
    uint64_t line;
    std::string reason, excerpt;
  };
  std::vector<Rejection> rejected;
};

Result<StackFile> ReadStackFile(const std::string& path);

struct StackIngestReport {
  uint64_t files_seen = 0, files_read = 0, stacks = 0, lines_rejected = 0, lines_unknown = 0;
  uint64_t files_incomplete = 0;              // read without an end line (a session still writing)
  std::vector<std::string> first_rejections;  // "path:line: reason", at most 10
  std::vector<std::string> failed;            // "path: why" for files not stored
};

// Stores the stack files among `paths` into run `run` (created when new).
Result<StackIngestReport> IngestStackFiles(Store& store, const std::vector<std::string>& paths,
                                           const std::string& run);

// True when the store has the stack tables (a read-only store may predate them).
bool HasStackTables(Store& store);

// The stored stacks (stack_samples) of run `run`, or of every run when `run` is empty, as folded
// stacks with their stored positions, ordered by run, file and line; empty when the store has no
// stack tables or the run no stacks.
Result<std::vector<FoldedStack>> ReadStoredStacks(Store& store, const std::string& run);

}  // namespace collscope::readers
