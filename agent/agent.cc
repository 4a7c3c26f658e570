#include "agent/agent.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/alertmanager.h"
#include "agent/http.h"
#include "agent/http_server.h"
#include "agent/remote_write.h"
#include "analysis/diagnose/diagnose.h"
#include "analysis/views.h"
#include "core/input_files.h"
#include "core/readers/ingest_inputs.h"
#include "core/readers/record_summary.h"
#include "core/readers/stacks.h"
#include "analysis/diagnose/stack_evidence.h"
#ifdef COLLSCOPE_HAVE_STACKS
#include "agent/stacks/stack_session.h"
#endif
#include "core/store.h"

namespace collscope::agent {
namespace {

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t WallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string JoinRanks(const std::vector<int>& v) { return diagnose::RankList(v, 64); }

// The host label of a finding's series: one series per host it names, else per suspect host (a
// hang the data cannot place on one of them: its dashboard row and alert still point at where to
// look); a finding that names neither (a job-wide step regression) is labelled "job".
std::vector<std::string> HostsOf(const diagnose::Finding& f) {
  if (!f.hosts.empty()) return f.hosts;
  std::vector<std::string> suspects = diagnose::SuspectHosts(f);
  return suspects.empty() ? std::vector<std::string>{"job"} : suspects;
}

constexpr const char* kMetaFindings = "agent.active_findings";
// After letting go of the store for a reader, the agent waits this long before taking it back
// (the reader retries every 50 ms at most).
constexpr double kReaderGraceS = 1.0;

}  // namespace

Agent::Agent(const AgentOptions& options)
    : o_(options), watch_(options.watch), tracker_(options.resolve_after) {}

Agent::~Agent() {
  stacks_stop_ = true;
  if (stacks_thread_.joinable()) stacks_thread_.join();
  if (server_) server_->Stop();
  for (auto& r : remotes_) r->Stop(std::chrono::seconds(2));
}

namespace {

constexpr std::string_view kSummariesPath = "/summaries/";

// A host agent's summary (PUT /summaries/host=<host>/<until_us>.parquet, the exporter's own
// layout), stored under `root` through a hidden name and a rename, so the watch never reads half
// a file. Names are checked segment by segment: nothing can land outside `root`.
HttpReply AcceptSummary(const std::string& root, const HttpServerRequest& r) {
  namespace fs = std::filesystem;
  auto reply = [](int status, std::string text) {
    return HttpReply{status, "text/plain; charset=utf-8", std::move(text) + "\n"};
  };
  const std::string rel = r.path.substr(kSummariesPath.size());
  const size_t slash = rel.find('/');
  if (slash == std::string::npos || rel.find('/', slash + 1) != std::string::npos)
    return reply(400, "expected " + std::string(kSummariesPath) + "host=<host>/<name>.parquet");
  const std::string dir = rel.substr(0, slash), name = rel.substr(slash + 1);
  auto plain = [](const std::string& s) {
    return !s.empty() && s.size() <= 255 && s[0] != '.' &&
           s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%=-") == std::string::npos;
  };
  if (!plain(dir) || !plain(name) || dir.rfind("host=", 0) != 0 || dir.size() == 5 || !name.ends_with(".parquet"))
    return reply(400, "expected " + std::string(kSummariesPath) + "host=<host>/<name>.parquet");
  // Parquet opens and ends with its magic: anything else is no summary, refused before it is
  // stored and retried by every ingest.
  if (r.body.size() < 12 || r.body.compare(0, 4, "PAR1") != 0 || r.body.compare(r.body.size() - 4, 4, "PAR1") != 0)
    return reply(400, "not a Parquet file");
  std::error_code ec;
  const fs::path folder = fs::path(root) / dir;
  fs::create_directories(folder, ec);
  if (ec) return reply(500, "cannot create " + folder.string() + ": " + ec.message());
  const fs::path target = folder / name;
  if (fs::exists(target, ec)) {
    // A retry of a PUT whose answer was lost (summaries are immutable once written): the same
    // bytes. Anything else must not be acknowledged, or its sender would delete it.
    if (fs::file_size(target, ec) == r.body.size()) {
      std::ifstream in(target, std::ios::binary);
      const std::string stored((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (stored == r.body) return reply(200, "already stored");
    }
    return reply(409, name + " is stored with other content");
  }
  const fs::path temp = folder / ("." + name + ".upload");
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(r.body.data(), static_cast<std::streamsize>(r.body.size()));
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      return reply(500, "cannot write " + temp.string());
    }
  }
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    return reply(500, "cannot store " + target.string());
  }
  return reply(201, "stored");
}

}  // namespace

