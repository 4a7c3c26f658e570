// In-flight state analysis on hand-built states with known answers, the reader on a document in
// the plugin's schema, and a simulated hang job diagnosed end to end from its state files.
#include "analysis/diagnose/hang.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>

#include "analysis/diagnose/diagnose.h"
#include "sim/sim.h"

namespace collscope::diagnose {
namespace {

InflightOp Coll(const std::string& op, int64_t sn, int64_t bytes, int started, int stopped, int64_t ts = 1000) {
  InflightOp o;
  o.op = op;
  o.sn = sn;
  o.bytes = bytes;
  o.n_channels = 4;
  o.channels_started = started;
  o.channels_stopped = stopped;
  o.start_ts_us = ts;
  o.enqueue_ts_us = ts + 2;
  return o;
}

InflightState Proc(int rank) {
  InflightState s;
  s.hostname = "h" + std::to_string(rank / 2);
  s.pid = 100 + rank;
  s.global_rank = rank;
  s.heartbeat_ts_us = 100'000'000;  // every op below has been in flight for ~100 s
  s.status = "running";
  return s;
}

void AddComm(InflightState* s, const std::string& id, const std::string& name, int rank, int n,
             std::vector<InflightOp> ops) {
  InflightComm c;
  c.id = id;
  c.name = name;
  c.rank = rank;
  c.n_ranks = n;
  c.ops = std::move(ops);
  s->comms.push_back(std::move(c));
}

std::string Ev(const Finding& f, const std::string& key) {
  for (const Evidence& e : f.evidence)
    if (e.key == key) return e.text.empty() ? std::to_string(static_cast<int64_t>(e.value)) : e.text;
  return "<none>";
}

// 4 ranks of one communicator; rank 2 never enters AllReduce #5.
TEST(Inflight, NeverJoinedIsRootOthersVictims) {
  std::vector<InflightState> st;
  for (int r = 0; r < 4; ++r) {
    st.push_back(Proc(r));
    std::vector<InflightOp> ops;
    if (r != 2) ops.push_back(Coll("AllReduce", 5, 1 << 17, 4, r == 3 ? 0 : 2));
    AddComm(&st.back(), "0xd", "dp", r, 4, ops);
  }
  auto f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kHang);
  EXPECT_EQ(f[0].ranks, std::vector<int>{2});
  EXPECT_EQ(f[0].victims, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(f[0].comms, std::vector<std::string>{"0xd"});
  EXPECT_EQ(f[0].hosts, std::vector<std::string>{"h1"});
  EXPECT_EQ(Ev(f[0], "sn"), "5");
  EXPECT_EQ(Ev(f[0], "op"), "AllReduce");
  EXPECT_EQ(Ev(f[0], "never_joined"), "2");
  EXPECT_EQ(Ev(f[0], "partly_transferred_ranks"), "0,1");
  EXPECT_NE(f[0].summary.find("never joined AllReduce #5"), std::string::npos) << f[0].summary;
}

// Ranks 2 and 3 are stuck mid-transfer in their tensor-parallel AllReduce (both joined); their
// data-parallel peers wait for them in their ReduceScatter: rank 3, which finished the fewest
// channels, is the root, stuck, not absent.
TEST(Inflight, StuckMidTransferElsewhereIsRootNotNeverJoined) {
  std::vector<InflightState> st;
  for (int r = 0; r < 4; ++r) st.push_back(Proc(r));
  // dp {1, 3}: rank 1 waits in ReduceScatter #7; rank 3 never got there.
  AddComm(&st[1], "0xd1", "dp", 0, 2, {Coll("ReduceScatter", 7, 4096, 4, 0)});
  AddComm(&st[3], "0xd1", "dp", 1, 2, {});
  // tp {2, 3}: both in AllReduce #40; rank 2 finished 3 channels, rank 3 one.
  AddComm(&st[2], "0xt1", "tp", 0, 2, {Coll("AllReduce", 40, 8192, 4, 3)});
  AddComm(&st[3], "0xt1", "tp", 1, 2, {Coll("AllReduce", 40, 8192, 4, 1)});
  // dp {0, 2}: rank 0 waits in ReduceScatter #7 for rank 2 (stuck in tp behind rank 3).
  AddComm(&st[0], "0xd0", "dp", 0, 2, {Coll("ReduceScatter", 7, 4096, 4, 0)});
  AddComm(&st[2], "0xd0", "dp", 1, 2, {});
  auto f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  // Both tp members joined the tp op, so neither waits on the other: both are stuck in it, one
  // fault; rank 2 finished more channels than rank 3, so it waits for rank 3 and is a victim.
  EXPECT_EQ(f[0].ranks, (std::vector<int>{3}));
  EXPECT_EQ(f[0].victims, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(f[0].comms, (std::vector<std::string>{"0xd0", "0xd1", "0xt1"}));
  EXPECT_EQ(Ev(f[0], "sn"), "40");
  EXPECT_NE(Ev(f[0], "stuck_mid_transfer").find("3 in AllReduce #40"), std::string::npos);
  EXPECT_EQ(Ev(f[0], "never_joined"), "<none>");
  EXPECT_NE(f[0].summary.find("stuck mid-transfer"), std::string::npos) << f[0].summary;
}

// Every member joined and nobody waits elsewhere: the communicator is stuck mid-transfer; the
// member that finished the fewest channels is named.
TEST(Inflight, AllJoinedNoneFinishedIsStuckMidTransfer) {
  std::vector<InflightState> st;
  for (int r = 0; r < 4; ++r) {
    st.push_back(Proc(r));
    AddComm(&st.back(), "0xw", "world", r, 4, {Coll("AllGather", 3, 1 << 20, 4, r == 1 ? 0 : 2)});
  }
  auto f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{1});
  EXPECT_EQ(f[0].victims, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(Ev(f[0], "stuck_mid_transfer"), "0-3 in AllGather #3 (1048576 B) of 0xw");
  EXPECT_NE(f[0].summary.find("none finished"), std::string::npos) << f[0].summary;
  // Equal progress everywhere: no rank or host singled out. Every host is a suspect to check and
  // none is named as the cause.
  for (auto& s : st) s.comms[0].ops[0].channels_stopped = 2;
  f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].ranks.empty());
  EXPECT_TRUE(f[0].hosts.empty());
  EXPECT_EQ(Ev(f[0], kSuspectHosts), "h0, h1");
  EXPECT_EQ(SuspectHosts(f[0]), (std::vector<std::string>{"h0", "h1"}));
  EXPECT_NE(f[0].summary.find("no host is singled out (h0, h1)"), std::string::npos) << f[0].summary;
}

InflightOp P2p(const std::string& op, int peer, int64_t ts = 1000) {
  InflightOp o = Coll(op, 7, 1 << 20, 1, 0, ts);
  o.coll = false;
  o.peer = peer;
  o.n_channels = 1;
  return o;
}

// A dead link on h0: two pipeline transfers through it were posted on both sides and never
// finished; rank 0 also waits for a gradient rank 2 never sent (it is still receiving the
// activation). One finding, on h0, whichever way the waits point.
TEST(Inflight, StuckTransfersShareTheDeadLinksHost) {
  std::vector<InflightState> st;
  for (int r = 0; r < 5; ++r) st.push_back(Proc(r));
  st[1].hostname = "h0";  // ranks 0, 1 on h0; 2 on h1; 4 on h2
  AddComm(&st[0], "0xp1", "pp", 0, 2, {P2p("Send", 1), P2p("Recv", 1)});
  AddComm(&st[2], "0xp1", "pp", 1, 2, {P2p("Recv", 0)});
  AddComm(&st[1], "0xp2", "pp", 0, 2, {P2p("Send", 1)});
  AddComm(&st[4], "0xp2", "pp", 1, 2, {P2p("Recv", 0)});
  // Rank 3 (h1) waits for rank 2 in their tensor-parallel AllReduce.
  AddComm(&st[3], "0xt", "tp", 0, 2, {Coll("AllReduce", 3, 4096, 4, 0)});
  AddComm(&st[2], "0xt", "tp", 1, 2, {});
  auto f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(f[0].hosts, std::vector<std::string>{"h0"});
  EXPECT_EQ(f[0].victims, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(f[0].comms, (std::vector<std::string>{"0xp1", "0xp2", "0xt"}));
  EXPECT_EQ(Ev(f[0], "stuck_transfers"), "2");
  EXPECT_NE(f[0].summary.find("goes through h0"), std::string::npos) << f[0].summary;
}

// Rank 1 issued Broadcast #0 where its peers are in AllReduce #5; rank 3 joined with half the size.
TEST(Inflight, MismatchedOpAndSizeAreRoots) {
  std::vector<InflightState> st;
  for (int r = 0; r < 4; ++r) {
    st.push_back(Proc(r));
    InflightOp o = Coll("AllReduce", 5, 1 << 17, 4, 0);
    if (r == 1) o = Coll("Broadcast", 0, 1 << 17, 4, 0);
    if (r == 3) o.bytes = 1 << 16;
    AddComm(&st.back(), "0xd", "dp", r, 4, {o});
  }
  auto f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(f[0].victims, (std::vector<int>{0, 2}));
  EXPECT_NE(Ev(f[0], "issued_other_op").find("Broadcast #0"), std::string::npos);
  EXPECT_EQ(Ev(f[0], "issued_other_size"), "3 (65536 B)");
}

// Rank 0 enqueued the collective but its GPU never started the kernel (busy in earlier work)
// while its peers' kernels run: it is what they wait on.
TEST(Inflight, KernelNeverStartedIsBehind) {
  std::vector<InflightState> st;
  for (int r = 0; r < 3; ++r) {
    st.push_back(Proc(r));
    AddComm(&st.back(), "0xd", "dp", r, 3, {Coll("AllGather", 9, 4096, r == 0 ? 0 : 4, 0)});
  }
  auto f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{0});
  EXPECT_EQ(f[0].victims, (std::vector<int>{1, 2}));
  EXPECT_EQ(Ev(f[0], "kernel_never_started"), "0");
  // No member has started its kernel: nobody is behind the others; all of them are stuck.
  st[1].comms[0].ops[0].channels_started = 0;
  st[2].comms[0].ops[0].channels_started = 0;
  f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].ranks.empty());
  EXPECT_EQ(f[0].victims, (std::vector<int>{0, 1, 2}));
}

