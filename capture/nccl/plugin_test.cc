// Host harness for libnccl-profiler-collscope.so: loads the built plugin with dlopen, resolves
// each exported ABI version (v4, v5, v6, v7) the way NCCL does, and drives realistic event sequences
// from several threads: a "user" thread per communicator issuing Coll/P2p events (with API
// parents where the version has them) and a shared "proxy" thread delivering KernelCh (and
// ProxyOp/ProxyStep) events with GPU timer values. It then checks the Inspector-format records,
// the in-flight state files, and the failure modes (bad directory, full disk, overflow).
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "capture/nccl/profiler_abi.h"
#include "capture/nccl/test_json.h"
#include "capture/nccl/test_prom.h"

#ifndef COLLSCOPE_PLUGIN_PATH
#error "COLLSCOPE_PLUGIN_PATH must name the built plugin"
#endif

namespace collscope::capture {
namespace {

namespace fs = std::filesystem;
using testing::JVal;
using testing::ParseJson;

constexpr collscope_ncclResult_t kOk = collscope_ncclSuccess;

// GCC says which sanitizer is on with __SANITIZE_*__, Clang 14 only through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define COLLSCOPE_UNDER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define COLLSCOPE_UNDER_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COLLSCOPE_UNDER_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define COLLSCOPE_UNDER_TSAN 1
#endif
#endif

#if defined(COLLSCOPE_UNDER_TSAN) || defined(COLLSCOPE_UNDER_ASAN)
constexpr int kSlow = 4;
#else
constexpr int kSlow = 1;
#endif

// ---------------------------------------------------------------------------------------------
// NCCL logger stand-in: records every message so tests can count warnings.

std::mutex g_log_mu;
std::vector<std::pair<int, std::string>> g_logs;

void TestLogger(collscope_ncclDebugLogLevel level, unsigned long flags, const char*, int,
                const char* fmt, ...) {
  EXPECT_EQ(flags, COLLSCOPE_NCCL_SUBSYS_PROFILE);
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lk(g_log_mu);
  g_logs.emplace_back(static_cast<int>(level), buf);
}

int CountLogs(int level) {
  std::lock_guard<std::mutex> lk(g_log_mu);
  return static_cast<int>(
      std::count_if(g_logs.begin(), g_logs.end(), [&](const auto& l) { return l.first == level; }));
}

std::string AllLogs() {
  std::lock_guard<std::mutex> lk(g_log_mu);
  std::string s;
  for (const auto& l : g_logs) s += std::to_string(l.first) + ": " + l.second + "\n";
  return s;
}

void ClearLogs() {
  std::lock_guard<std::mutex> lk(g_log_mu);
  g_logs.clear();
}

// ---------------------------------------------------------------------------------------------
// Environment and files

class ScopedEnv {
 public:
  ScopedEnv() = default;
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second.first) {
        setenv(it->first.c_str(), it->second.second.c_str(), 1);
      } else {
        unsetenv(it->first.c_str());
      }
    }
  }
  void Set(const std::string& k, const std::string& v) {
    Save(k);
    setenv(k.c_str(), v.c_str(), 1);
  }
  void Unset(const std::string& k) {
    Save(k);
    unsetenv(k.c_str());
  }

 private:
  void Save(const std::string& k) {
    const char* old = getenv(k.c_str());
    saved_.push_back({k, {old != nullptr, old != nullptr ? old : ""}});
  }
  std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_;
};

std::string MakeTempDir() {
  std::string tmpl = (fs::temp_directory_path() / "collscope-capture-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  EXPECT_NE(mkdtemp(buf.data()), nullptr);
  return buf.data();
}

std::string Hostname() {
  char h[256] = {};
  gethostname(h, sizeof(h) - 1);
  return h;
}

std::string LogPath(const std::string& dir) {
  return dir + "/" + Hostname() + "-pid" + std::to_string(getpid()) + ".log";
}
std::string StatePath(const std::string& dir) {
  return dir + "/" + Hostname() + "-pid" + std::to_string(getpid()) + ".inflight.json";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<JVal> ReadJsonLines(const std::string& path) {
  std::vector<JVal> out;
  std::istringstream in(ReadFile(path));
  std::string line;
  while (std::getline(in, line)) {
    JVal v;
    EXPECT_TRUE(ParseJson(line, &v)) << "invalid JSON line: " << line;
    out.push_back(std::move(v));
  }
  return out;
}

bool WaitFor(const std::function<bool()>& cond, int timeout_ms = 5000) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms * kSlow);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// ---------------------------------------------------------------------------------------------
// The plugin, seen through one ABI version.

struct EventSpec {
  uint64_t type = 0;
  void* parent = nullptr;
  int rank = 0;
  uint64_t seq = 0;
  const char* func = nullptr;
  size_t count = 0;
  const char* dtype = nullptr;
  uint8_t nch = 0;
  const char* algo = nullptr;
  const char* proto = nullptr;
  int peer = -1;
  uint8_t channel = 0;
  uint64_t ptimer = 0;
  int step = 0;
  pid_t pid = 0;
  int nsteps = 0;
  int is_send = 0;
  uint64_t user_tag = 0;  // v7
  uint8_t phase = 0;      // v7 KernelPhase
};

template <typename D>
void FillDescr(const EventSpec& s, D* d) {
  d->type = static_cast<decltype(d->type)>(s.type);
  d->parentObj = s.parent;
  d->rank = s.rank;
  switch (s.type) {
    case collscope_ncclProfileColl:
      d->coll.seqNumber = s.seq;
      d->coll.func = s.func;
      d->coll.count = s.count;
      d->coll.root = -1;
      d->coll.datatype = s.dtype;
      d->coll.nChannels = s.nch;
      d->coll.nWarps = 16;
      d->coll.algo = s.algo;
      d->coll.proto = s.proto;
      if constexpr (requires { d->coll.userTag; }) d->coll.userTag = s.user_tag;
      break;
    case collscope_ncclProfileP2p:
      d->p2p.func = s.func;
      d->p2p.datatype = s.dtype;
      d->p2p.count = s.count;
      d->p2p.peer = s.peer;
      d->p2p.nChannels = s.nch;
      if constexpr (requires { d->p2p.userTag; }) d->p2p.userTag = s.user_tag;
      break;
    case collscope_ncclProfileKernelCh:
      d->kernelCh.channelId = s.channel;
      d->kernelCh.pTimer = s.ptimer;
      break;
    case collscope_ncclProfileProxyOp:
      d->proxyOp.pid = s.pid;
      d->proxyOp.channelId = s.channel;
      d->proxyOp.peer = s.peer;
      d->proxyOp.nSteps = s.nsteps;
      d->proxyOp.chunkSize = 1 << 19;
      d->proxyOp.isSend = s.is_send;
      break;
    case collscope_ncclProfileProxyStep:
      d->proxyStep.step = s.step;
      break;
    case collscope_ncclProfileKernelPhase:
      if constexpr (requires { d->kernelPhase; }) {
        d->kernelPhase.channelId = s.channel;
        d->kernelPhase.phaseId = s.phase;
        d->kernelPhase.phaseName = "compute";
        d->kernelPhase.pTimer = s.ptimer;
      }
      break;
    default:
      break;
  }
}

class Plugin {
 public:
  // Loads `path` (a private copy gives an independent instance, like a separate process).
  Plugin(int version, const std::string& path = COLLSCOPE_PLUGIN_PATH) : version_(version) {
    dl_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(dl_, nullptr) << dlerror();
    if (dl_ == nullptr) return;
    const std::string sym = "ncclProfiler_v" + std::to_string(version);
    table_ = dlsym(dl_, sym.c_str());
    EXPECT_NE(table_, nullptr) << sym;
  }
  ~Plugin() {
    if (dl_ != nullptr) dlclose(dl_);
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  bool ok() const { return table_ != nullptr; }
  int version() const { return version_; }

  void* Init(uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks, int rank) {
    void* ctx = reinterpret_cast<void*>(0x1);
    collscope_ncclResult_t r;
    if (version_ == 4) {
      r = v4()->init(&ctx, mask, name, comm_id, nnodes, nranks, rank, &TestLogger);
    } else if (version_ == 5) {
      r = v5()->init(&ctx, comm_id, mask, name, nnodes, nranks, rank, &TestLogger);
    } else {
      r = v6()->init(&ctx, comm_id, mask, name, nnodes, nranks, rank, &TestLogger);
    }
    EXPECT_EQ(r, kOk);
    return ctx;
  }

  void* Start(void* ctx, const EventSpec& s) {
    void* h = reinterpret_cast<void*>(0xdead);
    collscope_ncclResult_t r;
    if (version_ == 4) {
      collscope_ncclProfilerEventDescr_v4_t d{};
      FillDescr(s, &d);
      r = v4()->startEvent(ctx, &h, &d);
    } else if (version_ == 5) {
      collscope_ncclProfilerEventDescr_v5_t d{};
      FillDescr(s, &d);
      r = v5()->startEvent(ctx, &h, &d);
    } else if (version_ == 6) {
      collscope_ncclProfilerEventDescr_v6_t d{};
      FillDescr(s, &d);
      r = v6()->startEvent(ctx, &h, &d);
    } else {
      collscope_ncclProfilerEventDescr_v7_t d{};
      FillDescr(s, &d);
      r = v7()->startEvent(ctx, &h, &d);
    }
    EXPECT_EQ(r, kOk);
    EXPECT_NE(h, reinterpret_cast<void*>(0xdead)) << "startEvent must always set the handle";
    return h;
  }

  void Stop(void* h) { EXPECT_EQ(v4()->stopEvent(h), kOk); }

  void Record(void* h, int state, uint64_t value) {
    collscope_ncclProfilerEventStateArgs_t a{};
    if (state == collscope_ncclProfilerKernelChStop) {
      a.kernelCh.pTimer = value;
    } else {
      a.proxyStep.transSize = value;
    }
    EXPECT_EQ(v4()->recordEventState(h, static_cast<collscope_ncclProfilerEventState_t>(state), &a),
              kOk);
  }

  void Finalize(void* ctx) { EXPECT_EQ(v4()->finalize(ctx), kOk); }

  // Convenience wrappers.
  void* StartColl(void* ctx, uint64_t seq, const char* func, size_t count, const char* dtype,
                  uint8_t nch, const char* algo = "RING", const char* proto = "SIMPLE",
                  void* parent = nullptr) {
    EventSpec s;
    s.type = collscope_ncclProfileColl;
    s.parent = parent;
    s.seq = seq;
    s.func = func;
    s.count = count;
    s.dtype = dtype;
    s.nch = nch;
    s.algo = algo;
    s.proto = proto;
    return Start(ctx, s);
  }
  void* StartP2p(void* ctx, const char* func, size_t count, const char* dtype, int peer,
                 uint8_t nch) {
    EventSpec s;
    s.type = collscope_ncclProfileP2p;
    s.func = func;
    s.count = count;
    s.dtype = dtype;
    s.peer = peer;
    s.nch = nch;
    return Start(ctx, s);
  }
  void* StartKernelCh(void* ctx, void* parent, uint8_t ch, uint64_t ptimer) {
    EventSpec s;
    s.type = collscope_ncclProfileKernelCh;
    s.parent = parent;
    s.channel = ch;
    s.ptimer = ptimer;
    return Start(ctx, s);
  }
  // One channel's full life on the proxy thread: start, GPU-stop state, stop.
  void RunChannel(void* ctx, void* parent, uint8_t ch, uint64_t gpu_start, uint64_t gpu_stop) {
    void* h = StartKernelCh(ctx, parent, ch, gpu_start);
    Record(h, collscope_ncclProfilerKernelChStop, gpu_stop);
    Stop(h);
  }
  // An API-level parent event where the version has one (v5+: CollApi); the plugin does not
  // track it, so it must hand back a null handle.
  void* StartApiParent(void* ctx) {
    EventSpec s;
    s.type = version_ >= 5 ? collscope_ncclProfileCollApi : collscope_ncclProfileGroup;
    return Start(ctx, s);
  }

 private:
  collscope_ncclProfiler_v4_t* v4() { return static_cast<collscope_ncclProfiler_v4_t*>(table_); }
  collscope_ncclProfiler_v5_t* v5() { return static_cast<collscope_ncclProfiler_v5_t*>(table_); }
  collscope_ncclProfiler_v6_t* v6() { return static_cast<collscope_ncclProfiler_v6_t*>(table_); }
  collscope_ncclProfiler_v7_t* v7() { return static_cast<collscope_ncclProfiler_v7_t*>(table_); }

  int version_;
  void* dl_ = nullptr;
  void* table_ = nullptr;
};

// stop/record/finalize have the same signature at the same offset in every version.
static_assert(offsetof(collscope_ncclProfiler_v4_t, stopEvent) ==
              offsetof(collscope_ncclProfiler_v6_t, stopEvent));
static_assert(offsetof(collscope_ncclProfiler_v4_t, finalize) ==
              offsetof(collscope_ncclProfiler_v5_t, finalize));

// ---------------------------------------------------------------------------------------------
// A proxy thread: a queue of "kernels" whose channels it runs, like NCCL's proxy progress thread.

struct KernelJob {
  void* ctx = nullptr;
  void* parent = nullptr;
  std::vector<uint8_t> channels;
  std::vector<uint64_t> gpu_start, gpu_stop;
};

class ProxyThread {
 public:
  explicit ProxyThread(Plugin* p) : plugin_(p), thread_([this] { Run(); }) {}
  ~ProxyThread() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Push(KernelJob j) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      q_.push_back(std::move(j));
    }
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return done_ || !q_.empty(); });
      if (q_.empty()) return;
      KernelJob j = std::move(q_.front());
      q_.pop_front();
      lk.unlock();
      // Start every channel first, then stop them, as a real kernel's channels overlap.
      std::vector<void*> hs;
      for (size_t i = 0; i < j.channels.size(); ++i) {
        hs.push_back(plugin_->StartKernelCh(j.ctx, j.parent, j.channels[i], j.gpu_start[i]));
      }
      for (size_t i = 0; i < j.channels.size(); ++i) {
        plugin_->Record(hs[i], collscope_ncclProfilerKernelChStop, j.gpu_stop[i]);
        plugin_->Stop(hs[i]);
      }
      lk.lock();
    }
  }

  Plugin* plugin_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<KernelJob> q_;
  bool done_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// Record expectations and checks.

