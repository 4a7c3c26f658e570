// Hang root cause from saved NCCL RAS status reports (detector ras.status).
#include <gtest/gtest.h>

#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/hang.h"
#include "analysis/diagnose/registry.h"
#include "tests/ras_samples.h"

namespace collscope::diagnose {
namespace {

std::vector<Finding> Analyze(const std::string& content, const std::string& path = "ras.txt") {
  auto r = readers::ParseRasReport(content, path);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return AnalyzeRasReports({*r});
}

bool HasEvidence(const Finding& f, const std::string& key) {
  for (const Evidence& e : f.evidence)
    if (e.key == key) return true;
  return false;
}

// The rule: in a communicator whose launched counts differ, the minority behind is the root cause
// and the ranks at the top are victims; the summary names rank, host, pid, GPU and the count.
TEST(RasStatus, BehindMinorityIsTheRootCause) {
  auto f = Analyze(testing::kRasTextMismatch);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kHang);
  EXPECT_EQ(f[0].detector, "ras.status");
  EXPECT_EQ(f[0].ranks, std::vector<int>({5}));
  EXPECT_EQ(f[0].victims, std::vector<int>({0, 1, 2, 3, 4, 6, 7}));
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"10.0.0.2"}));
  EXPECT_EQ(f[0].comms, std::vector<std::string>({"0x00c0ffee12345678"}));
  for (const char* s : {"rank 5 (host 10.0.0.2, pid 4242, GPU 1)", "AllReduce operation 911", "reached 912"})
    EXPECT_NE(f[0].summary.find(s), std::string::npos) << s << "\n" << f[0].summary;
  EXPECT_TRUE(HasEvidence(f[0], "counts_are_launches"));
  EXPECT_TRUE(HasEvidence(f[0], "one_report"));
  EXPECT_LE(f[0].confidence, 0.6) << "one report cannot tell a stall from a transient mismatch";
}

// Counts that stay put across repeated reports are a stall; counts that moved are not confirmed.
TEST(RasStatus, CountsUnchangedAcrossReportsConfirmTheStall) {
  auto parse = [](const std::string& text, const std::string& path) {
    auto r = readers::ParseRasReport(text, path);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return *r;
  };
  const std::string first = testing::kRasTextMismatch;
  auto same = AnalyzeRasReports({parse(first, "a.txt"), parse(first, "b.txt")});
  ASSERT_EQ(same.size(), 1u);
  EXPECT_GE(same[0].confidence, 0.9);
  EXPECT_TRUE(HasEvidence(same[0], "unchanged_across_reports"));
  EXPECT_FALSE(HasEvidence(same[0], "one_report"));

  std::string moved = first;
  for (const char* from : {"operation 912", "operation 911"}) {
    const size_t at = moved.find(from);
    ASSERT_NE(at, std::string::npos);
    moved.replace(at, std::string(from).size(), std::string(from) == "operation 912" ? "operation 950" : "operation 949");
  }
  auto progressed = AnalyzeRasReports({parse(first, "a.txt"), parse(moved, "b.txt")});
  ASSERT_EQ(progressed.size(), 1u);
  EXPECT_LE(progressed[0].confidence, 0.6) << "the counts moved between the reports: no stall confirmed";
  EXPECT_FALSE(HasEvidence(progressed[0], "unchanged_across_reports"));
}

// Half or more behind is no minority: a mismatch alone names nobody.
TEST(RasStatus, BehindMajorityNamesNobody) {
  std::string t = testing::kRasTextMismatch;
  t.replace(t.find("  7 ranks have launched up to operation 912"), 43, "  4 ranks have launched up to operation 912\n"
                                                                       "  3 ranks have launched up to operation 911");
  EXPECT_TRUE(Analyze(t).empty());
}

// 2.24's one collective count; a rank that launched nothing is behind too.
TEST(RasStatus, CollectiveCounts224) {
  auto f = Analyze(testing::kRasText224);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>({9, 17}));
  EXPECT_NE(f[0].summary.find("launched no collective operation"), std::string::npos) << f[0].summary;
}

// JSON: a count behind and a dead missing rank; global ranks from the world communicator.
TEST(RasStatus, JsonBehindAndDead) {
  auto f = Analyze(testing::kRasJson, "ras.json");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>({1, 3}));
  EXPECT_EQ(f[0].victims, std::vector<int>({0, 2}));
  EXPECT_NE(f[0].summary.find("considered dead"), std::string::npos) << f[0].summary;
  EXPECT_FALSE(HasEvidence(f[0], "missing_only"));
}