// A pipeline Recv whose sender never posted the matching Send waits on the sender.
TEST(Inflight, PendingRecvWaitsOnItsPeer) {
  std::vector<InflightState> st;
  for (int r = 0; r < 2; ++r) st.push_back(Proc(r));
  InflightOp recv = Coll("Recv", 12, 1 << 20, 1, 0);
  recv.coll = false;
  recv.peer = 0;
  AddComm(&st[1], "0xp", "pp", 1, 2, {recv});
  AddComm(&st[0], "0xp", "pp", 0, 2, {});
  auto f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{0});
  EXPECT_EQ(f[0].victims, std::vector<int>{1});
  EXPECT_EQ(Ev(f[0], "op"), "Recv");
  // With the Send in flight too, both sides joined: no one waits on a peer.
  InflightOp send = recv;
  send.op = "Send";
  send.peer = 1;
  st[0].comms[0].ops = {send};
  f = AnalyzeInflight(st);
  for (const Finding& x : f) EXPECT_TRUE(x.ranks.empty() || x.ranks != std::vector<int>{0}) << x.summary;
}

// Rank 2 left no state file: the finding names its communicator rank, the others are victims.
TEST(Inflight, MemberWithoutStateFileIsNamedByCommRank) {
  std::vector<InflightState> st;
  for (int r : {0, 1, 3}) {
    st.push_back(Proc(r + 10));
    AddComm(&st.back(), "0xd", "dp", r, 4, {Coll("AllReduce", 5, 1 << 17, 4, 0)});
  }
  auto f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].ranks.empty());
  EXPECT_EQ(f[0].victims, (std::vector<int>{10, 11, 13}));
  EXPECT_EQ(Ev(f[0], "comm_ranks_without_state"), "2");
  EXPECT_EQ(Ev(f[0], "sn"), "5");
}

