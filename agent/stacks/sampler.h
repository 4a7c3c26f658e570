// Samples the native and Python call stacks of every thread of one running process from outside
// it. A sample stops one thread at a time with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT, never a
// signal the program can see), reads that thread's Python frames from memory, unwinds it with
// libunwind, and lets it go; symbols are resolved (elfutils' libdwfl) after it runs again, so a
// thread is held only for its own reads. It never takes the GIL and runs nothing in the
// target. Python frames are read for the CPython version whose headers the build found (3.11);
// another version gives native stacks and says why.
//
// Only a process of the caller's own user is sampled. Errors say what the kernel refused and what
// to change (Yama's ptrace_scope, a container without CAP_SYS_PTRACE). A target that exits ends the
// sampling with StackError::kTargetExited, never a crash.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace collscope::stacks {

struct Frame {
  enum class Kind { kPython, kNative };
  Kind kind = Kind::kNative;
  std::string function;  // Python qualified name, or the native symbol (demangled); "" if unknown
  std::string file;      // Python source file, or the native module's path
  int line = 0;          // Python line; 0 for native frames
  uint64_t address = 0;  // native frames: the return address (the pc for the innermost)

  // "train_step (train.py:41)", "cudaStreamSynchronize", or "libfoo.so+0x1a2b" when unresolved.
  std::string Label() const;
};

struct ThreadStack {
  pid_t tid = 0;
  std::string name;           // /proc comm
  char state = '?';           // R, S, D... as the thread was before the sample stopped it
  std::vector<Frame> frames;  // innermost first
  bool truncated = false;     // deeper than the limit, or unwinding stopped early
};

struct Sample {
  int64_t unix_us = 0;
  int64_t stopped_us = 0;  // the longest any one thread was held (0 when nothing was stopped)
  int64_t took_us = 0;     // the whole sample, symbols included
  std::vector<ThreadStack> threads;
};

struct SamplerOptions {
  bool native = true;  // unwind native frames (stops the threads for the sample)
  bool python = true;  // read Python frames (without native, nothing is stopped)
  size_t max_depth = 256;
};

enum class StackError { kNone, kTargetExited, kPermissionDenied, kFailed };

struct ProcessFacts {
  pid_t pid = 0;
  std::string exe, command_line, host;
  int rank = -1;               // from RANK / OMPI_COMM_WORLD_RANK / SLURM_PROCID / PMI_RANK
  std::string python_version;  // "3.11.2" where Python frames are read
  std::string python_unread;   // why Python frames are not read ("" when they are)
};

class Sampler {
 public:
  // Checks that the process exists, belongs to this user and can be traced, and finds its
  // interpreter. Fails with a message naming the pid and what to change.
  static Result<std::unique_ptr<Sampler>> Attach(pid_t pid, const SamplerOptions& options);
  ~Sampler();

  // One sample of every thread. On failure, error() says whether the target has gone.
  Result<Sample> Take();
  StackError last_error() const { return last_error_; }

  const ProcessFacts& facts() const { return facts_; }

  class Impl;

 private:
  explicit Sampler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  ProcessFacts facts_;
  StackError last_error_ = StackError::kNone;
};

// Reads the rank a launcher gave the process from its environment (same user only); -1 if none.
int RankFromEnvironment(pid_t pid);

// This user's processes whose environment names the job: SLURM_JOB_ID, TORCHELASTIC_RUN_ID or
// COLLSCOPE_JOB equal to `job`; not this process or its ancestors, and only those with a rank
// when any has one. Sorted by pid.
std::vector<pid_t> ProcessesOfJob(const std::string& job);

}  // namespace collscope::stacks
