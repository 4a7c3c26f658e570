#include "core/readers/hang_evidence.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_util.h"

namespace collscope::readers {
namespace {

// A state file with one communicator in flight and one finalized, every field set.
std::string StateFile(const std::string& host, int rank, int64_t sn) {
  return R"({"collscope_inflight_version":1,"hostname":")" + host + R"(","pid":4242,"global_rank":)" +
         std::to_string(rank) + R"(,"status":"running","heartbeat_ts_us":1795938158281547,
    "comms":[{"id":"0x1f","comm_name":"dp","rank":1,"n_ranks":4,"ops_started":9,"ops_completed":7,
      "inflight":[{"kind":"coll","op":"AllReduce","sn":)" + std::to_string(sn) + R"(,"peer":-1,
        "msg_size_bytes":131072,"n_channels":4,"start_ts_us":1795938158270000,
        "enqueue_ts_us":1795938158270004,"n_channels_started":4,"n_channels_stopped":2},
       {"kind":"p2p","op":"Send","sn":3,"peer":2,"msg_size_bytes":4096,"n_channels":1,
        "start_ts_us":0,"enqueue_ts_us":17,"n_channels_started":0,"n_channels_stopped":0}]}],
    "finalized_comms":[{"id":"0xabc","comm_name":"","rank":0,"n_ranks":2,"ops_started":1,
      "ops_completed":0,"inflight":[]}]})";
}

void ExpectSameState(const InflightState& a, const InflightState& b) {
  EXPECT_EQ(a.hostname, b.hostname);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.global_rank, b.global_rank);
  EXPECT_EQ(a.heartbeat_ts_us, b.heartbeat_ts_us);
  ASSERT_EQ(a.comms.size(), b.comms.size());
  for (size_t c = 0; c < a.comms.size(); ++c) {
    const InflightComm &x = a.comms[c], &y = b.comms[c];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.n_ranks, y.n_ranks);
    EXPECT_EQ(x.ops_started, y.ops_started);
    EXPECT_EQ(x.ops_completed, y.ops_completed);
    EXPECT_EQ(x.finalized, y.finalized);
    ASSERT_EQ(x.ops.size(), y.ops.size());
    for (size_t k = 0; k < x.ops.size(); ++k) {
      const InflightOp &o = x.ops[k], &p = y.ops[k];
      EXPECT_EQ(o.coll, p.coll);
      EXPECT_EQ(o.op, p.op);
      EXPECT_EQ(o.sn, p.sn);
      EXPECT_EQ(o.peer, p.peer);
      EXPECT_EQ(o.bytes, p.bytes);
      EXPECT_EQ(o.n_channels, p.n_channels);
      EXPECT_EQ(o.channels_started, p.channels_started);
      EXPECT_EQ(o.channels_stopped, p.channels_stopped);
      EXPECT_EQ(o.start_ts_us, p.start_ts_us);
      EXPECT_EQ(o.enqueue_ts_us, p.enqueue_ts_us);
    }
  }
}

TEST(HangEvidence, StateFilesComeBackFromTheStoreAsTheyWereReadAndAReadAgainReplaces) {
  testing::TempDir dir;
  testing::WriteFile(dir / "a/node-1-pid1.inflight.json", StateFile("node-1", 5, 8));
  testing::WriteFile(dir / "a/node-2-pid2.inflight.json", StateFile("node-2", 6, 8));
  testing::WriteFile(dir / "a/node-3-pid3.inflight.json", R"({"collscope_inflight_version":2})");
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto rep = IngestHangEvidence(**store, {dir / "a"}, "job");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->states_seen, 3u);
  EXPECT_EQ(rep->states_read, 2u);
  ASSERT_EQ(rep->failed.size(), 1u);
  EXPECT_NE(rep->failed[0].find("node-3-pid3.inflight.json: not a collscope in-flight state file of version 1"),
            std::string::npos)
      << rep->failed[0];
  auto loaded = LoadInflightStates(**store, "job");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->size(), 2u);
  for (int k = 0; k < 2; ++k) {
    auto read = ReadInflightState(dir / "a" + "/node-" + std::to_string(k + 1) + "-pid" + std::to_string(k + 1) +
                                  ".inflight.json");
    ASSERT_TRUE(read.ok());
    ExpectSameState((*loaded)[static_cast<size_t>(k)], *read);
  }
  // The plugin rewrote one file in place: read again, it replaces its rows.
  testing::WriteFile(dir / "a/node-1-pid1.inflight.json", StateFile("node-1", 5, 9));
  ASSERT_TRUE(IngestHangEvidence(**store, {dir / "a"}, "job").ok());
  loaded = LoadInflightStates(**store, "job");
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->size(), 2u);
  EXPECT_EQ((*loaded)[0].comms[0].ops[0].sn, 9);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM inflight_ops"), 4);
  // Another run holds none of them.
  auto other = LoadInflightStates(**store, "other");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->empty());
}

