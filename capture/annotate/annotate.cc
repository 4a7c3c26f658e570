// The C ABI of collscope_annotate.h: calls publish events into one fixed ring; one writer thread
// drains it into the process's step/phase series file.
#include "capture/annotate/collscope_annotate.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "capture/annotate/event_ring.h"
#include "capture/common/launcher_env.h"
#include "capture/annotate/step_lines.h"

namespace collscope::annotate {
namespace {

constexpr size_t kRingEvents = 16384;  // a step of 100 phases and micro-batches is ~300 events

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // the vDSO: no system call
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void CopyName(const char* name, char* out) {
  if (name == nullptr) return;
  size_t n = strnlen(name, kNameBytes - 1);
  std::memcpy(out, name, n);
  out[n] = '\0';
}

using capture::FirstEnvInt;
using capture::LauncherLocalRank;
using capture::LauncherRank;
using capture::LauncherWorldSize;

// The begin times of the last kSteps steps, for collscope_annotate_step_at: in-process readers
// whose events arrive late (the CUPTI library gets kernel records seconds after they ran) place
// them in the step that was current when they happened. Writers never wait; a reader retries a
// slot that is being written (a per-slot sequence count).
class StepHistory {
 public:
  static constexpr uint64_t kSteps = 1024;

  void Begin(int64_t step, int64_t t_ns) {
    const uint64_t n = next_.fetch_add(1, std::memory_order_relaxed);
    Slot& s = slots_[n % kSteps];
    s.seq.fetch_add(1, std::memory_order_acq_rel);
    s.index.store(n, std::memory_order_release);
    s.step.store(step, std::memory_order_release);
    s.t_ns.store(t_ns, std::memory_order_release);
    s.seq.fetch_add(1, std::memory_order_release);
    uint64_t done = done_.load(std::memory_order_relaxed);
    while (done < n + 1 && !done_.compare_exchange_weak(done, n + 1, std::memory_order_release)) {
    }
  }