Result<std::unique_ptr<Agent>> Agent::Create(const AgentOptions& options) {
  if (options.watch.empty() && options.accept_summaries.empty())
    return Status::InvalidArgument("nothing to watch: give the job's dump folders");
  if (options.db.empty()) return Status::InvalidArgument("no store given (--db)");
  if (options.interval_s <= 0 || options.window_s <= 0)
    return Status::InvalidArgument("interval and window must be positive");
  if (!options.export_summaries.empty()) {
    // The store's sandbox names the folder it may write, so it must exist before the first open.
    std::error_code ec;
    std::filesystem::create_directories(options.export_summaries, ec);
    if (ec)
      return Status::IOError("--export-summaries " + options.export_summaries + ": " + ec.message());
  }
  if (!options.ship_summaries.empty()) {
    if (options.export_summaries.empty())
      return Status::InvalidArgument("--ship-summaries needs --export-summaries: the folder it ships from");
    auto url = ParseHttpUrl(options.ship_summaries);
    if (!url.ok()) return url.status().WithPrefix("--ship-summaries " + options.ship_summaries + ": ");
  }
  AgentOptions with_accepted = options;
  if (!options.accept_summaries.empty()) {
    if (options.listen.empty()) return Status::InvalidArgument("--accept-summaries needs --listen: uploads come through it");
    std::error_code ec;
    std::filesystem::create_directories(options.accept_summaries, ec);
    if (ec) return Status::IOError("--accept-summaries " + options.accept_summaries + ": " + ec.message());
    // What arrives there is read as any watched summary folder is.
    if (std::find(options.watch.begin(), options.watch.end(), options.accept_summaries) == options.watch.end())
      with_accepted.watch.push_back(options.accept_summaries);
  }
  if (options.stacks_rate_hz > 0) {
    if (options.stacks_job.empty()) return Status::InvalidArgument("--stacks-rate needs --stacks-job: whose processes");
    std::error_code ec;
    const std::string folder = options.db + ".stacks";
    std::filesystem::create_directories(folder, ec);
    if (ec) return Status::IOError(folder + ": " + ec.message());
    with_accepted.watch.push_back(folder);  // the sampler's files are ingested as any input
  }
  std::unique_ptr<Agent> a(new Agent(with_accepted));
  COLLSCOPE_RETURN_IF_ERROR(a->Init());
#ifdef COLLSCOPE_HAVE_STACKS
  if (options.stacks_rate_hz > 0) a->stacks_thread_ = std::thread([agent = a.get()] { agent->SampleStacksAlways(); });
#else
  if (options.stacks_rate_hz > 0) return Status::Unsupported("this collscope was built without stack sampling");
#endif
  return a;
}

Status Agent::Init() {
  // The store: created if new, its analysis views persisted (so readers between ticks get them
  // without installing), and the findings active before a restart loaded.
  {
    Store::Options so;
    so.memory_limit = o_.memory_limit;
    auto store = Store::Open(o_.db, so);
    if (!store.ok()) return store.status();
    COLLSCOPE_RETURN_IF_ERROR(InstallAnalysisViews(**store, false));
    auto saved = (*store)->MetaValue(kMetaFindings);
    if (!saved.ok()) return saved.status();
    COLLSCOPE_RETURN_IF_ERROR(tracker_.Load(*saved));
  }
  for (const std::string& target : o_.remote_write) {
    auto url = ParseHttpUrl(target);
    if (!url.ok()) return url.status().WithPrefix("--remote-write " + target + ": ");
    RemoteWriterOptions ro;
    ro.url = target;
    remotes_.push_back(std::make_unique<RemoteWriter>(ro));
    if (Status st = remotes_.back()->Start(); !st.ok())
      return st.WithPrefix("--remote-write " + target + ": ");
  }
  for (const std::vector<std::string>* urls : {&o_.alertmanager, &o_.webhook})
    for (const std::string& u : *urls) {
      auto url = ParseHttpUrl(u);
      if (!url.ok()) return url.status().WithPrefix(u + ": ");
    }
  if (!o_.listen.empty()) {
    const size_t colon = o_.listen.rfind(':');
    HttpServerOptions ho;
    int port = -1;
    if (colon != std::string::npos) {
      ho.address = o_.listen.substr(0, colon);
      try {
        size_t used = 0;
        port = std::stoi(o_.listen.substr(colon + 1), &used);
        if (used != o_.listen.size() - colon - 1) port = -1;
      } catch (const std::exception&) {
        port = -1;
      }
    }
    if (port < 0 || port > 65535 || ho.address.empty())
      return Status::InvalidArgument("--listen " + o_.listen +
                           ": give ADDRESS:PORT (127.0.0.1:9464; port 0 picks a free one)");
    ho.port = static_cast<uint16_t>(port);
    server_ = std::make_unique<HttpServer>(ho);
    server_->Handle("/metrics", [this](const HttpServerRequest&) {
      return HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", MetricsText()};
    });
    server_->Handle("/findings", [this](const HttpServerRequest&) {
      return HttpReply{200, "application/json", FindingsJson()};
    });
    server_->Handle("/healthz", [this](const HttpServerRequest&) {
      auto [code, text] = Health();
      return HttpReply{code, "text/plain; charset=utf-8", text};
    });
    if (!o_.accept_summaries.empty())
      server_->HandlePut(std::string(kSummariesPath), [this](const HttpServerRequest& r) {
        HttpReply reply = AcceptSummary(o_.accept_summaries, r);
        (reply.status < 300 ? summaries_accepted_ : summaries_refused_)++;
        return reply;
      });
    if (Status st = server_->Start(); !st.ok())
      return st.WithPrefix("--listen " + o_.listen + ": ");
  }
  Publish({});
  return Status::Ok();
}

int Agent::port() const { return server_ ? server_->port() : 0; }