// Missing, dead and error ranks are root causes; sub-communicator ranks whose process is not named
// in the world communicator keep only their host.
TEST(RasStatus, MissingDeadAndErrorRanks) {
  auto f = Analyze(testing::kRasTextIncomplete);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>({6, 7}));
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"10.0.0.1", "10.0.0.2"}));
  EXPECT_NE(f[0].summary.find("remote process exited"), std::string::npos) << f[0].summary;
  EXPECT_TRUE(HasEvidence(f[0], "global_ranks"));
  EXPECT_TRUE(HasEvidence(f[0], "ras_timeouts"));
}

// Missing data as the only signal lowers the confidence.
TEST(RasStatus, MissingOnlyIsLessSure) {
  std::string t = testing::kRasTextIncomplete;
  t.erase(t.find("DEAD\n"), t.find("#0-0") - t.find("DEAD\n"));
  t.erase(t.find("#1-0"), t.find("Warnings") - t.find("#1-0"));
  t.erase(t.find("TIMEOUT"));
  auto f = Analyze(t);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>({6, 7}));
  EXPECT_TRUE(HasEvidence(f[0], "missing_only"));
  EXPECT_LE(f[0].confidence, 0.5);
}

// Without a communicator of the job's size the culprit is named by host and process, no rank.
TEST(RasStatus, NoWorldCommunicatorNamesTheProcess) {
  std::string t = testing::kRasTextMismatch;
  t.erase(t.find("Job summary"), t.find("Communicators...") - t.find("Job summary"));
  auto f = Analyze(t);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].ranks.empty());
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"10.0.0.2"}));
  EXPECT_NE(f[0].summary.find("rank 5 of communicator 0x00c0ffee12345678 (host 10.0.0.2, pid 4242, GPU 1)"),
            std::string::npos)
      << f[0].summary;
}

// RAS names nodes by address, the records by host name: the records' pids join them. A pid one
// process has names it; where hosts share a pid (containers), the node learnt from another
// process's unique pid picks the host; a node two joins name differently is joined to none. A
// communicator the records have joins its ranks exactly, whatever their pids.
TEST(RasStatus, TheRecordsPidsJoinNodesToRanksAndHostNames) {
  auto rank = [](int r, const std::string& node, int64_t pid, int64_t allreduces) {
    readers::RasRank k;
    k.rank = r;
    k.host = node;
    k.pid = pid;
    k.launched = {{"AllReduce", allreduces}};
    return k;
  };
  readers::RasReport r;
  r.path = "ras.json";
  r.format = "json";
  readers::RasComm c;  // a communicator smaller than the job: its ranks are not global ones
  c.hash = "0x00000000000000aa";
  c.size = 4;
  c.ranks = {rank(0, "10.0.0.1", 100, 912), rank(1, "10.0.0.2", 100, 911), rank(2, "10.0.0.2", 201, 912),
             rank(3, "10.0.0.1", 101, 912)};
  r.comms = {c};
  r.job_processes = 16;
  const std::vector<JobProcess> job = {{"node-a", 100, 0, {}}, {"node-b", 100, 4, {}}, {"node-b", 201, 5, {}}, {"node-a", 101, 1, {}}};

  auto f = AnalyzeRasReports({r}, job);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>({4}));
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"node-b"}));
  EXPECT_EQ(f[0].victims, std::vector<int>({0, 1, 5}));
  EXPECT_NE(f[0].summary.find("rank 4 (host node-b, RAS node 10.0.0.2, pid 100)"), std::string::npos) << f[0].summary;
  EXPECT_FALSE(HasEvidence(f[0], "global_ranks"));

  // Nothing names the behind rank's node: pid 100 is on both hosts, so no rank and the address.
  readers::RasReport alone = r;
  alone.comms[0].ranks = {rank(0, "10.0.0.1", 100, 912), rank(1, "10.0.0.2", 100, 911), rank(3, "10.0.0.1", 100, 912)};
  f = AnalyzeRasReports({alone}, job);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].ranks.empty());
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"10.0.0.2"}));
  EXPECT_TRUE(HasEvidence(f[0], "global_ranks"));

  // A node two unique pids put on two hosts is joined to none.
  readers::RasReport torn = r;
  torn.comms[0].ranks.push_back(rank(4, "10.0.0.2", 101, 912));
  f = AnalyzeRasReports({torn}, job);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].ranks.empty());
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"10.0.0.2"}));

  // Containers: every process has pid 100, so pids join nothing; the communicator's hash and
  // rank, which the records have too (Inspector's id, not zero-padded), name each one exactly.
  readers::RasReport boxed = r;
  boxed.comms[0].ranks = {rank(0, "10.0.0.1", 100, 912), rank(1, "10.0.0.2", 100, 911), rank(2, "10.0.0.2", 100, 912),
                          rank(3, "10.0.0.1", 100, 912)};
  const std::vector<JobProcess> boxed_job = {{"node-a", 100, 0, {{"0xaa", 0}}},
                                             {"node-b", 100, 4, {{"0xaa", 1}}},
                                             {"node-b", 100, 5, {{"0xaa", 2}}},
                                             {"node-a", 100, 1, {{"0xaa", 3}}}};
  f = AnalyzeRasReports({boxed}, boxed_job);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>({4}));
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"node-b"}));
  EXPECT_EQ(f[0].victims, std::vector<int>({0, 1, 5}));
  EXPECT_NE(f[0].summary.find("rank 4 (host node-b, RAS node 10.0.0.2, pid 100)"), std::string::npos) << f[0].summary;
  // The same pids without the records' memberships: as before, no rank, the address.
  f = AnalyzeRasReports({boxed}, {{"node-a", 100, 0, {}}, {"node-b", 100, 4, {}}, {"node-b", 100, 5, {}}, {"node-a", 100, 1, {}}});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].ranks.empty());
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"10.0.0.2"}));

  // Without the records, as before: the node and process.
  f = AnalyzeRasReports({r});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].ranks.empty());
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"10.0.0.2"}));
}

