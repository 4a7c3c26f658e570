#include "sim/live.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <queue>
#include <thread>
#include <vector>

#include "capture/common/json_escape.h"
#include "sim/line_times.h"

namespace collscope::sim {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int64_t SystemNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Writes every byte of `iov` (one writev per IOV_MAX pieces; a short write is finished piece by
// piece).
Status WriteAll(int fd, std::vector<iovec>& iov, const std::string& path) {
  size_t k = 0;
  while (k < iov.size()) {
    const int n = static_cast<int>(std::min<size_t>(iov.size() - k, IOV_MAX));
    ssize_t w = ::writev(fd, iov.data() + k, n);
    if (w < 0 && errno != EINTR)
      return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
    size_t done = w < 0 ? 0 : static_cast<size_t>(w);
    for (int m = 0; m < n; ++m) {
      iovec& v = iov[k + m];
      if (done >= v.iov_len) {
        done -= v.iov_len;
        continue;
      }
      const char* p = static_cast<const char*>(v.iov_base) + done;
      size_t left = v.iov_len - done;
      done = 0;
      while (left > 0) {
        const ssize_t x = ::write(fd, p, left);
        if (x < 0 && errno == EINTR) continue;
        if (x <= 0) return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
        p += x;
        left -= static_cast<size_t>(x);
      }
    }
    k += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// The staging directory is removed however the run ends.
struct StagingGuard {
  std::string path;
  ~StagingGuard() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

struct FaultWindow {
  int64_t id = 0;
  std::string kind;
  int64_t start_us = 0, end_us = 0;
};

struct GroundTruth {
  int64_t start_us = 0, end_us = 0;
  std::vector<FaultWindow> faults;
};

Result<GroundTruth> ReadGroundTruth(const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.load(path).get(doc)) return Status::Corruption("cannot parse " + path);
  GroundTruth gt;
  simdjson::dom::element job;
  simdjson::dom::array faults;
  if (doc["job"].get(job) || job["start_us"].get_int64().get(gt.start_us) ||
      job["end_us"].get_int64().get(gt.end_us) || doc["faults"].get_array().get(faults))
    return Status::Corruption(path + ": no job start/end or faults");
  for (simdjson::dom::element f : faults) {
    FaultWindow w;
    std::string_view kind;
    if (f["id"].get_int64().get(w.id) || f["kind"].get_string().get(kind) ||
        f["start_us"].get_int64().get(w.start_us) || f["end_us"].get_int64().get(w.end_us))
      return Status::Corruption(path + ": a fault without id, kind, start_us or end_us");
    w.kind = std::string(kind);
    gt.faults.push_back(std::move(w));
  }
  return gt;
}

// A staged file: where it goes, and how.
struct Staged {
  std::string rel;  // path relative to the output dir
  bool lines = false;
  LineFormat format = LineFormat::kInspector;
};

// One pending timeline event: a fault's start or end threshold crossed by a line of this batch.
struct Threshold {
  int64_t us = 0;
  size_t fault = 0;
  bool end = false;
};

class Pacer {
 public:
  Pacer(const LiveOptions& options, std::string out, std::string staging, GroundTruth gt,
        std::vector<Staged> staged, LiveStats* stats)
      : opt_(options),
        out_(std::move(out)),
        staging_(std::move(staging)),
        gt_(std::move(gt)),
        staged_(std::move(staged)),
        stats_(stats) {}
  ~Pacer() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
    if (events_fd_ >= 0) ::close(events_fd_);
  }

  Status Run();

 private:
  struct Chunk {
    uint32_t file;  // reader index
    uint32_t seq;
    size_t offset, len;
  };
  struct Fired {
    Threshold th;
    bool has_line;
    int64_t line_us;
    size_t file;  // reader index
  };

  bool Stopping() const { return opt_.stop && opt_.stop->load(std::memory_order_relaxed); }
  int64_t JobNow(Clock::time_point now) const {
    const double el_us = std::chrono::duration<double, std::micro>(now - anchor_).count();
    return gt_.start_us + static_cast<int64_t>(std::floor(el_us * opt_.speed));
  }
  Clock::time_point DueAt(int64_t job_us) const {
    const double wall_us = std::max(0.0, static_cast<double>(job_us - gt_.start_us) / opt_.speed);
    return anchor_ + std::chrono::microseconds(static_cast<int64_t>(std::ceil(wall_us)));
  }
  // Sleeps until `until` in short slices; false when a stop was requested.
  bool SleepUntil(Clock::time_point until) const;
  Status Prepare();
  Status Flush();
  // One timeline line, stamped `wall_us` (default: now).
  Status Event(const std::string& body, int64_t wall_us = -1);
  Status FireEvents();
  Status MoveDocument(const Staged& s);
  std::string OutPath(size_t i) const { return out_ + "/" + staged_[i].rel; }

  const LiveOptions& opt_;
  std::string out_, staging_;
  GroundTruth gt_;
  std::vector<Staged> staged_;
  LiveStats* stats_;
  std::vector<TimedLineReader> readers_;
  std::vector<size_t> reader_file_;  // reader -> staged_ index
  std::vector<int> fds_;             // per reader: kept-open descriptor, or -1
  int events_fd_ = -1;
  int keep_open_ = 0;  // readers below this index keep their output descriptor open
  Clock::time_point anchor_;
  std::string arena_;
  std::vector<Chunk> chunks_;
  int64_t batch_first_us_ = INT64_MAX;  // the earliest line time in the batch
  std::vector<Threshold> thresholds_;
  size_t next_threshold_ = 0;
  std::vector<Fired> fired_;
  int64_t last_line_us_ = INT64_MIN;
};

bool Pacer::SleepUntil(Clock::time_point until) const {
  for (;;) {
    if (Stopping()) return false;
    const auto now = Clock::now();
    if (now >= until) return true;
    // Short slices: a stop request is seen within one of them.
    std::this_thread::sleep_for(
        std::min<Clock::duration>(until - now, std::chrono::milliseconds(10)));
  }
}

Status Pacer::Prepare() {
  // The output tree exists from the start, with no file of an earlier run at a path this run
  // writes: a consumer never sees stale content.
  std::error_code ec;
  fs::create_directories(out_, ec);
  if (ec) return Status::IOError("cannot create " + out_ + ": " + ec.message());
  for (const Staged& s : staged_) {
    const fs::path target = fs::path(out_) / s.rel;
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      return Status::IOError("cannot create " + target.parent_path().string() + ": " + ec.message());
    fs::remove(target, ec);
  }
  const std::string events = out_ + "/live_events.ndjson";
  events_fd_ = ::open(events.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
  if (events_fd_ < 0) return Status::IOError("cannot open " + events + ": " + std::strerror(errno));

  size_t line_files = 0;
  for (const Staged& s : staged_) line_files += s.lines;
  size_t chunk = opt_.read_chunk_bytes;
  if (chunk == 0)
    chunk = std::clamp<size_t>((size_t{64} << 20) / std::max<size_t>(line_files, 1),
                               size_t{4} << 10, size_t{64} << 10);
  int keep_open = opt_.max_open_files;
  if (keep_open <= 0) {
    rlimit rl{};
    keep_open = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                    ? static_cast<int>(std::min<rlim_t>(rl.rlim_cur / 4, 1 << 16))
                    : 256;
  }
  for (size_t i = 0; i < staged_.size(); ++i) {
    if (!staged_[i].lines) continue;
    readers_.emplace_back(staging_ + "/" + staged_[i].rel, staged_[i].format, gt_.end_us, chunk);
    reader_file_.push_back(i);
    fds_.push_back(-1);
  }
  stats_->line_files = readers_.size();
  stats_->documents = staged_.size() - readers_.size();
  keep_open_ = keep_open;

  // The batch never reallocates: it is written as soon as it reaches batch_bytes.
  arena_.reserve(opt_.batch_bytes + (size_t{1} << 20));
  for (size_t f = 0; f < gt_.faults.size(); ++f) {
    thresholds_.push_back({gt_.faults[f].start_us, f, false});
    thresholds_.push_back({gt_.faults[f].end_us, f, true});
  }
  std::stable_sort(thresholds_.begin(), thresholds_.end(),
                   [](const Threshold& a, const Threshold& b) { return a.us < b.us; });
  return Status::Ok();
}

Status Pacer::Event(const std::string& body, int64_t wall_us) {
  if (wall_us < 0) wall_us = SystemNowUs();
  std::string line = "{\"wall_us\":" + std::to_string(wall_us) + "," + body + "}\n";
  std::vector<iovec> iov{{line.data(), line.size()}};
  return WriteAll(events_fd_, iov, out_ + "/live_events.ndjson");
}

Status Pacer::FireEvents() {
  for (const Fired& e : fired_) {
    const FaultWindow& f = gt_.faults[e.th.fault];
    std::string b = std::string("\"event\":\"") +
                    (e.th.end ? "fault_last_record" : "fault_first_record") +
                    "\",\"fault\":" + std::to_string(f.id) + ",\"kind\":";
    capture::AppendEscapedJsonString(f.kind, &b);
    b += ",\"job_time_us\":" + std::to_string(e.th.us) + ",\"line_time_us\":";
    if (e.has_line) {
      b += std::to_string(e.line_us) + ",\"file\":";
      capture::AppendEscapedJsonString(staged_[reader_file_[e.file]].rel, &b);
    } else {
      b += "null,\"file\":null";
    }
    Status s = Event(b);
    if (!s.ok()) return s;
  }
  fired_.clear();
  return Status::Ok();
}

Status Pacer::Flush() {
  if (chunks_.empty()) return FireEvents();
  // Per file, its chunks in the order they were taken (the file's own order).
  std::sort(chunks_.begin(), chunks_.end(), [](const Chunk& a, const Chunk& b) {
    return a.file != b.file ? a.file < b.file : a.seq < b.seq;
  });
  std::vector<iovec> iov;
  for (size_t i = 0; i < chunks_.size();) {
    const uint32_t r = chunks_[i].file;
    iov.clear();
    size_t j = i;
    for (; j < chunks_.size() && chunks_[j].file == r; ++j)
      iov.push_back({arena_.data() + chunks_[j].offset, chunks_[j].len});
    i = j;
    const std::string path = OutPath(reader_file_[r]);
    int fd = fds_[r];
    const bool keep = static_cast<int>(r) < keep_open_;
    if (fd < 0) {
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
      if (fd < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
      if (keep) fds_[r] = fd;
    }
    Status s = WriteAll(fd, iov, path);
    if (!keep && ::close(fd) != 0 && s.ok()) s = Status::IOError("cannot close " + path);
    if (!s.ok()) return s;
  }
  stats_->batches++;
  // How late the earliest line of the batch reached its file.
  const int64_t late =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - DueAt(batch_first_us_))
          .count();
  stats_->max_late_us = std::max(stats_->max_late_us, late);
  arena_.clear();
  chunks_.clear();
  batch_first_us_ = INT64_MAX;
  return FireEvents();
}

Status Pacer::MoveDocument(const Staged& s) {
  const std::string from = staging_ + "/" + s.rel, to = out_ + "/" + s.rel;
  if (::rename(from.c_str(), to.c_str()) == 0) return Status::Ok();
  if (errno != EXDEV)
    return Status::IOError("cannot move " + from + " to " + to + ": " + std::strerror(errno));
  // Another file system: copied beside the target, then renamed, still never seen partial.
  const std::string tmp = to + ".live-tmp";
  std::error_code ec;
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::IOError("cannot copy " + from + " to " + tmp + ": " + ec.message());
  if (::rename(tmp.c_str(), to.c_str()) != 0)
    return Status::IOError("cannot move " + tmp + " to " + to + ": " + std::strerror(errno));
  return Status::Ok();
}

Status Pacer::Run() {
  Status s = Prepare();
  if (!s.ok()) return s;
  // Each reader's next entry, earliest first (ties: file order, so the output is deterministic).
  using Item = std::pair<int64_t, uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  std::vector<TimedLineReader::Entry> head(readers_.size());
  for (size_t r = 0; r < readers_.size(); ++r) {
    Result<bool> got = readers_[r].Next(&head[r]);
    if (!got.ok()) return got.status();
    if (*got) heap.push({head[r].time_us, static_cast<uint32_t>(r)});
  }
  // `started` carries the wall time of the anchor itself, so that a consumer computes exactly
  // the job clock the pacer uses.
  anchor_ = Clock::now();
  const int64_t anchor_wall_us = SystemNowUs();
  char speed[32];
  std::snprintf(speed, sizeof speed, "%.17g", opt_.speed);
  s = Event("\"event\":\"started\",\"job_time_us\":" + std::to_string(gt_.start_us) +
                ",\"speed\":" + speed + ",\"line_files\":" + std::to_string(stats_->line_files) +
                ",\"documents\":" + std::to_string(stats_->documents),
            anchor_wall_us);
  if (!s.ok()) return s;

  auto stopped = [&]() -> Status {
    stats_->stopped = true;
    Status f = Flush();
    if (!f.ok()) return f;
    stats_->pacing_s = std::chrono::duration<double>(Clock::now() - anchor_).count();
    return Event("\"event\":\"stopped\",\"job_time_us\":" + std::to_string(JobNow(Clock::now())) +
                 ",\"lines\":" + std::to_string(stats_->lines));
  };

  uint32_t seq = 0;
  Clock::time_point last_flush = anchor_;
  while (!heap.empty()) {
    if (Stopping()) return stopped();
    const int64_t now_us = JobNow(Clock::now());
    while (!heap.empty() && heap.top().first <= now_us) {
      const uint32_t r = heap.top().second;
      heap.pop();
      const TimedLineReader::Entry& e = head[r];
      batch_first_us_ = std::min(batch_first_us_, e.time_us);
      last_line_us_ = std::max(last_line_us_, e.time_us);
      chunks_.push_back({r, seq++, arena_.size(), e.bytes.size()});
      arena_.append(e.bytes);
      stats_->lines += static_cast<uint64_t>(std::count(e.bytes.begin(), e.bytes.end(), '\n'));
      stats_->bytes += e.bytes.size();
      for (; next_threshold_ < thresholds_.size() && thresholds_[next_threshold_].us <= e.time_us;
           ++next_threshold_)
        fired_.push_back({thresholds_[next_threshold_], true, e.time_us, r});
      Result<bool> got = readers_[r].Next(&head[r]);
      if (!got.ok()) return got.status();
      if (*got) heap.push({head[r].time_us, r});
      if (arena_.size() >= opt_.batch_bytes) {
        s = Flush();
        if (!s.ok()) return s;
      }
    }
    s = Flush();
    if (!s.ok()) return s;
    last_flush = Clock::now();
    if (heap.empty()) break;
    // Until the next line is due, and at least one tick: batches, not a write per line.
    const auto until =
        std::max(DueAt(heap.top().first), last_flush + std::chrono::microseconds(opt_.tick_us));
    if (!SleepUntil(until)) return stopped();
  }
  // Thresholds no line reached: every line of those windows is out now.
  for (; next_threshold_ < thresholds_.size(); ++next_threshold_)
    fired_.push_back({thresholds_[next_threshold_], false, 0, 0});
  s = FireEvents();
  if (!s.ok()) return s;

  // Documents at the job end, the ground truth last.
  if (!SleepUntil(DueAt(std::max(gt_.end_us, last_line_us_)))) return stopped();
  const Staged* truth = nullptr;
  for (const Staged& d : staged_) {
    if (d.lines) continue;
    if (d.rel == "ground_truth.json") {
      truth = &d;
      continue;
    }
    s = MoveDocument(d);
    if (!s.ok()) return s;
  }
  if (truth) {
    s = MoveDocument(*truth);
    if (!s.ok()) return s;
  }
  stats_->pacing_s = std::chrono::duration<double>(Clock::now() - anchor_).count();
  return Event("\"event\":\"finished\",\"job_time_us\":" + std::to_string(JobNow(Clock::now())) +
               ",\"lines\":" + std::to_string(stats_->lines));
}

}  // namespace

Result<LiveStats> SimulateLive(const SimConfig& config, const LiveOptions& options) {
  if (!(options.speed >= 1.0) || !std::isfinite(options.speed))
    return Status::InvalidArgument("live speed must be a finite number >= 1");
  if (options.tick_us < 0) return Status::InvalidArgument("live tick must be >= 0");
  COLLSCOPE_RETURN_IF_ERROR(ValidateConfig(config));
  std::error_code ec;
  fs::path out = fs::absolute(config.output.dir, ec).lexically_normal();
  if (ec) return Status::IOError("bad output directory " + config.output.dir + ": " + ec.message());
  if (!out.has_filename()) out = out.parent_path();  // "dir/" names "dir"
  StagingGuard guard;
  guard.path = options.staging_dir.empty()
                   ? (out.parent_path() / ("." + out.filename().string() + ".live-staging-" +
                                           std::to_string(::getpid())))
                         .string()
                   : options.staging_dir;
  fs::remove_all(guard.path, ec);

  LiveStats stats;
  SimConfig staged_config = config;
  staged_config.output.dir = guard.path;
  staged_config.output.kernel_summaries_gzip = false;
  staged_config.cancel = options.stop;
  const auto t0 = Clock::now();
  const Status simulated = Simulate(staged_config, &stats.sim);
  stats.staging_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (simulated.ok() && stats.sim.stopped) {
    // Stopped before pacing began: the timeline says so, and nothing else was written.
    stats.stopped = true;
    fs::create_directories(out, ec);
    const std::string events = (out / "live_events.ndjson").string();
    const std::string line = "{\"wall_us\":" + std::to_string(SystemNowUs()) +
                             ",\"event\":\"stopped\",\"job_time_us\":null,\"lines\":0}\n";
    const int fd = ::open(events.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return Status::IOError("cannot open " + events + ": " + std::strerror(errno));
    std::vector<iovec> iov{{const_cast<char*>(line.data()), line.size()}};
    Status w = WriteAll(fd, iov, events);
    ::close(fd);
    if (!w.ok()) return w;
    return stats;
  }
  if (!simulated.ok()) return simulated;

  Result<GroundTruth> gt = ReadGroundTruth(guard.path + "/ground_truth.json");
  if (!gt.ok()) return gt.status();
  std::vector<Staged> staged;
  for (fs::recursive_directory_iterator it(guard.path, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    Staged s;
    s.rel = fs::relative(it->path(), guard.path).generic_string();
    // An empty file has no line to pace: it is a document (moved into place at the end).
    s.lines = LineFormatOf(s.rel, &s.format) && it->file_size() > 0;
    staged.push_back(std::move(s));
  }
  if (ec) return Status::IOError("cannot list " + guard.path + ": " + ec.message());
  std::sort(staged.begin(), staged.end(),
            [](const Staged& a, const Staged& b) { return a.rel < b.rel; });
  Pacer pacer(options, out.string(), guard.path, std::move(*gt), std::move(staged), &stats);
  Status s = pacer.Run();
  if (!s.ok()) return s;
  return stats;
}

}  // namespace collscope::sim
