// capture -> state files -> diagnosis: drives the built NCCL profiler plugin through its v6 ABI as
// NCCL does, one private copy of the .so per simulated rank (each copy has its own runtime, as
// each process would), leaves a hang in flight, lets the plugin write its in-flight state files,
// and checks what `collscope diagnose` concludes from that directory: while the job hangs, and
// after the watchdog aborted every communicator.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/hang.h"
#include "capture/nccl/profiler_abi.h"
#include "sim/sim.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

namespace fs = std::filesystem;
using diagnose::Finding;

void QuietLogger(collscope_ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

// One rank: its own copy of the plugin, loaded with the environment a launcher would give it.
class Rank {
 public:
  Rank(const std::string& root, int rank) : rank_(rank) {
    const std::string dir = root + "/rank" + std::to_string(rank);
    fs::create_directories(dir);
    so_ = dir + "/libnccl-profiler-collscope.so";
    fs::copy_file(COLLSCOPE_PLUGIN_PATH, so_);
    out_ = root + "/logs/rank" + std::to_string(rank);
    lib_ = dlopen(so_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib_) table_ = static_cast<collscope_ncclProfiler_v6_t*>(dlsym(lib_, "ncclProfiler_v6"));
  }
  ~Rank() {
    for (void* c : ctxs_)
      if (c) table_->finalize(c);
    if (lib_) dlclose(lib_);
  }
  bool ok() const { return table_ != nullptr; }
  const std::string& out() const { return out_; }

  // ncclCommInitRank: the runtime reads its environment at the first init of this copy.
  int Init(uint64_t id, const char* name, int nranks, int comm_rank) {
    setenv("NCCL_INSPECTOR_DUMP_DIR", out_.c_str(), 1);
    setenv("RANK", std::to_string(rank_).c_str(), 1);
    setenv("COLLSCOPE_STATE_INTERVAL_MS", "10", 1);
    setenv("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "5000", 1);
    void* ctx = nullptr;
    int mask = 0;
    table_->init(&ctx, id, &mask, name, 1, nranks, comm_rank, QuietLogger);
    ctxs_.push_back(ctx);
    return static_cast<int>(ctxs_.size()) - 1;
  }
  // Host side of a collective: NCCL starts the Coll event and stops it once enqueued.
  void* Enter(int comm, uint64_t sn, const char* func, size_t count, uint8_t channels) {
    collscope_ncclProfilerEventDescr_v6_t d{};
    d.type = collscope_ncclProfileColl;
    d.rank = rank_;
    d.coll.seqNumber = sn;
    d.coll.func = func;
    d.coll.count = count;
    d.coll.datatype = "ncclBfloat16";
    d.coll.nChannels = channels;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    void* h = nullptr;
    table_->startEvent(ctxs_[comm], &h, &d);
    table_->stopEvent(h);
    return h;
  }
  // The proxy thread sees a channel of the kernel start; `finish` also delivers its stop.
  void Channel(int comm, void* coll, uint8_t ch, bool finish) {
    collscope_ncclProfilerEventDescr_v6_t d{};
    d.type = collscope_ncclProfileKernelCh;
    d.parentObj = coll;
    d.kernelCh.channelId = ch;
    d.kernelCh.pTimer = 1'000'000'000ull + ch;
    void* h = nullptr;
    table_->startEvent(ctxs_[comm], &h, &d);
    if (!finish) return;
    collscope_ncclProfilerEventStateArgs_t a{};
    a.kernelCh.pTimer = d.kernelCh.pTimer + 50'000;
    table_->recordEventState(h, collscope_ncclProfilerKernelChStop, &a);
    table_->stopEvent(h);
  }
  void Complete(int comm, uint64_t sn, const char* func, size_t count, uint8_t channels) {
    void* h = Enter(comm, sn, func, count, channels);
    for (uint8_t c = 0; c < channels; ++c) Channel(comm, h, c, true);
  }
  // ncclCommAbort of every communicator (the watchdog after its timeout).
  void AbortAll() {
    for (void*& c : ctxs_) {
      table_->finalize(c);
      c = nullptr;
    }
  }

 private:
  int rank_;
  std::string so_, out_;
  void* lib_ = nullptr;
  collscope_ncclProfiler_v6_t* table_ = nullptr;
  std::vector<void*> ctxs_;
};

// The rank's state file once it shows `want` ops in flight in total (the writer runs every 10 ms).
bool WaitForInflight(const std::string& dir, size_t want) {
  for (int i = 0; i < 500; ++i) {
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir, ec)) {
      if (!e.path().string().ends_with(".inflight.json") || e.path().filename().string()[0] == '.') continue;
      auto st = readers::ReadInflightState(e.path().string());
      if (!st.ok()) continue;
      size_t n = 0;
      for (const auto& c : st->comms) n += c.ops.size();
      if (n == want && !st->comms.empty()) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::vector<Finding> HangFindings(const std::string& dir) {
  auto f = diagnose::DiagnosePaths({dir}, diagnose::DiagnoseOptions{}, nullptr);
  EXPECT_TRUE(f.ok()) << f.status().message();
  std::vector<Finding> out;
  if (f.ok())
    for (const Finding& x : *f)
      if (x.kind == diagnose::Kind::kHang) out.push_back(x);
  return out;
}

std::vector<diagnose::InflightState> ReadStates(const std::string& dir) {
  std::vector<diagnose::InflightState> out;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".inflight.json") || name[0] == '.') continue;
    auto st = readers::ReadInflightState(e.path().string());
    EXPECT_TRUE(st.ok()) << st.status().message();
    if (st.ok()) out.push_back(std::move(*st));
  }
  return out;
}

