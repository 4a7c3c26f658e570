// The folded-stack model: where a stack says its thread is, windows, and the cross-process
// comparison that names a process stuck apart (the sampler's real-process tests are in
// agent/stacks/stacks_test.cc).
#include "core/stack_profile.h"

#include <gtest/gtest.h>

namespace collscope {
namespace {

TEST(PositionOf, TheProgramsInnermostPythonFrameAndTheNativeCallBelowIt) {
  StackPosition p =
      PositionOf({"_start", "Py_RunMain", "<module> (train.py:90)", "step (train.py:41)",
                  "Event.wait (python3.11/threading.py:622)", "PyThread_acquire_lock_timed",
                  "libfoo.so+0x1a2b", "__futex_abstimed_wait_common"});
  EXPECT_EQ(p.key, "step (train.py)");  // past the standard library's wait, without the line
  EXPECT_EQ(p.label, "step (train.py:41) -> __futex_abstimed_wait_common");
}

TEST(PositionOf, OnlyStandardLibraryFramesStillNameOne) {
  StackPosition p =
      PositionOf({"<module> (python3.11/runpy.py:12)", "Event.wait (python3.11/threading.py:622)"});
  EXPECT_EQ(p.key, "Event.wait (python3.11/threading.py)");
}

TEST(PositionOf, NativeOnlyStacksNameTheirInnermostNamedFrame) {
  EXPECT_EQ(PositionOf({"main", "cudaStreamSynchronize", "libcuda.so+0x99"}).key,
            "cudaStreamSynchronize");
  // A C++ symbol with parentheses is no Python frame.
  EXPECT_EQ(PositionOf({"main", "foo(int) (bar)"}).key, "foo(int) (bar)");
}

std::vector<std::string> Frames(const std::string& leaf) {
  return {"main", "<module> (t.py:1)", leaf};
}

TEST(StackFolder, CountsPerWindowAndClosesAWindowWhenALaterOneStarts) {
  StackFolder folder(1'000'000);
  EXPECT_TRUE(folder.Add("h", 7, 0, 7, "python", 10'100'000, Frames("a (t.py:3)")).empty());
  EXPECT_TRUE(folder.Add("h", 7, 0, 7, "python", 10'200'000, Frames("a (t.py:3)")).empty());
  EXPECT_TRUE(folder.Add("h", 7, 0, 7, "python", 10'300'000, Frames("b (t.py:9)")).empty());
  std::vector<FoldedStack> closed =
      folder.Add("h", 7, 0, 7, "python", 11'000'000, Frames("a (t.py:3)"));
  ASSERT_EQ(closed.size(), 2u);
  const FoldedStack& a = closed[0].frames.find("a (") != std::string::npos ? closed[0] : closed[1];
  EXPECT_EQ(a.count, 2);
  EXPECT_EQ(a.window_start_us, 10'000'000);
  EXPECT_EQ(a.window_end_us, 11'000'000);
  EXPECT_EQ(a.first_us, 10'100'000);
  EXPECT_EQ(a.last_us, 10'200'000);
  EXPECT_EQ(a.frames, "main;<module> (t.py:1);a (t.py:3)");
  EXPECT_EQ(a.position, "a (t.py)");
  EXPECT_EQ(folder.Flush().size(), 1u);
}

TEST(StackFolder, BoundsTheStacksOfAWindowAndCountsTheRest) {
  StackFolder folder(1'000'000, 2);
  folder.Add("h", 1, 0, 1, "p", 100, Frames("a (t.py:1)"));
  folder.Add("h", 1, 0, 1, "p", 200, Frames("b (t.py:2)"));
  folder.Add("h", 1, 0, 1, "p", 300, Frames("c (t.py:3)"));
  folder.Add("h", 1, 0, 1, "p", 400, Frames("a (t.py:1)"));  // known: still counted
  EXPECT_EQ(folder.dropped(), 1);
  int64_t counted = 0;
  for (const FoldedStack& s : folder.Flush()) counted += s.count;
  EXPECT_EQ(counted, 3);
}

// n processes' main threads, each at one position for `samples` samples from t = 0.
std::vector<FoldedStack> Job(const std::vector<std::string>& leaves, int64_t samples = 20) {
  std::vector<FoldedStack> out;
  StackFolder folder(60'000'000);
  for (int64_t t = 0; t < samples; ++t)
    for (size_t r = 0; r < leaves.size(); ++r) {
      // "moving" processes go round three functions.
      std::string leaf =
          leaves[r] == "moving" ? std::string("f") + char('a' + t % 3) + " (t.py:5)" : leaves[r];
      folder.Add("h", 100 + static_cast<int64_t>(r), static_cast<int64_t>(r),
                 100 + static_cast<int64_t>(r), "p", 1'000'000 + t * 100'000, Frames(leaf));
    }
  return folder.Flush();
}

TEST(CompareProcesses, NamesTheOneStuckApartFromItsWaitingPeers) {
  std::vector<std::string> leaves(8, "wait_for_peers (t.py:20)");
  leaves[5] = "compile_graph (t.py:12)";
  StackComparison c = CompareProcesses(Job(leaves));
  ASSERT_EQ(c.outliers.size(), 1u);
  EXPECT_EQ(c.processes[c.outliers[0]].rank, 5);
  EXPECT_TRUE(c.processes[c.outliers[0]].stayed);
  EXPECT_EQ(c.majority, 7u);
  EXPECT_EQ(c.summary,
            "rank 5 (pid 105 on h) has been in `compile_graph (t.py:12)` for 1.9 s (20 of 20 "
            "samples), while the "
            "other 7 processes have been in `wait_for_peers (t.py:20)` for 1.9 s.");
}

TEST(CompareProcesses, NamesTheOneStuckWhileItsPeersProgress) {
  std::vector<std::string> leaves(8, "moving");
  leaves[2] = "deadlocked (t.py:60)";
  StackComparison c = CompareProcesses(Job(leaves));
  ASSERT_EQ(c.outliers.size(), 1u);
  EXPECT_EQ(c.processes[c.outliers[0]].rank, 2);
  EXPECT_FALSE(c.majority_stayed);
  EXPECT_EQ(c.peers_text, "the other 7 processes are still progressing");
}

TEST(CompareProcesses, NamesNobodyWhenAllWaitAlikeOrNoMajorityExists) {
  StackComparison same = CompareProcesses(Job(std::vector<std::string>(4, "wait (t.py:2)")));
  EXPECT_TRUE(same.outliers.empty());
  EXPECT_NE(same.summary.find("none stands apart"), std::string::npos) << same.summary;
  StackComparison split =
      CompareProcesses(Job({"a (t.py:1)", "a (t.py:1)", "b (t.py:2)", "b (t.py:2)"}));
  EXPECT_TRUE(split.outliers.empty());
  EXPECT_EQ(split.majority, 0u);
  EXPECT_NE(split.summary.find("no position is shared by most"), std::string::npos)
      << split.summary;
}

TEST(CompareProcesses, AProcessAtOnePositionNineTenthsOfTheTimeStayed) {
  // 18 of 20 samples at one position: stayed; 17 of 20: moving.
  auto job = [](int64_t elsewhere) {
    StackFolder folder(60'000'000);
    for (int64_t t = 0; t < 20; ++t)
      folder.Add("h", 1, 0, 1, "p", t * 1000,
                 Frames(t < elsewhere ? "other (t.py:1)" : "stuck (t.py:2)"));
    return CompareProcesses(folder.Flush()).processes.at(0);
  };
  EXPECT_TRUE(job(2).stayed);
  EXPECT_FALSE(job(3).stayed);
}

}  // namespace
}  // namespace collscope
