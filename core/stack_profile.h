// Sampled call stacks as folded counts, and what they say across the processes of a job.
//
// A folded stack is one thread's stack, root first, frames joined by ';' (Brendan Gregg's folded
// format), counted per window. The sampler (agent/stacks) folds its samples into these, the stacks
// reader (core/readers/stacks) loads them into the store's stack_samples table, and both
// `collscope stacks` and the hang diagnosis compare processes with CompareProcesses, so the live
// command and the finding say the same thing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace collscope {

struct FoldedStack {
  std::string host;
  int64_t pid = 0;
  int64_t rank = -1;  // -1 when the launcher set none
  int64_t tid = 0;
  std::string thread;
  int64_t window_start_us = 0, window_end_us = 0;  // [start, end) of the window, Unix time
  int64_t first_us = 0, last_us = 0;               // the first and last sample with this stack
  // A step window's training steps (the first and last that ended in it); -1 for a time window.
  int64_t step_first = -1, step_last = -1;
  int64_t count = 0;
  std::string frames;    // root first, ';' separated
  std::string position;  // where the thread was (StackPosition of frames)
  std::string position_label;
};

// Where a stack says its thread is: the innermost Python frame's function and file (its line
// changes while it loops, so it is left out), and, below it, the innermost named native frame;
// without Python frames, the innermost named native frame. `label` adds the line for people.
struct StackPosition {
  std::string key, label;
};
// Python frames are written "function (file.py:line)"; native frames by symbol or "module+0xaddr".
StackPosition PositionOf(const std::vector<std::string>& frames_root_first);

// Folds samples of threads into per-window counts. Time windows are aligned to multiples of
// window_us of Unix time, so the files of several processes line up; step windows
// (agent/stacks/step_windows.h) are closed by their caller at a training step's end.
class StackFolder {
 public:
  explicit StackFolder(int64_t window_us, size_t max_stacks_per_window = 4096)
      : window_us_(window_us), max_stacks_(max_stacks_per_window) {}

  // frames: root first. Returns the windows that closed because this sample started a later one.
  std::vector<FoldedStack> Add(const std::string& host, int64_t pid, int64_t rank, int64_t tid,
                               const std::string& thread, int64_t unix_us,
                               const std::vector<std::string>& frames);
  // Step windows: the sample joins the open window whatever its time, until CloseWindow.
  void AddToOpen(const std::string& host, int64_t pid, int64_t rank, int64_t tid,
                 const std::string& thread, int64_t unix_us,
                 const std::vector<std::string>& frames);
  // Closes the open window as [start_us, end_us) of the steps step_first..step_last (-1: none).
  std::vector<FoldedStack> CloseWindow(int64_t start_us, int64_t end_us, int64_t step_first,
                                       int64_t step_last);
  std::vector<FoldedStack> Flush();             // whatever is open
  int64_t dropped() const { return dropped_; }  // samples of stacks past the per-window bound

 private:
  void Count(const std::string& host, int64_t pid, int64_t rank, int64_t tid,
             const std::string& thread, int64_t unix_us, const std::vector<std::string>& frames,
             int64_t window_start_us, int64_t window_end_us);

  int64_t window_us_;
  size_t max_stacks_;
  int64_t open_window_ = -1;
  int64_t dropped_ = 0;
  std::map<std::tuple<int64_t, int64_t, std::string>, FoldedStack> open_;
};

// One process's main thread over the samples compared.
struct ProcessStacks {
  std::string host;
  int64_t pid = 0, rank = -1;
  int64_t samples = 0;
  std::string position, position_label;  // the most frequent position
  int64_t in_position = 0;               // samples at that position
  int64_t since_us = 0, last_us = 0;     // first and last sample at that position
  size_t distinct_positions = 0;
  bool stayed = false;  // at one position in at least 90% of its samples (and more than one)
};

struct StackComparison {
  std::vector<ProcessStacks> processes;  // by rank, then pid
  std::vector<size_t> outliers;          // indices into processes
  std::string majority_position_label;   // "" when the processes have no majority
  bool majority_stayed = false;
  size_t majority = 0;
  std::string
      peers_text;       // "the other 7 processes have been in `...` for 40 s" ("" without outliers)
  std::string summary;  // one paragraph for people, naming the outliers and their frames
};

// "rank 12 (pid 4711 on node-003) has been in `frame` for 40 s (400 of 400 samples)", or "... is
// still progressing (...)".
std::string DescribeProcess(const ProcessStacks& p);

// Compares the main threads (tid == pid) of the processes: each is at one position throughout
// (stayed) or moving (progressing). Where a strict majority shares one state (the same position,
// or progressing), the others are outliers: a rank in its own frame while its peers wait in a
// collective, or a rank stuck while its peers still progress.
StackComparison CompareProcesses(const std::vector<FoldedStack>& stacks);

// Human duration: "850 ms", "4.9 s", "3 min 20 s".
std::string DurationText(int64_t us);

}  // namespace collscope
