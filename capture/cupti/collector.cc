#include "capture/cupti/collector.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "capture/common/launcher_env.h"


namespace collscope::capture {
namespace {

std::atomic<Collector*> g_collector{nullptr};
std::atomic<StepAtFn> g_step_at{nullptr};

uint64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// An integer variable within [lo, hi]; anything else keeps the default, with a warning.
int64_t EnvInt(const char* name, int64_t def, int64_t lo, int64_t hi, std::vector<std::string>* warnings) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < lo || x > hi) {
    warnings->push_back(std::string(name) + "=" + v + " is not valid; using " + std::to_string(def));
    return def;
  }
  return x;
}

bool MkdirP(const std::string& dir, std::string* err) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || (dir[i] == '/' && i > 0)) {
      partial = dir.substr(0, i);
      if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        *err = std::strerror(errno);
        return false;
      }
    }
  }
  return true;
}

const char* MemcpyName(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy other";
  }
}

}  // namespace

CollectorConfig LoadCollectorConfig() {
  CollectorConfig c;
  const char* dir = std::getenv("COLLSCOPE_DUMP_DIR");
  if (dir == nullptr || *dir == '\0') dir = std::getenv("NCCL_INSPECTOR_DUMP_DIR");
  if (dir != nullptr && *dir != '\0') c.dump_dir = dir;
  c.window_ns = static_cast<uint64_t>(EnvInt("COLLSCOPE_CUPTI_WINDOW_MS", 10000, 1, 86400000, &c.warnings)) * 1000000u;
  c.flush_ms = static_cast<int>(EnvInt("COLLSCOPE_CUPTI_FLUSH_MS", 1000, 10, 600000, &c.warnings));
  c.buffers = static_cast<size_t>(EnvInt("COLLSCOPE_CUPTI_BUFFERS", 16, 2, 4096, &c.warnings));
  c.buffer_bytes = static_cast<size_t>(EnvInt("COLLSCOPE_CUPTI_BUFFER_KB", 1024, 16, 1 << 20, &c.warnings)) * 1024;
  c.gzip = EnvInt("COLLSCOPE_CUPTI_GZIP", 1, 0, 1, &c.warnings) != 0;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
  c.host = host;
  c.pid = getpid();
  c.rank = LauncherRank();
  c.local_rank = LauncherLocalRank();
  c.world_size = LauncherWorldSize();
  return c;
}

BufferPool::BufferPool(size_t count, size_t bytes)
    : count_(count),
      bytes_(bytes / 8 * 8),
      memory_(new uint64_t[count * (bytes / 8)]),
      next_(new std::atomic<uint32_t>[count]) {
  for (size_t i = 0; i < count_; ++i) next_[i].store(i + 1 < count_ ? static_cast<uint32_t>(i + 2) : 0);
  head_.store(count_ > 0 ? 1 : 0);
}

uint8_t* BufferPool::Take() {
  uint64_t head = head_.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t top = static_cast<uint32_t>(head);
    if (top == 0) return nullptr;
    const uint64_t next = ((head >> 32) + 1) << 32 | next_[top - 1].load(std::memory_order_relaxed);
    if (head_.compare_exchange_weak(head, next, std::memory_order_acq_rel, std::memory_order_acquire))
      return reinterpret_cast<uint8_t*>(memory_.get()) + (top - 1) * bytes_;
  }
}

void BufferPool::Give(uint8_t* buffer) {
  const auto* base = reinterpret_cast<uint8_t*>(memory_.get());
  if (buffer < base || buffer >= base + count_ * bytes_) return;  // not one of ours
  const uint32_t index = static_cast<uint32_t>((buffer - base) / bytes_);
  uint64_t head = head_.load(std::memory_order_acquire);
  for (;;) {
    next_[index].store(static_cast<uint32_t>(head), std::memory_order_relaxed);
    const uint64_t next = ((head >> 32) + 1) << 32 | (index + 1);
    if (head_.compare_exchange_weak(head, next, std::memory_order_acq_rel, std::memory_order_acquire)) return;
  }
}

Collector::Collector(const CuptiApi& api, CollectorConfig config)
    : api_(api),
      config_(std::move(config)),
      pool_(config_.buffers, config_.buffer_bytes),
      summarizer_(config_.window_ns, &Collector::StepAt) {
  if (config_.now_ns == nullptr) config_.now_ns = &RealtimeNs;
  path_ = config_.dump_dir + "/" + config_.host + "-pid" + std::to_string(config_.pid) + ".kernels.jsonl" +
          (config_.gzip ? ".gz" : "");
}