std::string Agent::Describe() const {
  std::string s =
      "watching " + Join(o_.watch, ", ") + " (" +
      (watch_.polling() ? "polling: " + watch_.polling_reason() : std::string("inotify")) + ")\n";
  s += "store " + o_.db + ", run " + o_.run + "; every " + diagnose::Fmt("%g", o_.interval_s) +
       " s, window " + diagnose::Fmt("%g", o_.window_s) + " s of job time\n";
  if (server_)
    s += "serving /metrics, /findings, /healthz on " + o_.listen.substr(0, o_.listen.rfind(':')) +
         ":" + std::to_string(port()) + "\n";
  for (const std::string& target : o_.remote_write) s += "remote-writing to " + target + "\n";
  for (const std::string& target : o_.alertmanager) s += "alerting Alertmanager at " + target + "\n";
  for (const std::string& target : o_.webhook) s += "posting findings to " + target + "\n";
  if (!o_.hosts.empty()) s += "reading only the files of " + Join(o_.hosts, ", ") + "\n";
  if (!o_.export_summaries.empty())
    s += "writing record summaries to " + o_.export_summaries +
         (o_.diagnose ? "\n" : " (no diagnosis)\n");
  if (!o_.ship_summaries.empty())
    s += "shipping them to " + o_.ship_summaries + std::string(kSummariesPath) + " (PUT), deleting each once stored\n";
  if (!o_.accept_summaries.empty())
    s += "accepting host agents' record summaries (PUT " + std::string(kSummariesPath) + ") into " +
         o_.accept_summaries + ", watched\n";
  if (!tracker_.active().empty())
    s += std::to_string(tracker_.active().size()) +
         " finding(s) active before the restart, resumed from the store\n";
  return s;
}

TickReport Agent::Tick() {
  const double t0 = MonotonicSeconds();
  TickReport r = TickLocked();
  r.seconds = MonotonicSeconds() - t0;
  last_tick_s_ = r.seconds;
  ++ticks_;
  if (!r.ran) ++ticks_skipped_;
  if (!r.error.empty()) {
    ++errors_;
    std::fprintf(stderr, "collscope agent: %s\n", r.error.c_str());
  }
  if (r.stack_processes)
    std::fprintf(stderr, "collscope agent: a new hang: sampled the stacks of %d processes of job %s\n",
                 r.stack_processes, o_.stacks_job.c_str());
  if (!r.stacks_note.empty()) std::fprintf(stderr, "collscope agent: %s\n", r.stacks_note.c_str());
  last_ = r;
  std::vector<MetricFamily> families = job_metrics_;
  Publish(std::move(families));
  return r;
}

double Agent::DiagnoseEvery() const {
  return o_.diagnose_every_s > 0 ? o_.diagnose_every_s : std::max(o_.interval_s, o_.window_s / 10);
}

uint64_t Agent::ShipSummaries(std::string* error) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(o_.export_summaries, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string p = it->path().string();
    if (it->is_regular_file(ec) && readers::IsRecordSummaryPath(p) && it->path().filename().string()[0] != '.')
      files.push_back(it->path());
  }
  // Oldest first: the names are the exporter's clock.
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename() || (a.filename() == b.filename() && a < b); });
  uint64_t shipped = 0;
  const Deadline until = DeadlineAfter(30000);  // a tick ships for at most this long
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      *error = "cannot read " + f.string();
      break;
    }
    const std::string url = o_.ship_summaries + std::string(kSummariesPath) + f.parent_path().filename().string() + "/" +
                            f.filename().string();
    auto r = HttpRequestUntil("PUT", url, {{"Content-Type", "application/vnd.apache.parquet"}}, body, until, -1);
    if (!r.ok() || r->status < 200 || r->status > 299) {
      *error = url + ": " + (r.ok() ? "HTTP " + std::to_string(r->status) + " " + r->body : r.status().message());
      // The aggregator refused this file (4xx): it stays in the spool, said every tick, and the
      // others go on. Anything else (down, restarting, full) holds back the rest too.
      if (r.ok() && r->status >= 400 && r->status < 500) continue;
      break;
    }
    fs::remove(f, ec);
    ++shipped;
  }
  return shipped;
}