TEST(Inflight, NothingInFlightNoFinding) {
  std::vector<InflightState> st;
  for (int r = 0; r < 4; ++r) {
    st.push_back(Proc(r));
    AddComm(&st.back(), "0xd", "dp", r, 4, {});
  }
  EXPECT_TRUE(AnalyzeInflight(st).empty());
}

// A snapshot of a running job catches members in the normal skew of a collective (rank 2 not
// there yet, 2 ms in): not a hang until the op is old; after an abort, any op still in flight is.
TEST(Inflight, YoungOpsOfARunningJobAreSkewNotHang) {
  std::vector<InflightState> st;
  for (int r = 0; r < 4; ++r) {
    st.push_back(Proc(r));
    std::vector<InflightOp> ops;
    if (r != 2) ops.push_back(Coll("AllReduce", 5, 1 << 17, 4, 0, st.back().heartbeat_ts_us - 2000));
    AddComm(&st.back(), "0xd", "dp", r, 4, ops);
  }
  EXPECT_TRUE(AnalyzeInflight(st).empty());
  InflightOptions any_age;
  any_age.min_age_us = 0;
  EXPECT_EQ(AnalyzeInflight(st, any_age).size(), 1u);
  for (auto& s : st) {
    s.status = "finalized";
    s.comms[0].finalized = true;
  }
  auto f = AnalyzeInflight(st);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{2});
}