Collector* Collector::Start(const CuptiApi& api, CollectorConfig config) {
  for (const std::string& w : config.warnings) std::fprintf(stderr, "collscope: cupti: %s\n", w.c_str());
  Collector* expected = nullptr;
  auto* c = new Collector(api, std::move(config));
  if (!g_collector.compare_exchange_strong(expected, c)) {
    delete c;
    return nullptr;
  }
  const CUptiResult r = api.register_callbacks(&Collector::OnBufferRequested, &Collector::OnBufferCompleted);
  if (r != CUPTI_SUCCESS) {
    const char* why = "";
    if (api.get_result_string == nullptr || api.get_result_string(r, &why) != CUPTI_SUCCESS) why = "";
    std::fprintf(stderr,
                 "collscope: cupti: CUPTI refused the activity callbacks (error %d %s; another profiler such as "
                 "Nsight or the PyTorch profiler may hold it): kernel summaries disabled, training continues\n",
                 static_cast<int>(r), why);
    g_collector.store(nullptr);
    delete c;
    return nullptr;
  }
  // Concurrent kernels: CUPTI_ACTIVITY_KIND_KERNEL would serialise them.
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET}) {
    const CUptiResult e = api.enable(kind);
    if (e != CUPTI_SUCCESS)
      std::fprintf(stderr, "collscope: cupti: cannot enable activity kind %d (error %d): those records are missing\n",
                   static_cast<int>(kind), static_cast<int>(e));
  }
  c->writer_ = std::thread([c] { c->Run(); });
  return c;
}

void CUPTIAPI Collector::OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  Collector* c = g_collector.load(std::memory_order_acquire);
  *max_records = 0;  // fill the buffer
  *buffer = c != nullptr ? c->pool_.Take() : nullptr;
  *size = *buffer != nullptr ? c->pool_.buffer_bytes() : 0;
  if (c != nullptr && *buffer == nullptr) c->buffers_refused_.fetch_add(1, std::memory_order_relaxed);
}

void CUPTIAPI Collector::OnBufferCompleted(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  Collector* c = g_collector.load(std::memory_order_acquire);
  if (c == nullptr || buffer == nullptr) return;
  try {
    std::lock_guard<std::mutex> g(c->mu_);
    CUpti_Activity* record = nullptr;
    for (;;) {
      const CUptiResult r = c->api_.get_next_record(buffer, valid, &record);
      if (r == CUPTI_SUCCESS) {
        c->Process(record);
        continue;
      }
      if (r != CUPTI_ERROR_MAX_LIMIT_REACHED) ++c->stats_.invalid_records;
      break;
    }
  } catch (...) {
    // Out of memory in a summary: nothing may unwind into CUPTI. The buffer's rest is lost.
    if (!c->warned_.exchange(true))
      std::fputs("collscope: cupti: out of memory while summarising kernels (training continues)\n", stderr);
  }
  size_t dropped = 0;
  if (c->api_.get_num_dropped_records != nullptr &&
      c->api_.get_num_dropped_records(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    std::lock_guard<std::mutex> g(c->mu_);
    c->stats_.dropped_by_cupti += dropped;
  }
  c->pool_.Give(buffer);
}

bool Collector::StepAt(uint64_t unix_ns, int64_t* step) {
  StepAtFn f = g_step_at.load(std::memory_order_acquire);
  return f != nullptr && f(unix_ns, step);
}

void Collector::Process(const CUpti_Activity* record) {
  ++stats_.records;
  Activity a;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      // Read through the oldest kernel struct: its fields keep their offsets in every later
      // version (CUPTI hands over the struct of its own version, whatever headers we built with).
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel4*>(record);
      a.name = k->name != nullptr ? std::string_view(k->name) : std::string_view("(unnamed kernel)");
      a.kind = KernelKindOf(a.name);
      a.device = k->deviceId, a.stream = k->streamId, a.start_ns = k->start, a.end_ns = k->end;
      a.grid[0] = k->gridX, a.grid[1] = k->gridY, a.grid[2] = k->gridZ;
      a.block[0] = k->blockX, a.block[1] = k->blockY, a.block[2] = k->blockZ;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      a.name = MemcpyName(m->copyKind);
      a.kind = ActivityKind::kMemcpy;
      a.device = m->deviceId, a.stream = m->streamId, a.start_ns = m->start, a.end_ns = m->end;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      a.name = "memset";
      a.kind = ActivityKind::kMemset;
      a.device = m->deviceId, a.stream = m->streamId, a.start_ns = m->start, a.end_ns = m->end;
      break;
    }
    default:
      return;
  }
  // start = end = 0: CUPTI collected no timestamp for it.
  if (a.start_ns == 0 && a.end_ns == 0) {
    ++stats_.untimed;
    return;
  }
  ++stats_.activities;
  summarizer_.Add(a);
}

void Collector::Run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> g(wake_mu_);
      wake_.wait_for(g, std::chrono::milliseconds(config_.flush_ms), [this] { return stop_; });
      if (stop_) return;
    }
    // Not under mu_: CUPTI may deliver the flushed buffers on this thread, into OnBufferCompleted.
    api_.flush_all(0);
    Tick(false);
  }
}