struct Expected {
  bool is_p2p = false;
  std::string func;
  uint64_t sn = 0;
  uint64_t bytes = 0;
  uint64_t exec_us = 0;
  std::string source = "kernel_gpu";
  int nch = 0;
  int peer = -1;
  std::string algo = "unknown", proto = "unknown";
  double start_spread = 0, stop_spread = 0;
};

double BusFactor(const std::string& f, bool p2p, int n, double* traffic_mult) {
  *traffic_mult = 1;
  if (p2p) return 1;
  if (f == "AllReduce") return 2.0 * (n - 1) / n;
  if (f == "AllGather" || f == "ReduceScatter") {
    *traffic_mult = n;
    return double(n - 1) / n;
  }
  if (f == "Broadcast" || f == "Reduce") return 1;
  *traffic_mult = 0;
  return 0;
}

const std::regex kLfDouble(R"(-?\d+\.\d{6})");

const std::vector<std::string> kRecordKeys = {"header", "metadata", "coll_perf", "collscope"};
const std::vector<std::string> kP2pRecordKeys = {"header", "metadata", "p2p_perf", "collscope"};
const std::vector<std::string> kStatsKeys = {"header", "metadata", "dump_stats"};
const std::vector<std::string> kHeaderKeys = {"id", "comm_name", "rank", "n_ranks", "nnodes"};
const std::vector<std::string> kMetaKeys = {"inspector_output_format_version",
                                            "git_rev",
                                            "rec_mechanism",
                                            "dump_timestamp_us",
                                            "hostname",
                                            "pid"};
const std::vector<std::string> kCollPerfKeys = {"coll",
                                                "coll_sn",
                                                "coll_msg_size_bytes",
                                                "coll_exec_time_us",
                                                "coll_timing_source",
                                                "coll_algobw_gbs",
                                                "coll_busbw_gbs"};
const std::vector<std::string> kP2pPerfKeys = {"p2p",
                                               "p2p_sn",
                                               "p2p_peer",
                                               "p2p_msg_size_bytes",
                                               "p2p_exec_time_us",
                                               "p2p_timing_source",
                                               "p2p_algobw_gbs",
                                               "p2p_busbw_gbs"};
const std::vector<std::string> kCollscopeKeys = {"v",
                                                 "global_rank",
                                                 "local_rank",
                                                 "gpu",
                                                 "algo",
                                                 "proto",
                                                 "n_channels",
                                                 "start_ts_us",
                                                 "enqueue_ts_us",
                                                 "kernel_start_ts_us",
                                                 "kernel_stop_ts_us",
                                                 "queue_delay_us",
                                                 "ch_start_spread_us",
                                                 "ch_stop_spread_us"};

// Parsed output of one dump directory, indexed by (comm id, kind, func, sn).
struct Output {
  std::map<std::string, const JVal*> records;
  std::map<std::string, int> record_count;  // per comm id
  std::map<std::string, uint64_t> stats_records;
  std::map<std::string, uint64_t> coll_dropped;
  std::vector<JVal> lines;
};

std::string Key(const std::string& id, bool p2p, const std::string& func, uint64_t sn) {
  return id + (p2p ? "/p2p/" : "/coll/") + func + "/" + std::to_string(sn);
}

void ParseOutput(const std::string& path, Output* out) {
  out->lines = ReadJsonLines(path);
  for (const JVal& l : out->lines) {
    ASSERT_EQ(l.type, JVal::kObj);
    EXPECT_EQ(l["header"].Keys(), kHeaderKeys);
    EXPECT_EQ(l["metadata"].Keys(), kMetaKeys);
    EXPECT_EQ(l["metadata"]["rec_mechanism"].text, "nccl_profiler_interface");
    EXPECT_EQ(l["metadata"]["pid"].U(), static_cast<unsigned long long>(getpid()));
    EXPECT_EQ(l["metadata"]["hostname"].text, Hostname());
    const std::string id = l["header"]["id"].text;
    EXPECT_EQ(id.rfind("0x", 0), 0u);
    if (l.Has("dump_stats")) {
      EXPECT_EQ(l.Keys(), kStatsKeys);
      EXPECT_EQ(l["metadata"]["inspector_output_format_version"].text, "v4.1");
      out->stats_records[id] +=
          l["dump_stats"]["coll_records"].U() + l["dump_stats"]["p2p_records"].U();
      out->coll_dropped[id] =
          std::max<uint64_t>(out->coll_dropped[id], l["dump_stats"]["coll_dropped_total"].U());
      continue;
    }
    EXPECT_EQ(l["metadata"]["inspector_output_format_version"].text, "v4.0");
    const bool p2p = l.Has("p2p_perf");
    EXPECT_EQ(l.Keys(), p2p ? kP2pRecordKeys : kRecordKeys);
    const JVal& perf = p2p ? l["p2p_perf"] : l["coll_perf"];
    std::vector<std::string> pk = perf.Keys();
    pk.erase(std::remove_if(pk.begin(), pk.end(),
                            [](const std::string& k) { return k.rfind("event_trace", 0) == 0; }),
             pk.end());
    EXPECT_EQ(pk, p2p ? kP2pPerfKeys : kCollPerfKeys);
    EXPECT_EQ(l["collscope"].Keys(), kCollscopeKeys);
    for (const char* k : {"coll_algobw_gbs", "coll_busbw_gbs", "p2p_algobw_gbs", "p2p_busbw_gbs"}) {
      if (perf.Has(k)) {
        EXPECT_TRUE(std::regex_match(perf[k].text, kLfDouble)) << perf[k].text;
      }
    }
    for (const char* k : {"queue_delay_us", "ch_start_spread_us", "ch_stop_spread_us"}) {
      EXPECT_TRUE(std::regex_match(l["collscope"][k].text, kLfDouble)) << l["collscope"][k].text;
    }
    const std::string func = p2p ? perf["p2p"].text : perf["coll"].text;
    const uint64_t sn = p2p ? perf["p2p_sn"].U() : perf["coll_sn"].U();
    const std::string k = Key(id, p2p, func, sn);
    EXPECT_EQ(out->records.count(k), 0u) << "duplicate record " << k;
    out->records[k] = &l;
    out->record_count[id]++;
  }
}

void CheckRecord(const JVal& l, const Expected& e, int nranks) {
  const char* p = e.is_p2p ? "p2p" : "coll";
  const JVal& perf = l[e.is_p2p ? "p2p_perf" : "coll_perf"];
  auto k = [&](const char* suffix) { return std::string(p) + suffix; };
  EXPECT_EQ(perf[k("_msg_size_bytes")].U(), e.bytes);
  EXPECT_EQ(perf[k("_exec_time_us")].U(), e.exec_us) << e.func << " sn " << e.sn;
  EXPECT_EQ(perf[k("_timing_source")].text, e.source);
  double mult;
  const double factor = BusFactor(e.func, e.is_p2p, nranks, &mult);
  const double alg = e.exec_us == 0 ? 0 : double(e.bytes) * mult / 1e9 / (double(e.exec_us) / 1e6);
  EXPECT_NEAR(perf[k("_algobw_gbs")].D(), alg, 1e-6 + alg * 1e-12);
  EXPECT_NEAR(perf[k("_busbw_gbs")].D(), alg * factor, 1e-6 + alg * 1e-12);
  if (e.is_p2p) {
    EXPECT_EQ(perf["p2p_peer"].I(), e.peer);
  }
  const JVal& cs = l["collscope"];
  EXPECT_EQ(cs["v"].I(), 1);
  EXPECT_EQ(cs["algo"].text, e.algo);
  EXPECT_EQ(cs["proto"].text, e.proto);
  EXPECT_EQ(cs["n_channels"].I(), e.nch);
  EXPECT_NEAR(cs["ch_start_spread_us"].D(), e.start_spread, 1e-6);
  EXPECT_NEAR(cs["ch_stop_spread_us"].D(), e.stop_spread, 1e-6);
  const uint64_t start = cs["start_ts_us"].U(), enq = cs["enqueue_ts_us"].U();
  const uint64_t kstart = cs["kernel_start_ts_us"].U(), kstop = cs["kernel_stop_ts_us"].U();
  EXPECT_GT(start, 1600000000000000ull);  // a wall-clock time in µs
  EXPECT_LE(start, enq);
  if (e.nch > 0 && e.source != "collective_cpu") {
    EXPECT_GE(kstart, start);
    EXPECT_GE(kstop, kstart);
    // queue_delay_us is kernel start minus enqueue, in µs (from ns, so within 1 µs of the
    // difference of the truncated µs fields).
    EXPECT_NEAR(cs["queue_delay_us"].D(), double(int64_t(kstart) - int64_t(enq)), 1.0);
  } else {
    EXPECT_EQ(kstart, 0u);
    EXPECT_EQ(cs["queue_delay_us"].D(), 0.0);
  }
}