TickReport Agent::TickLocked() {
  TickReport r;
  // Where the tick's time goes, cumulatively per phase (collscope_agent_tick_phase_seconds_total).
  double mark_s = MonotonicSeconds();
  auto mark = [&](const char* phase) {
    const double now = MonotonicSeconds();
    phase_s_[phase] += now - mark_s;
    mark_s = now;
  };
  // inotify sees only this machine's writes: files that other hosts write to a network filesystem
  // (NFS, Lustre, GPFS: an aggregator's summaries) raise no event, so the folders are also walked
  // every `rescan_s` whatever the watch says.
  bool changed = watch_.Changed();
  if (o_.rescan_s > 0 && MonotonicSeconds() - last_rescan_s_ >= o_.rescan_s) changed = true;
  if (changed) last_rescan_s_ = MonotonicSeconds();
  if (!OpenStore(changed, &r)) return r;
  Store& store = *store_;
  r.ran = true;
  mark("open");
  if (!IngestChanged(store, changed, &r)) return r;
  if (r.ingested) mark("ingest");
  if (!o_.export_summaries.empty() && r.ingested) {
    readers::SummaryExportOptions eo;
    eo.run = o_.run;
    eo.root = o_.export_summaries;
    eo.hosts = o_.hosts;
    eo.now_us = WallMicros();
    auto out = readers::ExportRecordSummaries(store, eo);
    if (!out.ok()) {
      r.error = "export: " + out.status().message();
      return r;
    }
    r.summary_files = out->files_written;
    r.summary_bytes = out->bytes;
    summary_files_ += out->files_written;
    summary_bytes_ += out->bytes;
    mark("export");
  }
  if (!o_.ship_summaries.empty()) {
    std::string error;
    r.summaries_shipped = ShipSummaries(&error);
    summaries_shipped_ += r.summaries_shipped;
    if (!error.empty()) {
      ship_errors_++;
      r.error = "ship: " + error;
    }
    mark("ship");
  }
  // A host agent that only ships summaries leaves the window to the aggregator.
  if (!o_.diagnose) return r;
  auto run_id =
      store.QueryInt("SELECT CAST(coalesce(max(run_id), -1) AS BIGINT) FROM runs WHERE name = " +
                     SqlString(o_.run));
  if (!run_id.ok()) {
    r.error = run_id.status().message();
    return r;
  }
  if (*run_id < 0) return r;  // nothing of the job yet
  const std::string rid = std::to_string(*run_id);
  // The frontier: every process that wrote within the last window and quiet time has dumped
  // through it. A process whose data lags (its host's summaries come late to an aggregator, its
  // writer is slow) holds the frontier back rather than dropping out of it, which would leave the
  // window with transfers whose other side has not arrived; one silent for longer than that is
  // gone (dead, or hung: the quiet rule then applies). The scan reads recent records only (the
  // store keeps them in dump order per file).
  const int64_t lookback =
      newest_dump_us_ > 0 ? newest_dump_us_ - static_cast<int64_t>((o_.window_s + o_.quiet_s) * 1e6)
                          : 0;
  auto fr = store.Query(
      "SELECT CAST(min(last) AS BIGINT), CAST(max(last) AS BIGINT) FROM (SELECT process_id, "
      "max(dump_ts_us) AS last FROM records WHERE run_id = " +
      rid + " AND dump_ts_us >= " + std::to_string(std::max<int64_t>(0, lookback)) +
      " GROUP BY 1)");
  if (!fr.ok()) {
    r.error = fr.status().message();
    return r;
  }
  if (fr->rows.empty() || !fr->rows[0][0]) return r;
  const int64_t frontier = std::stoll(*fr->rows[0][0]);
  newest_dump_us_ = std::max<int64_t>(newest_dump_us_, std::stoll(*fr->rows[0][1]));
  if (last_new_records_s_ == 0) last_new_records_s_ = MonotonicSeconds();
  r.quiet = MonotonicSeconds() - last_new_records_s_ >= o_.quiet_s;
  // The window moves by a tick's worth of data each tick; diagnosing it again sooner than
  // diagnose_every would mostly repeat the last answer (a quiet job is diagnosed at once).
  const bool quiet_changed = r.quiet != last_quiet_;
  last_quiet_ = r.quiet;
  if (last_diagnosed_s_ > 0 && !quiet_changed &&
      MonotonicSeconds() - last_diagnosed_s_ < DiagnoseEvery())
    return r;
  last_diagnosed_s_ = MonotonicSeconds();
  mark("frontier");
  diagnose::DiagnoseOptions d;
  d.run = o_.run;
  d.window.until_us = r.quiet ? newest_dump_us_ : frontier;
  d.window.job_continues = !r.quiet;
  d.window.since_us = d.window.until_us - static_cast<int64_t>(o_.window_s * 1e6);
  r.window_since_us = d.window.since_us;
  r.window_until_us = d.window.until_us;
  diagnose::InputSummary read;
  auto findings = diagnose::DiagnoseStore(store, d, nullptr, &read);
  if (!findings.ok()) {
    r.error = "diagnose: " + findings.status().message();
    return r;
  }
  mark("diagnose");
  SampleStacksOnNewFinding(store, &*findings, &r);
  JobMetricsOptions mo;
  mo.tp = read.tp;
  mo.pp = read.pp;
  auto metrics = JobMetrics(store, o_.run, d.window, mo);
  if (!metrics.ok()) {
    r.error = "metrics: " + metrics.status().message();
    return r;
  }
  job_metrics_ = std::move(*metrics);
  mark("metrics");
  r.diagnosed = true;
  r.findings = static_cast<int>(findings->size());
  const FindingTracker::Changes ch = tracker_.Update(*findings, WallMicros());
  r.raised = static_cast<int>(ch.raised.size());
  r.resolved = static_cast<int>(ch.resolved.size());
  if (Status st = store.SetMetaValue(kMetaFindings, tracker_.Save()); !st.ok())
    r.error = st.message();
  if (o_.retention_s > 0) ApplyRetention(store, rid, &r);
  mark("save");
  Alert(ch);
  mark("alert");
  return r;
}

bool Agent::OpenStore(bool changed, TickReport* r) {
  if (store_) return true;
  if (MonotonicSeconds() - released_s_ < kReaderGraceS) {
    // Just let go for a reader: give it time to take the store before taking it back.
    if (changed) watch_.Requeue();
    return false;
  }
  Store::Options so;
  so.memory_limit = o_.memory_limit;
  so.lock_wait_s = o_.store_wait_s;
  so.writable_dir = o_.export_summaries;
  auto opened = Store::Open(o_.db, so);
  if (!opened.ok()) {
    // A reader (sql, report) holds the store: this tick's data waits for the next one.
    r->error = opened.status().message();
    if (r->error.find("Could not set lock") != std::string::npos) r->error.clear();
    if (changed) watch_.Requeue();
    return false;
  }
  store_ = std::move(*opened);
  return true;
}