std::string Ev(const Finding& f, const std::string& key) {
  for (const auto& e : f.evidence)
    if (e.key == key) return e.text.empty() ? std::to_string(static_cast<int64_t>(e.value)) : e.text;
  return "<none>";
}

// docs/capture.md's scenario: 4 ranks of one communicator; AllReduce 0-4 complete; rank 2 never
// enters AllReduce #5, ranks 0 and 1 finish two of its four channels.
TEST(PluginHang, RankThatNeverJoinedIsTheRootCause) {
  testing::TempDir root;
  constexpr uint64_t kComm = 0x5eed5eedull;
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(std::make_unique<Rank>(root.str(), r));
    ASSERT_TRUE(ranks.back()->ok()) << dlerror();
    ranks.back()->Init(kComm, "dp", 4, r);
  }
  for (uint64_t sn = 0; sn < 5; ++sn)
    for (auto& r : ranks) r->Complete(0, sn, "AllReduce", 65536, 4);
  for (int r : {0, 1, 3}) {
    void* h = ranks[r]->Enter(0, 5, "AllReduce", 65536, 4);
    for (uint8_t c = 0; c < 4; ++c) ranks[r]->Channel(0, h, c, r != 3 && c < 2);
  }
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(WaitForInflight(ranks[r]->out(), r == 2 ? 0 : 1)) << r;

  // While the job hangs the ops are milliseconds old: `collscope diagnose` takes that for the
  // normal skew of a running job; with no minimum age the live files already tell the hang.
  EXPECT_TRUE(HangFindings(root / "logs").empty());
  auto check = [&](const char* when, bool live) {
    SCOPED_TRACE(when);
    std::vector<Finding> f;
    if (live) {
      diagnose::InflightOptions any_age;
      any_age.min_age_us = 0;
      f = diagnose::AnalyzeInflight(ReadStates(root / "logs"), any_age);
    } else {
      f = HangFindings(root / "logs");
    }
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].detector, "inflight.state");
    EXPECT_EQ(f[0].ranks, std::vector<int>{2});
    EXPECT_EQ(f[0].victims, (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(f[0].comms, std::vector<std::string>{"0x5eed5eed"});
    EXPECT_EQ(Ev(f[0], "op"), "AllReduce");
    EXPECT_EQ(Ev(f[0], "sn"), "5");
    EXPECT_EQ(Ev(f[0], "msg_size_bytes"), "131072");  // 65536 bf16
    EXPECT_EQ(Ev(f[0], "never_joined"), "2");
    EXPECT_EQ(Ev(f[0], "partly_transferred_ranks"), "0,1");
    EXPECT_EQ(Ev(f[0], "comm_name"), "dp");
    EXPECT_NE(f[0].summary.find("Rank 2 never joined AllReduce #5"), std::string::npos) << f[0].summary;
  };
  check("while hung", true);
  // The watchdog aborts every communicator: the last state is "finalized", and rank 2's file must
  // still say it is member 2 of the communicator (with nothing in flight).
  for (auto& r : ranks) r->AbortAll();
  check("after abort", false);
}