TEST(Inflight, ReaderFollowsThePluginSchema) {
  const std::string dir = ::testing::TempDir() + "/inflight_reader";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/node-17-pid4242.inflight.json";
  std::ofstream(path) << R"({"collscope_inflight_version":1,"hostname":"node-17","pid":4242,
    "global_rank":11,"local_rank":3,"gpu":3,"heartbeat_ts_us":1795938158281547,"state_seq":42,
    "status":"running","comms":[{"id":"0x5eed5eed","comm_name":"dp","rank":2,"n_ranks":4,"nnodes":1,
    "ops_started":6,"ops_completed":5,"last_activity_ts_us":1795938158279000,"coll_dropped_total":0,
    "p2p_dropped_total":0,"untracked_total":0,"inflight":[{"kind":"coll","op":"AllReduce","sn":5,
    "peer":-1,"msg_size_bytes":131072,"algo":"RING","proto":"SIMPLE","n_channels":4,
    "start_ts_us":1795938158270000,"enqueue_ts_us":1795938158270004,"age_us":11547,
    "n_channels_started":4,"n_channels_stopped":2,"channels_started":[0,1,2,3],
    "channels_stopped":[0,1],"proxy":[]}]}],
    "finalized_comms":[{"id":"0xabc","comm_name":"tp","rank":0,"n_ranks":2,"nnodes":1,"ops_started":1,
    "ops_completed":0,"last_activity_ts_us":1,"coll_dropped_total":0,"p2p_dropped_total":0,
    "untracked_total":0,"inflight":[],"finalize_ts_us":5}]})";
  auto s = readers::ReadInflightState(path);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->hostname, "node-17");
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->global_rank, 11);
  EXPECT_EQ(s->heartbeat_ts_us, 1795938158281547);
  ASSERT_EQ(s->comms.size(), 2u);
  EXPECT_FALSE(s->comms[0].finalized);
  EXPECT_TRUE(s->comms[1].finalized);
  EXPECT_EQ(s->comms[0].ops_completed, 5u);
  ASSERT_EQ(s->comms[0].ops.size(), 1u);
  const InflightOp& o = s->comms[0].ops[0];
  EXPECT_TRUE(o.coll);
  EXPECT_EQ(o.sn, 5);
  EXPECT_EQ(o.bytes, 131072);
  EXPECT_EQ(o.channels_started, 4);
  EXPECT_EQ(o.channels_stopped, 2);
  EXPECT_EQ(o.enqueue_ts_us, 1795938158270004);
  // Other JSON documents are refused, not misread.
  std::ofstream(dir + "/x.inflight.json") << R"({"traceEvents":[]})";
  EXPECT_FALSE(readers::ReadInflightState(dir + "/x.inflight.json").ok());
  std::filesystem::remove_all(dir);
}