// ---------------------------------------------------------------------------------------------
// Tests

TEST(CapturePlugin, ExportsEveryVersion) {
  void* dl = dlopen(COLLSCOPE_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(dl, nullptr) << dlerror();
  for (const char* sym : {"ncclProfiler_v7", "ncclProfiler_v6", "ncclProfiler_v5", "ncclProfiler_v4"}) {
    auto* t = static_cast<collscope_ncclProfiler_v4_t*>(dlsym(dl, sym));
    ASSERT_NE(t, nullptr) << sym;
    EXPECT_STREQ(t->name, "collscope");
    EXPECT_NE(t->init, nullptr);
    EXPECT_NE(t->startEvent, nullptr);
    EXPECT_NE(t->stopEvent, nullptr);
    EXPECT_NE(t->recordEventState, nullptr);
    EXPECT_NE(t->finalize, nullptr);
  }
  EXPECT_EQ(dlsym(dl, "ncclProfiler_v3"), nullptr);
  // Internals stay hidden, so two plugins in one process cannot collide.
  EXPECT_EQ(dlsym(dl, "_ZN9collscope7capture5NowNsEv"), nullptr);
  dlclose(dl);
}

class CapturePluginVersions : public ::testing::TestWithParam<int> {};

// Several communicators at once, a user thread each, one shared proxy thread, concurrent dumps
// and state snapshots; every record must be present once with exact exec time and bandwidth.
TEST_P(CapturePluginVersions, ConcurrentCommunicatorsProduceExactRecords) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "3000");
  env.Set("COLLSCOPE_STATE_INTERVAL_MS", "2");
  // The harness's one proxy thread may lag all user threads; room for every op keeps the
  // expectation exact (pool exhaustion is covered by RingOverflowIsCountedNotBlocking).
  env.Set("COLLSCOPE_INFLIGHT_POOL_SIZE", "512");
  env.Set("RANK", "7");
  env.Set("LOCAL_RANK", "3");
  ClearLogs();

  Plugin plugin(GetParam());
  ASSERT_TRUE(plugin.ok());
  struct CommSpec {
    uint64_t id;
    const char* name;
    int nnodes, nranks, rank;
  };
  const std::vector<CommSpec> comms = {{0x7f8c496ae9f661ull, "world", 2, 16, 7},
                                       {0xabcdef01ull, "tp", 1, 4, 3},
                                       {0x42ull, nullptr, 1, 2, 1}};
  std::vector<void*> ctxs;
  for (const CommSpec& c : comms) {
    int mask = -1;
    ctxs.push_back(plugin.Init(c.id, &mask, c.name, c.nnodes, c.nranks, c.rank));
    EXPECT_EQ(mask,
              collscope_ncclProfileColl | collscope_ncclProfileKernelCh | collscope_ncclProfileP2p);
    ASSERT_NE(ctxs.back(), nullptr);
  }

  constexpr int kOps = 300;
  std::vector<std::vector<Expected>> expected(comms.size());
  {
    ProxyThread proxy(&plugin);
    std::vector<std::thread> users;
    for (size_t ci = 0; ci < comms.size(); ++ci) {
      users.emplace_back([&, ci] {
        static const char* kFuncs[] = {"AllReduce", "AllGather", "ReduceScatter",
                                       "Broadcast", "Send",      "Recv"};
        static const char* kAlgos[] = {"RING", "TREE", "NVLS", "COLLNET_DIRECT"};
        static const char* kProtos[] = {"SIMPLE", "LL", "LL128"};
        std::map<std::string, uint64_t> seq;
        uint64_t p2p_sn = 0;
        for (int op = 0; op < kOps; ++op) {
          Expected e;
          e.func = kFuncs[(op + ci) % 6];
          e.is_p2p = e.func == "Send" || e.func == "Recv";
          e.nch = 1 + (op * 7 + static_cast<int>(ci)) % 12;
          const size_t count = size_t{1024} << (op % 9);
          e.bytes = count * 4;
          KernelJob job;
          job.ctx = ctxs[ci];
          const uint64_t base = 1000000000000ull + uint64_t(op) * 10000000ull;
          uint64_t max_dur = 0, min_stop = UINT64_MAX, max_stop = 0;
          for (int c = 0; c < e.nch; ++c) {
            // Channel ids need not be dense; use a spread-out set.
            job.channels.push_back(static_cast<uint8_t>((c * 5) % 64));
            const uint64_t s = base + uint64_t(c) * 137;
            const uint64_t d = 5000 + (uint64_t(op) * 31 + uint64_t(c) * 977) % 50000;
            job.gpu_start.push_back(s);
            job.gpu_stop.push_back(s + d);
            max_dur = std::max(max_dur, d);
            min_stop = std::min(min_stop, s + d);
            max_stop = std::max(max_stop, s + d);
          }
          e.exec_us = max_dur / 1000;
          e.start_spread = double(e.nch - 1) * 137 / 1000.0;
          e.stop_spread = double(max_stop - min_stop) / 1000.0;
          void* api = plugin.StartApiParent(ctxs[ci]);
          EXPECT_EQ(api, nullptr);
          void* h;
          if (e.is_p2p) {
            e.peer = (op + 1) % comms[ci].nranks;
            e.sn = p2p_sn++;
            h = plugin.StartP2p(ctxs[ci], e.func.c_str(), count, "ncclFloat32", e.peer,
                                static_cast<uint8_t>(e.nch));
          } else {
            e.sn = seq[e.func]++;
            e.algo = kAlgos[op % 4];
            e.proto = kProtos[op % 3];
            h = plugin.StartColl(ctxs[ci], e.sn, e.func.c_str(), count, "ncclInt32",
                                 static_cast<uint8_t>(e.nch), kAlgos[op % 4], kProtos[op % 3], api);
          }
          EXPECT_NE(h, nullptr);
          job.parent = h;
          proxy.Push(std::move(job));
          if (op % 5 == 0) std::this_thread::yield();
          plugin.Stop(h);  // enqueued; the proxy may already be running its channels
          plugin.Stop(api);
          expected[ci].push_back(e);
        }
      });
    }
    for (auto& t : users) t.join();
  }  // the proxy drains its queue before joining

  // State file while everything is complete: no operation in flight.
  ASSERT_TRUE(WaitFor([&] {
    JVal st;
    return ParseJson(ReadFile(StatePath(dir)), &st) && st["comms"].arr.size() == comms.size() &&
           std::all_of(st["comms"].arr.begin(), st["comms"].arr.end(), [](const JVal& c) {
             return c["inflight"].arr.empty() && c["ops_completed"].U() == kOps;
           });
  }));

  for (void* c : ctxs) plugin.Finalize(c);

  Output out;
  ParseOutput(LogPath(dir), &out);
  for (size_t ci = 0; ci < comms.size(); ++ci) {
    char id[32];
    std::snprintf(id, sizeof(id), "0x%lx", static_cast<unsigned long>(comms[ci].id));
    EXPECT_EQ(out.record_count[id], kOps) << id;
    EXPECT_EQ(out.stats_records[id], uint64_t{kOps}) << id;
    EXPECT_EQ(out.coll_dropped[id], 0u);
    for (const Expected& e : expected[ci]) {
      auto it = out.records.find(Key(id, e.is_p2p, e.func, e.sn));
      ASSERT_NE(it, out.records.end()) << Key(id, e.is_p2p, e.func, e.sn);
      const JVal& l = *it->second;
      EXPECT_EQ(l["header"]["rank"].I(), comms[ci].rank);
      EXPECT_EQ(l["header"]["n_ranks"].I(), comms[ci].nranks);
      EXPECT_EQ(l["header"]["nnodes"].U(), static_cast<unsigned>(comms[ci].nnodes));
      EXPECT_EQ(l["header"]["comm_name"].text, comms[ci].name ? comms[ci].name : "unknown");
      EXPECT_EQ(l["collscope"]["global_rank"].I(), 7);
      EXPECT_EQ(l["collscope"]["local_rank"].I(), 3);
      EXPECT_EQ(l["collscope"]["gpu"].I(), 3);  // no CUDA runtime here: falls back to local rank
      CheckRecord(l, e, comms[ci].nranks);
    }
  }
  JVal st;
  ASSERT_TRUE(ParseJson(ReadFile(StatePath(dir)), &st));
  EXPECT_EQ(st["status"].text, "finalized");
  EXPECT_EQ(CountLogs(COLLSCOPE_NCCL_LOG_WARN), 0) << AllLogs();
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(AllVersions, CapturePluginVersions, ::testing::Values(4, 5, 6, 7),
                         [](const auto& info) { return "v" + std::to_string(info.param); });

