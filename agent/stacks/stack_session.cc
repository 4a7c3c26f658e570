#include "agent/stacks/stack_session.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "agent/stacks/step_windows.h"
#include "capture/common/json_escape.h"

namespace collscope::stacks {
namespace {

using capture::AppendEscapedJsonString;

int64_t MonotonicUs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

void SleepUntil(int64_t monotonic_us) {
  timespec ts{static_cast<time_t>(monotonic_us / 1000000),
              static_cast<long>(monotonic_us % 1000000) * 1000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void Field(const char* name, const std::string& value, std::string* out) {
  out->append(",\"").append(name).append("\":");
  AppendEscapedJsonString(value, out);
}
void Field(const char* name, int64_t value, std::string* out) {
  out->append(",\"").append(name).append("\":").append(std::to_string(value));
}

std::string StacksLine(const FoldedStack& s) {
  std::string line = "{\"type\":\"stacks\"";
  Field("tid", s.tid, &line);
  Field("thread", s.thread, &line);
  Field("window_start_us", s.window_start_us, &line);
  Field("window_end_us", s.window_end_us, &line);
  if (s.step_first >= 0) {
    Field("step_first", s.step_first, &line);
    Field("step_last", s.step_last, &line);
  }
  Field("first_us", s.first_us, &line);
  Field("last_us", s.last_us, &line);
  Field("count", s.count, &line);
  Field("frames", s.frames, &line);
  return line + "}\n";
}

// One process being sampled: its sampler, folder and file.
struct Target {
  std::unique_ptr<Sampler> sampler;
  ProcessSession session;
  std::unique_ptr<StackFolder> folder;
  std::unique_ptr<StepWindows> steps;  // with steps_dir
  FILE* file = nullptr;
  bool done = false;
};

void Emit(Target& t, std::vector<FoldedStack> windows, std::vector<FoldedStack>* all) {
  for (FoldedStack& s : windows) {
    if (t.file) std::fputs(StacksLine(s).c_str(), t.file);
    all->push_back(std::move(s));
  }
  if (t.file) std::fflush(t.file);
}

void Finish(Target& t, std::vector<FoldedStack>* all) {
  if (t.done) return;
  t.done = true;
  Emit(t, t.steps ? t.steps->Finish() : t.folder->Flush(), all);
  if (t.steps) {
    t.session.steps_file = t.steps->path();
    t.session.steps_read = t.steps->found() ? t.steps->steps_read() : -1;
  }
  t.session.dropped = t.folder->dropped();
  if (!t.file) return;
  std::string line = "{\"type\":\"end\"";
  Field("samples", t.session.samples, &line);
  Field("failed", t.session.failed, &line);
  Field("dropped", t.session.dropped, &line);
  Field("mean_sample_us", t.session.samples ? t.session.sample_us_total / t.session.samples : 0,
        &line);
  Field("mean_stopped_us", t.session.samples ? t.session.stopped_us_total / t.session.samples : 0,
        &line);
  Field("max_stopped_us", t.session.max_stopped_us, &line);
  line += std::string(",\"exited\":") + (t.session.exited ? "true" : "false") + "}\n";
  std::fputs(line.c_str(), t.file);
  std::fclose(t.file);
  t.file = nullptr;
}

}  // namespace

Result<StackSessionResult> SampleProcesses(const StackSessionOptions& options) {
  StackSessionResult result;
  std::vector<Target> targets;
  int64_t interval_us =
      std::max<int64_t>(1000, std::llround(1e6 / std::max(0.01, options.rate_hz)));
  std::error_code ec;
  if (!options.out_dir.empty() && !std::filesystem::create_directories(options.out_dir, ec) && ec)
    return Status::IOError("cannot create " + options.out_dir + ": " + ec.message());
  Status first_refusal;
  for (pid_t pid : options.pids) {
    auto sampler = Sampler::Attach(pid, options.sampler);
    if (!sampler.ok()) {
      if (first_refusal.ok()) first_refusal = sampler.status();
      result.not_sampled.push_back(sampler.status().message());
      continue;
    }
    Target t;
    t.sampler = std::move(*sampler);
    t.session.facts = t.sampler->facts();
    t.folder = std::make_unique<StackFolder>(options.window_us);
    if (!options.steps_dir.empty())
      t.steps = std::make_unique<StepWindows>(options.steps_dir, t.session.facts.host,
                                              t.session.facts.pid, t.session.facts.rank,
                                              options.window_us, t.folder.get());
    if (!options.out_dir.empty()) {
      const ProcessFacts& f = t.session.facts;
      t.session.file = options.out_dir + "/" + f.host + "-pid" + std::to_string(f.pid) +
                       (options.file_tag.empty() ? "" : "-" + options.file_tag) + ".stacks.jsonl";
      t.file = std::fopen(t.session.file.c_str(), "w");
      if (!t.file) {
        const std::string why = "cannot write " + t.session.file + ": " + std::strerror(errno);
        for (Target& opened : targets) std::fclose(opened.file);
        return Status::IOError(why);
      }
      std::string line = "{\"collscope_stacks\":1,\"type\":\"process\"";
      Field("host", f.host, &line);
      Field("pid", f.pid, &line);
      Field("rank", f.rank, &line);
      Field("exe", f.exe, &line);
      Field("command", f.command_line, &line);
      if (f.python_version.empty())
        line += ",\"python\":null";
      else
        Field("python", f.python_version, &line);
      Field("python_unread", f.python_unread, &line);
      Field("interval_us", interval_us, &line);
      line += std::string(",\"native\":") + (options.sampler.native ? "true" : "false") + "}\n";
      std::fputs(line.c_str(), t.file);
      std::fflush(t.file);
    }
    targets.push_back(std::move(t));
  }
  if (targets.empty()) {
    std::string why = "no process could be sampled";
    for (const std::string& r : result.not_sampled) why += "\n  " + r;
    // The first process's reason says what kind of failure it was (no such process, refused).
    return first_refusal.WithMessage(why);
  }

  int64_t start = MonotonicUs();
  int64_t end = options.duration_s > 0 ? start + std::llround(options.duration_s * 1e6) : INT64_MAX;
  for (int64_t next = start;; next += interval_us) {
    bool any = false;
    for (Target& t : targets) {
      if (t.done) continue;
      Result<Sample> sample = t.sampler->Take();
      if (!sample.ok()) {
        t.session.last_error = sample.status().message();
        if (t.sampler->last_error() == StackError::kTargetExited) {
          t.session.exited = true;
          Finish(t, &result.stacks);
          continue;
        }
        if (++t.session.failed >= 10 && t.session.samples == 0) {  // refused every time
          Finish(t, &result.stacks);
          continue;
        }
        any = true;
        continue;
      }
      any = true;
      t.session.samples++;
      t.session.sample_us_total += sample->took_us;
      t.session.stopped_us_total += sample->stopped_us;
      t.session.max_stopped_us = std::max(t.session.max_stopped_us, sample->stopped_us);
      const ProcessFacts& f = t.session.facts;
      for (const ThreadStack& th : sample->threads) {
        std::vector<std::string> frames;
        frames.reserve(th.frames.size() + 1);
        // ';' joins folded frames, so none may hold one (a C++ template's text could).
        for (auto it = th.frames.rbegin(); it != th.frames.rend(); ++it) {
          frames.push_back(it->Label());
          std::replace(frames.back().begin(), frames.back().end(), ';', ',');
        }
        if (th.truncated) frames.insert(frames.begin(), "[truncated]");
        if (frames.empty()) frames.push_back("[no frames read]");  // counted, never dropped
        Emit(t,
             t.steps
                 ? t.steps->Add(th.tid, th.name, sample->unix_us, frames)
                 : t.folder->Add(f.host, f.pid, f.rank, th.tid, th.name, sample->unix_us, frames),
             &result.stacks);
      }
      if (t.steps) Emit(t, t.steps->Poll(), &result.stacks);
    }
    bool stop = options.stop && options.stop->load();
    if (!any || stop || next + interval_us >= end) break;
    int64_t now = MonotonicUs();
    if (next + interval_us < now) next = now - interval_us;  // fell behind: skip, never burst
    SleepUntil(next + interval_us);
  }
  for (Target& t : targets) {
    Finish(t, &result.stacks);
    result.processes.push_back(std::move(t.session));
  }
  result.comparison = CompareProcesses(result.stacks);
  return result;
}

void PrintStackSession(const StackSessionResult& r, size_t top, FILE* out) {
  for (const ProcessSession& p : r.processes) {
    const ProcessFacts& f = p.facts;
    std::fprintf(out, "pid %d%s on %s: %s\n", f.pid,
                 f.rank >= 0 ? (" (rank " + std::to_string(f.rank) + ")").c_str() : "",
                 f.host.c_str(), f.command_line.c_str());
    std::fprintf(out, "  %lld samples", static_cast<long long>(p.samples));
    if (p.samples)
      std::fprintf(out,
                   ", %lld us each on average; a thread held %lld us on average (at most %lld)",
                   static_cast<long long>(p.sample_us_total / p.samples),
                   static_cast<long long>(p.stopped_us_total / p.samples),
                   static_cast<long long>(p.max_stopped_us));
    if (p.failed)
      std::fprintf(out, ", %lld failed (%s)", static_cast<long long>(p.failed),
                   p.last_error.c_str());
    if (p.dropped)
      std::fprintf(out, ", %lld samples of stacks past the per-window bound not kept",
                   static_cast<long long>(p.dropped));
    if (p.exited) std::fprintf(out, "; the process exited");
    std::fprintf(out, "\n  Python frames: %s\n",
                 f.python_unread.empty() ? ("read (CPython " + f.python_version + ")").c_str()
                                         : ("not read: " + f.python_unread).c_str());
    if (!p.file.empty()) std::fprintf(out, "  written to %s\n", p.file.c_str());
    if (!p.steps_file.empty()) {
      if (p.steps_read >= 0)
        std::fprintf(out, "  windows by training step: %lld steps read from %s\n",
                     static_cast<long long>(p.steps_read), p.steps_file.c_str());
      else
        std::fprintf(out, "  windows by time: no step file %s (the annotation API writes it)\n",
                     p.steps_file.c_str());
    }
    // Per thread, stacks merged over the windows, most frequent first.
    std::map<std::pair<int64_t, std::string>, int64_t> merged;
    std::map<int64_t, std::pair<std::string, int64_t>> threads;
    for (const FoldedStack& s : r.stacks) {
      if (s.pid != f.pid || s.host != f.host) continue;
      merged[{s.tid, s.frames}] += s.count;
      threads[s.tid].first = s.thread;
      threads[s.tid].second += s.count;
    }
    for (const auto& [tid, name] : threads) {
      std::fprintf(out, "  thread %lld (%s), %lld samples:\n", static_cast<long long>(tid),
                   name.first.c_str(), static_cast<long long>(name.second));
      std::vector<std::pair<int64_t, std::string>> lines;
      for (const auto& [key, n] : merged)
        if (key.first == tid) lines.emplace_back(n, key.second);
      std::sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (size_t i = 0; i < lines.size() && i < top; ++i)
        std::fprintf(out, "    %s %lld\n", lines[i].second.c_str(),
                     static_cast<long long>(lines[i].first));
      if (lines.size() > top) std::fprintf(out, "    ... %zu more stacks\n", lines.size() - top);
    }
  }
  for (const std::string& why : r.not_sampled) std::fprintf(out, "not sampled: %s\n", why.c_str());
  std::fprintf(out, "\n%s\n", r.comparison.summary.c_str());
}

std::string StackSessionJson(const StackSessionResult& r) {
  std::string out = "{\"processes\":[";
  for (size_t i = 0; i < r.processes.size(); ++i) {
    const ProcessSession& p = r.processes[i];
    out += i ? ",{" : "{";
    out += "\"pid\":" + std::to_string(p.facts.pid);
    Field("host", p.facts.host, &out);
    Field("rank", p.facts.rank, &out);
    Field("python", p.facts.python_version, &out);
    Field("python_unread", p.facts.python_unread, &out);
    Field("samples", p.samples, &out);
    Field("failed", p.failed, &out);
    Field("mean_sample_us", p.samples ? p.sample_us_total / p.samples : 0, &out);
    Field("mean_stopped_us", p.samples ? p.stopped_us_total / p.samples : 0, &out);
    Field("max_stopped_us", p.max_stopped_us, &out);
    out += std::string(",\"exited\":") + (p.exited ? "true" : "false");
    Field("file", p.file, &out);
    if (!p.steps_file.empty()) {
      Field("steps_file", p.steps_file, &out);
      Field("steps_read", p.steps_read, &out);
    }
    out += "}";
  }
  out += "],\"not_sampled\":[";
  for (size_t i = 0; i < r.not_sampled.size(); ++i) {
    if (i) out += ",";
    AppendEscapedJsonString(r.not_sampled[i], &out);
  }
  out += "],\"stacks\":[";
  for (size_t i = 0; i < r.stacks.size(); ++i) {
    const FoldedStack& s = r.stacks[i];
    out += i ? ",{" : "{";
    out += "\"pid\":" + std::to_string(s.pid);
    Field("rank", s.rank, &out);
    Field("tid", s.tid, &out);
    Field("thread", s.thread, &out);
    Field("window_start_us", s.window_start_us, &out);
    Field("window_end_us", s.window_end_us, &out);
    if (s.step_first >= 0) {
      Field("step_first", s.step_first, &out);
      Field("step_last", s.step_last, &out);
    }
    Field("count", s.count, &out);
    Field("position", s.position_label, &out);
    Field("frames", s.frames, &out);
    out += "}";
  }
  const StackComparison& c = r.comparison;
  out += "],\"comparison\":{\"outliers\":[";
  for (size_t i = 0; i < c.outliers.size(); ++i) {
    const ProcessStacks& p = c.processes[c.outliers[i]];
    out += i ? ",{" : "{";
    out += "\"pid\":" + std::to_string(p.pid);
    Field("rank", p.rank, &out);
    Field("position", p.position_label, &out);
    out += std::string(",\"stayed\":") + (p.stayed ? "true" : "false");
    Field("in_position", p.in_position, &out);
    Field("samples", p.samples, &out);
    out += "}";
  }
  out += "]";
  Field("majority_position", c.majority_position_label, &out);
  Field("majority", static_cast<int64_t>(c.majority), &out);
  Field("summary", c.summary, &out);
  return out + "}}";
}

}  // namespace collscope::stacks