// The records' hang guess (from a store) and the state files' finding about the same hang, put
// together by `collscope diagnose --db job.duckdb STATE_FILES...`, come out as one finding.
TEST(Inflight, ConsolidateKeepsOneHangFinding) {
  Finding records;
  records.kind = Kind::kHang;
  records.detector = "comm.progress";
  records.confidence = 0.7;
  records.victims = {0, 1, 2, 3};
  records.comms = {"0xd"};
  std::vector<InflightState> st;
  for (int r = 0; r < 4; ++r) {
    st.push_back(Proc(r));
    std::vector<InflightOp> ops;
    if (r != 2) ops.push_back(Coll("AllReduce", 5, 1 << 17, 4, 0));
    AddComm(&st.back(), "0xd", "dp", r, 4, ops);
  }
  std::vector<Finding> all = {records};
  for (Finding& f : AnalyzeInflight(st)) all.push_back(f);
  Finding other;
  other.kind = Kind::kSlowLink;
  other.detector = "comm.slow_link";
  all.push_back(other);
  Consolidate(&all);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].detector, "inflight.state");
  EXPECT_EQ(all[0].ranks, std::vector<int>{2});
  EXPECT_EQ(Ev(all[0], "also_detected_by"), "comm.progress");
  EXPECT_EQ(all[1].kind, Kind::kSlowLink);
  // Flight Recorder blaming the same rank: still one finding, naming both detectors.
  Finding fr;
  fr.kind = Kind::kHang;
  fr.detector = "flight_recorder.wait_graph";
  fr.confidence = 0.95;
  fr.ranks = {2};
  fr.comms = {"74"};
  all.push_back(fr);
  Consolidate(&all);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].ranks, std::vector<int>{2});
  EXPECT_EQ(all[0].comms, (std::vector<std::string>{"0xd", "74"}));
  EXPECT_NE(Ev(all[0], "also_detected_by").find("flight_recorder.wait_graph"), std::string::npos)
      << Ev(all[0], "also_detected_by");
  // Without a finding that names the root cause, the records' guess stays.
  std::vector<Finding> only = {records};
  Consolidate(&only);
  EXPECT_EQ(only.size(), 1u);
}

// A simulated job with one fault, diagnosed from its nccl-inspector directory (records and state
// files). Returns the ground truth's fault and the hang findings.
struct SimHang {
  std::vector<int> truth_ranks;
  std::string truth_comm;
  int64_t truth_sn = -1;
  std::vector<Finding> hangs;
};
SimHang RunSimHang(const std::string& name, const std::string& fault, bool state_files) {
  sim::SimConfig c;
  c.output.dir = ::testing::TempDir() + "/hang_sim_" + name;
  std::filesystem::remove_all(c.output.dir);
  c.cluster.hosts = 2;
  c.cluster.gpus_per_host = 8;
  c.parallel.tp = 2;
  c.parallel.pp = 2;
  c.workload.layers = 4;
  c.workload.steps = 8;
  c.hang_timeout_s = 30;
  c.output.inflight_state = state_files;
  sim::FaultSpec f;
  std::string err;
  EXPECT_EQ(sim::ParseFaultSpec(fault, &f).message(), "");
  c.faults.push_back(f);
  sim::SimStats stats;
  EXPECT_EQ(sim::Simulate(c, &stats).message(), "");
  SimHang out;
  simdjson::dom::parser parser;
  simdjson::dom::element gt = parser.load(c.output.dir + "/ground_truth.json");
  simdjson::dom::element fl = gt["faults"].at(0);
  for (simdjson::dom::element r : fl["ranks"].get_array()) out.truth_ranks.push_back(static_cast<int>(r.get_int64().value()));
  out.truth_comm = std::string(fl["comms"].at(0).get_string().value());
  int64_t sn = -1;
  if (!fl["resolved"]["coll_sn"].get_int64().get(sn)) out.truth_sn = sn;
  auto found = DiagnosePaths({c.output.dir + "/nccl-inspector"}, DiagnoseOptions{}, nullptr);
  EXPECT_TRUE(found.ok()) << found.status().message();
  if (found.ok())
    for (const Finding& x : *found)
      if (x.kind == Kind::kHang) out.hangs.push_back(x);
  std::filesystem::remove_all(c.output.dir);
  return out;
}