TEST(HangEvidence, FlightRecorderDumpsComeBackFromTheStoreAsTheyWereRead) {
  const std::string fr = testing::FixturesDir() + "/flight-recorder/gpu_error_1st";
  if (!std::filesystem::exists(fr)) GTEST_SKIP() << "fixture absent: " << fr;
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto rep = IngestHangEvidence(**store, {fr}, "job");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->dumps_seen, 16u);
  EXPECT_EQ(rep->dumps_read, 16u);
  auto loaded = LoadFlightRecorderDumps(**store, "job");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->size(), 16u);
  for (const FrDump& got : *loaded) {
    auto want = ReadFlightRecorderDump(got.path);
    ASSERT_TRUE(want.ok()) << got.path;
    EXPECT_EQ(got.rank, want->rank);
    EXPECT_EQ(got.version, want->version);
    EXPECT_EQ(got.nccl_version, want->nccl_version);
    ASSERT_EQ(got.pgs.size(), want->pgs.size());
    for (const auto& [name, pg] : want->pgs) {
      ASSERT_TRUE(got.pgs.contains(name)) << name;
      EXPECT_EQ(got.pgs.at(name).desc, pg.desc);
      EXPECT_EQ(got.pgs.at(name).ranks, pg.ranks);
    }
    ASSERT_EQ(got.status.size(), want->status.size());
    for (const auto& [id, s] : want->status) {
      EXPECT_EQ(got.status.at(id).last_enqueued, s.last_enqueued);
      EXPECT_EQ(got.status.at(id).last_started, s.last_started);
      EXPECT_EQ(got.status.at(id).last_completed, s.last_completed);
    }
    ASSERT_EQ(got.entries.size(), want->entries.size());
    for (size_t k = 0; k < got.entries.size(); ++k) {
      const FrEntry &a = got.entries[k], &b = want->entries[k];
      EXPECT_EQ(a.record_id, b.record_id);
      EXPECT_EQ(a.pg_id, b.pg_id);
      EXPECT_EQ(a.pg_name, b.pg_name);
      EXPECT_EQ(a.pg_desc, b.pg_desc);
      EXPECT_EQ(a.collective_seq_id, b.collective_seq_id);
      EXPECT_EQ(a.p2p_seq_id, b.p2p_seq_id);
      EXPECT_EQ(a.op_id, b.op_id);
      EXPECT_EQ(a.profiling_name, b.profiling_name);
      EXPECT_EQ(a.is_p2p, b.is_p2p);
      EXPECT_EQ(a.state, b.state);
      EXPECT_EQ(a.retired, b.retired);
      EXPECT_EQ(a.time_created_ns, b.time_created_ns);
      EXPECT_EQ(a.timeout_ms, b.timeout_ms);
      EXPECT_EQ(a.input_sizes, b.input_sizes);
      EXPECT_EQ(a.output_sizes, b.output_sizes);
      EXPECT_EQ(a.input_dtypes, b.input_dtypes);
      EXPECT_EQ(a.output_dtypes, b.output_dtypes);
    }
  }
}

// A store made before these tables existed gets them (and their taxonomy rows) when opened to
// write; opened read-only, it simply holds no hang evidence.
TEST(HangEvidence, AnOlderStoreGetsTheTablesAndReadOnlyHasNone) {
  testing::TempDir dir;
  const std::string db = dir / "old.duckdb";
  {
    auto store = Store::Open(db);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Exec("DROP TABLE inflight_ops; DROP TABLE inflight_files; "
                               "DELETE FROM taxonomy WHERE table_name IN ('inflight_ops', 'inflight_files')")
                    .ok());
  }
  {
    auto ro = Store::Open(db, Store::Options::ReadOnly());
    ASSERT_TRUE(ro.ok());
    auto none = LoadInflightStates(**ro, "job");
    ASSERT_TRUE(none.ok()) << none.status().message();
    EXPECT_TRUE(none->empty());
  }
  auto store = Store::Open(db);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM inflight_ops"), 0);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM taxonomy WHERE table_name = 'inflight_ops'"), 13);
  testing::WriteFile(dir / "s/node-1-pid1.inflight.json", StateFile("node-1", 5, 8));
  ASSERT_TRUE(IngestHangEvidence(**store, {dir / "s"}, "job").ok());
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM inflight_ops"), 2);
}

}  // namespace
}  // namespace collscope::readers
