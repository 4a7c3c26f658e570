// Cuts one process's stack samples at its training steps, so that its folded stacks are kept
// per step window: what the process did in steps 120-139, not in a span of clock time. The steps
// come from the series file the annotation API writes for the process
// (<steps_dir>/<host>-pid<pid>.steps.jsonl, docs/annotate.md), read as it grows: a step's line is
// written when the step has ended (flushed every COLLSCOPE_STEPS_INTERVAL_MS), so samples wait in
// a buffer until the end of their step is read.
//
// Contract:
// - A window closes at the end of the first step that ends at least min_window_us after the
//   window opened, and names the first and last step that ended in it (FoldedStack::step_first,
//   step_last). Windows tile time: each opens where the one before it closed (the first where
//   the first step read began, or at the first sample if that was earlier), so a sample between
//   steps (an evaluation, a checkpoint) counts in the next window.
// - Until the file is found (it is looked for at every poll) samples fold into time windows as
//   without steps (StackFolder::Add), and those still open are closed when it is found.
// - A process that writes no step for kStalledUs, or twice its longest step and the annotation
//   API's flush interval if longer (hung, or between phases), does not hold its samples: those
//   older than that are closed as a window with no steps (step_first -1), so a hang's stacks
//   reach the store as they would without steps. So at most that span of samples is held.
// - A line that is not a step of this file's format is skipped; only complete lines are read.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/stack_profile.h"

namespace collscope::stacks {

class StepWindows {
 public:
  static constexpr int64_t kStalledUs = 10'000'000;
  static constexpr int64_t kFlushUs = 1'000'000;  // COLLSCOPE_STEPS_INTERVAL_MS's default
  static constexpr size_t kMaxPartialBytes = size_t{1} << 20;
  static constexpr int64_t kMaxTimeUs = int64_t{1} << 53;
  static constexpr double kMaxDurationUs = 1099511627776.0;  // 2^40

  StepWindows(const std::string& steps_dir, const std::string& host, int64_t pid, int64_t rank,
              int64_t min_window_us, StackFolder* folder);

  // One thread's sample (frames root first). Returns the windows it let close.
  std::vector<FoldedStack> Add(int64_t tid, const std::string& thread, int64_t unix_us,
                               const std::vector<std::string>& frames);
  // Reads the step lines written since the last poll; returns the windows they closed.
  std::vector<FoldedStack> Poll();
  // At the end of sampling: the buffered samples, after a last poll, as a window with no steps.
  std::vector<FoldedStack> Finish();

  const std::string& path() const { return path_; }
  bool found() const { return found_; }
  int64_t steps_read() const { return steps_read_; }

 private:
  struct Pending {
    int64_t unix_us, tid;
    std::string thread;
    std::vector<std::string> frames;
  };
  struct Step {
    int64_t step, start_us, end_us;
  };
  void ReadNewLines();
  void FoldUntil(int64_t end_us);
  std::vector<FoldedStack> Drain(int64_t now_us);
  int64_t StalledUs() const;

  std::string path_, host_;
  int64_t pid_, rank_, min_window_us_;
  StackFolder* folder_;
  bool found_ = false;
  uint64_t offset_ = 0;     // bytes of the file read
  std::string partial_;     // a line not yet ended
  std::deque<Step> steps_;  // read, not yet drained
  std::deque<Pending> pending_;
  int64_t steps_read_ = 0, longest_step_us_ = 0;
  int64_t window_start_us_ = -1, first_step_ = -1, last_step_ = -1, last_end_us_ = -1;
};

}  // namespace collscope::stacks
