// Live mode of the simulator (sim/live.h) and the line-time rules it paces by (sim/line_times.h).
//
// Timing checks are orderings or one-sided bounds with margins (a 2-core loaded machine may be
// slow, never early): a line seen on disk must have been due by the job clock at the end of the
// read that saw it.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/ingest.h"
#include "core/input_files.h"
#include "sim/line_times.h"
#include "sim/live.h"
#include "sim/sim.h"

extern char** environ;

namespace fs = std::filesystem;
using namespace collscope::sim;
using collscope::Result;

namespace {

std::string TempDir(const std::string& name) {
  fs::path p = fs::path(COLLSCOPE_BINARY_DIR) / "live_test_out" / name;
  fs::remove_all(p);
  return p.string();
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Gunzip(const fs::path& p) {
  gzFile gz = gzopen(p.c_str(), "rb");
  std::string out;
  if (!gz) return out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(gz);
  return out;
}

// Relative path -> bytes, for every file under `dir` (.gz decompressed, the name kept without .gz
// for kernel summaries, which live mode writes plain).
std::map<std::string, std::string> Tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::string rel = fs::relative(e.path(), dir).generic_string();
    if (rel.ends_with(".kernels.jsonl.gz"))
      out[rel.substr(0, rel.size() - 3)] = Gunzip(e.path());
    else
      out[rel] = ReadAll(e.path());
  }
  return out;
}

SimConfig Job(const std::string& dir) {
  SimConfig c;
  c.output.dir = dir;
  c.start_time_us = 1767225600000000;
  c.cluster.hosts = 2;
  c.cluster.gpus_per_host = 8;
  c.parallel.tp = 4;
  c.parallel.pp = 2;
  c.workload.layers = 4;
  c.workload.micro_batches = 4;
  c.workload.steps = 8;
  // Slow compute (seconds per step, as in a real job) spreads the lines over the paced time
  // instead of a burst after the 15 s of initialisation.
  c.cluster.mfu = 0.01;
  FaultSpec f;
  std::string err;
  EXPECT_EQ(ParseFaultSpec("kind=nic_degrade,host=1,factor=0.5,start_step=3,end_step=5", &f).message(), "")
      << err;
  c.faults.push_back(f);
  return c;
}

struct Event {
  int64_t wall_us = 0;
  std::string event, kind, file;
  int64_t fault = -1, job_time_us = 0, line_time_us = -1;
  double speed = 0;
};

std::vector<Event> ReadEvents(const std::string& out) {
  std::vector<Event> ev;
  std::ifstream in(out + "/live_events.ndjson");
  std::string line;
  simdjson::dom::parser parser;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a line without its '\n' is not whole yet
    simdjson::dom::element d = parser.parse(line);
    Event e;
    e.wall_us = d["wall_us"].get_int64().value();
    e.event = std::string(d["event"].get_string().value());
    int64_t v;
    if (!d["job_time_us"].get_int64().get(v)) e.job_time_us = v;
    if (!d["fault"].get_int64().get(v)) e.fault = v;
    if (!d["line_time_us"].get_int64().get(v)) e.line_time_us = v;
    std::string_view s;
    if (!d["kind"].get_string().get(s)) e.kind = std::string(s);
    if (!d["file"].get_string().get(s)) e.file = std::string(s);
    double sp;
    if (!d["speed"].get_double().get(sp)) e.speed = sp;
    ev.push_back(e);
  }
  return ev;
}

bool IsLineFile(const std::string& rel) {
  LineFormat f;
  return LineFormatOf(rel, &f);
}

// The time each whole line of a line file states, as the formats define it (docs/simulator.md),
// parsed independently of sim/line_times.cc; -1 for lines with no time of their own.
std::vector<std::pair<std::string, int64_t>> StatedTimes(const std::string& rel,
                                                         const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> out;
  simdjson::dom::parser parser;
  size_t pos = 0;
  for (size_t nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    const std::string line = text.substr(pos, nl - pos);
    simdjson::dom::element d = parser.parse(line);
    int64_t t = -1;
    if (rel.starts_with("nccl-inspector/")) {
      t = d["metadata"]["dump_timestamp_us"].get_int64().value();
    } else if (rel.starts_with("steps/")) {
      if (d["type"].get_string().value() == "step")
        t = d["start_us"].get_int64().value() + d["wall_us"].get_int64().value();
    } else if (d["type"].get_string().value() == "summary") {
      t = d["end_ns"].get_int64().value() / 1000;
    }
    out.push_back({line, t});
  }
  return out;
}

