// PyTorch NCCL Flight Recorder dumps (pickle; see docs/diagnosis.md): per-rank ring buffers of
// collective entries plus process-group configuration and status.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace collscope::readers {

struct FrEntry {
  int64_t record_id = 0;
  int64_t pg_id = -1;             // local process-group id of the dumping rank
  std::string pg_name, pg_desc;   // process_group tuple
  int64_t collective_seq_id = -1, p2p_seq_id = -1, op_id = -1;
  std::string profiling_name;     // nccl:all_reduce, nccl:send 3->2, ...
  bool is_p2p = false;
  std::string state;              // scheduled | started | completed
  bool retired = false;
  int64_t time_created_ns = 0;
  int64_t timeout_ms = 0;
  std::string input_sizes, output_sizes;  // e.g. "4027x5120" (tensors joined by ";")
  std::string input_dtypes, output_dtypes;
};

struct FrPg {
  std::string name, desc;
  std::vector<int> ranks;  // global ranks
};

struct FrPgStatus {
  int64_t last_enqueued = -1, last_started = -1, last_completed = -1;
};

struct FrDump {
  int rank = -1;                       // from the file name suffix (or the dump's rank field)
  std::string path, version, nccl_version;
  std::map<std::string, FrPg> pgs;     // by process-group name
  std::map<int64_t, FrPgStatus> status;  // by local pg_id
  std::vector<FrEntry> entries;
};

// True when the file starts like a pickle (protocol 2+), or is PyTorch's JSON dump (a JSON object
// with "version" and "pg_config" in its first 64 KiB), and its name ends in a rank number
// (before a ".json").
bool IsFlightRecorderDump(const std::string& path);
Result<FrDump> ReadFlightRecorderDump(const std::string& path);
// True for an empty file named like a dump ("..dump..<rank>"): a rank that died while or before
// writing its dump leaves one.
bool IsEmptyFlightRecorderDump(const std::string& path);

}  // namespace collscope::readers
