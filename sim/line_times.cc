#include "sim/line_times.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace collscope::sim {
namespace {

// The integer after the first `key` in `line`; false when the key or the number is missing.
bool NumberAfter(std::string_view line, std::string_view key, int64_t* out) {
  const size_t k = line.find(key);
  if (k == std::string_view::npos) return false;
  const char* b = line.data() + k + key.size();
  const char* e = line.data() + line.size();
  return std::from_chars(b, e, *out).ec == std::errc();
}

bool HasPrefixAfter(std::string_view name, std::string_view dir, std::string_view suffix) {
  return name.size() > dir.size() + suffix.size() && name.starts_with(dir) &&
         name.ends_with(suffix) && name.find('/', dir.size()) == std::string_view::npos;
}

}  // namespace

bool LineFormatOf(std::string_view rel, LineFormat* format) {
  if (HasPrefixAfter(rel, "nccl-inspector/", ".log"))
    *format = LineFormat::kInspector;
  else if (HasPrefixAfter(rel, "steps/", ".steps.jsonl"))
    *format = LineFormat::kSteps;
  else if (HasPrefixAfter(rel, "kernels/", ".kernels.jsonl"))
    *format = LineFormat::kKernelSummaries;
  else
    return false;
  return true;
}

LineTime TimeOfLine(LineFormat format, std::string_view line) {
  LineTime t;
  switch (format) {
    case LineFormat::kInspector:
      if (NumberAfter(line, "\"dump_timestamp_us\":", &t.us)) t.kind = LineTime::kTimed;
      break;
    case LineFormat::kSteps: {
      // The step's own start and duration come before its phases' (sim/writers.cc StepWriter).
      int64_t start = 0, dur = 0;
      if (line.starts_with("{\"type\":\"step\"") && NumberAfter(line, "\"start_us\":", &start) &&
          NumberAfter(line, "\"wall_us\":", &dur)) {
        t.kind = LineTime::kTimed;
        t.us = start + dur;
      }
      break;
    }
    case LineFormat::kKernelSummaries: {
      int64_t end_ns = 0;
      if (!line.starts_with("{\"type\":\"summary\"") || !NumberAfter(line, "\"end_ns\":", &end_ns))
        break;
      t.kind = LineTime::kWindow;
      t.us = end_ns / 1000 + (end_ns % 1000 != 0);  // rounded up: never before the window closes
      // A step window by its step; a time window (step null) by its start, kept apart from steps.
      int64_t step = 0, start_ns = 0;
      if (NumberAfter(line, "\"step\":", &step))
        t.window = step;
      else if (NumberAfter(line, "\"start_ns\":", &start_ns))
        t.window = -1 - start_ns;
      break;
    }
  }
  return t;
}

TimedLineReader::TimedLineReader(std::string path, LineFormat format, int64_t trailing_us,
                                 size_t chunk_bytes)
    : path_(std::move(path)),
      format_(format),
      trailing_us_(trailing_us),
      chunk_(std::max<size_t>(chunk_bytes, 256)) {}

Status TimedLineReader::Fill() {
  // What was returned is dropped first, so the buffer holds one entry plus one chunk at most.
  if (pos_ > 0) {
    std::memmove(buf_.get(), buf_.get() + pos_, len_ - pos_);
    len_ -= pos_;
    pos_ = 0;
  }
  // Grows only when an unfinished entry leaves less than a quarter chunk to read into.
  if (cap_ - len_ < chunk_ / 4 + 1) {
    const size_t cap = len_ + chunk_;
    std::unique_ptr<char[]> b(new char[cap]);
    if (len_) std::memcpy(b.get(), buf_.get(), len_);
    buf_ = std::move(b);
    cap_ = cap;
  }
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("cannot open " + path_ + ": " + std::strerror(errno));
  const size_t want = cap_ - len_;
  size_t got = 0;
  while (got < want) {
    const ssize_t n =
        ::pread(fd, buf_.get() + len_ + got, want - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::IOError("cannot read " + path_ + ": " + std::strerror(err));
    }
    if (n == 0) {
      eof_ = true;
      break;
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  len_ += got;
  offset_ += got;
  return Status::Ok();
}

Result<bool> TimedLineReader::LineAt(size_t from, size_t* end) {
  for (;;) {
    const size_t nl = Buffered().find('\n', from);
    if (nl != std::string_view::npos) {
      *end = nl + 1;
      return true;
    }
    if (eof_) {
      if (from >= len_) return false;
      *end = len_;  // a last line without its '\n'
      return true;
    }
    // Fill moves the unreturned bytes to the front: keep `from` relative to them.
    const size_t rel = from - pos_;
    Status s = Fill();
    if (!s.ok()) return s;
    from = pos_ + rel;
  }
}

Result<bool> TimedLineReader::Next(Entry* entry) {
  // Offsets are kept relative to pos_, which Fill may move.
  size_t scan = 0;       // the next line to look at, from pos_
  size_t committed = 0;  // the entry so far ends here, from pos_
  bool timed = false;
  int64_t time = INT64_MIN;
  bool in_window = false;
  int64_t window = 0;
  for (;;) {
    size_t end = 0;
    Result<bool> has = LineAt(pos_ + scan, &end);
    if (!has.ok()) return has.status();
    if (!*has) break;
    const size_t line_start = scan;
    scan = end - pos_;
    const LineTime lt =
        TimeOfLine(format_, Buffered().substr(pos_ + line_start, scan - line_start));
    if (lt.kind == LineTime::kUntimed) {
      // With the next timed line; inside a window only if the window goes on after it.
      if (!in_window) committed = scan;
      continue;
    }
    if (lt.kind == LineTime::kTimed) {
      if (in_window) break;  // belongs to the next entry
      committed = scan;
      timed = true;
      time = lt.us;
      break;
    }
    if (in_window && lt.window != window) break;
    in_window = true;
    window = lt.window;
    timed = true;
    time = std::max(time, lt.us);
    committed = scan;
  }
  if (committed == 0) {
    buf_.reset();
    cap_ = len_ = pos_ = 0;
    return false;
  }
  // Lines with no timed line after them appear when the process exits.
  if (!timed) time = trailing_us_;
  last_us_ = std::max(last_us_, time);
  entry->time_us = last_us_;
  entry->bytes = Buffered().substr(pos_, committed);
  pos_ += committed;
  return true;
}

}  // namespace collscope::sim
