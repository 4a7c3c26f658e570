#include "agent/stacks/step_windows.h"

#include <simdjson.h>

#include <algorithm>
#include <fstream>

namespace collscope::stacks {

StepWindows::StepWindows(const std::string& steps_dir, const std::string& host, int64_t pid,
                         int64_t rank, int64_t min_window_us, StackFolder* folder)
    : path_(steps_dir + "/" + host + "-pid" + std::to_string(pid) + ".steps.jsonl"),
      host_(host),
      pid_(pid),
      rank_(rank),
      min_window_us_(min_window_us),
      folder_(folder) {}

std::vector<FoldedStack> StepWindows::Add(int64_t tid, const std::string& thread, int64_t unix_us,
                                          const std::vector<std::string>& frames) {
  if (!found_) return folder_->Add(host_, pid_, rank_, tid, thread, unix_us, frames);
  pending_.push_back({unix_us, tid, thread, frames});
  return Drain(unix_us);
}

std::vector<FoldedStack> StepWindows::Poll() {
  std::vector<FoldedStack> out;
  if (!found_) {
    std::ifstream probe(path_);
    if (!probe) return out;
    found_ = true;
    out = folder_->Flush();  // the time windows open until now
  }
  ReadNewLines();
  const int64_t newest = pending_.empty() ? 0 : pending_.back().unix_us;
  for (FoldedStack& s : Drain(newest)) out.push_back(std::move(s));
  return out;
}

void StepWindows::ReadNewLines() {
  std::ifstream in(path_, std::ios::binary | std::ios::ate);
  if (!in) return;
  if (static_cast<uint64_t>(in.tellg()) < offset_) offset_ = 0, partial_.clear();  // written anew
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  offset_ += chunk.size();
  partial_ += chunk;
  simdjson::dom::parser parser;
  size_t b = 0;
  for (size_t e; (e = partial_.find('\n', b)) != std::string::npos; b = e + 1) {
    simdjson::dom::element line;
    if (parser.parse(partial_.data() + b, e - b).get(line) != simdjson::SUCCESS) continue;
    std::string_view type;
    int64_t step = 0, start_us = 0;
    double wall_us = 0;
    if (line["type"].get_string().get(type) != simdjson::SUCCESS || type != "step" ||
        line["step"].get_int64().get(step) != simdjson::SUCCESS ||
        line["start_us"].get_int64().get(start_us) != simdjson::SUCCESS ||
        line["wall_us"].get_double().get(wall_us) != simdjson::SUCCESS || start_us < 0 ||
        start_us >= kMaxTimeUs || !(wall_us >= 0 && wall_us < kMaxDurationUs))
      continue;  // the step file reader's bounds (core/readers/step_file.h)
    steps_.push_back({step, start_us, start_us + static_cast<int64_t>(wall_us)});
    longest_step_us_ = std::max(longest_step_us_, static_cast<int64_t>(wall_us));
    ++steps_read_;
  }
  partial_.erase(0, b);
  if (partial_.size() > kMaxPartialBytes) partial_.clear();  // no step line is this long
}

void StepWindows::FoldUntil(int64_t end_us) {
  while (!pending_.empty() && pending_.front().unix_us < end_us) {
    const Pending& p = pending_.front();
    folder_->AddToOpen(host_, pid_, rank_, p.tid, p.thread, p.unix_us, p.frames);
    pending_.pop_front();
  }
}

std::vector<FoldedStack> StepWindows::Drain(int64_t now_us) {
  std::vector<FoldedStack> out;
  auto close = [&](int64_t end_us, int64_t first, int64_t last) {
    for (FoldedStack& s : folder_->CloseWindow(window_start_us_, end_us, first, last))
      out.push_back(std::move(s));
    window_start_us_ = end_us;
    first_step_ = last_step_ = -1;
  };
  while (!steps_.empty()) {
    const Step s = steps_.front();
    steps_.pop_front();
    if (window_start_us_ < 0) {
      // Steps that ended before the first sample are the process's past, not a window of ours.
      if (pending_.empty() || pending_.front().unix_us >= s.end_us) continue;
      window_start_us_ = std::min(s.start_us, pending_.front().unix_us);
    }
    if (s.end_us <= window_start_us_) continue;
    FoldUntil(s.end_us);
    if (first_step_ < 0) first_step_ = s.step;
    last_step_ = s.step;
    last_end_us_ = s.end_us;
    if (s.end_us - window_start_us_ >= min_window_us_) close(s.end_us, first_step_, last_step_);
  }
  // A process that ends no step holds no samples: the steps it ended, then the rest, stepless.
  if (!pending_.empty() && now_us - pending_.front().unix_us > StalledUs()) {
    if (first_step_ >= 0) close(last_end_us_, first_step_, last_step_);
    if (window_start_us_ < 0) window_start_us_ = pending_.front().unix_us;
    const int64_t end_us = pending_.back().unix_us + 1;
    FoldUntil(end_us);
    close(end_us, -1, -1);
  }
  return out;
}

int64_t StepWindows::StalledUs() const {
  // A step's line comes after the step: a long step must not be taken for a stall.
  return std::max(kStalledUs, 2 * longest_step_us_ + kFlushUs);
}

std::vector<FoldedStack> StepWindows::Finish() {
  std::vector<FoldedStack> out = Poll();
  if (!found_) {
    for (FoldedStack& s : folder_->Flush()) out.push_back(std::move(s));
    return out;
  }
  auto close = [&](int64_t end_us, int64_t first, int64_t last) {
    for (FoldedStack& s : folder_->CloseWindow(window_start_us_, end_us, first, last))
      out.push_back(std::move(s));
    window_start_us_ = end_us;
  };
  if (first_step_ >= 0) close(last_end_us_, first_step_, last_step_);
  if (!pending_.empty()) {
    if (window_start_us_ < 0) window_start_us_ = pending_.front().unix_us;
    const int64_t end_us = pending_.back().unix_us + 1;
    FoldUntil(end_us);
    close(end_us, -1, -1);
  }
  first_step_ = last_step_ = -1;
  return out;
}

}  // namespace collscope::stacks