void Collector::Tick(bool final) noexcept {
  try {
    TickOrThrow(final);
  } catch (...) {
    if (!warned_.exchange(true))
      std::fputs("collscope: cupti: out of memory while writing kernel summaries: they stop here (training "
                 "continues)\n",
                 stderr);
    disabled_ = true;
  }
}

void Collector::TickOrThrow(bool final) {
  if (g_step_at.load(std::memory_order_relaxed) == nullptr && config_.find_step_at != nullptr)
    g_step_at.store(config_.find_step_at(), std::memory_order_release);
  std::string text;
  {
    std::lock_guard<std::mutex> g(mu_);
    // A window is complete once every buffer that could hold its activities was flushed: two
    // flush intervals after it closed.
    const uint64_t grace = 2 * static_cast<uint64_t>(config_.flush_ms) * 1000000u;
    const uint64_t now = config_.now_ns();
    summarizer_.Emit(final ? UINT64_MAX : (now > grace ? now - grace : 0), &text);
    stats_.late = summarizer_.late();
    stats_.buffers_refused = buffers_refused_.load(std::memory_order_relaxed);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "{\"type\":\"stats\",\"records\":%" PRIu64 ",\"kernels\":%" PRIu64 ",\"untimed\":%" PRIu64
                  ",\"dropped_by_cupti\":%" PRIu64 ",\"buffers_refused\":%" PRIu64 ",\"invalid_records\":%" PRIu64
                  ",\"late\":%" PRIu64 "}\n",
                  stats_.records, stats_.activities, stats_.untimed, stats_.dropped_by_cupti, stats_.buffers_refused,
                  stats_.invalid_records, stats_.late);
    if (last_stats_ != buf && (stats_.records > 0 || final)) {
      last_stats_ = buf;
      text += buf;
    }
  }
  if (!text.empty()) Write(text);
}

void Collector::Write(const std::string& text) {
  if (disabled_) return;
  if (fd_ < 0) {
    std::string err;
    if (!MkdirP(config_.dump_dir, &err)) {
      disabled_ = true;
      return Warn("cannot use dump directory '" + config_.dump_dir + "': " + err);
    }
    fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      disabled_ = true;
      return Warn("cannot open '" + path_ + "': " + std::strerror(errno));
    }
    // 15 + 16: a gzip stream (header and trailer), which every gzip reader takes.
    if (config_.gzip && deflateInit2(&zs_, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      disabled_ = true;
      return Warn("cannot start compression for '" + path_ + "'");
    }
    deflating_ = config_.gzip;
    SummaryProcess p;
    p.host = config_.host, p.pid = config_.pid, p.rank = config_.rank, p.local_rank = config_.local_rank;
    p.world_size = config_.world_size, p.step_windows = g_step_at.load() != nullptr;
    p.window_ms = config_.window_ns / 1000000;
    const std::string head = ProcessLine(p);
    if (!(deflating_ ? Deflate(head + text, Z_SYNC_FLUSH) : WriteRaw(head.data(), head.size()) &&
                                                              WriteRaw(text.data(), text.size())))
      disabled_ = true;
    return;
  }
  // A sync flush per tick: the file reads complete up to the last tick if the job dies.
  if (!(deflating_ ? Deflate(text, Z_SYNC_FLUSH) : WriteRaw(text.data(), text.size()))) disabled_ = true;
}

bool Collector::Deflate(const std::string& text, int flush) {
  zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs_.avail_in = static_cast<uInt>(text.size());
  char out[1 << 14];
  do {
    zs_.next_out = reinterpret_cast<Bytef*>(out);
    zs_.avail_out = sizeof out;
    const int r = deflate(&zs_, flush);
    if (r == Z_STREAM_ERROR) {
      Warn("compression failed for '" + path_ + "'");
      return false;
    }
    if (!WriteRaw(out, sizeof out - zs_.avail_out)) return false;
  } while (zs_.avail_out == 0);
  return true;
}

bool Collector::WriteRaw(const char* data, size_t size) {
  size_t off = 0;
  while (off < size) {
    const ssize_t n = write(fd_, data + off, size - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Warn("cannot write '" + path_ + "': " + std::strerror(errno));
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

void Collector::Warn(const std::string& what) {
  if (!warned_.exchange(true))
    std::fprintf(stderr, "collscope: cupti: %s: kernel summaries disabled, training continues\n", what.c_str());
}

CollectorStats Collector::stats() {
  std::lock_guard<std::mutex> g(mu_);
  CollectorStats s = stats_;
  s.buffers_refused = buffers_refused_.load(std::memory_order_relaxed);
  s.late = summarizer_.late();
  return s;
}

void Collector::Stop() {
  {
    std::lock_guard<std::mutex> g(wake_mu_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Tick(true);
  if (fd_ >= 0) {
    if (deflating_) {
      if (!disabled_) Deflate(std::string(), Z_FINISH);
      deflateEnd(&zs_);
      deflating_ = false;
    }
    close(fd_);
    fd_ = -1;
  }
}

}  // namespace collscope::capture