// ABI v7: userTag reaches the record as Inspector's user-tag variant writes it (a decimal
// string, only when set), and KernelPhase events (which the plugin never asks for, but RAS may
// turn on job-wide) are refused with a null handle without disturbing their channel's op.
TEST(CapturePlugin, V7UserTagsAndKernelPhases) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", "0");
  Plugin plugin(7);
  ASSERT_TRUE(plugin.ok());
  int mask = 0;
  void* ctx = plugin.Init(0x77, &mask, "tagged", 1, 8, 0);
  EXPECT_EQ(mask & collscope_ncclProfileKernelPhase, 0) << "the plugin does not ask for KernelPhase";
  EventSpec coll;
  coll.type = collscope_ncclProfileColl;
  coll.seq = 1, coll.func = "AllReduce", coll.count = 1 << 20, coll.dtype = "ncclFloat32", coll.nch = 1;
  coll.algo = "RING", coll.proto = "SIMPLE", coll.user_tag = 18446744073709551615ull;  // the largest uint64
  void* h = plugin.Start(ctx, coll);
  ASSERT_NE(h, nullptr);
  void* ch = plugin.StartKernelCh(ctx, h, 0, 5000000);
  EventSpec phase;
  phase.type = collscope_ncclProfileKernelPhase, phase.parent = ch, phase.channel = 0, phase.phase = 1;
  phase.ptimer = 5001000;
  void* ph = plugin.Start(ctx, phase);
  EXPECT_EQ(ph, nullptr);
  plugin.Record(ph, collscope_ncclProfilerKernelPhaseStop, 5009000);
  plugin.Stop(ph);
  plugin.Record(ch, collscope_ncclProfilerKernelChStop, 5000000 + 25000);
  plugin.Stop(ch);
  plugin.Stop(h);
  coll.seq = 2, coll.user_tag = 0;  // untagged
  h = plugin.Start(ctx, coll);
  plugin.RunChannel(ctx, h, 0, 6000000, 6000000 + 25000);
  plugin.Stop(h);
  EventSpec p2p;
  p2p.type = collscope_ncclProfileP2p;
  p2p.func = "Send", p2p.count = 4096, p2p.dtype = "ncclUint8", p2p.peer = 3, p2p.nch = 1, p2p.user_tag = 42;
  h = plugin.Start(ctx, p2p);
  plugin.RunChannel(ctx, h, 0, 7000000, 7000000 + 9000);
  plugin.Stop(h);
  plugin.Finalize(ctx);
  int tagged = 0, untagged = 0, p2p_tagged = 0;
  for (const JVal& v : ReadJsonLines(LogPath(dir))) {
    if (v.Has("coll_perf")) {
      EXPECT_FALSE(v["collscope"].Has("step")) << "no annotation library here: no step";
      const JVal& c = v["coll_perf"];
      EXPECT_EQ(c["coll_exec_time_us"].D(), 25.0) << "a KernelPhase must not change its channel's timing";
      if (c.Has("coll_user_tag")) {
        EXPECT_EQ(c["coll_user_tag"].type, JVal::kStr);
        EXPECT_EQ(c["coll_user_tag"].text, "18446744073709551615");
        ++tagged;
      } else {
        ++untagged;
      }
    }
    if (v.Has("p2p_perf") && v["p2p_perf"].Has("p2p_user_tag")) {
      EXPECT_EQ(v["p2p_perf"]["p2p_user_tag"].text, "42");
      ++p2p_tagged;
    }
  }
  EXPECT_EQ(tagged, 1);
  EXPECT_EQ(untagged, 1);
  EXPECT_EQ(p2p_tagged, 1);
}

// With the annotation library in the process (loaded globally, as Python's ctypes does with
// RTLD_GLOBAL or as a linked library), every record carries the step, innermost phase and
// micro-batch it was issued in; without it, records carry none (the other tests' records).
TEST(CapturePlugin, RecordsCarryTheAnnotatedStepAndPhase) {
  const std::string dir = MakeTempDir();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("NCCL_INSPECTOR_DUMP_DIR", dir.c_str(), 1);
    setenv("COLLSCOPE_DUMP_DIR", dir.c_str(), 1);
    setenv("NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", "0", 1);
    void* ann = dlopen(COLLSCOPE_ANNOTATE_PATH, RTLD_NOW | RTLD_GLOBAL);
    if (ann == nullptr) _exit(10);
    auto step_begin = reinterpret_cast<int (*)(int64_t)>(dlsym(ann, "collscope_step_begin"));
    auto phase_begin = reinterpret_cast<int (*)(const char*)>(dlsym(ann, "collscope_phase_begin"));
    auto phase_end = reinterpret_cast<int (*)(const char*)>(dlsym(ann, "collscope_phase_end"));
    auto micro_batch = reinterpret_cast<int (*)(int32_t)>(dlsym(ann, "collscope_micro_batch"));
    if (!step_begin || !phase_begin || !phase_end || !micro_batch) _exit(11);
    Plugin plugin(7);
    int mask = 0;
    void* ctx = plugin.Init(0x55, &mask, "annotated", 1, 8, 0);
    step_begin(12);
    phase_begin("backward");
    micro_batch(3);
    void* h = plugin.StartColl(ctx, 1, "AllReduce", 1 << 20, "ncclFloat32", 1);
    plugin.RunChannel(ctx, h, 0, 1000000, 1000000 + 5000);
    plugin.Stop(h);
    phase_end("backward");
    step_begin(13);
    h = plugin.StartColl(ctx, 2, "AllReduce", 1 << 20, "ncclFloat32", 1);
    plugin.RunChannel(ctx, h, 0, 2000000, 2000000 + 5000);
    plugin.Stop(h);
    plugin.Finalize(ctx);
    _exit(::testing::Test::HasFailure() ? 12 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::map<long long, std::pair<std::string, long long>> by_sn;  // sn -> (phase, micro-batch)
  std::map<long long, long long> step_of;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".log") continue;
    for (const JVal& v : ReadJsonLines(e.path().string())) {
      if (!v.Has("coll_perf")) continue;
      const JVal& c = v["collscope"];
      ASSERT_TRUE(c.Has("step")) << "a record without its step";
      const long long sn = v["coll_perf"]["coll_sn"].I();
      step_of[sn] = c["step"].I();
      by_sn[sn] = {c["phase"].text, c["micro_batch"].I()};
    }
  }
  EXPECT_EQ(step_of, (std::map<long long, long long>{{1, 12}, {2, 13}}));
  EXPECT_EQ(by_sn[1], (std::pair<std::string, long long>{"backward", 3}));
  EXPECT_EQ(by_sn[2].first, "") << "a new step closes its phases";
  fs::remove_all(dir);
}

