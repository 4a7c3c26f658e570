// When each line of a simulator output file would appear during the real job, and a reader that
// walks a finished file in those appearances (the live mode, sim/live.h, paces files out by them).
//
// Contract:
// - LineFormatOf names the line-oriented outputs by their path relative to the output directory:
//   nccl-inspector/*.log (Inspector), steps/*.steps.jsonl (step/phase series) and
//   kernels/*.kernels.jsonl (kernel summaries, plain). Every other output is a document, valid
//   only whole (Kineto traces, in-flight state files, nccl-tests.out, ground_truth.json).
// - A line's time is on the job's clock (wall-clock microseconds since the epoch, as the line
//   itself writes time, host clock offsets included) and is when its writer writes it:
//   * Inspector: its dump_timestamp_us (the dump pass that wrote it);
//   * step line: start_us + wall_us (the annotation library writes a step when it ends);
//   * kernel summary: the end of its window, i.e. the latest end_ns among the summaries of that
//     window (the CUPTI library writes a window whole when it closes), rounded up to a
//     microsecond. The summaries of one window are one entry, with the kernel declarations
//     among them.
//   Lines without a time of their own (process lines, kernel declarations, the stats line)
//   appear with the next timed line of their file; trailing ones at `trailing_us` (the job end,
//   when the process exits).
// - TimedLineReader returns a file's lines in order, in entries (lines that appear together),
//   each with a time no earlier than the previous entry's: a file grows in its own order and no
//   line appears before its own time. It holds no file descriptor between calls (it opens, reads
//   one chunk and closes), so thousands of readers need no more than one descriptor, and its
//   memory is one chunk, more only while one entry is longer than that.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"  // header-only: the simulator still links no collscope_core

namespace collscope::sim {

enum class LineFormat : uint8_t { kInspector, kSteps, kKernelSummaries };

// False: `relative_path` is not a line-oriented output of the simulator (a document).
bool LineFormatOf(std::string_view relative_path, LineFormat* format);

// What one line says about its time.
struct LineTime {
  enum Kind : uint8_t {
    kUntimed,  // appears with the next timed line
    kTimed,    // at `us`
    kWindow,   // a kernel-summary window `window` that ends no earlier than `us`
  };
  Kind kind = kUntimed;
  int64_t us = 0;
  int64_t window = 0;
};
LineTime TimeOfLine(LineFormat format, std::string_view line);

class TimedLineReader {
 public:
  struct Entry {
    int64_t time_us = 0;
    std::string_view bytes;  // whole lines, each ending in '\n'; valid until the next Next call
  };
  TimedLineReader(std::string path, LineFormat format, int64_t trailing_us, size_t chunk_bytes);

  // The next entry: true and *entry, or false at the end of the file (the buffer is then freed).
  Result<bool> Next(Entry* entry);
  const std::string& path() const { return path_; }

 private:
  // Makes sure a whole line starting at buf_[from] is buffered (reading more as needed); its end
  // (past the '\n', or the end of a last line without one) in *end. False: no line at `from`.
  Result<bool> LineAt(size_t from, size_t* end);
  Status Fill();  // appends the next chunk of the file to buf_, after dropping what was returned

  std::string_view Buffered() const { return std::string_view(buf_.get(), len_); }

  std::string path_;
  LineFormat format_;
  int64_t trailing_us_;
  size_t chunk_;
  // Sized by hand (a std::string may double its capacity): chunk_ bytes, more only while one
  // entry is longer than about that.
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0, len_ = 0;
  size_t pos_ = 0;       // buf_[pos_..len_) is not yet returned
  uint64_t offset_ = 0;  // file offset of the end of buf_
  bool eof_ = false;
  int64_t last_us_ = INT64_MIN;
};

}  // namespace collscope::sim
