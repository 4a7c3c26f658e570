// What stacks add to findings: hang findings say where their root-cause rank was, compared with
// its peers after the hang began; stall and straggler findings, which position grew.
#include "analysis/diagnose/stack_evidence.h"

#include <gtest/gtest.h>

namespace collscope::diagnose {
namespace {

// One main-thread row: `count` samples of rank `rank` at `leaf` from first_us to last_us.
FoldedStack Row(int rank, const std::string& leaf, int64_t first_us, int64_t last_us,
                int64_t count) {
  FoldedStack s;
  s.host = "h";
  s.pid = s.tid = 100 + rank;
  s.rank = rank;
  s.first_us = first_us;
  s.last_us = last_us;
  s.count = count;
  s.frames = "main;<module> (t.py:1);" + leaf;
  StackPosition p = PositionOf({"main", "<module> (t.py:1)", leaf});
  s.position = p.key;
  s.position_label = p.label;
  return s;
}

std::string Text(const Finding& f, const std::string& key) {
  for (const Evidence& e : f.evidence)
    if (e.key == key) return e.text;
  return "";
}

Finding Hang(std::vector<int> ranks, int64_t start_us) {
  Finding f;
  f.kind = Kind::kHang;
  f.ranks = std::move(ranks);
  f.start_us = start_us;
  f.summary = "Rank 3 never joined.";
  return f;
}

std::vector<FoldedStack> HungJob(int odd, int64_t from_us) {
  std::vector<FoldedStack> s;
  for (int r = 0; r < 4; ++r)
    s.push_back(Row(r, r == odd ? "compile (t.py:9)" : "wait (t.py:4)", from_us,
                    from_us + 10'000'000, 100));
  return s;
}

TEST(StackEvidence, AHangSaysWhereItsRankWasAgainstItsPeers) {
  std::vector<Finding> f{Hang({3}, 1'000'000)};
  AddStackEvidence(HungJob(3, 2'000'000), &f);
  EXPECT_EQ(Text(f[0], "stack_frame.rank3"), "compile (t.py:9)");
  EXPECT_EQ(Text(f[0], "stacks"),
            "rank 3 (pid 103 on h) has been in `compile (t.py:9)` for 10.0 s (100 of 100 samples), "
            "while the "
            "other 3 processes have been in `wait (t.py:4)` for 10.0 s.");
  EXPECT_EQ(f[0].summary, "Rank 3 never joined. Its stack: in `compile (t.py:9)` for 10.0 s.");
  // Said again (a later burst), it replaces what it said.
  AddStackEvidence(HungJob(3, 2'000'000), &f);
  EXPECT_EQ(f[0].evidence.size(), 2u);
  EXPECT_EQ(f[0].summary, "Rank 3 never joined. Its stack: in `compile (t.py:9)` for 10.0 s.");
}

TEST(StackEvidence, StacksFromBeforeTheHangAreNotCompared) {
  std::vector<Finding> f{Hang({3}, 50'000'000)};
  AddStackEvidence(HungJob(3, 2'000'000), &f);
  EXPECT_EQ(Text(f[0], "stack_frame.rank3"), "");
  EXPECT_NE(Text(f[0], "stacks").find("before the hang began: not compared"), std::string::npos)
      << Text(f[0], "stacks");
}

TEST(StackEvidence, ARankTheStacksDoNotSingleOutAndAnotherTheyDo) {
  std::vector<Finding> f{Hang({1}, 1'000'000)};
  AddStackEvidence(HungJob(3, 2'000'000), &f);
  const std::string t = Text(f[0], "stacks");
  EXPECT_NE(t.find("rank 1 (pid 101 on h) has been in `wait (t.py:4)`"), std::string::npos) << t;
  EXPECT_NE(t.find("its stacks do not stand apart from its peers'"), std::string::npos) << t;
  EXPECT_NE(t.find("The stacks also single out rank 3"), std::string::npos) << t;
  EXPECT_EQ(f[0].summary,
            "Rank 3 never joined.");  // no stack sentence for a rank that does not stand apart
  std::vector<Finding> g{Hang({9}, 1'000'000)};
  AddStackEvidence(HungJob(3, 2'000'000), &g);
  EXPECT_NE(Text(g[0], "stacks").find("rank 9: no stacks sampled."), std::string::npos);
}

TEST(StackEvidence, UnrankedStacksAreNotJoinedAndManyRanksAreNotListed) {
  std::vector<FoldedStack> unranked = HungJob(3, 2'000'000);
  for (FoldedStack& s : unranked) s.rank = -1;
  std::vector<Finding> f{Hang({3}, 1'000'000)};
  AddStackEvidence(unranked, &f);
  EXPECT_NE(Text(f[0], "stacks").find("carry no rank"), std::string::npos) << Text(f[0], "stacks");
  EXPECT_EQ(Text(f[0], "stack_frame.rank3"), "");
  std::vector<FoldedStack> big;
  for (int r = 0; r < 20; ++r) big.push_back(Row(r, "wait (t.py:4)", 2'000'000, 12'000'000, 100));
  std::vector<int> all(20);
  for (int r = 0; r < 20; ++r) all[r] = r;
  std::vector<Finding> g{Hang(all, 1'000'000)};
  AddStackEvidence(big, &g);
  EXPECT_NE(Text(g[0], "stacks").find("And 12 more ranks."), std::string::npos)
      << Text(g[0], "stacks");
  EXPECT_EQ(Text(g[0], "stack_frame.rank8"), "");
}

TEST(StackEvidence, AHangNamingNoRankGetsTheComparison) {
  std::vector<Finding> f{Hang({}, 1'000'000)};
  AddStackEvidence(HungJob(2, 2'000'000), &f);
  EXPECT_NE(Text(f[0], "stacks").find("rank 2 (pid 102 on h) has been in `compile (t.py:9)`"),
            std::string::npos);
}

TEST(StackEvidence, AStallSaysWhichPositionGrewDuringIt) {
  // Rank 1 trains (forward/backward) throughout, except 4-6 s when it sits in jit_compile.
  std::vector<FoldedStack> s;
  for (int64_t w = 0; w < 10; ++w) {
    const int64_t t = w * 1'000'000;
    if (w >= 4 && w < 6) {
      s.push_back(Row(1, "jit_compile (m.py:88)", t, t + 900'000, 9));
      s.push_back(Row(1, "forward (m.py:10)", t, t + 900'000, 1));
    } else {
      s.push_back(Row(1, "forward (m.py:10)", t, t + 900'000, 5));
      s.push_back(Row(1, "backward (m.py:20)", t, t + 900'000, 5));
    }
  }
  Finding stall;
  stall.kind = Kind::kHostStall;
  stall.ranks = {1};
  stall.start_us = 4'000'000;
  stall.end_us = 6'000'000;
  std::vector<Finding> f{stall};
  AddStackEvidence(s, &f);
  EXPECT_EQ(Text(f[0], "stack_grew.rank1"),
            "`jit_compile (m.py:88)` in 90% of its samples during it, 0% outside it");
  // Outside its window nothing grew.
  f[0].start_us = 7'000'000;
  f[0].end_us = 9'000'000;
  AddStackEvidence(s, &f);
  EXPECT_EQ(Text(f[0], "stack_grew.rank1"), "");
}

TEST(StackEvidence, WithoutSamplesOutsideAFindingItsPeersAreTheBaseline) {
  std::vector<FoldedStack> s{
      Row(1, "load_batch (data.py:5)", 0, 900'000, 8), Row(1, "forward (m.py:10)", 0, 900'000, 2),
      Row(2, "forward (m.py:10)", 0, 900'000, 10), Row(3, "forward (m.py:10)", 0, 900'000, 10)};
  std::string text;
  EXPECT_EQ(GrownPosition(s, 1, 0, 0, &text), "load_batch (data.py)");
  EXPECT_EQ(
      text,
      "`load_batch (data.py:5)` in 80% of its samples during it, 0% of its peers' at the time");
  // Below 20 points of growth, or under 5 samples, nothing is said.
  std::vector<FoldedStack> few{Row(1, "load_batch (data.py:5)", 0, 900'000, 4),
                               Row(2, "forward (m.py:10)", 0, 900'000, 10)};
  EXPECT_EQ(GrownPosition(few, 1, 0, 0, &text), "");
  std::vector<FoldedStack> flat{
      Row(1, "load_batch (data.py:5)", 0, 900'000, 3), Row(1, "forward (m.py:10)", 0, 900'000, 7),
      Row(2, "load_batch (data.py:5)", 0, 900'000, 2), Row(2, "forward (m.py:10)", 0, 900'000, 8)};
  EXPECT_EQ(GrownPosition(flat, 1, 0, 0, &text), "");
}

}  // namespace
}  // namespace collscope::diagnose