TEST(CapturePlugin, TimingSourceFallbacks) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Unset("RANK");
  env.Unset("OMPI_COMM_WORLD_RANK");
  env.Unset("SLURM_PROCID");
  env.Unset("PMI_RANK");
  env.Set("OMPI_COMM_WORLD_LOCAL_RANK", "5");
  env.Unset("LOCAL_RANK");
  // One slot: every op below reuses it, so stale channel data from earlier ops would show.
  env.Set("COLLSCOPE_INFLIGHT_POOL_SIZE", "1");
  Plugin plugin(5);
  int mask = 0;
  void* ctx = plugin.Init(0x99, &mask, "fallbacks", 1, 8, 0);

  // (a) GPU timers on some channels only: still kernel_gpu, max over the channels that have them.
  void* h = plugin.StartColl(ctx, 0, "AllReduce", 1 << 20, "ncclFloat32", 2);
  plugin.RunChannel(ctx, h, 0, 1000000, 1000000 + 12345);
  plugin.RunChannel(ctx, h, 1, 0, 5000);
  plugin.Stop(h);
  // (c2) more KernelCh events than announced: the extra one is refused and does not count, even
  // though the reused slot's channel 0 still holds (a)'s longer timing (12 us).
  h = plugin.StartColl(ctx, 2, "AllReduce", 1 << 20, "ncclFloat32", 1);
  plugin.Stop(h);
  void* first = plugin.StartKernelCh(ctx, h, 1, 3000000);
  EXPECT_EQ(plugin.StartKernelCh(ctx, h, 0, 3000000), nullptr);
  EXPECT_EQ(plugin.StartKernelCh(ctx, h, 1, 3000000), nullptr);  // duplicate channel
  plugin.Record(first, collscope_ncclProfilerKernelChStop, 3000000 + 7000);
  plugin.Stop(first);
  // (b) no GPU timers: the channels' CPU timestamps (sleep so the time is measurable).
  h = plugin.StartColl(ctx, 1, "AllReduce", 1 << 20, "ncclFloat32", 1);
  plugin.Stop(h);
  void* ch = plugin.StartKernelCh(ctx, h, 0, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  plugin.Record(ch, collscope_ncclProfilerKernelChStop, 0);
  plugin.Stop(ch);
  // (c) no channel at all: collective CPU time, start to completion.
  h = plugin.StartColl(ctx, 0, "Broadcast", 100, "ncclUint8", 0, nullptr, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  plugin.Stop(h);
  // (d) unknown function and datatype: tracked, bandwidth 0, "Invalid".
  h = plugin.StartColl(ctx, 0, "FancyNewColl", 10, "ncclMystery", 1);
  plugin.RunChannel(ctx, h, 3, 2000000, 2000000 + 4000);
  plugin.Stop(h);
  plugin.Finalize(ctx);

  Output out;
  ParseOutput(LogPath(dir), &out);
  const JVal* a = out.records["0x99/coll/AllReduce/0"];
  const JVal* b = out.records["0x99/coll/AllReduce/1"];
  const JVal* c = out.records["0x99/coll/Broadcast/0"];
  const JVal* d = out.records["0x99/coll/Invalid/0"];
  ASSERT_TRUE(a && b && c && d);
  EXPECT_EQ((*a)["coll_perf"]["coll_timing_source"].text, "kernel_gpu");
  EXPECT_EQ((*a)["coll_perf"]["coll_exec_time_us"].U(), 12u);
  EXPECT_EQ((*a)["collscope"]["ch_start_spread_us"].D(), 0.0);  // one channel had a start timer
  EXPECT_EQ((*b)["coll_perf"]["coll_timing_source"].text, "kernel_cpu");
  EXPECT_GE((*b)["coll_perf"]["coll_exec_time_us"].U(), 3000u);
  EXPECT_GT((*b)["coll_perf"]["coll_busbw_gbs"].D(), 0.0);
  EXPECT_EQ((*c)["coll_perf"]["coll_timing_source"].text, "collective_cpu");
  EXPECT_GE((*c)["coll_perf"]["coll_exec_time_us"].U(), 2000u);
  EXPECT_EQ((*c)["collscope"]["algo"].text, "unknown");
  EXPECT_EQ((*c)["collscope"]["kernel_start_ts_us"].U(), 0u);
  EXPECT_EQ((*c)["collscope"]["queue_delay_us"].text, "0.000000");
  const JVal* c2 = out.records["0x99/coll/AllReduce/2"];
  ASSERT_NE(c2, nullptr);
  EXPECT_EQ((*c2)["coll_perf"]["coll_exec_time_us"].U(), 7u);
  EXPECT_GE((*c2)["collscope"]["kernel_start_ts_us"].U(), (*c2)["collscope"]["start_ts_us"].U());
  EXPECT_EQ((*c2)["collscope"]["ch_start_spread_us"].D(), 0.0);
  EXPECT_EQ((*d)["coll_perf"]["coll_msg_size_bytes"].U(), 0u);
  EXPECT_EQ((*d)["coll_perf"]["coll_busbw_gbs"].text, "0.000000");
  EXPECT_EQ((*a)["collscope"]["global_rank"].I(), -1);
  EXPECT_EQ((*a)["collscope"]["local_rank"].I(), 5);
  fs::remove_all(dir);
}

// Four "ranks" of one communicator, each a separate plugin instance with its own dump directory
// (a private copy of the .so behaves like another process). Rank 2 never enters AllReduce #5;
// the other ranks enqueue it and some of their channels start. The state files must show it.
TEST(CapturePlugin, SimulatedHangShowsInStateFiles) {
  const std::string root = MakeTempDir();
  constexpr int kRanks = 4;
  constexpr uint64_t kComm = 0x5eed5eedull;
  ScopedEnv env;
  env.Set("COLLSCOPE_STATE_INTERVAL_MS", "10");
  env.Set("COLLSCOPE_PROXY_EVENTS", "1");
  env.Set("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "5000");
  env.Unset("LOCAL_RANK");
  std::vector<std::unique_ptr<Plugin>> plugins;
  std::vector<void*> ctxs;
  std::vector<std::string> dirs;
  for (int r = 0; r < kRanks; ++r) {
    const std::string dir = root + "/rank" + std::to_string(r);
    fs::create_directories(dir);
    const std::string so = dir + "/libnccl-profiler-collscope.so";
    fs::copy_file(COLLSCOPE_PLUGIN_PATH, so);
    env.Set("NCCL_INSPECTOR_DUMP_DIR", dir + "/out");
    env.Set("RANK", std::to_string(r));
    plugins.push_back(std::make_unique<Plugin>(5 + (r % 2), so));
    ASSERT_TRUE(plugins.back()->ok());
    int mask = 0;
    ctxs.push_back(plugins.back()->Init(kComm, &mask, "dp", 1, kRanks, r));
    EXPECT_EQ(mask & (collscope_ncclProfileProxyOp | collscope_ncclProfileProxyStep),
              collscope_ncclProfileProxyOp | collscope_ncclProfileProxyStep);
    dirs.push_back(dir + "/out");
  }
  constexpr uint8_t kCh = 4;
  // AllReduce 0..4 complete everywhere, each rank on its own thread.
  {
    std::vector<std::thread> ts;
    for (int r = 0; r < kRanks; ++r) {
      ts.emplace_back([&, r] {
        Plugin& p = *plugins[r];
        for (uint64_t sn = 0; sn < 5; ++sn) {
          void* h = p.StartColl(ctxs[r], sn, "AllReduce", 1 << 16, "ncclBfloat16", kCh);
          p.Stop(h);
          for (uint8_t c = 0; c < kCh; ++c) p.RunChannel(ctxs[r], h, c, 1000 + c, 9000 + c);
        }
      });
    }
    for (auto& t : ts) t.join();
  }
  // AllReduce 5: ranks 0, 1, 3 enter; rank 2 does not. Ranks 0 and 1 finish channels 0 and 1.
  std::vector<std::vector<void*>> open(kRanks);
  void* proxy_op = nullptr;
  for (int r : {0, 1, 3}) {
    Plugin& p = *plugins[r];
    void* h = p.StartColl(ctxs[r], 5, "AllReduce", 1 << 16, "ncclBfloat16", kCh);
    p.Stop(h);
    for (uint8_t c = 0; c < kCh; ++c) {
      void* ch = p.StartKernelCh(ctxs[r], h, c, 50000 + c);
      if (r != 3 && c < 2) {
        p.Record(ch, collscope_ncclProfilerKernelChStop, 60000 + c);
        p.Stop(ch);
      } else {
        open[r].push_back(ch);
      }
    }
    if (r == 3) {
      // Rank 3's proxy is stuck sending on channel 2 to rank 2: 3 of 8 steps done.
      EventSpec s;
      s.type = collscope_ncclProfileProxyOp;
      s.parent = h;
      s.pid = getpid();
      s.channel = 2;
      s.peer = 2;
      s.nsteps = 8;
      s.is_send = 1;
      proxy_op = p.Start(ctxs[r], s);
      ASSERT_NE(proxy_op, nullptr);
      for (int step = 0; step < 4; ++step) {
        EventSpec st;
        st.type = collscope_ncclProfileProxyStep;
        st.parent = proxy_op;
        st.step = step;
        void* sh = p.Start(ctxs[r], st);
        ASSERT_NE(sh, nullptr);
        p.Record(sh, collscope_ncclProfilerProxyStepSendWait, 1 << 19);
        if (step < 3) p.Stop(sh);
      }
      // A proxy op from another process (PXN) must not be dereferenced or tracked.
      s.pid = getpid() + 1;
      EXPECT_EQ(p.Start(ctxs[r], s), nullptr);
    }
  }

  auto state_of = [&](int r, JVal* st) {
    return ParseJson(ReadFile(StatePath(dirs[r])), st) && (*st)["comms"].arr.size() == 1;
  };
  // Wait until every state file reflects the hang (written after the events above).
  ASSERT_TRUE(WaitFor([&] {
    for (int r = 0; r < kRanks; ++r) {
      JVal st;
      if (!state_of(r, &st)) return false;
      const size_t want = r == 2 ? 0 : 1;
      // Rank 2 has nothing in flight from its first snapshot on: wait for its completions too.
      if (st["comms"].arr[0]["ops_completed"].U() != 5u) return false;
      if (st["comms"].arr[0]["inflight"].arr.size() != want) return false;
      if (r == 3 && st["comms"].arr[0]["inflight"].arr[0]["proxy"].arr.empty()) return false;
    }
    return true;
  }));
  uint64_t hb[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    JVal st;
    ASSERT_TRUE(state_of(r, &st));
    EXPECT_EQ(st["collscope_inflight_version"].I(), 1);
    EXPECT_EQ(st["status"].text, "running");
    EXPECT_EQ(st["global_rank"].I(), r);
    EXPECT_EQ(st["pid"].U(), static_cast<unsigned long long>(getpid()));
    hb[r] = st["heartbeat_ts_us"].U();
    const JVal& comm = st["comms"].arr[0];
    EXPECT_EQ(comm["id"].text, "0x5eed5eed");
    EXPECT_EQ(comm["comm_name"].text, "dp");
    EXPECT_EQ(comm["rank"].I(), r);
    EXPECT_EQ(comm["n_ranks"].I(), kRanks);
    EXPECT_EQ(comm["ops_completed"].U(), 5u);
    EXPECT_EQ(comm["ops_started"].U(), r == 2 ? 5u : 6u);
    if (r == 2) continue;
    const JVal& op = comm["inflight"].arr[0];
    EXPECT_EQ(op["kind"].text, "coll");
    EXPECT_EQ(op["op"].text, "AllReduce");
    EXPECT_EQ(op["sn"].U(), 5u);
    EXPECT_EQ(op["msg_size_bytes"].U(), 2u << 16);
    EXPECT_EQ(op["algo"].text, "RING");
    EXPECT_EQ(op["n_channels"].U(), kCh);
    EXPECT_GT(op["enqueue_ts_us"].U(), 0u);
    EXPECT_GE(op["enqueue_ts_us"].U(), op["start_ts_us"].U());
    EXPECT_EQ(op["n_channels_started"].U(), 4u);
    std::vector<long long> started, stopped;
    for (const JVal& v : op["channels_started"].arr) started.push_back(v.I());
    for (const JVal& v : op["channels_stopped"].arr) stopped.push_back(v.I());
    EXPECT_EQ(started, (std::vector<long long>{0, 1, 2, 3}));
    if (r == 3) {
      EXPECT_TRUE(stopped.empty());
      ASSERT_EQ(op["proxy"].arr.size(), 1u);
      const JVal& px = op["proxy"].arr[0];
      EXPECT_EQ(px["channel"].I(), 2);
      EXPECT_EQ(px["peer"].I(), 2);
      EXPECT_TRUE(px["is_send"].b);
      EXPECT_EQ(px["n_steps"].I(), 8);
      EXPECT_EQ(px["steps_started"].I(), 4);
      EXPECT_EQ(px["steps_done"].I(), 3);
      EXPECT_EQ(px["last_state"].text, "SendWait");
      EXPECT_EQ(px["trans_bytes"].U(), 1u << 19);
    } else {
      EXPECT_EQ(stopped, (std::vector<long long>{0, 1}));
      EXPECT_TRUE(op["proxy"].arr.empty());
    }
  }
  // The heartbeat keeps moving while the job is stuck.
  EXPECT_TRUE(WaitFor([&] {
    for (int r = 0; r < kRanks; ++r) {
      JVal st;
      if (!state_of(r, &st) || st["heartbeat_ts_us"].U() <= hb[r]) return false;
    }
    return true;
  }));

  // Abort-style teardown with the op still in flight: the final state keeps the evidence.
  for (int r = 0; r < kRanks; ++r) plugins[r]->Finalize(ctxs[r]);
  for (int r = 0; r < kRanks; ++r) {
    JVal st;
    ASSERT_TRUE(ParseJson(ReadFile(StatePath(dirs[r])), &st));
    EXPECT_EQ(st["status"].text, "finalized");
    EXPECT_TRUE(st["comms"].arr.empty());
    // Rank 2 keeps its communicator too, with nothing in flight: that entry is what maps the
    // member that never joined to this process.
    ASSERT_EQ(st["finalized_comms"].arr.size(), 1u);
    const JVal& fc = st["finalized_comms"].arr[0];
    EXPECT_GT(fc["finalize_ts_us"].U(), 0u);
    EXPECT_EQ(fc["rank"].I(), r);
    EXPECT_EQ(fc["ops_completed"].U(), 5u);
    ASSERT_EQ(fc["inflight"].arr.size(), r == 2 ? 0u : 1u);
    if (r != 2) {
      EXPECT_EQ(fc["inflight"].arr[0]["sn"].U(), 5u);
    }
    // The completed AllReduces were all written.
    Output out;
    ParseOutput(LogPath(dirs[r]), &out);
    EXPECT_EQ(out.record_count["0x5eed5eed"], 5);
  }
  plugins.clear();
  fs::remove_all(root);
}

TEST(CapturePlugin, UnwritableDirectoryDisablesCleanly) {
  const std::string root = MakeTempDir();
  // A path below a regular file cannot be created, even by root.
  std::ofstream(root + "/file") << "x";
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", root + "/file/sub");
  ClearLogs();
  Plugin plugin(6);
  int mask = -1;
  void* ctx = plugin.Init(0x1, &mask, "x", 1, 2, 0);
  EXPECT_EQ(mask, 0);
  EXPECT_EQ(CountLogs(COLLSCOPE_NCCL_LOG_WARN), 1) << AllLogs();
  EXPECT_NE(AllLogs().find("disabled"), std::string::npos);
  // NCCL keeps calling us with whatever context we returned: everything is a no-op.
  void* h = plugin.StartColl(ctx, 0, "AllReduce", 1024, "ncclFloat32", 1);
  EXPECT_EQ(h, nullptr);
  plugin.Stop(h);
  plugin.Record(h, collscope_ncclProfilerKernelChStop, 1);
  int mask2 = -1;
  void* ctx2 = plugin.Init(0x2, &mask2, "y", 1, 2, 1);
  EXPECT_EQ(mask2, 0);
  EXPECT_EQ(CountLogs(COLLSCOPE_NCCL_LOG_WARN), 1) << "one warning only";
  plugin.Finalize(ctx);
  plugin.Finalize(ctx2);
  plugin.Finalize(nullptr);
  fs::remove_all(root);
}

// C11: NCCL (or a buggy caller) finalizing one context twice must not touch freed memory; under
// ASan the second call was a heap-use-after-free.
TEST(CapturePlugin, FinalizingAContextTwiceIsHarmless) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  Plugin plugin(6);
  int mask = 0;
  void* a = plugin.Init(0x31, &mask, "a", 1, 2, 0);
  void* b = plugin.Init(0x32, &mask, "b", 1, 2, 1);
  plugin.Finalize(a);
  plugin.Finalize(a);  // again: ignored
  void* h = plugin.StartColl(b, 0, "AllReduce", 1024, "ncclFloat32", 1);
  plugin.Stop(h);
  plugin.Finalize(b);
  plugin.Finalize(b);
  fs::remove_all(dir);
}

TEST(CapturePlugin, FullDiskDisablesCleanly) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  const std::string dir = MakeTempDir();
  // The log file is a link to /dev/full: open works, every write fails with ENOSPC.
  ASSERT_EQ(symlink("/dev/full", LogPath(dir).c_str()), 0);
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "1000");
  ClearLogs();
  Plugin plugin(5);
  int mask = 0;
  void* ctx = plugin.Init(0x3, &mask, "z", 1, 2, 0);
  EXPECT_NE(mask, 0);
  auto one_op = [&](uint64_t sn) {
    void* h = plugin.StartColl(ctx, sn, "AllReduce", 1024, "ncclFloat32", 1);
    plugin.Stop(h);
    if (h != nullptr) plugin.RunChannel(ctx, h, 0, 100, 5000);
    return h;
  };
  EXPECT_NE(one_op(0), nullptr);
  ASSERT_TRUE(WaitFor([] { return CountLogs(COLLSCOPE_NCCL_LOG_WARN) > 0; }));
  EXPECT_NE(AllLogs().find("No space left"), std::string::npos) << AllLogs();
  // Disabled: new operations are ignored and nothing else is reported.
  EXPECT_EQ(one_op(1), nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  plugin.Finalize(ctx);
  EXPECT_EQ(CountLogs(COLLSCOPE_NCCL_LOG_WARN), 1) << AllLogs();
  fs::remove_all(dir);
}