bool Agent::IngestChanged(Store& store, bool changed, TickReport* r) {
  // A folder the job has not created yet is waited for, not an error.
  std::vector<std::string> present;
  for (const std::string& w : o_.watch) {
    std::error_code ec;
    if (std::filesystem::exists(w, ec))
      present.push_back(w);
    else
      r->not_stored.push_back(w + ": does not exist (yet)");
  }
  if (!o_.hosts.empty() && changed && !present.empty()) {
    // Only the named hosts' files, by the name the Inspector gives them (<host>-pid<pid>...).
    auto mine = FindInputFiles(present, [&](const std::string& path, bool) {
      const std::string name = std::filesystem::path(path).filename().string();
      for (const std::string& h : o_.hosts)
        if (name.starts_with(h + "-pid")) return true;
      return false;
    });
    if (!mine.ok()) {
      r->error = "ingest: " + mine.status().message();
      return false;
    }
    present = std::move(mine->files);
  }
  if (changed && !present.empty()) {
    IngestOptions io;
    io.run = o_.run;
    io.threads = o_.ingest_threads;
    io.checkpoint =
        false;  // the store stays open: DuckDB checkpoints as its log grows, and on close
    auto in = readers::IngestInputs(store, present, io);
    if (!in.ok()) {
      r->error = "ingest: " + in.status().message();
      return false;
    }
    r->ingested = true;
    r->records_stored = in->records.records_stored + in->summaries.records_stored;
    r->lines_rejected =
        in->records.lines_rejected + in->steps.lines_rejected + in->kernels.lines_rejected + in->stacks.lines_rejected;
    for (std::string& s : in->NotStored()) r->not_stored.push_back(std::move(s));
    records_ += r->records_stored;
    rejected_ += r->lines_rejected;
    if (r->records_stored > 0) last_new_records_s_ = MonotonicSeconds();
  }
  return true;
}

void Agent::ApplyRetention(Store& store, const std::string& rid, TickReport* r) {
  // Rows older than the retention, by each file's line cutoff so a record and its kernel
  // events and annotations go together; the freed blocks are reused after the checkpoint.
  const std::string horizon =
      std::to_string(newest_dump_us_ - static_cast<int64_t>(o_.retention_s * 1e6));
  std::string sql =
      "CREATE OR REPLACE TEMP TABLE agent_cut AS SELECT file_id, max(line) AS line FROM records "
      "WHERE run_id = " +
      rid + " AND dump_ts_us < " + horizon + " GROUP BY 1;\n";
  for (const char* t : {"records", "kernel_events", "record_annotations", "dump_stats", "proxy_ops", "proxy_steps"})
    sql += std::string("DELETE FROM ") + t + " x USING agent_cut c WHERE x.run_id = " + rid +
           " AND x.file_id = c.file_id AND x.line <= c.line;\n";
  // The other series the agent stores grow with the job as well: each goes by its own clock
  // (wall-clock microseconds, as the records' dumps), a row once its window has closed before
  // the horizon.
  static constexpr std::pair<const char*, const char*> kByEnd[] = {
      {"stack_samples", "window_end_us"}, {"kernel_summaries", "end_us"},
      {"steps", "start_us + dur_us"}, {"step_phases", "start_us + wall_us"}};
  std::string count =
      "SELECT count(*) AS n FROM records WHERE run_id = " + rid + " AND dump_ts_us < " + horizon;
  for (const auto& [table, end] : kByEnd) {
    const std::string where = " WHERE run_id = " + rid + " AND " + end + " < " + horizon;
    count += std::string(" UNION ALL SELECT count(*) FROM ") + table + where;
    sql += std::string("DELETE FROM ") + table + where + ";\n";
  }
  auto n = store.QueryInt("SELECT CAST(sum(n) AS BIGINT) FROM (" + count + ")");
  if (n.ok() && *n > 0) {
    if (Status st = store.Exec(sql + "CHECKPOINT"); !st.ok())
      r->error = "retention: " + st.message();
    else
      rows_deleted_ += static_cast<uint64_t>(*n);
  }
  DeleteSpentStackFiles(store, rid, r);
}

// The stack files the agent wrote itself (<db>.stacks/: always-on sessions and hang bursts) leave
// the disk once complete and none of their samples is left in the store. A file in a watched
// folder is the user's: its rows go by the retention, the file stays.
void Agent::DeleteSpentStackFiles(Store& store, const std::string& rid, TickReport* r) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path own = fs::weakly_canonical(o_.db + ".stacks", ec);
  if (ec || !fs::is_directory(own, ec)) return;
  auto spent = store.Query("SELECT file_id, path FROM stack_files f WHERE run_id = " + rid +
                           " AND complete AND NOT EXISTS (SELECT 1 FROM stack_samples s "
                           "WHERE s.run_id = f.run_id AND s.file_id = f.file_id)");
  if (!spent.ok()) {
    r->error = "retention: " + spent.status().message();
    return;
  }
  std::string ids;
  for (const auto& row : spent->rows) {
    if (!row[0] || !row[1]) continue;
    const fs::path file = fs::weakly_canonical(*row[1], ec);
    if (ec || file.parent_path() != own) continue;
    if (!fs::remove(file, ec) && ec) continue;  // one that is gone already is spent as well
    ids += (ids.empty() ? "" : ", ") + *row[0];
    ++stack_files_deleted_;
  }
  if (ids.empty()) return;
  if (Status st = store.Exec("DELETE FROM stack_files WHERE run_id = " + rid + " AND file_id IN (" + ids + ")");
      !st.ok())
    r->error = "retention: " + st.message();
}

