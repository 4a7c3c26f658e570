#include "core/coverage.h"

#include <gtest/gtest.h>

#include <string>

#include "core/ingest.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

using testing::CollLine;
using testing::TempDir;
using testing::WriteFile;

constexpr uint64_t kT0 = 1760000000000000;
constexpr uint64_t kDumpUs = 200000;

// A v4.1 dump_stats line of rank `rank` of `comm` with the given running drop total.
std::string DumpStatsLine(const std::string& host, int pid, const std::string& comm, int rank, uint64_t dump_ts,
                          uint64_t dropped_total) {
  return R"({"header":{"id":")" + comm + R"(","rank":)" + std::to_string(rank) +
         R"(,"n_ranks":4,"nnodes":4},"metadata":{"inspector_output_format_version":"v4.1","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":)" +
         std::to_string(dump_ts) + R"(,"hostname":")" + host + R"(","pid":)" + std::to_string(pid) +
         R"(},"dump_stats":{"coll_records":10,"coll_dropped_total":)" + std::to_string(dropped_total) +
         R"(,"coll_dropped_since_last_dump":0,"p2p_records":0,"p2p_dropped_total":0,"p2p_dropped_since_last_dump":0}})" "\n";
}

// A 4-rank communicator 0xc0 on four hosts runs AllReduce 1..100; no member records every tenth
// (under the size cutoff). Each rank dumps after every tenth collective, 200 ms apart, except:
// rank 1 pauses its dumps after the 40th (41-80 come in the dump after the 80th), and rank 3's log
// stops after the 50th. Rank 0 also holds a 2-rank communicator 0xd0 whose other member left no
// record (AllGathers and AllReduces), and one CPU-timed record; rank 2's Inspector counted 7
// dropped records.
class CoverageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int rank = 0; rank < 4; ++rank) {
      const std::string host = "h" + std::to_string(rank);
      const int pid = 10 + rank;
      std::string log;
      for (uint64_t sn = 1; sn <= 100; ++sn) {
        if (rank == 3 && sn > 50) break;
        if (sn % 10 == 0) continue;
        uint64_t k = (sn + 9) / 10;  // the dump after the k-th tenth
        if (rank == 1 && k >= 5 && k <= 8) k = 8;
        std::string line = CollLine(host, pid, "0xc0", rank, 4, 4, "AllReduce", sn, 1048576, 100, "10.485760",
                                    "15.728640", kT0 + k * kDumpUs);
        if (rank == 0 && sn == 1) line.replace(line.find("kernel_gpu"), 10, "kernel_cpu");
        log += line;
      }
      // Sequence numbers count per function: 0xd0's AllGathers and AllReduces are both 1..5.
      if (rank == 0)
        for (uint64_t sn = 1; sn <= 5; ++sn)
          log += CollLine(host, pid, "0xd0", 0, 2, 2, "AllGather", sn, 65536, 20, "3.2", "1.6", kT0 + kDumpUs) +
                 CollLine(host, pid, "0xd0", 0, 2, 2, "AllReduce", sn, 65536, 20, "3.2", "1.6", kT0 + kDumpUs);
      if (rank == 2) log += DumpStatsLine(host, pid, "0xc0", 2, kT0 + kDumpUs, 3) + DumpStatsLine(host, pid, "0xc0", 2, kT0 + 2 * kDumpUs, 7);
      WriteFile(dir_ / ("logs/" + host + "-pid" + std::to_string(pid) + ".log"), log);
    }
    auto s = Store::Open(dir_ / "store.duckdb");
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(*s);
    IngestOptions o;
    o.run = "job";
    auto r = Ingest(*store_, {dir_ / "logs"}, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->lines_rejected, 0u);
    auto id = store_->RunId("job", false);
    ASSERT_TRUE(id.ok());
    run_id_ = *id;
  }
  TempDir dir_;
  std::unique_ptr<Store> store_;
  int32_t run_id_ = 0;
};

