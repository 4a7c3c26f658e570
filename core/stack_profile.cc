#include "core/stack_profile.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

namespace collscope {
namespace {

// "function (file.py:41)" -> {function, file, line}; false for a native frame.
bool SplitPythonFrame(const std::string& frame, std::string* function, std::string* file,
                      std::string* line) {
  if (frame.size() < 6 || frame.back() != ')') return false;
  size_t open = frame.rfind(" (");
  size_t colon = frame.rfind(':');
  if (open == std::string::npos || colon == std::string::npos || colon < open) return false;
  std::string digits = frame.substr(colon + 1, frame.size() - colon - 2);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return false;
  *function = frame.substr(0, open);
  *file = frame.substr(open + 2, colon - open - 2);
  *line = digits;
  return true;
}

bool Named(const std::string& native) {
  return !native.empty() && native.find("+0x") == std::string::npos && native != "?";
}

std::string ProcessName(const ProcessStacks& p) {
  std::string where = "pid " + std::to_string(p.pid) + (p.host.empty() ? "" : " on " + p.host);
  return p.rank >= 0 ? "rank " + std::to_string(p.rank) + " (" + where + ")" : where;
}

std::string Where(const ProcessStacks& p) {
  if (p.stayed)
    return "has been in `" + p.position_label + "` for " + DurationText(p.last_us - p.since_us) +
           " (" + std::to_string(p.in_position) + " of " + std::to_string(p.samples) + " samples)";
  return "is still progressing (" + std::to_string(p.distinct_positions) + " positions in " +
         std::to_string(p.samples) + " samples, most often `" + p.position_label + "`)";
}

// The sampler writes standard-library files as "python3.11/threading.py".
bool StandardLibrary(const std::string& file) {
  return file.size() > 8 && file.compare(0, 6, "python") == 0 &&
         std::isdigit(static_cast<unsigned char>(file[6])) && file.find('/') != std::string::npos &&
         file.find('.') < file.find('/');
}

}  // namespace

std::string DescribeProcess(const ProcessStacks& p) { return ProcessName(p) + " " + Where(p); }

std::string DurationText(int64_t us) {
  char buf[64];
  if (us < 1000000) {
    std::snprintf(buf, sizeof(buf), "%lld ms", static_cast<long long>(us / 1000));
  } else if (us < 60000000) {
    std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(us) / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld min %lld s", static_cast<long long>(us / 60000000),
                  static_cast<long long>(us / 1000000 % 60));
  }
  return buf;
}

StackPosition PositionOf(const std::vector<std::string>& frames) {
  StackPosition pos;
  std::string function, file, line;
  // The innermost frame of the program's own code (a stuck Event.wait is its caller's wait), else
  // the innermost Python frame.
  size_t chosen = frames.size();
  for (size_t i = frames.size(); i-- > 0;) {
    if (!SplitPythonFrame(frames[i], &function, &file, &line)) continue;
    if (chosen == frames.size()) chosen = i;
    if (!StandardLibrary(file)) {
      chosen = i;
      break;
    }
  }
  if (chosen < frames.size()) {
    SplitPythonFrame(frames[chosen], &function, &file, &line);
    pos.key = function + " (" + file + ")";
    pos.label = frames[chosen];
    for (size_t j = frames.size(); j-- > chosen + 1;) {
      if (Named(frames[j])) {
        pos.label += " -> " + frames[j];
        break;
      }
    }
    return pos;
  }
  for (size_t i = frames.size(); i-- > 0;) {
    if (Named(frames[i])) {
      pos.key = pos.label = frames[i];
      return pos;
    }
  }
  pos.key = pos.label = frames.empty() ? "(no frames)" : frames.back();
  return pos;
}

std::vector<FoldedStack> StackFolder::Add(const std::string& host, int64_t pid, int64_t rank,
                                          int64_t tid, const std::string& thread, int64_t unix_us,
                                          const std::vector<std::string>& frames) {
  int64_t window = unix_us - (unix_us % window_us_);
  std::vector<FoldedStack> closed;
  if (window > open_window_) {
    closed = Flush();
    open_window_ = window;
  }
  const int64_t start = std::max(window, open_window_);
  Count(host, pid, rank, tid, thread, unix_us, frames, start, start + window_us_);
  return closed;
}

void StackFolder::AddToOpen(const std::string& host, int64_t pid, int64_t rank, int64_t tid,
                            const std::string& thread, int64_t unix_us,
                            const std::vector<std::string>& frames) {
  Count(host, pid, rank, tid, thread, unix_us, frames, 0, 0);
}

std::vector<FoldedStack> StackFolder::CloseWindow(int64_t start_us, int64_t end_us,
                                                  int64_t step_first, int64_t step_last) {
  std::vector<FoldedStack> out = Flush();
  for (FoldedStack& s : out) {
    s.window_start_us = start_us;
    s.window_end_us = end_us;
    s.step_first = step_first;
    s.step_last = step_last;
  }
  return out;
}