TEST(CapturePlugin, DisabledByEnvironment) {
  const std::string dir = MakeTempDir() + "/never";
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("COLLSCOPE_ENABLE", "0");
  ClearLogs();
  Plugin plugin(4);
  int mask = -1;
  void* ctx = plugin.Init(0x4, &mask, "q", 1, 2, 0);
  EXPECT_EQ(mask, 0);
  EXPECT_EQ(plugin.StartColl(ctx, 0, "AllReduce", 1, "ncclInt8", 1), nullptr);
  plugin.Finalize(ctx);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(CountLogs(COLLSCOPE_NCCL_LOG_WARN), 0);
  fs::remove_all(fs::path(dir).parent_path());
}

// Tiny ring, no periodic dumps: completions beyond the ring are counted, never block, and the
// drop counts reach the file as a dump_stats line at the final drain.
TEST(CapturePlugin, RingOverflowIsCountedNotBlocking) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "-1");
  env.Set("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE", "4");
  env.Set("COLLSCOPE_INFLIGHT_POOL_SIZE", "2");
  Plugin plugin(6);
  int mask = 0;
  void* ctx = plugin.Init(0x5, &mask, "r", 1, 2, 0);
  for (uint64_t sn = 0; sn < 20; ++sn) {
    void* h = plugin.StartColl(ctx, sn, "AllGather", 256, "ncclFloat16", 1);
    plugin.Stop(h);
    plugin.RunChannel(ctx, h, 0, 10, 2010);
  }
  // In-flight pool of 2: a third concurrent op is untracked (and counted as a drop).
  void* a = plugin.StartColl(ctx, 20, "AllGather", 256, "ncclFloat16", 1);
  void* b = plugin.StartColl(ctx, 21, "AllGather", 256, "ncclFloat16", 1);
  void* c = plugin.StartColl(ctx, 22, "AllGather", 256, "ncclFloat16", 1);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(c, nullptr);
  for (void* h : {a, b}) {
    plugin.Stop(h);
    plugin.RunChannel(ctx, h, 0, 10, 2010);
  }
  plugin.Finalize(ctx);
  Output out;
  ParseOutput(LogPath(dir), &out);
  EXPECT_EQ(out.record_count["0x5"], 4);
  EXPECT_EQ(out.coll_dropped["0x5"], 16u + 2u + 1u);
  fs::remove_all(dir);
}

TEST(CapturePlugin, VerboseSamplingMinSizeAndP2pSwitch) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("NCCL_INSPECTOR_DUMP_VERBOSE", "1");
  env.Set("NCCL_INSPECTOR_ENABLE_P2P", "0");
  env.Set("NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", "4096");
  env.Set("COLLSCOPE_SAMPLE_EVERY", "2");
  env.Set("COLLSCOPE_DUMP_STATS", "off");
  Plugin plugin(5);
  int mask = 0;
  void* ctx = plugin.Init(0x6, &mask, "v", 1, 4, 2);
  EXPECT_EQ(mask, collscope_ncclProfileColl | collscope_ncclProfileKernelCh);
  for (uint64_t sn = 0; sn < 10; ++sn) {
    void* h = plugin.StartColl(ctx, sn, "ReduceScatter", sn < 2 ? 16 : 4096, "ncclFloat32", 2);
    plugin.Stop(h);
    void* c0 = plugin.StartKernelCh(ctx, h, 0, 1000);
    void* c1 = plugin.StartKernelCh(ctx, h, 1, 1500);
    plugin.Record(c1, collscope_ncclProfilerKernelChStop, 7500);
    plugin.Record(c0, collscope_ncclProfilerKernelChStop, 9000);
    plugin.Stop(c0);
    plugin.Stop(c1);
  }
  plugin.Finalize(ctx);
  Output out;
  ParseOutput(LogPath(dir), &out);
  // sn 0,1 are below the minimum size; of the 8 others every second one is kept.
  EXPECT_EQ(out.record_count["0x6"], 4);
  EXPECT_TRUE(out.stats_records.empty());
  for (const auto& [k, l] : out.records) {
    const JVal& perf = (*l)["coll_perf"];
    EXPECT_EQ(perf["coll_exec_time_us"].U(), 8u);
    const JVal& sn = perf["event_trace_sn"];
    EXPECT_EQ(sn.Keys(),
              (std::vector<std::string>{"coll_start_sn", "coll_stop_sn", "kernel_events"}));
    EXPECT_EQ(sn["coll_start_sn"].U(), 1u);
    EXPECT_EQ(sn["coll_stop_sn"].U(), 2u);
    ASSERT_EQ(sn["kernel_events"].arr.size(), 2u);
    const JVal& k0 = sn["kernel_events"].arr[0];
    EXPECT_EQ(k0.Keys(), (std::vector<std::string>{"channel_id", "kernel_start_sn",
                                                   "kernel_stop_sn", "kernel_record_sn"}));
    EXPECT_EQ(k0["kernel_start_sn"].U(), 3u);
    EXPECT_EQ(k0["kernel_record_sn"].U(), 6u);
    EXPECT_EQ(k0["kernel_stop_sn"].U(), 7u);
    const JVal& ts = perf["event_trace_ts"];
    EXPECT_EQ(ts.Keys(),
              (std::vector<std::string>{"coll_start_ts", "coll_stop_ts", "kernel_events"}));
    const JVal& t1 = ts["kernel_events"].arr[1];
    EXPECT_EQ(t1["channel_id"].U(), 1u);
    EXPECT_GE(t1["kernel_stop_ts"].U(), t1["kernel_record_ts"].U());
    EXPECT_GE(t1["kernel_record_ts"].U(), t1["kernel_start_ts"].U());
    EXPECT_GE(t1["kernel_start_ts"].U(), ts["coll_start_ts"].U());
  }
  fs::remove_all(dir);
}

// At the defaults (1 s dumps, 4,096-record rings), a communicator completing 10,000 operations
// a second (8,000 in 0.8 s) overflows its ring before its first dump unless the writer drains
// rings that pass half full.
TEST(CapturePlugin, AFastCommunicatorLosesNothingAtTheDefaults) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Unset("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS");
  env.Unset("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE");
  Plugin plugin(6);
  int mask = 0;
  void* ctx = plugin.Init(0x9, &mask, "fast", 1, 2, 0);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t sn = 0; sn < 8000; ++sn) {
    void* h = plugin.StartColl(ctx, sn, "AllReduce", 4096, "ncclFloat32", 1);
    plugin.Stop(h);
    plugin.RunChannel(ctx, h, 0, 10, 2010);
    if (sn % 10 == 9) std::this_thread::sleep_until(t0 + std::chrono::microseconds(1000 * (sn + 1) / 10));
  }
  plugin.Finalize(ctx);
  Output out;
  ParseOutput(LogPath(dir), &out);
#ifdef COLLSCOPE_SANITIZED
  // Under the sanitizers the writer runs 5-20x slower on cores shared with other tests, so the
  // zero-drop figure is the release build's to check; here every operation is accounted for.
  EXPECT_EQ(out.record_count["0x9"] + static_cast<int>(out.coll_dropped["0x9"]), 8000);
#else
  EXPECT_EQ(out.record_count["0x9"], 8000);
  EXPECT_EQ(out.coll_dropped["0x9"], 0u);
#endif
  fs::remove_all(dir);
}

TEST(CapturePlugin, PeriodicDumpsAppearWhileRunning) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "0");  // continuous
  Plugin plugin(6);
  int mask = 0;
  void* ctx = plugin.Init(0x7, &mask, "p", 1, 2, 0);
  void* h = plugin.StartP2p(ctx, "Send", 1 << 20, "ncclUint8", 1, 2);
  plugin.Stop(h);
  plugin.RunChannel(ctx, h, 0, 100, 100 + 500000);
  plugin.RunChannel(ctx, h, 1, 120, 100 + 400000);
  ASSERT_TRUE(
      WaitFor([&] { return ReadFile(LogPath(dir)).find("p2p_perf") != std::string::npos; }));
  Output out;
  ParseOutput(LogPath(dir), &out);
  ASSERT_EQ(out.record_count["0x7"], 1);
  Expected e;
  e.is_p2p = true;
  e.func = "Send";
  e.bytes = 1 << 20;
  e.exec_us = 500;
  e.nch = 2;
  e.peer = 1;
  e.start_spread = 0.02;
  e.stop_spread = 100.0;
  CheckRecord(*out.records["0x7/p2p/Send/0"], e, 2);
  plugin.Finalize(ctx);
  fs::remove_all(dir);
}