TEST_F(CoverageTest, RunCoverageCountsEachKindOfLossOnce) {
  auto c = SummarizeCoverage(*store_, run_id_, 10);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->records, 90u * 3 + 45 + 5 + 5);
  EXPECT_EQ(c->not_kernel_timed, 1u);
  EXPECT_TRUE(c->has_dump_stats);
  EXPECT_EQ(c->coll_dropped, 7u) << "running totals: the newest counts, not their sum";
  EXPECT_EQ(c->dropping_pairs, 1u);
  // 0xc0 spans sn 1..99 of which 9 no member recorded; 0xd0 spans 1..5 per function, all recorded.
  EXPECT_EQ(c->coll_issued, 99u + 5 + 5);
  EXPECT_EQ(c->coll_unrecorded, 9u);
  ASSERT_EQ(c->incomplete.size(), 1u);
  EXPECT_EQ(c->incomplete[0].comm, "0xd0");
  EXPECT_EQ(c->incomplete[0].n_ranks, 2);
  EXPECT_EQ(c->incomplete[0].ranks_seen, 1);
  // What every member lacks (each tenth) does not lower anyone; rank 3's cut log does.
  ASSERT_EQ(c->low.size(), 1u);
  EXPECT_EQ(c->low[0].hostname, "h3");
  EXPECT_EQ(c->low[0].comm, "0xc0");
  EXPECT_EQ(c->low[0].op, "AllReduce");
  EXPECT_EQ(c->low[0].seen, 45u);
  EXPECT_EQ(c->low[0].known, 90u);
  EXPECT_DOUBLE_EQ(c->low[0].peer_share, 1.0);
  EXPECT_DOUBLE_EQ(c->low[0].relative(), 0.5);
  // Rank 3's dumps stop 1 s before the job's; rank 1's pause 800 ms; both over 3 usual intervals.
  ASSERT_EQ(c->gaps.size(), 2u);
  EXPECT_EQ(c->gaps[0].hostname, "h3");
  EXPECT_TRUE(c->gaps[0].at_end);
  EXPECT_EQ(c->gaps[0].to_us - c->gaps[0].from_us, 5 * static_cast<int64_t>(kDumpUs));
  EXPECT_EQ(c->gaps[0].usual_us, static_cast<int64_t>(kDumpUs));
  EXPECT_EQ(c->gaps[1].hostname, "h1");
  EXPECT_FALSE(c->gaps[1].at_end);
  EXPECT_EQ(c->gaps[1].from_us, static_cast<int64_t>(kT0 + 4 * kDumpUs));
  EXPECT_EQ(c->gaps[1].to_us, static_cast<int64_t>(kT0 + 8 * kDumpUs));
}

TEST_F(CoverageTest, MemberCoverageIsAgainstThePeersOfTheSameSpan) {
  CoverageQuery q;
  q.run_id = run_id_;
  q.comms = {"0xc0"};
  auto all = MemberCoverageOf(*store_, q);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 4u);
  for (const MemberCoverage& m : *all) {
    EXPECT_EQ(m.known, 90u);
    EXPECT_DOUBLE_EQ(m.relative(), m.hostname == "h3" ? 0.5 : 1.0) << m.hostname;
  }
  // Over the first half of the job, where rank 3's log still runs, it lost nothing; rank 1's
  // records of 41-49, dumped only after the 80th, still count: the window takes instances.
  q.since_us = static_cast<int64_t>(kT0);
  q.until_us = static_cast<int64_t>(kT0 + 5 * kDumpUs);
  auto half = MemberCoverageOf(*store_, q);
  ASSERT_TRUE(half.ok()) << half.status().message();
  ASSERT_EQ(half->size(), 4u);
  for (const MemberCoverage& m : *half) {
    EXPECT_EQ(m.seen, 45u) << m.hostname;
    EXPECT_EQ(m.known, 45u) << m.hostname;
    EXPECT_DOUBLE_EQ(m.relative(), 1.0) << m.hostname;
  }
  // Over the second half, rank 3 recorded none of the instances: it is not among the members.
  q.since_us = static_cast<int64_t>(kT0 + 6 * kDumpUs);
  q.until_us = static_cast<int64_t>(kT0 + 10 * kDumpUs);
  auto late = MemberCoverageOf(*store_, q);
  ASSERT_TRUE(late.ok()) << late.status().message();
  EXPECT_EQ(late->size(), 3u);
  for (const MemberCoverage& m : *late) EXPECT_NE(m.hostname, "h3");
}

}  // namespace
}  // namespace collscope
