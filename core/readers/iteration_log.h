// Training frameworks' own iteration logs as job-level step series:
//   - Megatron-LM and Megatron-DeepSpeed: "iteration N/ M | ... | elapsed time per iteration (ms): X |"
//     (any prefix: a pdsh host "vm-07-14: ", a "[date time]" stamp);
//   - NeMo (PyTorch Lightning's progress bar): "... global_step=N ... train_step_timing in s=X"
//     (tqdm refreshes a step in place with carriage returns: the last value of a step is kept).
// Found by content whatever the file's name (core/input_files.h IsIterationLog).
//
// Contract: the series is job-level (rank -1), one step per iteration line, its duration as the
// framework measured it (Megatron averages over its log interval, and names the interval's last
// iteration). Start times are unknown (NULL): the frameworks print local time without a zone.
// An iteration line whose numbers cannot be read, or are out of range, is rejected with its line
// number and reason; other lines (arguments, memory reports) are no iteration lines and are
// counted as read. A file with no iteration line is refused.
#pragma once

#include <string>

#include "core/readers/step_file.h"
#include "core/status.h"

namespace collscope::readers {

// source "megatron" or "nemo"; procs holds one job-level process (rank -1) with the host prefix
// of the iteration lines when they carry one.
Result<StepFile> ReadIterationLog(const std::string& path);

}  // namespace collscope::readers