// One live run of Job() at a speed that paces it in a few seconds, watched while it runs, and
// the normal run of the same configuration; the checks below look at what was seen. One test
// runs them all, so the run is paid once (ctest runs every test in a process of its own).
struct LiveRun {
  struct Sample {
    int64_t wall_us;  // after the sizes were read
    uint64_t bytes;   // of the line files
  };
  static inline std::string live_dir_, normal_dir_;
  static inline double speed_ = 0;
  static inline std::vector<Sample> samples_;
  static inline uint64_t final_bytes_ = 0;
  static inline int content_checks_ = 0, lines_checked_ = 0;
  static inline std::vector<std::string> early_;        // lines seen before they were due
  static inline std::vector<std::string> event_first_;  // fault events seen before their line
  static inline std::vector<std::string> partial_;      // files seen not ending in '\n'
  static inline bool ok_ = false;
  static inline LiveStats stats_;
  static inline std::string error_;

  static void Run() {
    normal_dir_ = TempDir("normal");
    live_dir_ = TempDir("live");
    SimConfig normal = Job(normal_dir_);
    std::string err;
    SimStats st;
    ASSERT_EQ(Simulate(normal, &st).message(), "");
    // About 3 s of pacing whatever the model's step time.
    speed_ = std::max(1.0, st.job_duration_s / 3.0);
    LiveOptions lo;
    lo.speed = speed_;
    const SimConfig live = Job(live_dir_);
    std::thread run([&] {
      Result<LiveStats> r = SimulateLive(live, lo);
      if (r.ok())
        stats_ = *r;
      else
        error_ = r.status().message();
      ok_ = r.ok();
    });
    std::atomic<bool> done{false};
    std::thread watch([&] { Watch(done); });
    run.join();
    done = true;
    watch.join();
    for (const auto& e : fs::recursive_directory_iterator(live_dir_))
      if (e.is_regular_file() && IsLineFile(fs::relative(e.path(), live_dir_).generic_string()))
        final_bytes_ += e.file_size();
  }

