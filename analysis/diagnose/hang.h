// Hang root cause from PyTorch Flight Recorder dumps and from collscope's in-flight state files.
#pragma once

#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/readers/flight_recorder.h"
#include "core/status.h"

namespace collscope::diagnose {

using readers::IsFlightRecorderDump;

// Wait graph: each rank is blocked in its oldest pending collective; in it, members that never
// enqueued that sequence number are what it waits on. Root causes are the waited-on ranks that
// wait on nobody themselves; everyone transitively waiting on them is a victim.
std::vector<Finding> AnalyzeFlightRecorder(const std::vector<readers::FrDump>& dumps);
Result<std::vector<Finding>> DiagnoseFlightRecorder(const std::vector<std::string>& paths);

// collscope in-flight state files (<host>-pid<pid>.inflight.json, docs/capture.md).
Result<std::vector<Finding>> DiagnoseInflight(const std::vector<std::string>& paths);

}  // namespace collscope::diagnose