// The rank that never arrives is named, with the collective it never joined; records and state
// files about the one hang make one finding.
TEST(InflightSim, HangNamesTheRankThatNeverJoined) {
  for (const char* fault : {"kind=hang,rank=6,comm=dp,start_step=3", "kind=hang,rank=3,comm=tp,start_step=2",
                            "kind=hang,rank=12,comm=tp,op=AllReduce,coll_sn=40"}) {
    SCOPED_TRACE(fault);
    SimHang h = RunSimHang("hang", fault, true);
    ASSERT_EQ(h.hangs.size(), 1u);
    const Finding& f = h.hangs[0];
    EXPECT_EQ(f.detector, "inflight.state");
    EXPECT_EQ(f.ranks, h.truth_ranks);
    EXPECT_NE(std::find(f.comms.begin(), f.comms.end(), h.truth_comm), f.comms.end());
    EXPECT_EQ(Ev(f, "sn"), std::to_string(h.truth_sn));
    EXPECT_EQ(Ev(f, "never_joined"), std::to_string(h.truth_ranks.at(0)));
    EXPECT_EQ(f.victims.size(), 15u);
  }
}

// Two groups that never joined two communicators' collectives at once are one hang, not two
// culprits: one finding naming both, each at a chance of one in two.
TEST(Inflight, GroupsThatNeverJoinedAtOnceAreOneHang) {
  std::vector<InflightState> st;
  for (int r = 0; r < 8; ++r) {
    st.push_back(Proc(r));
    std::vector<InflightOp> ops;
    if (r != 2 && r != 6) ops.push_back(Coll("AllReduce", r < 4 ? 5 : 9, 1 << 17, 4, 0));
    AddComm(&st.back(), r < 4 ? "0xa" : "0xb", "dp", r % 4, 4, ops);
  }
  auto fs = AnalyzeInflight(st);
  ASSERT_EQ(fs.size(), 1u) << FindingsToText(fs);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({2, 6}));
  EXPECT_EQ(Ev(fs[0], "never_joined_groups"), "2");
  EXPECT_LT(fs[0].confidence, 0.5);
  EXPECT_NE(fs[0].summary.find("2 groups of ranks (2; 6) never joined"), std::string::npos) << fs[0].summary;
}

// Three groups never joined at once: rank 5 stopped where its host mate (rank 4, the same
// tensor-parallel pair) moved on into AllReduce #8; ranks 0 and 1 stopped level with each other,
// their pair's every operation done, waiting on a shared input. The hang began at rank 5, and
// ranks 0 and 1 are blocked behind it. Had rank 1 moved on past rank 0, two groups would have
// stopped on their own, and the one finding would name all three as before.
TEST(Inflight, TheGroupThatStoppedWhereAHostMateMovedOnIsWhereTheHangBegan) {
  for (const bool rank1_moved_on : {false, true}) {
    std::vector<InflightState> st;
    for (int r = 0; r < 8; ++r) st.push_back(Proc(r));  // two ranks a host
    auto tp = [&](int r, uint64_t started, uint64_t completed, std::vector<InflightOp> ops) {
      AddComm(&st[r], "0xt" + std::to_string(r / 2), "tp", r % 2, 2, std::move(ops));
      st[r].comms.back().ops_started = started;
      st[r].comms.back().ops_completed = completed;
    };
    tp(0, 10, 10, {});
    tp(1, rank1_moved_on ? 11 : 10, 10, {});
    tp(2, 10, 10, {});
    tp(3, 10, 10, {});
    tp(4, 9, 8, {Coll("AllReduce", 8, 1 << 17, 4, 0)});
    tp(5, 8, 8, {});
    tp(6, 10, 10, {});
    tp(7, 10, 10, {});
    // Data-parallel pairs across hosts: ranks 2 and 3 wait in AllReduce #3 for ranks 0 and 1.
    for (int r : {0, 1, 2, 3})
      AddComm(&st[r], "0xd" + std::to_string(r % 2), "dp", r / 2, 2,
              r >= 2 ? std::vector<InflightOp>{Coll("AllReduce", 3, 1 << 20, 4, 0)} : std::vector<InflightOp>{});
    auto fs = AnalyzeInflight(st);
    ASSERT_EQ(fs.size(), 1u) << FindingsToText(fs);
    if (rank1_moved_on) {
      EXPECT_EQ(fs[0].ranks, std::vector<int>({0, 1, 5})) << FindingsToText(fs);
      EXPECT_EQ(Ev(fs[0], "never_joined_groups"), "3");
      continue;
    }
    EXPECT_EQ(fs[0].ranks, std::vector<int>({5})) << FindingsToText(fs);
    EXPECT_EQ(Ev(fs[0], "stopped_behind_it"), "0,1");
    EXPECT_EQ(fs[0].victims, std::vector<int>({0, 1, 2, 3, 4})) << FindingsToText(fs);
    EXPECT_GT(fs[0].confidence, 0.5);
  }
}