// Keys, in order, of the top level, of the first finalized communicator and of its first op.
std::vector<std::vector<std::string>> KeyOrder(const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element d = parser.load(path);
  std::vector<std::vector<std::string>> out(3);
  for (auto [k, v] : d.get_object()) out[0].emplace_back(k);
  simdjson::dom::element c = d["finalized_comms"].at(0);
  for (auto [k, v] : c.get_object()) out[1].emplace_back(k);
  for (auto [k, v] : c["inflight"].at(0).get_object()) out[2].emplace_back(k);
  return out;
}

// The simulator's state files follow the plugin's schema key for key: a simulated hang and the
// plugin's own files after the same kind of hang and abort.
TEST(PluginHang, SimulatorWritesThePluginsSchema) {
  testing::TempDir root;
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<Rank>(root.str(), r));
    ASSERT_TRUE(ranks.back()->ok()) << dlerror();
    ranks.back()->Init(0xabc, "dp", 2, r);
  }
  for (auto& r : ranks) r->Complete(0, 0, "AllReduce", 4096, 2);
  void* h = ranks[0]->Enter(0, 1, "AllReduce", 4096, 2);
  for (uint8_t c = 0; c < 2; ++c) ranks[0]->Channel(0, h, c, false);
  ASSERT_TRUE(WaitForInflight(ranks[0]->out(), 1));
  for (auto& r : ranks) r->AbortAll();
  std::string plugin_file;
  for (auto& e : fs::directory_iterator(ranks[0]->out()))
    if (e.path().string().ends_with(".inflight.json")) plugin_file = e.path().string();
  ASSERT_FALSE(plugin_file.empty());

  sim::SimConfig c;
  c.output.dir = root / "sim";
  c.cluster.hosts = 1;
  c.cluster.gpus_per_host = 4;
  c.parallel.tp = 2;
  c.parallel.pp = 1;
  c.workload.layers = 2;
  c.workload.steps = 3;
  c.hang_timeout_s = 30;
  sim::FaultSpec f;
  std::string err;
  ASSERT_EQ(sim::ParseFaultSpec("kind=hang,rank=1,comm=dp,start_step=1", &f).message(), "");
  c.faults.push_back(f);
  sim::SimStats stats;
  ASSERT_EQ(sim::Simulate(c, &stats).message(), "");
  // Rank 0 is a member of the hung dp communicator that entered the collective.
  std::string sim_file;
  for (auto& e : fs::directory_iterator(c.output.dir + "/nccl-inspector")) {
    if (!e.path().string().ends_with(".inflight.json")) continue;
    auto st = readers::ReadInflightState(e.path().string());
    ASSERT_TRUE(st.ok()) << st.status().message();
    if (st->global_rank == 0) sim_file = e.path().string();
  }
  ASSERT_FALSE(sim_file.empty());
  // The simulated first communicator is the world one; find one with an op in flight.
  simdjson::dom::parser parser;
  simdjson::dom::element d = parser.load(sim_file);
  bool any = false;
  for (simdjson::dom::element cm : d["finalized_comms"].get_array()) any |= cm["inflight"].get_array().size() > 0;
  ASSERT_TRUE(any);
  auto plugin_keys = KeyOrder(plugin_file);
  // Top level and communicator keys are fixed; compare an op from whichever simulated
  // communicator has one.
  std::vector<std::vector<std::string>> sim_keys(3);
  for (auto [k, v] : d.get_object()) sim_keys[0].emplace_back(k);
  for (simdjson::dom::element cm : d["finalized_comms"].get_array()) {
    if (sim_keys[1].empty())
      for (auto [k, v] : cm.get_object()) sim_keys[1].emplace_back(k);
    if (sim_keys[2].empty() && cm["inflight"].get_array().size() > 0)
      for (auto [k, v] : cm["inflight"].at(0).get_object()) sim_keys[2].emplace_back(k);
  }
  EXPECT_EQ(sim_keys[0], plugin_keys[0]);
  EXPECT_EQ(sim_keys[1], plugin_keys[1]);
  EXPECT_EQ(sim_keys[2], plugin_keys[2]);
}