void Agent::SampleStacksOnNewFinding(Store& store, std::vector<diagnose::Finding>* findings,
                                     TickReport* r) {
  if (o_.stacks_job.empty()) return;
  // A hang, or a slow phase whose cause may be on the host (a stall, a slow rank's compute): what
  // the processes are doing now is evidence for it while it goes on.
  std::vector<bool> firing(findings->size(), false);
  bool any = false;
  for (size_t i = 0; i < findings->size(); ++i) {
    const diagnose::Finding& f = (*findings)[i];
    const bool burst_kind = f.kind == diagnose::Kind::kHang || f.kind == diagnose::Kind::kHostStall ||
                            f.kind == diagnose::Kind::kSlowCompute;
    firing[i] = burst_kind && !tracker_.active().count(FindingTracker::KeyOf(f));
    any |= firing[i];
  }
  if (!any) return;
#ifdef COLLSCOPE_HAVE_STACKS
  std::vector<pid_t> pids = stacks::ProcessesOfJob(o_.stacks_job);
  if (pids.empty()) {
    r->stacks_note = "no process of job " + o_.stacks_job + " runs here as this user: no stacks sampled";
    return;
  }
  stacks::StackSessionOptions so;
  so.pids = pids;
  so.duration_s = o_.stacks_burst_s;
  so.rate_hz = 10;
  so.out_dir = o_.db + ".stacks";
  auto session = stacks::SampleProcesses(so);
  if (!session.ok()) {
    r->stacks_note = "stacks: " + session.status().message();
    return;
  }
  std::vector<std::string> files;
  for (const stacks::ProcessSession& p : session->processes)
    if (!p.file.empty()) files.push_back(p.file);
  for (const std::string& why : session->not_sampled) r->stacks_note += (r->stacks_note.empty() ? "" : "; ") + why;
  auto stored = readers::IngestStackFiles(store, files, o_.run);
  if (!stored.ok()) {
    r->stacks_note = "stacks: " + stored.status().message();
    return;
  }
  auto stacks = readers::ReadStoredStacks(store, o_.run);
  if (!stacks.ok()) {
    r->stacks_note = "stacks: " + stacks.status().message();
    return;
  }
  diagnose::AddStackEvidence(*stacks, findings, firing);
  r->stack_processes = static_cast<int>(session->processes.size());
#else
  r->stacks_note = "this collscope was built without stack sampling (libunwind-dev, libdw-dev)";
#endif
}

// Where the processes' step files are: the one given, else the first watched folder, where the
// annotation API writes them beside Inspector's dumps when both use the same dump folder.
std::string Agent::StacksStepsDir() const {
  if (!o_.stacks_steps_dir.empty()) return o_.stacks_steps_dir;
  for (const std::string& w : o_.watch) {
    std::error_code ec;
    if (std::filesystem::is_directory(w, ec)) return w;
  }
  return "";
}