  static void Watch(const std::atomic<bool>& done) {
    const fs::path out(live_dir_);
    for (int i = 0; !done; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      const std::vector<Event> events = ReadEvents(live_dir_);
      if (events.empty() || events[0].event != "started") continue;
      const Event& started = events[0];
      const bool content = i % 4 == 0;  // the full check reads every file: every 100 ms
      std::map<std::string, std::string> files;
      uint64_t bytes = 0;
      std::error_code ec;
      for (fs::recursive_directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        const std::string rel = fs::relative(it->path(), out).generic_string();
        if (!IsLineFile(rel)) continue;
        if (content)
          files[rel] = ReadAll(it->path());
        else
          bytes += it->file_size(ec);
      }
      const int64_t after = NowUs();
      if (!content) {
        samples_.push_back({after, bytes});
        continue;
      }
      ++content_checks_;
      // Due by the job clock at the end of the read, with 20 ms of wall time for clock reading.
      const int64_t due =
          started.job_time_us + static_cast<int64_t>((after - started.wall_us + 20000) * speed_);
      for (const auto& [rel, text] : files) {
        // A reader can catch a write of several pages half done (the file grows page by page):
        // only a tail that stays unfinished is a partial line the writer left.
        if (!text.empty() && text.back() != '\n' && partial_.size() < 5) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          const std::string again = ReadAll(fs::path(out) / rel);
          if (again.size() <= text.size()) partial_.push_back(rel);
        }
        for (const auto& [line, t] : StatedTimes(rel, text)) {
          ++lines_checked_;
          if (t > due && early_.size() < 5)
            early_.push_back(rel + ": due " + std::to_string(t) + " > clock " +
                             std::to_string(due));
        }
      }
      // A fault event is written once its line is on disk: read before the files, it names one.
      for (const Event& e : events) {
        if (e.event != "fault_first_record" || e.line_time_us < 0) continue;
        bool found = false;
        for (const auto& [line, t] : StatedTimes(e.file, files[e.file]))
          found |= t == e.line_time_us;
        if (!found) event_first_.push_back(e.file + " " + std::to_string(e.line_time_us));
      }
    }
  }

  static void FinishesAndReportsWhatItWrote() {
    ASSERT_TRUE(ok_) << error_;
    EXPECT_FALSE(stats_.stopped);
    EXPECT_GT(stats_.lines, 100u);
    EXPECT_GT(stats_.line_files, 16u);  // Inspector logs, step series and kernel summaries
    EXPECT_GT(stats_.documents, 16u);   // Kineto traces, state files, the ground truth
    // The staging directory is gone (this run's: other tests of the binary run beside it).
    const std::string mine = "." + fs::path(live_dir_).filename().string() + ".live-staging";
    for (const auto& e : fs::directory_iterator(fs::path(live_dir_).parent_path()))
      EXPECT_FALSE(e.path().filename().string().starts_with(mine)) << e.path();
  }

  static void FilesGrowOverTime() {
    ASSERT_TRUE(ok_) << error_;
    ASSERT_GT(final_bytes_, 0u);
    std::set<uint64_t> between;
    uint64_t last = 0;
    for (const Sample& s : samples_) {
      EXPECT_GE(s.bytes, last) << "a file shrank";
      last = s.bytes;
      if (s.bytes > 0 && s.bytes < final_bytes_) between.insert(s.bytes);
    }
    // At least two moments strictly between empty and final, with different sizes.
    EXPECT_GE(between.size(), 2u) << samples_.size() << " samples";
  }

  static void LinesNeverAppearBeforeTheirTime() {
    ASSERT_TRUE(ok_) << error_;
    EXPECT_GE(content_checks_, 3);
    EXPECT_GT(lines_checked_, 0);
    EXPECT_TRUE(early_.empty()) << early_[0];
    EXPECT_TRUE(partial_.empty()) << partial_[0];
    EXPECT_TRUE(event_first_.empty()) << event_first_[0];
  }

  static void FinalFilesIdenticalToNormalRun() {
    ASSERT_TRUE(ok_) << error_;
    std::map<std::string, std::string> live = Tree(live_dir_), normal = Tree(normal_dir_);
    ASSERT_EQ(live.erase("live_events.ndjson"), 1u);
    ASSERT_EQ(live.size(), normal.size());
    size_t kernels = 0;
    for (const auto& [rel, bytes] : normal) {
      ASSERT_TRUE(live.count(rel)) << rel << " missing from the live run";
      EXPECT_TRUE(live[rel] == bytes) << rel << " differs";
      kernels += rel.ends_with(".kernels.jsonl");
    }
    EXPECT_GT(kernels, 0u);
    // Live line files are plain, so a consumer can follow them as they grow.
    for (const auto& e : fs::recursive_directory_iterator(live_dir_ + "/kernels"))
      EXPECT_TRUE(e.path().string().ends_with(".kernels.jsonl")) << e.path();
  }

  static void TimelineMarksFaultWindows() {
    ASSERT_TRUE(ok_) << error_;
    const std::vector<Event> ev = ReadEvents(live_dir_);
    ASSERT_GE(ev.size(), 4u);
    EXPECT_EQ(ev.front().event, "started");
    EXPECT_EQ(ev.front().job_time_us, 1767225600000000);
    EXPECT_DOUBLE_EQ(ev.front().speed, speed_);
    EXPECT_EQ(ev.back().event, "finished");
    simdjson::dom::parser parser;
    simdjson::dom::element gt = parser.load(live_dir_ + "/ground_truth.json");
    simdjson::dom::element fault = gt["faults"].at(0);
    int first = -1, last = -1;
    for (size_t i = 0; i < ev.size(); ++i) {
      if (i) {
        EXPECT_GE(ev[i].wall_us, ev[i - 1].wall_us);
      }
      if (ev[i].event == "fault_first_record") first = static_cast<int>(i);
      if (ev[i].event == "fault_last_record") last = static_cast<int>(i);
    }
    ASSERT_GT(first, 0);  // after `started`
    ASSERT_GT(last, first);
    EXPECT_EQ(ev[first].fault, 0);
    EXPECT_EQ(ev[first].kind, "nic_degrade");
    EXPECT_EQ(ev[first].job_time_us, fault["start_us"].get_int64().value());
    EXPECT_GE(ev[first].line_time_us, ev[first].job_time_us);
    EXPECT_EQ(ev[last].job_time_us, fault["end_us"].get_int64().value());
    EXPECT_GE(ev[last].line_time_us, ev[last].job_time_us);
    // Neither is written before its line was due (the job clock, from `started`).
    for (int i : {first, last})
      EXPECT_GE(ev[0].job_time_us +
                    static_cast<int64_t>((ev[i].wall_us - ev[0].wall_us + 20000) * speed_),
                ev[i].line_time_us);
  }

  static void ConsumersTakeNoTimelineOrGroundTruthAsInput() {
    ASSERT_TRUE(ok_) << error_;
    auto inputs = collscope::DiscoverInputs({live_dir_});
    ASSERT_TRUE(inputs.ok()) << inputs.status().message();
    size_t logs = 0;
    for (const std::string& f : inputs->files) {
      EXPECT_TRUE(f.ends_with(".log")) << f << " taken as an Inspector log";
      logs += 1;
    }
    size_t expected = 0;
    for (const auto& e : fs::directory_iterator(live_dir_ + "/nccl-inspector"))
      expected += e.path().extension() == ".log";
    EXPECT_EQ(logs, expected);
    for (const char* name : {"live_events.ndjson", "ground_truth.json"}) {
      const std::string p = live_dir_ + "/" + name;
      EXPECT_FALSE(collscope::IsStepSeriesFile(p)) << name;
      EXPECT_FALSE(collscope::IsKernelSummaryFile(p)) << name;
    }
  }
};