// Repeated reports of one hang are one finding; a Flight Recorder finding blaming the same rank
// merges with it (registry.cc MergeRules), and so does the records' hang guess naming nobody.
TEST(RasStatus, MergesWithOtherHangDetectors) {
  auto a = readers::ParseRasReport(testing::kRasTextMismatch, "a.txt");
  auto b = readers::ParseRasReport(testing::kRasTextMismatch, "b.txt");
  auto f = AnalyzeRasReports({*a, *b});
  ASSERT_EQ(f.size(), 1u);
  Finding fr;
  fr.kind = Kind::kHang;
  fr.confidence = 0.8;
  fr.ranks = {5};
  fr.detector = "flight_recorder.wait_graph";
  Finding guess;
  guess.kind = Kind::kHang;
  guess.confidence = 0.3;
  guess.detector = "comm.progress";
  f.push_back(fr);
  f.push_back(guess);
  Consolidate(&f);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].detector, "ras.status");
  EXPECT_EQ(f[0].ranks, std::vector<int>({5}));
  std::string also;
  for (const Evidence& e : f[0].evidence)
    if (e.key == "also_detected_by") also = e.text;
  EXPECT_NE(also.find("flight_recorder.wait_graph"), std::string::npos) << also;
  EXPECT_NE(also.find("comm.progress"), std::string::npos) << also;
}

// A MONITOR log's dead peer is the hang's root cause, named by node and pid with the events that
// lost it; an unresponsive one is named less surely; a recovered one is not named.
TEST(RasStatus, MonitorLogNamesTheDeadProcess) {
  auto f = Analyze(testing::kRasMonitorText, "monitor.log");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kHang);
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"10.0.0.3"}));
  EXPECT_TRUE(f[0].ranks.empty()) << "a MONITOR log names no rank";
  EXPECT_DOUBLE_EQ(f[0].confidence, 0.85);
  for (const char* s : {"the process (host 10.0.0.3, pid 301)", "considered dead by RAS", "PEER_TIMEOUT_DEAD"})
    EXPECT_NE(f[0].summary.find(s), std::string::npos) << s << "\n" << f[0].summary;
  EXPECT_FALSE(HasEvidence(f[0], "counts_are_launches")) << "a MONITOR log has no counts";
  auto j = Analyze(testing::kRasMonitorJson, "monitor.json");
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0].hosts, std::vector<std::string>({"10.0.0.2", "10.0.0.5"}));
  EXPECT_NE(j[0].summary.find("report it unresponsive"), std::string::npos) << j[0].summary;
}

TEST(RasStatus, Registered) {
  bool found = false;
  for (const DetectorInfo& d : Detectors())
    if (d.name == "ras.status") found = d.tier == 'A' && d.kinds == std::vector<Kind>{Kind::kHang};
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace collscope::diagnose