// Without the state files, completion records cannot name the rank (the finding this replaces).
TEST(InflightSim, RecordsAloneCannotNameTheRank) {
  SimHang h = RunSimHang("records_only", "kind=hang,rank=6,comm=dp,start_step=3", false);
  ASSERT_EQ(h.hangs.size(), 1u);
  EXPECT_EQ(h.hangs[0].detector, "comm.progress");
  EXPECT_TRUE(h.hangs[0].ranks.empty());
  // The stopped communicators' members are suspects, the rank that never joined among them; none
  // of them is called a victim.
  EXPECT_TRUE(h.hangs[0].victims.empty()) << FindingsToText(h.hangs);
  // The suspects are the members of the stopped communicators, the hung one among them.
  const std::string suspects = Ev(h.hangs[0], "suspects");
  EXPECT_NE(suspects, "<none>") << FindingsToText(h.hangs);
  EXPECT_NE(suspects, "0") << "no suspect: " << FindingsToText(h.hangs);
  EXPECT_NE(std::find(h.hangs[0].comms.begin(), h.hangs[0].comms.end(), h.truth_comm), h.hangs[0].comms.end())
      << FindingsToText(h.hangs);
  EXPECT_NE(h.hangs[0].summary.find("of ranks " + suspects + " stopped"), std::string::npos) << h.hangs[0].summary;
}

// A size mismatch that hangs names the rank that issued the other size; a dead link leaves every
// transfer through it stuck mid-transfer, on the failed host among others.
TEST(InflightSim, MismatchAndLinkDown) {
  SimHang m = RunSimHang("mismatch", "kind=mismatch,rank=5,comm=tp,start_step=2,size_factor=2,effect=hang", true);
  ASSERT_EQ(m.hangs.size(), 1u);
  EXPECT_EQ(m.hangs[0].ranks, m.truth_ranks);
  EXPECT_NE(Ev(m.hangs[0], "issued_other_size"), "<none>");
  SimHang l = RunSimHang("link_down", "kind=link_down,host=1,start_step=3", true);
  ASSERT_EQ(l.hangs.size(), 1u);
  EXPECT_EQ(l.hangs[0].detector, "inflight.state");
  EXPECT_NE(std::find(l.hangs[0].comms.begin(), l.hangs[0].comms.end(), l.truth_comm), l.hangs[0].comms.end());
  // Both ends of each stuck pipeline transfer joined it: the dead link's host is a suspect, with
  // its partner, and neither is named as the cause.
  const std::vector<std::string> suspects = SuspectHosts(l.hangs[0]);
  EXPECT_NE(std::find(suspects.begin(), suspects.end(), "node-001"), suspects.end()) << Ev(l.hangs[0], kSuspectHosts);
  EXPECT_TRUE(l.hangs[0].hosts.empty());
  EXPECT_NE(l.hangs[0].summary.find("stuck mid-transfer"), std::string::npos) << l.hangs[0].summary;
}

}  // namespace
}  // namespace collscope::diagnose