TEST(LiveRun, PacesAJobAsItRuns) {
  LiveRun::Run();
  if (::testing::Test::HasFatalFailure()) return;
  {
    SCOPED_TRACE("FinishesAndReportsWhatItWrote");
    LiveRun::FinishesAndReportsWhatItWrote();
  }
  {
    SCOPED_TRACE("FilesGrowOverTime");
    LiveRun::FilesGrowOverTime();
  }
  {
    SCOPED_TRACE("LinesNeverAppearBeforeTheirTime");
    LiveRun::LinesNeverAppearBeforeTheirTime();
  }
  {
    SCOPED_TRACE("FinalFilesIdenticalToNormalRun");
    LiveRun::FinalFilesIdenticalToNormalRun();
  }
  {
    SCOPED_TRACE("TimelineMarksFaultWindows");
    LiveRun::TimelineMarksFaultWindows();
  }
  {
    SCOPED_TRACE("ConsumersTakeNoTimelineOrGroundTruthAsInput");
    LiveRun::ConsumersTakeNoTimelineOrGroundTruthAsInput();
  }
}

// Runs a long (speed 1) live job until `started`, then stops it by `stop`; returns the wall
// seconds from the stop to the end.
double StopAfterStart(const std::string& out, const std::function<void()>& stop,
                      const std::function<bool()>& running) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const std::vector<Event> ev = ReadEvents(out);
    if (!ev.empty() && ev[0].event == "started") break;
    if (!running() || std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto t1 = std::chrono::steady_clock::now();
  stop();
  while (running()) {
    if (std::chrono::steady_clock::now() - t1 > std::chrono::seconds(30)) return 1e9;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
}

void ExpectCleanStop(const std::string& out) {
  const std::vector<Event> ev = ReadEvents(out);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().event, "stopped");
  EXPECT_FALSE(fs::exists(out + "/ground_truth.json"));  // the job never ended
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    if (!e.is_regular_file()) continue;
    const std::string text = ReadAll(e.path());
    EXPECT_TRUE(text.empty() || text.back() == '\n') << e.path() << " ends in a partial line";
  }
  // Only this run's staging folder (.<name>.live-staging-<pid>): other tests of this binary run
  // beside it in the same parent, in parallel under ctest.
  const std::string mine = "." + fs::path(out).filename().string() + ".live-staging";
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
    EXPECT_FALSE(e.path().filename().string().starts_with(mine)) << e.path();
}