// Rank 3 entered tensor-parallel AllReduce #3 with rank 2 but only one of its four channels
// finished (rank 2 finished three); their data-parallel peers 0 and 1 wait for them in
// ReduceScatter #0. Rank 3 is stuck mid-transfer, not absent.
TEST(PluginHang, StuckMidTransferIsNotNeverJoined) {
  testing::TempDir root;
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(std::make_unique<Rank>(root.str(), r));
    ASSERT_TRUE(ranks.back()->ok()) << dlerror();
    ranks.back()->Init(r < 2 ? 0x71 : 0x72, "tp", 2, r % 2);     // comm index 0
    ranks.back()->Init(r % 2 ? 0xd1 : 0xd0, "dp", 2, r / 2);     // comm index 1
  }
  for (uint64_t sn = 0; sn < 3; ++sn)
    for (auto& r : ranks) r->Complete(0, sn, "AllReduce", 1 << 20, 4);
  for (int r : {0, 1}) {
    ranks[r]->Complete(0, 3, "AllReduce", 1 << 20, 4);
    void* h = ranks[r]->Enter(1, 0, "ReduceScatter", 1 << 18, 4);
    for (uint8_t c = 0; c < 4; ++c) ranks[r]->Channel(1, h, c, false);
  }
  for (int r : {2, 3}) {
    void* h = ranks[r]->Enter(0, 3, "AllReduce", 1 << 20, 4);
    for (uint8_t c = 0; c < 4; ++c) ranks[r]->Channel(0, h, c, c < (r == 2 ? 3 : 1));
  }
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(WaitForInflight(ranks[r]->out(), 1)) << r;
  diagnose::InflightOptions any_age;
  any_age.min_age_us = 0;
  auto f = diagnose::AnalyzeInflight(ReadStates(root / "logs"), any_age);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{3});
  EXPECT_EQ(f[0].victims, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(f[0].comms, (std::vector<std::string>{"0x72", "0xd0", "0xd1"}));
  EXPECT_EQ(Ev(f[0], "op"), "AllReduce");
  EXPECT_EQ(Ev(f[0], "sn"), "3");
  EXPECT_EQ(Ev(f[0], "never_joined"), "<none>");
  EXPECT_NE(Ev(f[0], "stuck_mid_transfer").find("3 in AllReduce #3"), std::string::npos) << Ev(f[0], "stuck_mid_transfer");
  EXPECT_NE(f[0].summary.find("stuck mid-transfer"), std::string::npos) << f[0].summary;
  for (auto& r : ranks) r->AbortAll();
  f = HangFindings(root / "logs");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{3});
}

}  // namespace
}  // namespace collscope