void StackFolder::Count(const std::string& host, int64_t pid, int64_t rank, int64_t tid,
                        const std::string& thread, int64_t unix_us,
                        const std::vector<std::string>& frames, int64_t window_start_us,
                        int64_t window_end_us) {
  std::string joined;
  for (const std::string& f : frames) {
    if (!joined.empty()) joined += ';';
    joined += f;
  }
  auto key = std::make_tuple(pid, tid, joined);
  auto it = open_.find(key);
  if (it == open_.end()) {
    if (open_.size() >= max_stacks_) {
      ++dropped_;
      return;
    }
    FoldedStack s;
    s.host = host;
    s.pid = pid;
    s.rank = rank;
    s.tid = tid;
    s.thread = thread;
    s.window_start_us = window_start_us;
    s.window_end_us = window_end_us;
    s.first_us = unix_us;
    s.frames = joined;
    StackPosition pos = PositionOf(frames);
    s.position = pos.key;
    s.position_label = pos.label;
    it = open_.emplace(key, std::move(s)).first;
  }
  it->second.count++;
  it->second.last_us = std::max(it->second.last_us, unix_us);
}

std::vector<FoldedStack> StackFolder::Flush() {
  std::vector<FoldedStack> out;
  out.reserve(open_.size());
  for (auto& [key, s] : open_) out.push_back(std::move(s));
  open_.clear();
  return out;
}

StackComparison CompareProcesses(const std::vector<FoldedStack>& stacks) {
  struct Tally {
    ProcessStacks p;
    std::unordered_map<std::string, int64_t> counts;
    std::unordered_map<std::string, std::pair<int64_t, int64_t>> span;
    std::unordered_map<std::string, std::unordered_map<std::string, int64_t>> labels;
  };
  std::map<std::pair<std::string, int64_t>, Tally> by_process;
  for (const FoldedStack& s : stacks) {
    if (s.tid != s.pid || s.count <= 0) continue;  // main threads only
    Tally& t = by_process[{s.host, s.pid}];
    t.p.host = s.host;
    t.p.pid = s.pid;
    t.p.rank = s.rank;
    t.p.samples += s.count;
    t.counts[s.position] += s.count;
    t.labels[s.position][s.position_label] += s.count;
    auto [span, fresh] = t.span.try_emplace(s.position, s.first_us, s.last_us);
    if (!fresh) {
      span->second.first = std::min(span->second.first, s.first_us);
      span->second.second = std::max(span->second.second, s.last_us);
    }
  }
  StackComparison out;
  for (auto& [id, t] : by_process) {
    ProcessStacks& p = t.p;
    for (const auto& [pos, n] : t.counts)
      if (n > p.in_position || (n == p.in_position && pos < p.position)) {
        p.position = pos;
        p.in_position = n;
      }
    int64_t best = -1;
    for (const auto& [label, n] : t.labels[p.position])
      if (n > best) best = n, p.position_label = label;
    p.since_us = t.span[p.position].first;
    p.last_us = t.span[p.position].second;
    p.distinct_positions = t.counts.size();
    p.stayed = p.samples >= 2 && p.in_position * 10 >= p.samples * 9;
    out.processes.push_back(std::move(p));
  }
  std::sort(out.processes.begin(), out.processes.end(), [](const auto& a, const auto& b) {
    return std::tie(a.rank, a.pid, a.host) < std::tie(b.rank, b.pid, b.host);
  });
  size_t n = out.processes.size();
  if (n == 0) {
    out.summary = "no samples of any process's main thread";
    return out;
  }
  auto state = [](const ProcessStacks& p) {
    return p.stayed ? "at " + p.position : std::string("moving");
  };
  std::map<std::string, size_t> states;
  for (const auto& p : out.processes) states[state(p)]++;
  auto top = std::max_element(states.begin(), states.end(),
                              [](const auto& a, const auto& b) { return a.second < b.second; });
  if (n == 1) {
    out.summary = DescribeProcess(out.processes[0]) + ".";
    return out;
  }
  if (top->second * 2 <= n) {
    out.summary = "no position is shared by most of the " + std::to_string(n) + " processes:";
    for (const auto& p : out.processes) out.summary += " " + DescribeProcess(p) + ";";
    out.summary.back() = '.';
    return out;
  }
  out.majority = top->second;
  const ProcessStacks* example = nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (state(out.processes[i]) == top->first) {
      if (!example) example = &out.processes[i];
    } else {
      out.outliers.push_back(i);
    }
  }
  out.majority_stayed = example->stayed;
  out.majority_position_label = example->position_label;
  std::string peers;
  if (example->stayed) {
    int64_t since = INT64_MAX, last = 0;
    for (const auto& p : out.processes)
      if (state(p) == top->first)
        since = std::min(since, p.since_us), last = std::max(last, p.last_us);
    peers = "been in `" + example->position_label + "` for " + DurationText(last - since);
  }
  if (out.outliers.empty()) {
    out.summary = example->stayed
                      ? "all " + std::to_string(n) + " processes have " + peers +
                            ": none stands apart (the cause may be a process not sampled)."
                      : "all " + std::to_string(n) + " processes are progressing; none is stuck.";
    return out;
  }
  for (size_t k = 0; k < out.outliers.size(); ++k) {
    const ProcessStacks& p = out.processes[out.outliers[k]];
    out.summary += (k ? "; " : "") + DescribeProcess(p);
  }
  std::string m = std::to_string(out.majority);
  out.peers_text = example->stayed ? "the other " + m + " processes have " + peers
                                   : "the other " + m + " processes are still progressing";
  out.summary += ", while " + out.peers_text + ".";
  return out;
}

}  // namespace collscope