// A process that exits without finalizing its communicators still flushes completed records.
TEST(CapturePlugin, ExitWithoutFinalizeFlushes) {
  const std::string dir = MakeTempDir();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("NCCL_INSPECTOR_DUMP_DIR", dir.c_str(), 1);
    setenv("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "-1", 1);
    void* dl = dlopen(COLLSCOPE_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (dl == nullptr) _exit(2);
    auto* t = static_cast<collscope_ncclProfiler_v5_t*>(dlsym(dl, "ncclProfiler_v5"));
    void* ctx = nullptr;
    int mask = 0;
    t->init(&ctx, 0x8, &mask, "exit", 1, 2, 0, nullptr);
    collscope_ncclProfilerEventDescr_v5_t d{};
    d.type = collscope_ncclProfileColl;
    d.coll.func = "AllReduce";
    d.coll.datatype = "ncclFloat32";
    d.coll.count = 1024;
    d.coll.nChannels = 0;
    void* h = nullptr;
    t->startEvent(ctx, &h, &d);
    t->stopEvent(h);
    exit(0);  // no finalize: the plugin's exit hook must flush
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const std::string base = dir + "/" + Hostname() + "-pid" + std::to_string(child);
  const std::string log = ReadFile(base + ".log");
  EXPECT_NE(log.find("\"coll\":\"AllReduce\""), std::string::npos) << log;
  JVal st;
  ASSERT_TRUE(ParseJson(ReadFile(base + ".inflight.json"), &st));
  EXPECT_EQ(st["status"].text, "exiting");
  fs::remove_all(dir);
}

// fork() with a live runtime (DataLoader workers): the child must neither join the parent's
// writer thread nor write the parent's files, and can start its own runtime.
TEST(CapturePlugin, ForkedChildAbandonsInheritedRuntime) {
#if defined(COLLSCOPE_UNDER_TSAN)
  GTEST_SKIP() << "TSan kills a child of a multi-threaded fork that starts threads";
#endif
#if defined(COLLSCOPE_UNDER_ASAN)
  // ASan's allocator is not fork-safe: the child can inherit its lock held by the parent's
  // writer thread and hang in its first allocation (glibc's malloc resets it at fork).
  GTEST_SKIP() << "ASan's allocator can deadlock in the child of a multi-threaded fork";
#endif
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("COLLSCOPE_STATE_INTERVAL_MS", "5");
  Plugin plugin(6);
  int mask = 0;
  void* ctx = plugin.Init(0x9, &mask, "parent", 1, 2, 0);
  void* inflight = plugin.StartColl(ctx, 0, "AllReduce", 1024, "ncclFloat32", 1);
  plugin.Stop(inflight);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Inherited context: finalize is a no-op (no join of a thread that does not exist here).
    plugin.Finalize(ctx);
    int m = 0;
    void* own = plugin.Init(0x10, &m, "child", 1, 1, 0);
    void* h = plugin.StartColl(own, 0, "Broadcast", 64, "ncclInt8", 0);
    plugin.Stop(h);
    plugin.Finalize(own);
    _exit(m != 0 && own != nullptr ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string child_log = dir + "/" + Hostname() + "-pid" + std::to_string(child) + ".log";
  EXPECT_NE(ReadFile(child_log).find("\"id\":\"0x10\""), std::string::npos);
  EXPECT_EQ(ReadFile(child_log).find("\"id\":\"0x9\""), std::string::npos);
  // The parent is unaffected: its in-flight op is still tracked and then completes.
  ASSERT_TRUE(WaitFor([&] {
    JVal st;
    return ParseJson(ReadFile(StatePath(dir)), &st) && st["comms"].arr.size() == 1 &&
           st["comms"].arr[0]["inflight"].arr.size() == 1;
  }));
  plugin.RunChannel(ctx, inflight, 0, 10, 20010);
  plugin.Finalize(ctx);
  Output out;
  ParseOutput(LogPath(dir), &out);
  EXPECT_EQ(out.record_count["0x9"], 1);
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// Prometheus textfile (NCCL_INSPECTOR_PROM_DUMP=1): NCCL 2.30 Inspector's series, written by the
// writer thread and replaced atomically.

std::string PromPath(const std::string& dir) {
  // No CUDA driver in this process: the file is named after the process, not a GPU UUID.
  return dir + "/nccl_inspector_metrics_" + Hostname() + "-pid" + std::to_string(getpid()) + ".prom";
}

std::vector<std::string> PromFilesIn(const std::string& dir) {
  std::vector<std::string> v;
  if (!fs::exists(dir)) return v;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.find(".prom") != std::string::npos) v.push_back(n);
  }
  return v;
}

const testing::PromSample* FindSample(const testing::PromFile& f, const std::string& name,
                                      const std::map<std::string, std::string>& want) {
  const testing::PromSample* hit = nullptr;
  for (const testing::PromSample* s : f.Named(name)) {
    bool ok = true;
    for (const auto& [k, v] : want) ok = ok && s->Label(k) == v;
    if (ok) {
      EXPECT_EQ(hit, nullptr) << "two series match in " << name;
      hit = s;
    }
  }
  return hit;
}

// One complete operation with one channel timed by GPU timers (exec_ns long); exec_ns 0 leaves
// the channel without GPU timers (kernel_cpu timing).
void RunOp(Plugin& plugin, void* ctx, void* h, uint64_t exec_ns) {
  ASSERT_NE(h, nullptr);
  plugin.Stop(h);
  if (exec_ns == 0) {
    plugin.RunChannel(ctx, h, 0, 0, 0);
  } else {
    plugin.RunChannel(ctx, h, 0, 5000000, 5000000 + exec_ns);
  }
}

uint64_t Inode(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// A scripted job through the ABI: the file carries Inspector 2.30's names, labels and per-window
// aggregates (mean exec time, geometric-mean bus bandwidth), collscope's additions, a new window
// replaces the buckets, and the file is gone after the last finalize.
TEST(CapturePluginProm, TextfileCarriesInspectorSeriesForScriptedCollectives) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("NCCL_INSPECTOR_PROM_DUMP", "1");
  env.Set("NCCL_INSPECTOR_PROM_DUMP_STATS", "1");
  env.Set("COLLSCOPE_PROM_INTERVAL_MS", "1000");  // Inspector's 30 s minimum, shortened for tests
  env.Set("SLURM_JOB_ID", "812");
  env.Set("LOCAL_RANK", "3");
  ClearLogs();
  Plugin plugin(6);
  int mask = 0;
  void* dp = plugin.Init(0xa1, &mask, "dp", 2, 16, 3);
  void* dp2 = plugin.Init(0xc3, &mask, "dp", 2, 16, 5);
  void* pp = plugin.Init(0xb2, &mask, "pp", 2, 2, 0);
  const uint64_t big = 16 * 1048576 + 524288;  // "16-17MB"
  uint64_t sn = 0;
  for (uint64_t us : {100, 200, 400})
    RunOp(plugin, dp, plugin.StartColl(dp, sn++, "AllReduce", big / 4, "ncclFloat32", 1), us * 1000);
  RunOp(plugin, dp, plugin.StartColl(dp, sn++, "AllReduce", big / 4, "ncclFloat32", 1, "TREE", "LL"), 50000);
  RunOp(plugin, dp, plugin.StartColl(dp, sn++, "AllReduce", big / 4, "ncclFloat32", 1), 0);  // kernel_cpu
  RunOp(plugin, dp, plugin.StartColl(dp, 0, "AllGather", 4096, "ncclInt8", 1), 10000);
  RunOp(plugin, dp, plugin.StartColl(dp, 1, "AllGather", 4096, "ncclInt8", 1), 40000);
  RunOp(plugin, dp2, plugin.StartColl(dp2, 0, "AllReduce", big / 4, "ncclFloat32", 1), 200000);
  RunOp(plugin, pp, plugin.StartP2p(pp, "Send", 2621440, "ncclUint8", 1, 1), 50000);
  RunOp(plugin, pp, plugin.StartP2p(pp, "Recv", 2621440, "ncclUint8", 1, 1), 70000);
  void* stuck = plugin.StartColl(pp, 0, "AllReduce", 1024, "ncclFloat32", 1);  // never completes
  plugin.Stop(stuck);

  const std::string path = PromPath(dir);
  ASSERT_TRUE(WaitFor([&] { return fs::exists(path); }, 4000)) << AllLogs();
  const std::string text = ReadFile(path);
  testing::PromFile f;
  ASSERT_EQ(testing::ParsePromText(text, &f), "") << text;

  // Exact line: Inspector's label order and values (mean of 100, 200, 400 and 200 us).
  EXPECT_NE(text.find("nccl_collective_exec_time_microseconds{version=\"v5.1\",slurm_job_id=\"812\",node=\"" +
                      Hostname() +
                      "\",gpu=\"GPU3\",comm_name=\"dp\",n_nodes=\"2\",nranks=\"16\",collective=\"AllReduce\","
                      "message_size=\"16-17MB\",algo_proto=\"RING_SIMPLE\"} 225\n"),
            std::string::npos)
      << text;
  const std::vector<std::string> coll_labels = {"version", "slurm_job_id", "node", "gpu", "comm_name",
                                                "n_nodes", "nranks", "collective", "message_size",
                                                "algo_proto"};
  const std::vector<std::string> p2p_labels = {"version", "slurm_job_id", "node", "gpu", "comm_name",
                                               "n_nodes", "nranks", "p2p_operation", "message_size"};
  ASSERT_EQ(f.Named("nccl_bus_bandwidth_gbs").size(), 3u) << text;
  ASSERT_EQ(f.Named("nccl_collective_exec_time_microseconds").size(), 3u);
  ASSERT_EQ(f.Named("nccl_p2p_bus_bandwidth_gbs").size(), 2u);
  ASSERT_EQ(f.Named("nccl_p2p_exec_time_microseconds").size(), 2u);
  for (const auto& s : f.samples) {
    if (s.name.rfind("nccl_p2p_", 0) == 0 && s.name != "nccl_p2p_total" && s.name != "nccl_p2p_dropped_total") {
      EXPECT_EQ(s.LabelNames(), p2p_labels) << s.line;
    } else if (s.name == "nccl_bus_bandwidth_gbs" || s.name == "nccl_collective_exec_time_microseconds") {
      EXPECT_EQ(s.LabelNames(), coll_labels) << s.line;
    }
    if (s.name.rfind("nccl_", 0) == 0) {
      EXPECT_EQ(s.Label("version"), "v5.1");
      EXPECT_EQ(s.Label("slurm_job_id"), "812");
      EXPECT_EQ(s.Label("node"), Hostname());
      EXPECT_EQ(s.Label("gpu"), "GPU3");
      EXPECT_EQ(f.types.count(s.name), 0u) << "Inspector writes no TYPE lines";
    }
  }
  auto near = [](double got, double want) { EXPECT_NEAR(got, want, want * 1e-5) << want; };
  const auto* ring = FindSample(f, "nccl_bus_bandwidth_gbs", {{"collective", "AllReduce"}, {"algo_proto", "RING_SIMPLE"}});
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->Label("comm_name"), "dp");
  EXPECT_EQ(ring->Label("message_size"), "16-17MB");
  near(ring->value, double(big) / 1e3 / 200 * 30 / 16);  // geometric mean of the 4 is t = 200 us
  const auto* tree = FindSample(f, "nccl_bus_bandwidth_gbs", {{"algo_proto", "TREE_LL"}});
  ASSERT_NE(tree, nullptr);
  near(tree->value, double(big) / 1e3 / 50 * 30 / 16);
  const auto* ag = FindSample(f, "nccl_bus_bandwidth_gbs", {{"collective", "AllGather"}});
  ASSERT_NE(ag, nullptr);
  EXPECT_EQ(ag->Label("message_size"), "4-5KB");
  near(ag->value, 4096.0 * 16 / 1e3 / 20 * 15 / 16);  // AllGather traffic is S x n
  near(FindSample(f, "nccl_collective_exec_time_microseconds", {{"collective", "AllGather"}})->value, 25);
  const auto* send = FindSample(f, "nccl_p2p_bus_bandwidth_gbs", {{"p2p_operation", "Send"}});
  ASSERT_NE(send, nullptr);
  EXPECT_EQ(send->Label("comm_name"), "pp");
  EXPECT_EQ(send->Label("nranks"), "2");
  EXPECT_EQ(send->Label("message_size"), "2-3MB");
  near(send->value, 2621440.0 / 1e3 / 50);
  near(FindSample(f, "nccl_p2p_exec_time_microseconds", {{"p2p_operation", "Recv"}})->value, 70);

  // collscope's additions.
  near(FindSample(f, "collscope_collective_operations", {{"collective", "AllReduce"}, {"algo_proto", "RING_SIMPLE"}})->value, 4);
  near(FindSample(f, "collscope_collective_exec_time_max_seconds", {{"collective", "AllReduce"}, {"algo_proto", "RING_SIMPLE"}})->value, 400e-6);
  EXPECT_EQ(FindSample(f, "collscope_records_total", {{"kind", "coll"}})->value, 8.0);
  EXPECT_EQ(FindSample(f, "collscope_records_total", {{"kind", "p2p"}})->value, 2.0);
  EXPECT_EQ(FindSample(f, "collscope_prometheus_records_excluded_total", {{"reason", "timing_source"}})->value, 1.0);
  EXPECT_EQ(FindSample(f, "nccl_collectives_total", {})->value, 8.0);
  EXPECT_EQ(FindSample(f, "nccl_p2p_dropped_total", {})->value, 0.0);
  EXPECT_EQ(FindSample(f, "collscope_inflight_operations", {{"comm_name", "pp"}})->value, 1.0);
  EXPECT_EQ(FindSample(f, "collscope_inflight_operations", {{"comm_name", "dp"}})->value, 0.0);
  EXPECT_GT(FindSample(f, "collscope_inflight_oldest_age_seconds", {{"comm_name", "pp"}})->value, 0.0);

  // The next window: only its own bucket; totals keep counting; the file was replaced.
  const uint64_t inode = Inode(path);
  RunOp(plugin, dp2, plugin.StartColl(dp2, 1, "AllReduce", big / 4, "ncclFloat32", 1), 1000000);
  testing::PromFile g;
  ASSERT_TRUE(WaitFor([&] {
    g = testing::PromFile();
    return testing::ParsePromText(ReadFile(path), &g).empty() &&
           FindSample(g, "collscope_records_total", {{"kind", "coll"}})->value == 9.0;
  }, 4000));
  ASSERT_EQ(g.Named("nccl_collective_exec_time_microseconds").size(), 1u);
  EXPECT_EQ(g.Named("nccl_collective_exec_time_microseconds")[0]->value, 1000.0);
  EXPECT_TRUE(g.Named("nccl_p2p_exec_time_microseconds").empty());
  EXPECT_NE(Inode(path), inode);
  EXPECT_EQ(CountLogs(COLLSCOPE_NCCL_LOG_WARN), 0) << AllLogs();

  plugin.RunChannel(pp, stuck, 0, 10, 20010);
  for (void* c : {dp, dp2, pp}) plugin.Finalize(c);
  EXPECT_TRUE(PromFilesIn(dir).empty()) << "the file goes away with the plugin, as Inspector's";
  Output out;
  ParseOutput(LogPath(dir), &out);  // the JSON capture is unchanged beside it
  EXPECT_EQ(out.record_count["0xa1"], 7);
  fs::remove_all(dir);
}

// A reader polling the file while the writer rewrites it every 10 ms never sees a partial file,
// and every rewrite is a new file renamed into place (Inspector rewrites in place).
TEST(CapturePluginProm, TextfileIsReplacedAtomically) {
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("NCCL_INSPECTOR_PROM_DUMP", "1");
  env.Set("COLLSCOPE_PROM_INTERVAL_MS", "10");
  Plugin plugin(6);
  int mask = 0;
  void* ctx = plugin.Init(0xd4, &mask, "big", 4, 32, 1);
  std::atomic<bool> done{false};
  std::thread user([&] {
    // Hundreds of size buckets keep the file large (hundreds of KB), so a write in place would
    // be caught half done.
    for (uint64_t sn = 0; !done.load(); ++sn) {
      RunOp(plugin, ctx, plugin.StartColl(ctx, sn, "AllReduce", 256 * (1 + sn % 400), "ncclFloat32", 1),
            1000 + sn % 7000);
      if (sn % 64 == 63) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  const std::string path = PromPath(dir);
  ASSERT_TRUE(WaitFor([&] { return fs::exists(path); }));
  // Inode numbers may be recycled (two can alternate), so count changes, not distinct numbers.
  uint64_t last_inode = 0;
  size_t inode_changes = 0, reads = 0, max_size = 0;
  // The loop ends as soon as it has seen enough; the long deadline is for a loaded machine under
  // TSan, where a rewrite of this file can take over a second (CI once saw only 2 in 6 s).
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(10000 * kSlow);
  while (std::chrono::steady_clock::now() < end && (reads < 100 || inode_changes < 3)) {
    const int fd = open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << "the path must always name a file";
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    if (reads > 0 && static_cast<uint64_t>(st.st_ino) != last_inode) ++inode_changes;
    last_inode = static_cast<uint64_t>(st.st_ino);
    std::string text;
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
    close(fd);
    ++reads;
    max_size = std::max(max_size, text.size());
    // A file caught mid-write is a prefix of the complete one: it lacks the last family (the
    // in-flight ages) or its final newline. Every 32nd read is parsed in full as well.
    ASSERT_FALSE(text.empty()) << "read " << reads << " saw an empty file";
    ASSERT_EQ(text.back(), '\n') << "read " << reads << " saw a partial file";
    const size_t last = text.rfind('\n', text.size() - 2);
    ASSERT_EQ(text.compare(last == std::string::npos ? 0 : last + 1, 38,
                           "collscope_inflight_oldest_age_seconds{"), 0)
        << "read " << reads << " saw a partial file";
    if (reads % 32 == 1) {
      testing::PromFile f;
      ASSERT_EQ(testing::ParsePromText(text, &f), "") << "read " << reads;
    }
  }
  done = true;
  user.join();
  EXPECT_GE(inode_changes, 3u) << "each rewrite must be a new file renamed over the old one";
  EXPECT_GT(max_size, 100000u);
  EXPECT_GT(reads, 10u);
  plugin.Finalize(ctx);
  EXPECT_TRUE(PromFilesIn(dir).empty());
  fs::remove_all(dir);
}

TEST(CapturePluginProm, NoTextfileUnlessEnabled) {
  for (const bool explicit_off : {false, true}) {
    const std::string dir = MakeTempDir();
    ScopedEnv env;
    env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
    if (explicit_off) {
      // Inspector: PROM_DUMP=1 with the interval at -1 writes nothing at all.
      env.Set("NCCL_INSPECTOR_PROM_DUMP", "1");
      env.Set("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "-1");
      env.Unset("COLLSCOPE_PROM_INTERVAL_MS");
    } else {
      env.Unset("NCCL_INSPECTOR_PROM_DUMP");
      env.Set("COLLSCOPE_PROM_INTERVAL_MS", "10");  // a period alone does not turn it on
    }
    Plugin plugin(6);
    int mask = 0;
    void* ctx = plugin.Init(0xe5, &mask, "off", 1, 2, 0);
    RunOp(plugin, ctx, plugin.StartColl(ctx, 0, "AllReduce", 1 << 20, "ncclFloat32", 1), 100000);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(PromFilesIn(dir).empty()) << explicit_off;
    plugin.Finalize(ctx);
    EXPECT_TRUE(PromFilesIn(dir).empty()) << explicit_off;
    EXPECT_TRUE(fs::exists(LogPath(dir)));
    fs::remove_all(dir);
  }
}

// promtool (Debian's prometheus package) parses the file. Its only complaints may be the lint
// about Inspector's own names (no HELP text, microseconds instead of seconds), which collscope
// must keep for NVIDIA's dashboard; collscope's series must lint clean.
TEST(CapturePluginProm, PromtoolAcceptsTheTextfile) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (Debian package 'prometheus'); text-format checks above still ran";
  }
  const std::string dir = MakeTempDir();
  ScopedEnv env;
  env.Set("NCCL_INSPECTOR_DUMP_DIR", dir);
  env.Set("NCCL_INSPECTOR_PROM_DUMP", "1");
  env.Set("NCCL_INSPECTOR_PROM_DUMP_STATS", "1");
  env.Set("COLLSCOPE_PROM_INTERVAL_MS", "50");
  Plugin plugin(6);
  int mask = 0;
  void* a = plugin.Init(0xf6, &mask, "we\"ird\\name", 2, 8, 0);
  void* b = plugin.Init(0xf7, &mask, "pp", 2, 2, 0);
  RunOp(plugin, a, plugin.StartColl(a, 0, "ReduceScatter", 1 << 18, "ncclBfloat16", 1), 30000);
  RunOp(plugin, a, plugin.StartColl(a, 0, "Broadcast", 0, "ncclInt8", 1), 3000);
  RunOp(plugin, b, plugin.StartP2p(b, "Recv", 1 << 22, "ncclUint8", 1, 1), 90000);
  void* stuck = plugin.StartColl(b, 0, "AllReduce", 64, "ncclInt8", 1);
  plugin.Stop(stuck);
  const std::string path = PromPath(dir);
  std::string text;
  ASSERT_TRUE(WaitFor([&] {
    text = ReadFile(path);
    return text.find("nccl_p2p_exec_time_microseconds") != std::string::npos &&
           text.find("Broadcast") != std::string::npos;
  }));
  const std::string copy = dir + "/copy.txt";
  { std::ofstream(copy) << text; }
  plugin.RunChannel(b, stuck, 0, 10, 20010);
  plugin.Finalize(a);
  plugin.Finalize(b);

  FILE* p = popen(("promtool check metrics < '" + copy + "' 2>&1; echo \"rc=$?\"").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, n);
  pclose(p);
  const size_t rc_at = output.rfind("rc=");
  ASSERT_NE(rc_at, std::string::npos) << output;
  const int rc = std::atoi(output.c_str() + rc_at + 3);
  EXPECT_TRUE(rc == 0 || rc == 3) << "promtool could not parse the file (rc " << rc << "):\n" << output << text;
  const std::regex allowed(
      R"(^(nccl_[a-z0-9_]+) (no help text|use base unit "seconds" instead of "microseconds")$)");
  std::istringstream lines(output.substr(0, rc_at));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    EXPECT_TRUE(std::regex_match(line, allowed)) << "promtool: " << line << "\n" << text;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace collscope::capture
