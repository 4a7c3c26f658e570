// Turns annotation events, in the order they were recorded, into the lines of a step/phase series
// file (docs/capture.md, "Step/phase series", format version 1).
//
// Contract: pure (no I/O, no clock); runs on the writer thread, where allocating is fine. A step's
// line is written when the step ends, or when the next step begins without an end. Phases still
// open when their step ends are closed at the step's end. A phase_end with no matching open phase
// is counted (unmatched_phase_ends) and written on the next step line.
#ifndef COLLSCOPE_CAPTURE_ANNOTATE_STEP_LINES_H_
#define COLLSCOPE_CAPTURE_ANNOTATE_STEP_LINES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "capture/annotate/event_ring.h"

namespace collscope::annotate {

struct ProcessInfo {
  std::string hostname;
  int64_t pid = 0;
  int32_t rank = -1, world_size = -1, local_rank = -1;  // from the launcher's environment
};

class StepLines {
 public:
  explicit StepLines(ProcessInfo p);

  // Appends the lines this event completes to *out.
  void Add(const Event& e, std::string* out);
  // The process line (written first, and again whenever set_parallel changes it).
  void ProcessLine(std::string* out) const;
  // A "dropped" line when the total of dropped events grew since the last one.
  void Dropped(uint64_t total, std::string* out);

 private:
  struct Phase {
    std::string name;
    int64_t first_ns = 0, wall_ns = 0;
    int32_t count = 0;
  };
  struct Open {
    size_t phase;  // index into phases_
    int64_t begin_ns;
  };
  void EndStep(int64_t t_ns, std::string* out);
  size_t PhaseIndex(const std::string& name, int64_t t_ns);

  ProcessInfo proc_;
  int32_t parallel_[12];
  bool in_step_ = false;
  int64_t step_ = 0, step_begin_ns_ = 0;
  int32_t micro_batches_ = 0;
  uint32_t unmatched_ends_ = 0;
  std::vector<Phase> phases_;
  std::vector<Open> open_;
  uint64_t dropped_written_ = 0;
};

}  // namespace collscope::annotate

#endif  // COLLSCOPE_CAPTURE_ANNOTATE_STEP_LINES_H_