void Agent::SampleStacksAlways() {
#ifdef COLLSCOPE_HAVE_STACKS
  // Sessions end to list the job's processes anew (ranks restart, workers come and go); each
  // writes its own files, named by its start, so the store keeps every session's stacks.
  // A second's pause that a stop ends at once.
  auto pause = [this] {
    for (int i = 0; i < 20 && !stacks_stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  while (!stacks_stop_) {
    std::vector<pid_t> pids = stacks::ProcessesOfJob(o_.stacks_job);
    if (pids.empty()) {
      pause();
      continue;
    }
    stacks::StackSessionOptions so;
    so.pids = pids;
    so.rate_hz = o_.stacks_rate_hz;
    so.duration_s = o_.stacks_session_s;
    so.window_us = static_cast<int64_t>(o_.stacks_window_s * 1e6);
    so.steps_dir = StacksStepsDir();
    so.out_dir = o_.db + ".stacks";
    so.file_tag = std::to_string(WallMicros() / 1000000);
    so.sampler.native = false;  // nothing is stopped: native stacks are for a new hang's burst
    so.stop = &stacks_stop_;
    auto session = stacks::SampleProcesses(so);
    if (!session.ok()) {
      std::fprintf(stderr, "collscope agent: always-on stacks: %s\n", session.status().message().c_str());
      pause();
    }
  }
#endif
}

void Agent::Alert(const FindingTracker::Changes& ch) {
  if (o_.alertmanager.empty() && o_.webhook.empty()) return;
  auto to_alert = [&](const TrackedFinding& t, bool resolved) {
    const diagnose::Finding& f = t.finding;
    AlertmanagerAlert a;
    a.labels = {{"alertname", "CollscopeFinding"},
                {"kind", std::string(diagnose::KindName(f.kind))},
                {"hosts", Join(HostsOf(f), ",")},
                {"run", o_.run}};
    // An empty label is an absent one to Alertmanager; the key still tells findings apart.
    if (!f.ranks.empty()) a.labels["ranks"] = JoinRanks(f.ranks);
    if (!o_.job.empty()) a.labels["job"] = o_.job;
    a.annotations = {{"summary", f.summary},
                     {"confidence", diagnose::Fmt("%.2f", f.confidence)},
                     {"detector", f.detector}};
    if (!f.victims.empty()) a.annotations["victims"] = JoinRanks(f.victims);
    // Suspects (a slow network's hosts, a dead link's ends) are in the hosts label too.
    if (!diagnose::SuspectHosts(f).empty())
      a.annotations["culprit"] = "not named: the data cannot tell its hosts apart; they are suspects";
    if (!o_.report_url.empty()) a.annotations["report"] = o_.report_url;
    a.starts_at_us = t.first_seen_us;
    // An active alert expires by itself unless re-sent: if the agent dies, Alertmanager resolves
    // it.
    a.ends_at_us =
        resolved ? t.resolved_us : WallMicros() + static_cast<int64_t>(4 * o_.interval_s * 1e6);
    a.generator_url = o_.report_url;
    return a;
  };
  std::vector<AlertmanagerAlert> alerts;
  for (const auto& [key, t] : tracker_.active()) alerts.push_back(to_alert(t, false));
  for (const TrackedFinding& t : ch.resolved) alerts.push_back(to_alert(t, true));
  for (const std::string& target : o_.alertmanager) {
    if (alerts.empty()) break;
    Status st = PostAlerts(target, alerts, 5000);
    st.ok() ? ++alerts_sent_ : ++alert_errors_;
    if (!st.ok()) std::fprintf(stderr, "collscope agent: alertmanager %s: %s\n", target.c_str(), st.message().c_str());
  }
  if (!o_.webhook.empty() && (!ch.raised.empty() || !ch.resolved.empty())) {
    std::vector<diagnose::Finding> raised, resolved;
    for (const TrackedFinding& t : ch.raised) raised.push_back(t.finding);
    for (const TrackedFinding& t : ch.resolved) resolved.push_back(t.finding);
    std::string body = "{\"schema\": \"collscope.agent.alert.v1\", \"run\": \"" + o_.run +
                       "\", \"raised\": " + diagnose::FindingsToJson(raised) +
                       ", \"resolved\": " + diagnose::FindingsToJson(resolved) + "}";
    for (const std::string& target : o_.webhook) {
      Status st = PostWebhook(target, body, 5000);
      st.ok() ? ++alerts_sent_ : ++alert_errors_;
      if (!st.ok()) std::fprintf(stderr, "collscope agent: webhook %s: %s\n", target.c_str(), st.message().c_str());
    }
  }
}

std::vector<MetricFamily> Agent::OwnMetrics() const {
  std::vector<MetricFamily> m;
  MetricFamily active{
      "collscope_finding_active",
      "An active finding of this kind naming this host; the value is its confidence (0-1).",
      "gauge",
      {}};
  std::map<std::pair<std::string, std::string>, double> by;
  for (const auto& [key, t] : tracker_.active())
    for (const std::string& h : HostsOf(t.finding)) {
      double& c = by[{std::string(diagnose::KindName(t.finding.kind)), h}];
      c = std::max(c, t.finding.confidence);
    }
  for (const auto& [kh, c] : by) active.Add({{"kind", kh.first}, {"host", kh.second}}, c);
  m.push_back(std::move(active));
  m.push_back(MetricFamily{"collscope_findings_active", "Active findings.", "gauge", {}}.Add(
      {}, static_cast<double>(tracker_.active().size())));
  auto counter = [&](const char* name, const char* help, double v) {
    m.push_back(MetricFamily{name, help, "counter", {}}.Add({}, v));
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    m.push_back(MetricFamily{name, help, "gauge", {}}.Add({}, v));
  };
  counter("collscope_agent_ticks_total", "Ticks run.", static_cast<double>(ticks_));
  counter("collscope_agent_ticks_skipped_total", "Ticks skipped because a reader held the store.",
          static_cast<double>(ticks_skipped_));
  counter("collscope_agent_errors_total", "Ticks with a failed step (said on /healthz and stderr).",
          static_cast<double>(errors_));
  counter("collscope_agent_records_ingested_total", "Records stored by the agent's ingests.",
          static_cast<double>(records_));
  counter("collscope_agent_lines_rejected_total",
          "Input lines the ingests rejected (each in ingest_log).", static_cast<double>(rejected_));
  counter("collscope_agent_store_releases_total",
          "Times the agent closed its store for a waiting reader.", static_cast<double>(releases_));
  counter("collscope_agent_records_deleted_total",
          "Rows removed by retention: records, stack samples, kernel summaries, steps and phases.",
          static_cast<double>(rows_deleted_));
  counter("collscope_agent_stack_files_deleted_total",
          "Stack files the agent wrote (<db>.stacks/) removed by retention once nothing of theirs was stored.",
          static_cast<double>(stack_files_deleted_));
  if (!o_.export_summaries.empty()) {
    counter("collscope_agent_summary_files_total", "Record-summary files written (docs/scale.md).",
            static_cast<double>(summary_files_));
    counter("collscope_agent_summary_bytes_total", "Bytes of record-summary files written.",
            static_cast<double>(summary_bytes_));
  }
  if (!o_.ship_summaries.empty()) {
    counter("collscope_agent_summaries_shipped_total", "Record-summary files the aggregator stored (--ship-summaries).",
            static_cast<double>(summaries_shipped_));
    counter("collscope_agent_summary_ship_errors_total", "Ticks whose shipping stopped at a failure.",
            static_cast<double>(ship_errors_));
  }
  if (!o_.accept_summaries.empty()) {
    counter("collscope_agent_summaries_accepted_total", "Record-summary uploads stored (--accept-summaries).",
            static_cast<double>(summaries_accepted_.load()));
    counter("collscope_agent_summaries_refused_total", "Record-summary uploads refused.",
            static_cast<double>(summaries_refused_.load()));
  }
  counter("collscope_agent_alert_posts_total", "Alert and webhook posts delivered.",
          static_cast<double>(alerts_sent_));
  counter("collscope_agent_alert_post_errors_total", "Alert and webhook posts that failed.",
          static_cast<double>(alert_errors_));
  counter("collscope_agent_cpu_seconds_total", "CPU time of the agent process.", CpuSeconds());
  MetricFamily phases{
      "collscope_agent_tick_phase_seconds_total",
      "Wall time of the agent's ticks by phase (open, ingest, export, frontier, diagnose, metrics, "
      "save, alert).",
      "counter",
      {}};
  for (const auto& [phase, seconds] : phase_s_) phases.Add({{"phase", phase}}, seconds);
  m.push_back(std::move(phases));
  gauge("collscope_agent_resident_memory_bytes", "Resident memory of the agent process.",
        ResidentBytes());
  gauge("collscope_agent_tick_duration_seconds", "Wall time of the last tick.", last_tick_s_);
  gauge("collscope_agent_window_end_timestamp_seconds",
        "Job time the last diagnosis window ended at.", last_.window_until_us / 1e6);
  gauge("collscope_agent_data_lag_seconds", "Wall clock now minus the newest record's dump time.",
        newest_dump_us_ > 0 ? (WallMicros() - newest_dump_us_) / 1e6 : 0);
  if (!remotes_.empty()) {
    MetricFamily sent{"collscope_agent_remote_write_samples_total",
                      "Samples delivered by remote-write.",
                      "counter",
                      {}};
    MetricFamily dropped{
        "collscope_agent_remote_write_dropped_samples_total",
        "Samples remote-write gave up on (queue full, rejected by the receiver, or still failing "
        "after its retries).",
        "counter",
        {}};
    MetricFamily retries{
        "collscope_agent_remote_write_retries_total", "Remote-write sends retried.", "counter", {}};
    MetricFamily queued{"collscope_agent_remote_write_queue_samples",
                        "Samples waiting to be remote-written.",
                        "gauge",
                        {}};
    for (size_t i = 0; i < remotes_.size(); ++i) {
      const RemoteWriterStats s = remotes_[i]->Stats();
      const Labels target{{"url", o_.remote_write[i]}};
      sent.Add(target, static_cast<double>(s.samples_sent));
      dropped.Add(target,
                  static_cast<double>(s.samples_dropped + s.samples_rejected + s.samples_failed));
      retries.Add(target, static_cast<double>(s.retries));
      queued.Add(target, static_cast<double>(s.queued_samples));
    }
    for (MetricFamily* f : {&sent, &dropped, &retries, &queued}) m.push_back(std::move(*f));
  }
  return m;
}

void Agent::Publish(std::vector<MetricFamily> families) {
  std::vector<MetricFamily> own = OwnMetrics();
  families.insert(families.end(), std::make_move_iterator(own.begin()),
                  std::make_move_iterator(own.end()));
  series_ = SeriesCount(families) + 1;
  families.push_back(MetricFamily{
      "collscope_agent_series",
      "Series the agent exposes (its cardinality).",
      "gauge",
      {}}.Add({}, static_cast<double>(series_)));
  if (Status st = Validate(families); !st.ok())
    std::fprintf(stderr, "collscope agent: metrics: %s\n", st.message().c_str());
  std::vector<diagnose::Finding> active;
  for (const auto& [key, t] : tracker_.active()) active.push_back(t.finding);
  std::pair<int, std::string> health{200, "ok\n"};
  if (ticks_ == 0)
    health = {503, "no tick yet\n"};
  else if (!last_.error.empty())
    health = {503, "last tick failed: " + last_.error + "\n"};
  health.second += Describe();
  {
    std::lock_guard<std::mutex> lock(published_mu_);
    metrics_text_ = ToPrometheusText(families);
    findings_json_ = diagnose::FindingsToJson(active);
    health_ = health;
    published_s_ = MonotonicSeconds();
  }
  if (!remotes_.empty() && ticks_ > 0) {
    const std::vector<PromSeries> batch = ToRemoteWriteBatch(families, o_.job, WallMicros() / 1000);
    for (size_t i = 0; i < remotes_.size(); ++i)
      if (Status st = remotes_[i]->Enqueue(batch); !st.ok())
        std::fprintf(stderr, "collscope agent: remote-write %s: %s\n", o_.remote_write[i].c_str(),
                     st.message().c_str());
  }
}

std::string Agent::MetricsText() const {
  std::lock_guard<std::mutex> lock(published_mu_);
  return metrics_text_;
}

std::string Agent::FindingsJson() const {
  std::lock_guard<std::mutex> lock(published_mu_);
  return findings_json_;
}

std::pair<int, std::string> Agent::Health() const {
  std::lock_guard<std::mutex> lock(published_mu_);
  auto h = health_;
  // Overdue ticks (a wedged store, a stuck ingest) are unhealthy even when the last one was fine.
  const double since = MonotonicSeconds() - published_s_;
  if (h.first == 200 && since > 3 * o_.interval_s + 30)
    h = {503, "no tick finished in " + diagnose::Fmt("%.0f", since) + " s\n"};
  return h;
}

bool Agent::ReleaseStoreIfWanted() {
  std::error_code ec;
  if (!store_ || !std::filesystem::exists(Store::WantedPath(o_.db), ec)) return false;
  // Closing checkpoints: the reader sees everything ingested so far.
  store_.reset();
  std::filesystem::remove(Store::WantedPath(o_.db), ec);
  released_s_ = MonotonicSeconds();
  ++releases_;
  return true;
}

void Agent::Run(const std::atomic<bool>& stop) {
  for (int n = 0; !stop.load() && (o_.max_ticks <= 0 || n < o_.max_ticks); ++n) {
    const double start = MonotonicSeconds();
    Tick();
    // At least once per tick, even when ticks take longer than the interval: a reader must never
    // wait on an agent that is always busy.
    ReleaseStoreIfWanted();
    while (!stop.load() && MonotonicSeconds() - start < o_.interval_s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ReleaseStoreIfWanted();
    }
  }
  store_.reset();
}

}  // namespace collscope::agent