TEST(LiveStop, StopFlagEndsThePacingPromptly) {
  const std::string out = TempDir("stop_flag");
  SimConfig c = Job(out);
  c.workload.steps = 40;  // minutes of job time at speed 1
  std::atomic<bool> stop{false}, running{true};
  Result<LiveStats> result = collscope::Status::Internal("not run");
  LiveOptions lo;
  lo.stop = &stop;
  std::thread t([&] {
    result = SimulateLive(c, lo);
    running = false;
  });
  const double secs = StopAfterStart(
      out, [&] { stop = true; }, [&] { return running.load(); });
  t.join();
  ASSERT_GE(secs, 0) << "never started";
  EXPECT_LT(secs, 2.0);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(result->stopped);
  ExpectCleanStop(out);
}

TEST(LiveStop, StopWhileStagingWritesNoOutput) {
  const std::string out = TempDir("stop_staging");
  std::atomic<bool> stop{true};
  LiveOptions lo;
  lo.stop = &stop;
  Result<LiveStats> r = SimulateLive(Job(out), lo);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(r->lines, 0u);
  EXPECT_FALSE(fs::exists(out + "/nccl-inspector"));
  ExpectCleanStop(out);
}

TEST(LiveStop, SigtermStopsTheCommandCleanly) {
  const char* bin = std::getenv("COLLSCOPE_BIN");
  if (!bin || ::access(bin, X_OK) != 0)
    GTEST_SKIP() << "COLLSCOPE_BIN (the collscope CLI) not built";
  const std::string out = TempDir("sigterm");
  std::vector<std::string> args = {bin,       "simulate", "-o",     out, "--hosts",  "2",
                                   "--tp",    "4",        "--pp",   "2", "--layers", "4",
                                   "--steps", "40",       "--live", "-q"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, bin, nullptr, nullptr, argv.data(), environ), 0);
  int status = 0;
  bool exited = false;
  auto running = [&] {
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
    return !exited;
  };
  const double secs = StopAfterStart(
      out, [&] { ::kill(pid, SIGTERM); }, running);
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ASSERT_GE(secs, 0) << "never started";
  EXPECT_LT(secs, 2.0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ExpectCleanStop(out);
  // The default start time is now: the job clock started at the wall clock.
  const std::vector<Event> ev = ReadEvents(out);
  EXPECT_LT(std::llabs(ev[0].job_time_us - ev[0].wall_us), int64_t{60} * 1000000);
}

// ---- line times

TEST(LineTimes, FormatsByPath) {
  LineFormat f;
  ASSERT_TRUE(LineFormatOf("nccl-inspector/node-000-pid1.log", &f));
  EXPECT_EQ(f, LineFormat::kInspector);
  ASSERT_TRUE(LineFormatOf("steps/node-000-pid1.steps.jsonl", &f));
  EXPECT_EQ(f, LineFormat::kSteps);
  ASSERT_TRUE(LineFormatOf("kernels/node-000-pid1.kernels.jsonl", &f));
  EXPECT_EQ(f, LineFormat::kKernelSummaries);
  for (const char* doc : {"ground_truth.json", "nccl-inspector/node-000-pid1.inflight.json",
                          "kineto/node-000_1.1767225600000.pt.trace.json.gz", "nccl-tests.out",
                          "kernels/node-000-pid1.kernels.jsonl.gz", "nccl-inspector/sub/x.log"})
    EXPECT_FALSE(LineFormatOf(doc, &f)) << doc;
}

