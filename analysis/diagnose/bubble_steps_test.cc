// Step-phase pipeline bubble on hand-built step series with known answers.
#include "analysis/diagnose/bubble_steps.h"

#include <gtest/gtest.h>

#include <functional>

#include "analysis/diagnose/diagnose.h"

namespace collscope::diagnose {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000;
constexpr int64_t kStepUs = 60'000;

// 16 ranks, 4 pipeline stages of 4 ranks (stage = rank / 4), one stage per host (h0..h3). The
// step is the named phases plus a little unaccounted time (launch gaps), all with +-1% jitter.
// `tweak(rank, step, row)` applies a fault; extra time must also be added to dur_us.
readers::StepSeries Job(int steps, const std::function<void(int, int, readers::StepRow*)>& tweak) {
  readers::StepSeries s;
  s.source = "annotation";
  uint64_t seed = 7;
  auto noise = [&]() {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return 1.0 + 0.02 * (static_cast<double>((seed >> 33) % 1000) / 1000.0 - 0.5);
  };
  for (int r = 0; r < 16; ++r)
    for (int st = 0; st < steps; ++st) {
      readers::StepRow row;
      row.rank = r;
      row.step = st;
      row.start_us = kT0 + st * kStepUs;
      row.phases["forward"] = 4000 * noise();
      row.phases["backward"] = 8000 * noise();
      row.phases["tp_comm"] = 1000 * noise();
      row.phases["pp_p2p"] = 20000 * noise();
      row.phases["dp_comm"] = 1700 * noise();
      row.phases["optimizer"] = 300 * noise();
      row.dur_us = 500 * noise();
      for (const auto& [ph, v] : row.phases) row.dur_us += v;
      tweak(r, st, &row);
      s.rows.push_back(row);
    }
  return s;
}

std::map<int, int> Stages() {
  std::map<int, int> m;
  for (int r = 0; r < 16; ++r) m[r] = r / 4;
  return m;
}

std::map<int, std::string> Hosts() {
  std::map<int, std::string> h;
  for (int r = 0; r < 16; ++r) h[r] = "h" + std::to_string(r / 4);
  return h;
}

std::vector<Finding> Detect(const readers::StepSeries& s) {
  return DetectStageIdle(s, Stages(), Hosts(), StageIdleOptions{});
}

double Ev(const Finding& f, const std::string& key) {
  for (const Evidence& e : f.evidence)
    if (e.key == key) return e.value;
  return -1;
}

// Stage `stage` leaves a gap of `gap_us` per step in steps [s0, s1] that no phase names; the
// next stage waits for it in its pipeline receives.
std::function<void(int, int, readers::StepRow*)> Bubble(int stage, int s0, int s1, double gap_us) {
  return [=](int r, int st, readers::StepRow* row) {
    if (st < s0 || st > s1) return;
    if (r / 4 != stage) row->phases["pp_p2p"] += gap_us;
    row->dur_us += gap_us;
  };
}

TEST(StageIdle, BubbleOfAStageIsFoundWithItsRanksAndSteps) {
  auto f = Detect(Job(50, Bubble(1, 10, 25, 9000)));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kPipelineBubble);
  EXPECT_EQ(f[0].detector, "steps.stage_idle");
  EXPECT_EQ(f[0].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(f[0].victims, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(f[0].hosts, std::vector<std::string>{"h1"});
  EXPECT_EQ(f[0].start_us, kT0 + 10 * kStepUs);
  EXPECT_GT(f[0].end_us, kT0 + 25 * kStepUs);
  EXPECT_LT(f[0].end_us, kT0 + 26 * kStepUs);
  EXPECT_EQ(Ev(f[0], "stage"), 1);
  EXPECT_EQ(Ev(f[0], "first_step"), 10);
  EXPECT_EQ(Ev(f[0], "last_step"), 25);
  EXPECT_NEAR(Ev(f[0], "extra_idle_us"), 9000, 300);
  EXPECT_NEAR(Ev(f[0], "waiter_extra_p2p_us"), 9000, 600);
  EXPECT_NE(f[0].summary.find("Pipeline stage 1"), std::string::npos) << f[0].summary;
}

// Downstream of a bubble every stage waits as long as the origin idles; where a stage's timers
// put part of that wait after the receive, the part seems idle. A stage that waited more than
// it idled follows another: stage 0's bubble is the one finding.
TEST(StageIdle, AStageThatWaitedMoreThanItIdledFollowsTheBubble) {
  auto f = Detect(Job(50, [](int r, int st, readers::StepRow* row) {
    Bubble(0, 10, 25, 9000)(r, st, row);
    if (r / 4 == 2 && st >= 10 && st <= 25) row->phases["pp_p2p"] -= 4000;
  }));
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_LT(Ev(f[0], "own_extra_p2p_us"), 500);
}

TEST(StageIdle, AGapInAPhaseOfAnotherNameCountsAsIdle) {
  // Real timers name no "host_stall": a gap under an unknown phase name (or none) is idle, and
  // the simulator's host_stall phase is just one such name.
  auto named = Job(50, [](int r, int st, readers::StepRow* row) {
    Bubble(2, 12, 30, 8000)(r, st, row);
    if (r / 4 == 2 && st >= 12 && st <= 30) row->phases["data_wait"] = 8000;
  });
  auto f = Detect(named);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(Ev(f[0], "first_step"), 12);
  EXPECT_EQ(Ev(f[0], "last_step"), 30);
}

TEST(StageIdle, TheLastStageMakesThePreviousOneWait) {
  auto f = Detect(Job(50, [](int r, int st, readers::StepRow* row) {
    if (st < 20 || st > 30) return;
    if (r / 4 != 3) row->phases["pp_p2p"] += 7000;  // every earlier stage waits in the end
    row->dur_us += 7000;
  }));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(Ev(f[0], "waiter_stage"), 2);
}

TEST(StageIdle, AStallOfOneRankIsNotABubble) {
  // Rank 9 stalls 3 s once, and rank 5 alone leaves 9 ms gaps in steps 10-25 (one slow host
  // thread): neither is a whole stage.
  auto f = Detect(Job(50, [](int r, int st, readers::StepRow* row) {
    if (st == 30) {
      if (r != 9) row->phases["dp_comm"] += 3e6;
      row->dur_us += 3e6;
    }
    if (st >= 10 && st <= 25) {
      if (r != 5) row->phases["pp_p2p"] += 9000;
      row->dur_us += 9000;
    }
  }));
  EXPECT_TRUE(f.empty());
}

TEST(StageIdle, ASlowedStageIsNotABubble) {
  // Stage 1 computes 1.8x in steps 10-25 and, its host being slow, also launches late (4 ms of
  // unaccounted time per step): its compute grew, so it is a slow stage (steps.compute's).
  auto slow = [](double compute) {
    return [=](int r, int st, readers::StepRow* row) {
      if (st < 10 || st > 25) return;
      double extra = 4000;
      if (r / 4 == 1) {
        extra += (compute - 1) * (row->phases["forward"] + row->phases["backward"]);
        row->phases["forward"] *= compute;
        row->phases["backward"] *= compute;
      } else {
        row->phases["pp_p2p"] += 4000 + 9600;
        extra += 9600;
      }
      row->dur_us += extra;
    };
  };
  EXPECT_TRUE(Detect(Job(50, slow(1.8))).empty());
  // The same gap with compute as usual is a bubble: the compute check is what refused it.
  EXPECT_EQ(Detect(Job(50, slow(1.0))).size(), 1u);
}

TEST(StageIdle, ShortSpikesSmallGapsAndGapsNobodyWaitsForAreNothing) {
  EXPECT_TRUE(Detect(Job(50, [](int, int, readers::StepRow*) {})).empty());
  EXPECT_TRUE(Detect(Job(50, Bubble(1, 12, 13, 20000))).empty());  // two steps: jitter
  EXPECT_TRUE(Detect(Job(50, Bubble(1, 10, 25, 1500))).empty());   // 2.5% of a step
  // The whole stage idles but the next stage does not wait (its slack absorbed it): nothing is
  // delayed, so no bubble.
  EXPECT_TRUE(Detect(Job(50, [](int r, int st, readers::StepRow* row) {
                if (r / 4 == 1 && st >= 10 && st <= 25) row->dur_us += 9000;
              })).empty());
  // Without pipeline stages (no records) the check has nothing to group by.
  EXPECT_TRUE(DetectStageIdle(Job(50, Bubble(1, 10, 25, 9000)), {}, Hosts(), StageIdleOptions{}).empty());
}

TEST(StageIdle, ABubbleOfHalfTheJobIsOneRunAndNoOtherStageSeemsIdle) {
  // As in the simulator's phases: during the bubble the waiting stages' pipeline receives
  // overlap more of their other phases (their idle falls by 4.5 ms), and the bubble stage waits
  // less for their gradients. The bubble covers steps 15-39, half the job: a median over all
  // steps would sit halfway, making stage 0 look idle (and stage 1 waiting) in the other half.
  auto f = Detect(Job(50, [](int r, int st, readers::StepRow* row) {
    if (st < 15 || st > 39) return;
    row->phases["pp_p2p"] += r / 4 == 1 ? -4500 : 13500;
    row->dur_us += 9000;
  }));
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(Ev(f[0], "first_step"), 15);
  EXPECT_EQ(Ev(f[0], "last_step"), 39);
  EXPECT_NEAR(Ev(f[0], "extra_idle_us"), 13500, 400);
  // 35 of 50 steps: the faster quarter of the steps still shows the usual level.
  f = Detect(Job(50, Bubble(0, 10, 44, 12000)));
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(Ev(f[0], "first_step"), 10);
  EXPECT_EQ(Ev(f[0], "last_step"), 44);
}

TEST(StageIdle, RecordAndStepFindingsOfOneBubbleMerge) {
  auto f = Detect(Job(50, Bubble(1, 10, 25, 9000)));
  ASSERT_EQ(f.size(), 1u);
  Finding rec;
  rec.kind = Kind::kPipelineBubble;
  rec.detector = "comm.pipeline_bubble";
  rec.ranks = {4, 5, 6, 7};
  rec.start_us = kT0;
  rec.end_us = kT0 + 2'000'000;
  rec.confidence = 0.99;
  f.push_back(rec);
  Finding other = rec;  // a bubble of another stage stays separate
  other.ranks = {8, 9, 10, 11};
  f.push_back(other);
  Consolidate(&f);
  ASSERT_EQ(f.size(), 2u);
  const Finding& m = f[0].ranks[0] == 4 ? f[0] : f[1];
  EXPECT_EQ(m.detector, "comm.pipeline_bubble");  // the more confident one keeps its summary
  bool named = false;
  for (const Evidence& e : m.evidence) named |= e.key == "also_detected_by" && e.text == "steps.stage_idle";
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace collscope::diagnose
