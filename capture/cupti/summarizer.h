// Per-window kernel summaries: GPU activities (kernels, memcpys, memsets) in, the summary file's
// `kernel` and `summary` lines (docs/cupti.md) out.
//
// An activity belongs to a window by its start time: the annotated step that was current then
// (a StepAtFn, when the annotation library is in the process), else a fixed time window aligned
// to the Unix epoch. Per (window, name, device, stream) it keeps exact count, total, min and max
// and a LogHistogram; Emit writes the windows that have closed and forgets them. An activity whose
// window was already written starts a new summary of that window (counted as late).
//
// Not thread-safe: the caller serialises Add and Emit (the collector holds one mutex for both).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "capture/cupti/duration_modes.h"

namespace collscope::capture {

enum class ActivityKind : uint8_t { kCompute, kNccl, kMemcpy, kMemset };
const char* ActivityKindName(ActivityKind k);
// NCCL's kernels are named ncclKernel_* (up to 2.18) or ncclDevKernel_* (2.19 on).
ActivityKind KernelKindOf(std::string_view name);

struct Activity {
  std::string_view name;
  ActivityKind kind = ActivityKind::kCompute;
  // Launch configuration: one kernel name runs tensors of many shapes, each its own distribution.
  int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint32_t device = 0, stream = 0;
  uint64_t start_ns = 0, end_ns = 0;
};

// The step current at `unix_ns`; false when none is known.
using StepAtFn = bool (*)(uint64_t unix_ns, int64_t* step);

class Summarizer {
 public:
  Summarizer(uint64_t window_ns, StepAtFn step_at) : window_ns_(window_ns), step_at_(step_at) {}

  void Add(const Activity& a);
  // The same, in a step the caller knows (the simulator).
  void AddInStep(const Activity& a, int64_t step);
  // Appends the lines of every window that closed before `closed_before_ns` (a time window
  // whose end, or a step window whose last activity, is earlier), then forgets them. UINT64_MAX
  // writes all.
  void Emit(uint64_t closed_before_ns, std::string* out);

  uint64_t activities() const { return activities_; }
  uint64_t late() const { return late_; }
  size_t open_summaries() const { return open_.size(); }

 private:
  struct WindowId {
    bool is_step = false;
    int64_t id = 0;  // step number, or start / window_ns
    auto operator<=>(const WindowId&) const = default;
  };
  struct Key {
    WindowId window;
    uint32_t name = 0, device = 0, stream = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct Summary {
    uint64_t count = 0, total_ns = 0, min_ns = UINT64_MAX, max_ns = 0;
    uint64_t first_start_ns = UINT64_MAX, last_end_ns = 0;
    LogHistogram durations;
  };

  // The id of a kernel (name and launch configuration), declared in the file before first use.
  uint32_t KernelId(const Activity& a);
  void Insert(const Activity& a, WindowId window);
  void WriteSummary(const Key& k, const Summary& s, std::string* out) const;

  uint64_t window_ns_;
  StepAtFn step_at_;
  std::unordered_map<std::string, uint32_t> name_ids_;
  struct KernelDef {
    std::string name;
    ActivityKind kind;
    int32_t grid[3], block[3];
  };
  std::vector<KernelDef> names_;
  size_t names_written_ = 0;
  std::map<Key, Summary> open_;
  std::deque<WindowId> written_;  // recently written windows, to count late activities
  uint64_t activities_ = 0, late_ = 0;
};

// The file's first line (docs/cupti.md, `process`).
struct SummaryProcess {
  std::string host;
  int64_t pid = 0;
  int32_t rank = -1, local_rank = -1, world_size = -1;
  bool step_windows = false;
  uint64_t window_ms = 0;
};
std::string ProcessLine(const SummaryProcess& p);

}  // namespace collscope::capture