  // The step whose begin came last at or before t_ns; false before the first step or when t_ns
  // is older than the history.
  bool At(int64_t t_ns, int64_t* step) const {
    // A search that meets a slot overwritten under it (the writer wrapped around) starts again.
    for (int attempt = 0; attempt < 4; ++attempt) {
      const uint64_t n = done_.load(std::memory_order_acquire);
      if (n == 0) return false;
      uint64_t lo = n > kSteps ? n - kSteps : 0, hi = n;  // the answer is in [lo, hi)
      int64_t found_step = 0;
      bool found = false, overwritten = false;
      while (lo < hi && !overwritten) {
        const uint64_t mid = lo + (hi - lo) / 2;
        int64_t s_step, s_t;
        if (!Read(mid, &s_step, &s_t)) {
          overwritten = true;
        } else if (s_t <= t_ns) {
          found = true, found_step = s_step;
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      if (overwritten) continue;
      // The oldest slot kept began after t_ns: t_ns is older than the history.
      if (!found) return false;
      *step = found_step;
      return true;
    }
    return false;
  }

 private:
  struct Slot {
    std::atomic<uint64_t> seq{0}, index{0};
    std::atomic<int64_t> step{0}, t_ns{0};
  };

  // Slot `i` (a count of steps begun), or false when it has been overwritten by a later step.
  bool Read(uint64_t i, int64_t* step, int64_t* t_ns) const {
    const Slot& s = slots_[i % kSteps];
    for (;;) {
      const uint64_t before = s.seq.load(std::memory_order_acquire);
      // Acquire loads keep the second look at seq after them (no fence: TSan does not model one).
      const uint64_t index = s.index.load(std::memory_order_acquire);
      *step = s.step.load(std::memory_order_acquire);
      *t_ns = s.t_ns.load(std::memory_order_acquire);
      if ((before & 1) == 0 && s.seq.load(std::memory_order_relaxed) == before) return index == i;
    }
  }

  std::atomic<uint64_t> next_{0}, done_{0};
  Slot slots_[kSteps];
};

// The current step, micro-batch and stack of open phases, for collscope_annotate_current. A
// seqlock whose writers never wait: an update that finds another in progress is skipped (the
// event still reaches the ring), so readers may briefly see an older phase.
class Current {
 public:
  static constexpr int kDepth = 8;
  static constexpr int kWords = static_cast<int>(kNameBytes / 8);

  void SetStep(int64_t step) {
    Update([&] {
      step_.store(step, std::memory_order_release);
      depth_.store(0, std::memory_order_release);
    });
  }
  void SetMicroBatch(int32_t mb) { Update([&] { mb_.store(mb, std::memory_order_release); }); }
  void Push(const char* name) {
    Update([&] {
      const int d = depth_.load(std::memory_order_relaxed);
      if (d < kDepth) Store(d, name);
      depth_.store(d + 1, std::memory_order_release);
    });
  }
  void Pop() {
    Update([&] {
      const int d = depth_.load(std::memory_order_relaxed);
      if (d > 0) depth_.store(d - 1, std::memory_order_release);
    });
  }

  int Read(int64_t* step, char* buf, int32_t size, int32_t* mb) const {
    // Acquire loads throughout (no fences, which ThreadSanitizer cannot follow): a value stored
    // after the writer made the sequence odd is seen only with that odd sequence or a later one.
    const uint32_t s0 = seq_.load(std::memory_order_acquire);
    if (s0 & 1) return -1;
    const int64_t st = step_.load(std::memory_order_acquire);
    const int32_t m = mb_.load(std::memory_order_acquire);
    const int d = std::min(depth_.load(std::memory_order_acquire), kDepth);
    uint64_t words[kWords] = {};
    if (d > 0)
      for (int w = 0; w < kWords; ++w) words[w] = names_[d - 1][w].load(std::memory_order_acquire);
    if (seq_.load(std::memory_order_acquire) != s0) return -1;
    if (step) *step = st;
    if (mb) *mb = m;
    if (buf && size > 0) {
      char name[kNameBytes];
      std::memcpy(name, words, kNameBytes);
      name[kNameBytes - 1] = '\0';
      std::snprintf(buf, static_cast<size_t>(size), "%s", name);
    }
    return 0;
  }

 private:
  template <typename F>
  void Update(F f) {
    uint32_t s = seq_.load(std::memory_order_relaxed);
    if ((s & 1) || !seq_.compare_exchange_strong(s, s + 1, std::memory_order_acq_rel)) return;
    f();  // release stores: whoever sees one also sees the odd sequence before it
    seq_.store(s + 2, std::memory_order_release);
  }
  void Store(int d, const char* name) {
    uint64_t words[kWords] = {};
    CopyName(name, reinterpret_cast<char*>(words));
    for (int w = 0; w < kWords; ++w) names_[d][w].store(words[w], std::memory_order_release);
  }

  std::atomic<uint32_t> seq_{0};
  std::atomic<int64_t> step_{-1};
  std::atomic<int32_t> mb_{-1};
  std::atomic<int> depth_{0};
  std::atomic<uint64_t> names_[kDepth][kWords] = {};
};

bool MkdirP(const std::string& dir, std::string* err) {
  std::string cur;
  size_t pos = 0;
  while (pos <= dir.size()) {
    size_t next = dir.find('/', pos);
    if (next == std::string::npos) next = dir.size();
    cur = dir.substr(0, next);
    if (!cur.empty() && mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST) {
      *err = cur + ": " + std::strerror(errno);
      return false;
    }
    pos = next + 1;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *err = dir + ": not a directory";
    return false;
  }
  return true;
}

class Runtime;
Runtime& Rt();

class Runtime {
 public:
  Runtime() {
    const char* enable = std::getenv("COLLSCOPE_ENABLE");
    if (enable && std::strcmp(enable, "0") == 0) disabled_.store(true);
    const int32_t ms = FirstEnvInt({"COLLSCOPE_STEPS_INTERVAL_MS"}, 1000);
    interval_ms_ = ms > 0 ? ms : 1000;
    if (!disabled_.load()) writer_ = std::thread([this] { Loop(); });
    // A forked child (a data-loader worker) has no writer thread and may have inherited a held
    // mutex: it records nothing and never waits on the parent's writer.
    pthread_atfork(nullptr, nullptr, [] { Rt().ForkedChild(); });
  }
  ~Runtime() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (writer_.joinable()) writer_.join();
  }

  bool Record(const Event& e) {
    if (disabled_.load(std::memory_order_relaxed)) return false;
    if (ring_.Push(e)) return true;
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  void ForkedChild() {
    forked_child_ = true;
    disabled_.store(true);
  }

  int Flush() {
    if (forked_child_ || disabled_.load() || !writer_.joinable()) return -1;
    std::unique_lock<std::mutex> g(mu_);
    const uint64_t want = ++flush_requested_;
    cv_.notify_all();
    done_cv_.wait(g, [&] { return flush_done_ >= want || stop_; });
    return disabled_.load() ? -1 : 0;
  }

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  bool disabled() const { return disabled_.load(std::memory_order_relaxed); }
  Current& current() { return current_; }
  StepHistory& steps() { return steps_; }

 private:
  void Loop() {
    ProcessInfo p;
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
    p.hostname = host;
    p.pid = getpid();
    p.rank = LauncherRank();
    p.world_size = LauncherWorldSize();
    p.local_rank = LauncherLocalRank();
    StepLines lines(p);
    std::string out;
    for (;;) {
      uint64_t flush_to = 0;
      bool stopping = false;
      {
        std::unique_lock<std::mutex> g(mu_);
        cv_.wait_for(g, std::chrono::milliseconds(interval_ms_), [&] { return stop_ || flush_requested_ > flush_done_; });
        flush_to = flush_requested_;
        stopping = stop_;
      }
      Event e;
      while (ring_.Pop(&e)) lines.Add(e, &out);
      lines.Dropped(dropped(), &out);
      if (!out.empty() && !disabled()) Write(lines, &out);
      out.clear();
      {
        std::lock_guard<std::mutex> g(mu_);
        flush_done_ = std::max(flush_done_, flush_to);
      }
      done_cv_.notify_all();
      if (stopping) break;
    }
    if (fd_ >= 0) close(fd_);
  }

  void Write(const StepLines& lines, std::string* out) {
    if (fd_ < 0) {
      const char* dir = std::getenv("COLLSCOPE_DUMP_DIR");
      if (dir == nullptr || *dir == '\0') dir = std::getenv("NCCL_INSPECTOR_DUMP_DIR");
      const std::string d = dir && *dir ? dir : "collscope-dump";
      char host[256] = {};
      if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
      path_ = d + "/" + host + "-pid" + std::to_string(getpid()) + ".steps.jsonl";
      std::string err;
      if (!MkdirP(d, &err)) return Disable("cannot use dump directory '" + d + "': " + err);
      fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd_ < 0) return Disable("cannot open '" + path_ + "': " + std::strerror(errno));
      std::string head;
      lines.ProcessLine(&head);
      out->insert(0, head);
    }
    size_t off = 0;
    while (off < out->size()) {
      const ssize_t n = write(fd_, out->data() + off, out->size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Disable("cannot write '" + path_ + "': " + std::strerror(errno));
      off += static_cast<size_t>(n);
    }
  }

  void Disable(const std::string& why) {
    if (!disabled_.exchange(true))
      std::fprintf(stderr, "collscope: step/phase annotations disabled: %s (training continues)\n", why.c_str());
  }

  EventRing<kRingEvents> ring_;
  Current current_;
  StepHistory steps_;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<bool> disabled_{false};
  bool forked_child_ = false;
  int interval_ms_ = 1000;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  bool stop_ = false;
  uint64_t flush_requested_ = 0, flush_done_ = 0;
  std::thread writer_;
  int fd_ = -1;
  std::string path_;
};

Runtime& Rt() {
  static Runtime* rt = new Runtime();  // never destroyed before atexit flushes it (below)
  return *rt;
}

// Started at load, so that no call ever starts a thread; flushed at exit.
struct Lifetime {
  Lifetime() { Rt(); }
  ~Lifetime() { Rt().Flush(); }
} g_lifetime;

int Record(Event& e) {
  e.t_ns = NowNs();
  return Rt().Record(e) ? 0 : -1;
}

}  // namespace
}  // namespace collscope::annotate

using collscope::annotate::Event;
using collscope::annotate::EventType;
using collscope::annotate::Rt;

extern "C" {

int collscope_step_begin(int64_t step) {
  Rt().current().SetStep(step);
  Rt().steps().Begin(step, collscope::annotate::NowNs());
  Event e;
  e.type = EventType::kStepBegin;
  e.value = step;
  return collscope::annotate::Record(e);
}

int collscope_step_end(void) {
  Event e;
  e.type = EventType::kStepEnd;
  return collscope::annotate::Record(e);
}

int collscope_phase_begin(const char* name) {
  Rt().current().Push(name ? name : "");
  Event e;
  e.type = EventType::kPhaseBegin;
  collscope::annotate::CopyName(name, e.name);
  return collscope::annotate::Record(e);
}

int collscope_phase_end(const char* name) {
  Rt().current().Pop();
  Event e;
  e.type = EventType::kPhaseEnd;
  collscope::annotate::CopyName(name, e.name);
  return collscope::annotate::Record(e);
}

int collscope_micro_batch(int32_t index) {
  Rt().current().SetMicroBatch(index);
  Event e;
  e.type = EventType::kMicroBatch;
  e.value = index;
  return collscope::annotate::Record(e);
}

int collscope_set_parallel(int32_t rank, int32_t world_size, int32_t dp_rank, int32_t dp_size,
                           int32_t tp_rank, int32_t tp_size, int32_t pp_rank, int32_t pp_size,
                           int32_t ep_rank, int32_t ep_size, int32_t cp_rank, int32_t cp_size) {
  Event e;
  e.type = EventType::kParallel;
  const int32_t v[12] = {rank, world_size, dp_rank, dp_size, tp_rank, tp_size,
                         pp_rank, pp_size, ep_rank, ep_size, cp_rank, cp_size};
  for (int i = 0; i < 12; ++i) e.parallel[i] = v[i] < 0 ? -1 : v[i];
  if (e.parallel[0] < 0) e.parallel[0] = collscope::annotate::LauncherRank();
  if (e.parallel[1] < 0) e.parallel[1] = collscope::annotate::LauncherWorldSize();
  return collscope::annotate::Record(e);
}

int collscope_phase_gpu_time(int64_t step, const char* phase, double gpu_us) {
  if (!std::isfinite(gpu_us) || gpu_us < 0) return -2;
  Event e;
  e.type = EventType::kGpuTime;
  e.value = step;
  e.gpu_us = gpu_us;
  collscope::annotate::CopyName(phase, e.name);
  return collscope::annotate::Record(e);
}

int collscope_annotate_current(int64_t* step, char* phase_buf, int32_t phase_buf_size, int32_t* micro_batch) {
  return Rt().current().Read(step, phase_buf, phase_buf_size, micro_batch);
}

int collscope_annotate_step_at(int64_t unix_ns, int64_t* step) {
  if (step == nullptr) return -2;
  return Rt().steps().At(unix_ns, step) ? 0 : -1;
}

int collscope_flush(void) { return Rt().Flush(); }

uint64_t collscope_annotate_dropped(void) { return Rt().dropped(); }

}  // extern "C"
