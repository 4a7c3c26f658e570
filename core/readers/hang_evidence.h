// Hang evidence in the store: PyTorch NCCL Flight Recorder dumps (flight_recorder.h), collscope
// in-flight state files (inflight_state.h) and saved NCCL RAS status reports (ras.h), found under
// the inputs, stored in the fr_*, inflight_* and ras_* tables of a run, and loaded back for hang diagnosis. `collscope ingest` and
// `diagnose PATHS` (through its temporary store) both store them here, so `diagnose --db` sees
// what `diagnose PATHS` sees.
//
// Contract:
// - A dump is a file named like one (its name ends in a rank) that opens as a pickle or as
//   PyTorch's JSON dump; a state file is named *.inflight.json; a RAS report is found by content
//   (IsRasReportFile). All are found by the shared input walk (core/input_files.h).
// - Each file found is read whole and replaces the rows stored from the same path in the run:
//   the plugin rewrites its state files in place while the job runs.
// - A file that cannot be read stores nothing and is named in `failed` with its reason; the
//   others are stored. An empty file named like a dump (a rank that died before writing one) is
//   named there too: the hang analysis treats its rank as one without a dump. A RAS report's
//   lines or values that were not understood are counted, and the first named, in `ras_unused`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/readers/flight_recorder.h"
#include "core/readers/inflight_state.h"
#include "core/readers/ras.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::readers {

struct HangIngestReport {
  uint64_t dumps_seen = 0, dumps_read = 0, states_seen = 0, states_read = 0;
  uint64_t ras_seen = 0, ras_read = 0, ras_lines_unused = 0;
  std::vector<std::string> ras_unused;  // "path:line: why" (text) or "path: json.path: why"
  std::vector<std::string> failed;   // "path: why", for files found but not stored
  std::vector<std::string> skipped;  // "path: why", from the input walk
};

// True for a file the importer takes: a state file by name, a dump by name and content.
bool IsHangEvidenceFile(const std::string& path);

Result<HangIngestReport> IngestHangEvidence(Store& store, const std::vector<std::string>& paths,
                                            const std::string& run);

// The run's stored dumps and state files, in the order they were found (by path). An unknown
// run, or a store made before these tables existed and opened read-only, holds none.
Result<std::vector<FrDump>> LoadFlightRecorderDumps(Store& store, const std::string& run);
Result<std::vector<InflightState>> LoadInflightStates(Store& store, const std::string& run);
Result<std::vector<RasReport>> LoadRasReports(Store& store, const std::string& run);

}  // namespace collscope::readers
