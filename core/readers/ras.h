// Saved NCCL RAS status reports: what `ncclras` (NCCL >= 2.24, RAS on by default) prints for
// STATUS and VERBOSE STATUS, in its text form (`ncclras > ras.txt`) or its JSON form (2.28.7+,
// `ncclras -f json`). During a hang they name what completion logs cannot: the ranks that have
// launched fewer operations than their peers (MISMATCH), the ranks the report is missing
// (INCOMPLETE), processes RAS considers dead (DEAD) and ranks with an init or async error (ERROR).
// MONITOR event logs (`ncclras -m`, 2.29+: one line, or one pretty-printed JSON object, per event a
// RAS thread saw about a peer process) are read too (ParseRasMonitorLog, ras_monitor.cc): each
// peer's events are folded into its last state, and a peer left dead (PEER_DEAD,
// PEER_TIMEOUT_DEAD) or in trouble (unresponsive, send stuck, keepalive timeout, disconnected,
// retrying, init timeout; not followed by PEER_RECOVERED, PEER_CONNECTED or PEER_NEW) becomes a
// job process of the report, with its events.
//
// Contract:
// - Found by content, whatever the file's name (core/input_files.h IsRasReportFile): the text form
//   starts with "NCCL version" and has a "Communicators" section; the JSON form is one object
//   with "nccl_version" and "communicators"; a MONITOR log starts with its banner or an event
//   ("[YYYY-MM-DD HH:MM:SS] PEER_...:", or a JSON object with "event": "PEER_..."), gzipped or not
//   (a name ending in .gz is decompressed, as LineReader does).
// - The format varies by release (NVIDIA says so), so parsing is tolerant: every line of the text
//   form is either understood or counted in `unused` as "path:line: why"; in the JSON form every
//   value of a known key that has the wrong type or range is counted the same way, named by its
//   JSON path ("path: communicators[0].ranks[3].pid: why"). Nothing is dropped in silence;
//   unknown JSON keys (a later release's) are passed over, as the JSON form is documented as a
//   raw dump.
// - What a file cannot be read as (no "NCCL version" line, no Communicators section, JSON that
//   does not parse, a file over kMaxRasBytes) is refused whole with its path and reason.
// - Bounds: a file over kMaxRasBytes is refused before it is read; a rank, communicator size or
//   rank count over kMaxRasRanks and an operation count over INT64_MAX are counted in `unused`,
//   never used to size anything; at most kMaxRasUnusedNamed reasons are kept, the rest counted.
// - Counts are launches, not completions: NCCL's per-function counter goes up when a kernel plan
//   is launched, so a rank stuck inside a kernel shows its peers' count. Point-to-point and
//   graph-captured operations are not counted at all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace collscope::readers {

inline constexpr uint64_t kMaxRasBytes = uint64_t{1} << 30;
inline constexpr int64_t kMaxRasRanks = int64_t{1} << 24;
inline constexpr size_t kMaxRasUnusedNamed = 100;

// One rank of a communicator, or (text form) a group of ranks the report counts together
// ("7 ranks have launched up to operation 912": rank -1, n_ranks 7, no process).
struct RasRank {
  int rank = -1;           // rank within the communicator; -1 for a group
  int n_ranks = 1;         // ranks this entry stands for
  std::string host;        // node (IP as NCCL prints it); "" when not given
  int64_t pid = -1;
  int cuda_dev = -1, nvml_dev = -1;
  // ok, missing (no data and no reason), unresponsive, dead, error, or a status the report gave
  // ("RUNNING", "INIT", ... from a status MISMATCH).
  std::string state = "ok";
  std::string detail;      // the error text, the reported status, or why it is missing
  // Launched operation counts by NCCL function ("collective" for 2.24's single count); -1 when the
  // report did not give this entry's count for that function.
  std::vector<std::pair<std::string, int64_t>> launched;
  int64_t Launched(std::string_view func) const;
};

struct RasComm {
  std::string hash;        // commHash as 0x%016lx (text and JSON agree)
  std::string label;       // "#g-c" in the text form, "" in JSON
  int size = -1;           // communicator size, -1 when unknown
  int ranks_reported = -1; // ranks that answered (JSON ranks_count), -1 when unknown
  int missing = -1;        // ranks the report is missing, -1 when unknown
  std::string status;      // text: the group's Status column; "" when unknown
  std::string errors;      // text: the group's Errors column (OK, MISMATCH, INCOMPLETE,ERROR, ...)
  std::vector<RasRank> ranks;
};

// A job process from the report's job-level blocks (INCOMPLETE: missing, DEAD: dead).
struct RasProcess {
  std::string host, state, gpus;
  int64_t pid = -1;
  // MONITOR logs: the events about it, oldest first ("2025-12-19 13:07:07 PEER_DEAD; ...").
  std::string events;
};

struct RasReport {
  std::string path;
  std::string format;           // "text", "json", or "monitor" / "monitor-json" (a MONITOR log)
  std::string nccl_version;     // "2.30.7"
  std::string timestamp;        // JSON only ("YYYY-MM-DD HH:MM:SS", server local time)
  int64_t job_processes = -1;   // text Job summary's process total, -1 when not given
  int64_t job_nodes = -1;
  double collection_s = -1;     // time RAS took to gather the data
  int64_t timeouts = 0;         // leg timeouts while gathering (the data may be incomplete)
  std::vector<RasComm> comms;
  std::vector<RasProcess> processes;
  uint64_t lines = 0;           // text: lines read; JSON: values read
  uint64_t unused = 0;          // lines or values not understood
  std::vector<std::string> unused_named;  // "path:line: why", the first kMaxRasUnusedNamed
};

// Parses a report's (or a MONITOR log's) whole content; `path` names it in reasons.
Result<RasReport> ParseRasReport(std::string_view content, const std::string& path);
// A MONITOR log: its peers left dead or in trouble as `processes`, the newest event's time as
// `timestamp`, every event counted in `lines`, events and lines not understood in `unused`.
Result<RasReport> ParseRasMonitorLog(std::string_view content, const std::string& path);
Result<RasReport> ReadRasReport(const std::string& path);

}  // namespace collscope::readers