TEST(LineTimes, EachFormatsOwnTime) {
  LineTime t = TimeOfLine(
      LineFormat::kInspector,
      R"({"header":{"id":"0x1","rank":0},"metadata":{"dump_timestamp_us":1767225615000123,"hostname":"h"},"coll_perf":{}})");
  EXPECT_EQ(t.kind, LineTime::kTimed);
  EXPECT_EQ(t.us, 1767225615000123);
  // A step ends at its start plus its duration; its phases' times come later in the line.
  t = TimeOfLine(
      LineFormat::kSteps,
      R"({"type":"step","rank":0,"step":3,"start_us":1000,"wall_us":250,"phases":[{"name":"forward","start_us":5000,"wall_us":9}]})");
  EXPECT_EQ(t.kind, LineTime::kTimed);
  EXPECT_EQ(t.us, 1250);
  EXPECT_EQ(
      TimeOfLine(LineFormat::kSteps, R"({"collscope_steps_version":1,"type":"process"})").kind,
      LineTime::kUntimed);
  t = TimeOfLine(LineFormat::kKernelSummaries,
                 R"({"type":"summary","step":7,"start_ns":1000,"end_ns":2000001,"kernel":0})");
  EXPECT_EQ(t.kind, LineTime::kWindow);
  EXPECT_EQ(t.us, 2001);  // rounded up
  EXPECT_EQ(t.window, 7);
  EXPECT_EQ(TimeOfLine(LineFormat::kKernelSummaries, R"({"type":"kernel","id":0,"name":"k"})").kind,
            LineTime::kUntimed);
}

TEST(LineTimes, ReaderGroupsWindowsAndKeepsTimesMonotonic) {
  const std::string dir = TempDir("reader");
  fs::create_directories(dir);
  const std::string path = dir + "/x.kernels.jsonl";
  const std::string pad(900, 'x');  // longer than the chunk: the buffer grows for it
  const std::string process = "{\"type\":\"process\",\"pad\":\"" + pad + "\"}\n";
  const std::string k0 = "{\"type\":\"kernel\",\"id\":0}\n",
                    k1 = "{\"type\":\"kernel\",\"id\":1}\n",
                    k2 = "{\"type\":\"kernel\",\"id\":2}\n";
  const std::string s0a = "{\"type\":\"summary\",\"step\":0,\"start_ns\":1,\"end_ns\":9000000}\n";
  const std::string s0b = "{\"type\":\"summary\",\"step\":0,\"start_ns\":1,\"end_ns\":5000000}\n";
  const std::string s1 = "{\"type\":\"summary\",\"step\":1,\"start_ns\":1,\"end_ns\":7000000}\n";
  const std::string s2 = "{\"type\":\"summary\",\"step\":2,\"start_ns\":1,\"end_ns\":12000000}\n";
  const std::string stats = "{\"type\":\"stats\"}\n";
  std::ofstream(path) << process << k0 << s0a << k1 << s0b << s1 << k2 << s2 << stats;
  TimedLineReader r(path, LineFormat::kKernelSummaries, 99999, 256);
  std::vector<std::pair<int64_t, std::string>> got;
  TimedLineReader::Entry e;
  for (;;) {
    Result<bool> has = r.Next(&e);
    ASSERT_TRUE(has.ok()) << has.status().message();
    if (!*has) break;
    got.push_back({e.time_us, std::string(e.bytes)});
  }
  ASSERT_EQ(got.size(), 4u);
  // Window 0 whole (its declarations inside), at its latest end.
  EXPECT_EQ(got[0], std::make_pair(int64_t{9000}, process + k0 + s0a + k1 + s0b));
  // Window 1 ends earlier than window 0 (clock skew): never before what precedes it.
  EXPECT_EQ(got[1], std::make_pair(int64_t{9000}, s1));
  // A declaration goes with the window that uses it.
  EXPECT_EQ(got[2], std::make_pair(int64_t{12000}, k2 + s2));
  // Trailing lines without a time: at the process exit.
  EXPECT_EQ(got[3], std::make_pair(int64_t{99999}, stats));
}

}  // namespace
