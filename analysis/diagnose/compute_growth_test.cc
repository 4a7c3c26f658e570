// L2 compute-phase growth on hand-built step series with known answers.
#include "analysis/diagnose/compute_growth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/diagnose.h"

namespace collscope::diagnose {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000;
constexpr int64_t kStepUs = 40'000;

// 16 ranks, 4 pipeline stages of 4 ranks, one stage per host (h0..h3): stage s runs a different
// amount of compute (the last stage carries the LM head). `tweak(rank, step, row)` applies a fault.
readers::StepSeries Job(int steps, const std::function<void(int, int, readers::StepRow*)>& tweak) {
  readers::StepSeries s;
  s.source = "annotation";
  uint64_t seed = 11;
  auto noise = [&]() {  // +-1% per phase, like per-kernel jitter summed over a step
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return 1.0 + 0.02 * (static_cast<double>((seed >> 33) % 1000) / 1000.0 - 0.5);
  };
  for (int r = 0; r < 16; ++r)
    for (int st = 0; st < steps; ++st) {
      readers::StepRow row;
      row.rank = r;
      row.step = st;
      row.start_us = kT0 + st * kStepUs;
      row.dur_us = kStepUs;
      const double stage = 1.0 + 0.2 * (r / 4);
      row.phases["forward"] = 4000 * stage * noise();
      row.phases["backward"] = 8000 * stage * noise();
      row.phases["tp_comm"] = 1000 * noise();
      row.phases["pp_p2p"] = 20000 * noise();
      row.phases["dp_comm"] = 1700 * noise();
      tweak(r, st, &row);
      s.rows.push_back(row);
    }
  return s;
}

std::map<int, std::string> Hosts() {
  std::map<int, std::string> h;
  for (int r = 0; r < 16; ++r) h[r] = "h" + std::to_string(r / 4);
  return h;
}

// Each host is one pipeline stage, its 4 ranks one tensor-parallel group: the groups doing the
// same work.
SameWork Stages() {
  SameWork g;
  for (int h = 0; h < 4; ++h) g.push_back({4 * h, 4 * h + 1, 4 * h + 2, 4 * h + 3});
  return g;
}

std::vector<Finding> Detect(const readers::StepSeries& s) {
  return DetectComputeGrowth(AnalyzeComputeGrowth(s, ComputeOptions{}), Hosts());
}

double Ev(const Finding& f, const std::string& key) {
  for (const Evidence& e : f.evidence)
    if (e.key == key) return e.value;
  return -1;
}

TEST(ComputeGrowth, SlowStageIsOneHostFindingWithItsWindow) {
  // Host h1 = pipeline stage 1 computes 1.8x in steps 10-25; its neighbours wait (pp_p2p grows).
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (st < 10 || st > 25) return;
    if (r / 4 == 1) {
      row->phases["forward"] *= 1.8;
      row->phases["backward"] *= 1.8;
    } else {
      row->phases["pp_p2p"] += 9000;
    }
  });
  auto f = Detect(s);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kSlowCompute);
  EXPECT_EQ(f[0].detector, "steps.compute");
  EXPECT_EQ(f[0].hosts, std::vector<std::string>{"h1"});
  EXPECT_EQ(f[0].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(f[0].start_us, kT0 + 10 * kStepUs);
  EXPECT_EQ(f[0].end_us, kT0 + 26 * kStepUs);
  EXPECT_NEAR(Ev(f[0], "compute_growth"), 0.8, 0.05);
  EXPECT_EQ(Ev(f[0], "first_step"), 10);
  EXPECT_EQ(Ev(f[0], "last_step"), 25);
  EXPECT_NE(f[0].summary.find("All 4 ranks of host h1"), std::string::npos) << f[0].summary;
  EXPECT_NE(f[0].summary.find("host-wide"), std::string::npos);
}

TEST(ComputeGrowth, PipelineBubbleAndStallAddNoComputeSoNoFinding) {
  // The same stage is late by the same amount, but from a host-side gap before its sends (a
  // bubble: host_stall phase) and one long stall of rank 9: forward/backward are unchanged.
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (st >= 10 && st <= 25) {
      if (r / 4 == 1)
        row->phases["host_stall"] = 9000;
      else
        row->phases["pp_p2p"] += 9000;
    }
    if (r == 9 && st == 30) row->phases["host_stall"] = 3e6;
  });
  EXPECT_TRUE(Detect(s).empty());
}

TEST(ComputeGrowth, JobWideChangeCancelsAgainstTheSameStep) {
  // Every rank computes 30% more in steps 20-40 (a longer sequence length): nobody is slow.
  auto s = Job(50, [](int, int st, readers::StepRow* row) {
    if (st < 20 || st > 40) return;
    row->phases["forward"] *= 1.3;
    row->phases["backward"] *= 1.3;
  });
  EXPECT_TRUE(Detect(s).empty());
}

TEST(ComputeGrowth, BackwardOnlyStragglerIsARankFinding) {
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (r == 9 && st >= 5 && st < 21) row->phases["backward"] *= 2.5;
  });
  auto f = Detect(s);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{9});
  EXPECT_EQ(f[0].hosts, std::vector<std::string>{"h2"});
  EXPECT_NEAR(Ev(f[0], "backward_growth"), 1.5, 0.05);
  EXPECT_NEAR(Ev(f[0], "forward_growth"), 0.0, 0.05);
  EXPECT_NE(f[0].summary.find("backward only"), std::string::npos) << f[0].summary;
  EXPECT_NE(f[0].summary.find("Rank 9 on h2"), std::string::npos) << f[0].summary;
}

// Host wall time may hide waiting inside a phase: where GPU time was measured it decides, and a
// finding from wall time alone says so and is less sure.
TEST(ComputeGrowth, GpuTimeDecidesWhereMeasuredAndWallTimeIsSaidAndDiscounted) {
  auto wall = Detect(Job(50, [](int r, int st, readers::StepRow* row) {
    if (r == 9 && st >= 5 && st < 21) row->phases["backward"] *= 2.5;
  }));
  ASSERT_EQ(wall.size(), 1u);
  // The wall clock shows rank 9's backward growing; its GPU time did not: it waited, and the
  // GPU time clears it.
  auto gpu_flat = Detect(Job(50, [](int r, int st, readers::StepRow* row) {
    row->gpu_phases["forward"] = row->phases["forward"];
    row->gpu_phases["backward"] = row->phases["backward"];
    if (r == 9 && st >= 5 && st < 21) row->phases["backward"] *= 2.5;
  }));
  EXPECT_TRUE(gpu_flat.empty());
  auto gpu_slow = Detect(Job(50, [](int r, int st, readers::StepRow* row) {
    if (r == 9 && st >= 5 && st < 21) row->phases["backward"] *= 2.5;
    row->gpu_phases["forward"] = row->phases["forward"];
    row->gpu_phases["backward"] = row->phases["backward"];
  }));
  ASSERT_EQ(gpu_slow.size(), 1u);
  auto timing = [](const Finding& f) {
    for (const Evidence& e : f.evidence)
      if (e.key == "phase_timing") return e.text;
    return std::string();
  };
  EXPECT_NE(timing(wall[0]).find("host wall clock"), std::string::npos);
  EXPECT_NE(timing(gpu_slow[0]).find("GPU time"), std::string::npos);
  EXPECT_NEAR(wall[0].confidence, 0.85 * gpu_slow[0].confidence, 1e-9);
}

TEST(ComputeGrowth, OverlappingFaultsStaySeparate) {
  // Rank 2 straggles in steps 10-30 while host h3 slows down in steps 20-35.
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    double k = 1;
    if (r == 2 && st >= 10 && st <= 30) k *= 1.5;
    if (r / 4 == 3 && st >= 20 && st <= 35) k *= 1.4;
    row->phases["forward"] *= k;
    row->phases["backward"] *= k;
  });
  auto f = Detect(s);
  ASSERT_EQ(f.size(), 2u);
  std::sort(f.begin(), f.end(),
            [](const Finding& a, const Finding& b) { return a.ranks[0] < b.ranks[0]; });
  EXPECT_EQ(f[0].ranks, std::vector<int>{2});
  EXPECT_EQ(Ev(f[0], "first_step"), 10);
  EXPECT_EQ(Ev(f[0], "last_step"), 30);
  EXPECT_EQ(f[1].ranks, (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(Ev(f[1], "first_step"), 20);
  EXPECT_EQ(Ev(f[1], "last_step"), 35);
}

TEST(ComputeGrowth, ShortSpikesAndSmallGrowthAreNotStragglers) {
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (r == 3 && (st == 12 || st == 13)) row->phases["backward"] *= 3;  // two steps: jitter
    if (r == 6 && st >= 10 && st < 30) row->phases["backward"] *= 1.05;  // +3% of compute
  });
  EXPECT_TRUE(Detect(s).empty());
}

TEST(ComputeGrowth, OneOrdinaryStepInsideARunDoesNotSplitIt) {
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (r == 0 && st >= 10 && st < 30 && st != 20) row->phases["forward"] *= 2;
  });
  auto f = Detect(s);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(Ev(f[0], "first_step"), 10);
  EXPECT_EQ(Ev(f[0], "last_step"), 29);
}

Finding Late(std::vector<int> ranks, std::string host, int s0, int s1) {
  Finding f;
  f.kind = Kind::kSlowCompute;
  f.detector = "comm.late_arrival";
  f.ranks = std::move(ranks);
  f.hosts = {std::move(host)};
  f.start_us = kT0 + s0 * kStepUs;
  f.end_us = kT0 + s1 * kStepUs;
  f.confidence = 0.5;
  return f;
}

TEST(DemoteFlatLateArrivals, PropagatedLatenessBecomesVictimsOfTheStraggler) {
  // Rank 8 computes 2x in steps 15-40; ranks 12,13 (its pipeline neighbours) arrive last in their
  // own group because they waited for it. Their compute is flat: victims, not a second cause.
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (r == 8 && st >= 15 && st <= 40) row->phases["backward"] *= 2;
  });
  const ComputeProfile p = AnalyzeComputeGrowth(s, ComputeOptions{});
  std::vector<Finding> fs = DetectComputeGrowth(p, Hosts());
  ASSERT_EQ(fs.size(), 1u);
  fs.push_back(Late({8}, "h2", 15, 41));
  fs.push_back(Late({12, 13}, "h3", 20, 41));
  std::vector<Suppressed> suppressed;
  EXPECT_EQ(DemoteFlatLateArrivals(p, 200000, &fs, Stages(), &suppressed), 1);
  ASSERT_EQ(fs.size(), 2u);
  ASSERT_EQ(suppressed.size(), 1u);
  EXPECT_EQ(suppressed[0].finding.ranks, (std::vector<int>{12, 13}));
  EXPECT_NE(suppressed[0].reason.find("propagated lateness"), std::string::npos)
      << suppressed[0].reason;
  EXPECT_EQ(fs[0].ranks, std::vector<int>{8});
  EXPECT_EQ(fs[0].victims, (std::vector<int>{12, 13}));
  EXPECT_EQ(fs[1].detector, "comm.late_arrival");
  EXPECT_EQ(fs[1].ranks, std::vector<int>{8});
  // Consolidate then merges the two findings about rank 8 and names both detectors.
  Consolidate(&fs);
  ASSERT_EQ(fs.size(), 1u);
  bool named = false;
  for (const Evidence& e : fs[0].evidence)
    named |=
        e.key == "also_detected_by" && (e.text == "comm.late_arrival" || e.text == "steps.compute");
  EXPECT_TRUE(named);
}

TEST(DemoteFlatLateArrivals, HostMateWithFlatComputeMovesToVictims) {
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (r == 11 && st >= 20) row->phases["forward"] *= 1.6;
  });
  const ComputeProfile p = AnalyzeComputeGrowth(s, ComputeOptions{});
  std::vector<Finding> fs = {Late({10, 11}, "h2", 22, 48)};
  EXPECT_EQ(DemoteFlatLateArrivals(p, 200000, &fs, Stages()), 0);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].ranks, std::vector<int>{11});
  EXPECT_EQ(fs[0].victims, std::vector<int>{10});
}

// Rank 9 computes 1.5x its peers in every step (a GPU slow from the start): it never grew against
// its own history, yet it is the straggler, not a victim of the slow link beside it. Rank 13, in
// the heaviest stage, computes as much as the ranks doing its work: flat, and demoted.
TEST(DemoteFlatLateArrivals, AStragglerFromTheFirstStepIsJudgedAgainstItsPeers) {
  auto s = Job(50, [](int r, int, readers::StepRow* row) {
    if (r == 9) {
      row->phases["forward"] *= 1.5;
      row->phases["backward"] *= 1.5;
    }
  });
  const ComputeProfile p = AnalyzeComputeGrowth(s, ComputeOptions{});
  EXPECT_TRUE(DetectComputeGrowth(p, Hosts()).empty());  // invisible against its own history
  EXPECT_NEAR(ComputeAbovePeers(p, 9, Stages()), 0.5, 0.03);
  EXPECT_NEAR(ComputeAbovePeers(p, 13, Stages()), 0.0, 0.03);
  Finding link;
  link.kind = Kind::kSlowLink;
  link.detector = "comm.slow_link";
  link.hosts = {"h0"};
  link.ranks = {0, 1, 2, 3};
  link.start_us = kT0;
  link.end_us = kT0 + 50 * kStepUs;
  std::vector<Finding> fs = {link, Late({9}, "h2", 0, 50), Late({13}, "h3", 0, 50)};
  EXPECT_EQ(DemoteFlatLateArrivals(p, 200000, &fs, Stages()), 1);
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[1].ranks, std::vector<int>{9});
  // Without groups (no records to tell who does the same work) nobody is judged against peers,
  // and rank 9's flat history gets it dropped as well.
  fs = {link, Late({9}, "h2", 0, 50), Late({13}, "h3", 0, 50)};
  EXPECT_EQ(DemoteFlatLateArrivals(p, 200000, &fs), 2);
}

// A GPU slow from the first step: nothing grew against its own history, but it computes 30% more
// than its stage peers in every step. A whole host so from the start is one finding; a healthy
// job whose stages do unequal work is nothing, unless the stages are unknown.
TEST(DetectComputeAbovePeers, ASlowGpuOrHostFromTheFirstStepAgainstItsPeers) {
  // h2 and h3 do the same work, in the data-parallel groups {8, 9, 12, 13} and {10, 11, 14, 15};
  // rank 6 is slow alone in h1's group, and all of h2 is slow, which its own tensor-parallel
  // group cannot show but its data-parallel groups do.
  SameWork groups = Stages();
  groups.push_back({8, 9, 12, 13});
  groups.push_back({10, 11, 14, 15});
  for (auto& g : groups) std::sort(g.begin(), g.end());
  auto s = Job(50, [](int r, int, readers::StepRow* row) {
    if (r >= 12) {  // the same work as h2
      row->phases["forward"] *= 1.4 / 1.6;
      row->phases["backward"] *= 1.4 / 1.6;
    }
    if (r == 6 || (r >= 8 && r <= 11)) {
      row->phases["forward"] *= 1.3;
      row->phases["backward"] *= 1.3;
    }
  });
  const ComputeProfile p = AnalyzeComputeGrowth(s, ComputeOptions{});
  EXPECT_TRUE(DetectComputeGrowth(p, Hosts()).empty());
  const auto f = DetectComputeAbovePeers(p, groups, Hosts());
  ASSERT_EQ(f.size(), 2u) << FindingsToText(f);
  EXPECT_EQ(f[0].hosts, std::vector<std::string>{"h1"});
  EXPECT_EQ(f[0].ranks, std::vector<int>{6});
  EXPECT_NEAR(Ev(f[0], "compute_above_peers"), 0.3, 0.03);
  EXPECT_EQ(Ev(f[0], "steps_above_share"), 1);
  EXPECT_EQ(f[0].start_us, kT0);
  EXPECT_EQ(f[1].hosts, std::vector<std::string>{"h2"});
  EXPECT_EQ(f[1].ranks, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_NE(f[1].summary.find("All 4 ranks of host h2"), std::string::npos) << f[1].summary;
  // A healthy job whose stages do unequal work: nothing, as long as the groups are the same
  // work's; a group across stages would make the heavy stage stand out.
  const ComputeProfile healthy =
      AnalyzeComputeGrowth(Job(50, [](int, int, readers::StepRow*) {}), ComputeOptions{});
  EXPECT_TRUE(DetectComputeAbovePeers(healthy, Stages(), Hosts()).empty());
  EXPECT_FALSE(DetectComputeAbovePeers(healthy, {{0, 1, 4, 5, 12, 13}}, Hosts()).empty());
}

// Who does the same work, from the communicators: groups that run collectives, of 3 or more
// ranks short of the job. A pipeline communicator (Send/Recv only), the world communicator and a
// 2-rank group span stages.
TEST(SameWorkGroups, CollectiveGroupsInsideAStageOnly) {
  CommData d;
  for (int r = 0; r < 8; ++r) d.procs.push_back({r / 4, r});
  auto comm = [&](std::vector<int> procs, bool collectives) {
    Comm c;
    c.n_ranks = static_cast<int>(procs.size());
    c.procs = std::move(procs);
    d.comms.push_back(c);
    if (collectives) {
      Inst x;
      x.comm = static_cast<int>(d.comms.size()) - 1;
      d.insts.push_back(x);
    }
  };
  comm({0, 1, 2, 3}, true);              // tensor-parallel, stage 0
  comm({7, 5, 4, 6}, true);              // tensor-parallel, stage 1 (any member order)
  comm({0, 4, 1, 5}, false);             // pipeline: Send/Recv only
  comm({0, 7}, true);                    // embedding group
  comm({0, 1, 2, 3, 4, 5, 6, 7}, true);  // world
  comm({3, 2, 1, 0}, true);              // the same group again
  const SameWork g = SameWorkGroups(d);
  EXPECT_EQ(g, (SameWork{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

TEST(DemoteFlatLateArrivals, LateWithFlatComputeIsExplainedByASlowLink) {
  auto s = Job(50, [](int, int, readers::StepRow*) {});
  const ComputeProfile p = AnalyzeComputeGrowth(s, ComputeOptions{});
  Finding link;
  link.kind = Kind::kSlowLink;
  link.detector = "comm.slow_link";
  link.hosts = {"h0"};
  link.ranks = {0, 1, 2, 3};
  link.start_us = kT0 + 10 * kStepUs;
  link.end_us = kT0 + 30 * kStepUs;
  std::vector<Finding> fs = {link, Late({2, 3}, "h0", 12, 30)};
  // The host's ranks arrive last because their transfers are slow: not a compute straggler.
  EXPECT_EQ(DemoteFlatLateArrivals(p, 200000, &fs), 1);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, Kind::kSlowLink);
  EXPECT_TRUE(fs[0].victims.empty());  // they are the link finding's own ranks
  // A link finding far away in time explains nothing.
  fs = {link, Late({2, 3}, "h0", 40, 48)};
  EXPECT_EQ(DemoteFlatLateArrivals(p, 40000, &fs), 0);
  EXPECT_EQ(fs.size(), 2u);
}

TEST(DemoteFlatLateArrivals, UnexplainedOrUncoveredLateArrivalsStay) {
  auto s = Job(50, [](int, int, readers::StepRow*) {});
  const ComputeProfile p = AnalyzeComputeGrowth(s, ComputeOptions{});
  // Flat compute but nothing else explains it (e.g. a slow data loader the phases do not show).
  std::vector<Finding> fs = {Late({5}, "h1", 10, 30)};
  EXPECT_EQ(DemoteFlatLateArrivals(p, 200000, &fs), 0);
  EXPECT_EQ(fs.size(), 1u);
  // A rank the step series does not cover is never judged.
  auto comp =
      DetectComputeGrowth(AnalyzeComputeGrowth(Job(50,
                                                   [](int r, int st, readers::StepRow* row) {
                                                     if (r == 1 && st > 10 && st < 30)
                                                       row->phases["forward"] *= 2;
                                                   }),
                                               ComputeOptions{}),
                          Hosts());
  ASSERT_EQ(comp.size(), 1u);
  fs = {comp[0], Late({40}, "h9", 10, 30)};
  EXPECT_EQ(DemoteFlatLateArrivals(p, 200000, &fs), 0);
  EXPECT_EQ(fs.size(), 2u);
}

Finding Stall(int rank, int step, double wait_us) {
  Finding f;
  f.kind = Kind::kHostStall;
  f.detector = "comm.stall";
  f.ranks = {rank};
  f.hosts = {"h" + std::to_string(rank / 4)};
  f.start_us = kT0 + step * kStepUs;
  f.end_us = kT0 + (step + 1) * kStepUs;
  f.confidence = 0.8;
  f.Add("max_wait_us", wait_us);
  return f;
}

TEST(DemotePropagatedStalls, APeerThatWaitedIsAVictimOfTheStalledRank) {
  // Rank 9 stalls 3 s in step 30 (a host-side gap: its own time); everyone else waits for it in
  // their communication phases, so every step 30 is 3 s longer.
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (st != 30) return;
    row->dur_us += 3e6;
    if (r == 9)
      row->phases["host_stall"] = 3e6;
    else
      row->phases["dp_comm"] += 3e6;
  });
  const ComputeProfile p = AnalyzeComputeGrowth(s, ComputeOptions{});
  EXPECT_NEAR(OwnTimeJump(p, 9, kT0 + 30 * kStepUs, kT0 + 30 * kStepUs + 10), 3e6, 2e3);
  EXPECT_LT(OwnTimeJump(p, 13, kT0 + 30 * kStepUs, kT0 + 30 * kStepUs + 10), 2e3);
  EXPECT_TRUE(DetectComputeGrowth(p, Hosts()).empty());  // a stall is not slow compute
  // The detector blamed rank 9 and, wrongly, rank 13 (it arrived 2.9 s late elsewhere).
  std::vector<Finding> fs = {Stall(9, 30, 3e6), Stall(13, 30, 2.9e6)};
  EXPECT_EQ(DemotePropagatedStalls(p, 100000, &fs), 1);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].ranks, std::vector<int>{9});
  EXPECT_EQ(fs[0].victims, std::vector<int>{13});
  // Without the real stall in the series, nothing explains rank 13's wait: it stays.
  const ComputeProfile healthy =
      AnalyzeComputeGrowth(Job(50, [](int, int, readers::StepRow*) {}), ComputeOptions{});
  fs = {Stall(13, 30, 2.9e6)};
  EXPECT_EQ(DemotePropagatedStalls(healthy, 100000, &fs), 0);
  EXPECT_EQ(fs.size(), 1u);
}

Finding Bubble(std::vector<int> ranks, int s0, int s1) {
  Finding f;
  f.kind = Kind::kPipelineBubble;
  f.detector = "comm.pipeline_bubble";
  f.ranks = std::move(ranks);
  f.start_us = kT0 + s0 * kStepUs;
  f.end_us = kT0 + s1 * kStepUs;
  f.confidence = 0.6;
  return f;
}

TEST(DemoteBubbles, ASlowStageIsNotABubble) {
  // Stage 1 (host h1) computes 1.8x in steps 10-25: its activations are late, as in a bubble.
  auto slow = Job(50, [](int r, int st, readers::StepRow* row) {
    if (r / 4 != 1 || st < 10 || st > 25) return;
    row->phases["forward"] *= 1.8;
    row->phases["backward"] *= 1.8;
  });
  const ComputeProfile p = AnalyzeComputeGrowth(slow, ComputeOptions{});
  std::vector<Finding> fs = DetectComputeGrowth(p, Hosts());
  fs.push_back(Bubble({4, 5, 6, 7}, 10, 26));
  EXPECT_EQ(DemoteBubbles(p, 100000, &fs), 1);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, Kind::kSlowCompute);
  bool seen = false;
  for (const Evidence& e : fs[0].evidence) seen |= e.key == "also_seen_as";
  EXPECT_TRUE(seen);
  // A real bubble (a host-side gap before the sends; compute as usual) stays a bubble.
  auto bubble = Job(50, [](int r, int st, readers::StepRow* row) {
    if (r / 4 == 1 && st >= 10 && st <= 25) row->phases["host_stall"] = 9000;
  });
  const ComputeProfile q = AnalyzeComputeGrowth(bubble, ComputeOptions{});
  fs = DetectComputeGrowth(q, Hosts());
  fs.push_back(Bubble({4, 5, 6, 7}, 10, 26));
  EXPECT_EQ(DemoteBubbles(q, 100000, &fs), 0);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, Kind::kPipelineBubble);
}

TEST(DemoteBubbles, InheritedLatenessIsNotTheStagesBubble) {
  // Stage 2 delivers late because stage 1's link is slow: stage 2 itself waits (pp_p2p), its own
  // time stays as it was. The bubble finding claims its receivers idled 10% of each step.
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (st < 10 || st > 25 || r / 4 < 2) return;
    row->phases["pp_p2p"] += 4000;
    row->dur_us += 4000;
  });
  const ComputeProfile p = AnalyzeComputeGrowth(s, ComputeOptions{});
  Finding link;
  link.kind = Kind::kSlowLink;
  link.detector = "comm.slow_link";
  link.hosts = {"h1"};
  link.start_us = kT0 + 10 * kStepUs;
  link.end_us = kT0 + 26 * kStepUs;
  Finding b = Bubble({8, 9, 10, 11}, 10, 26);
  b.Add("extra_idle_share", 0.10);
  std::vector<Finding> fs = {b};
  EXPECT_EQ(DemoteBubbles(p, 100000, &fs), 0);  // nothing else explains it: it stays
  fs = {b, link};
  EXPECT_EQ(DemoteBubbles(p, 100000, &fs), 1);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, Kind::kSlowLink);
  // A real bubble of stage 2 (a 4 ms gap before its sends per step: own time) stays, link or not.
  auto real = Job(50, [](int r, int st, readers::StepRow* row) {
    if (st < 10 || st > 25 || r / 4 < 2) return;
    if (r / 4 == 2)
      row->phases["host_stall"] = 4000;
    else
      row->phases["pp_p2p"] += 4000;
    row->dur_us += 4000;
  });
  const ComputeProfile q = AnalyzeComputeGrowth(real, ComputeOptions{});
  fs = {b, link};
  EXPECT_EQ(DemoteBubbles(q, 100000, &fs), 0);
  EXPECT_EQ(fs.size(), 2u);
  // Downstream of that real bubble, stage 3 waits and then delivers late itself: the bubble
  // finding about stage 3 (own time flat) is explained by stage 2's and dropped; two inherited
  // bubbles do not explain each other.
  Finding down = Bubble({12, 13, 14, 15}, 10, 26);
  down.Add("extra_idle_share", 0.10);
  fs = {b, down};
  EXPECT_EQ(DemoteBubbles(q, 100000, &fs), 1);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].ranks, (std::vector<int>{8, 9, 10, 11}));
  fs = {b, down};
  EXPECT_EQ(DemoteBubbles(p, 100000, &fs), 0);  // stage 2 inherited too: nothing explains either
}

TEST(DemoteBubbles, AStepPhaseBubbleIsLeftAloneAndExplainsTheNextStage) {
  // Stages 2 and 3 wait in steps 10-25, their own time flat. A step-phase bubble of stage 1
  // (found from stage 1's own gap against a baseline a long bubble does not shift) is not judged
  // again by this median-based own time; it explains the record finding about stage 2, which
  // only inherited the lateness.
  auto s = Job(50, [](int r, int st, readers::StepRow* row) {
    if (st < 10 || st > 25 || r / 4 < 2) return;
    row->phases["pp_p2p"] += 4000;
    row->dur_us += 4000;
  });
  const ComputeProfile p = AnalyzeComputeGrowth(s, ComputeOptions{});
  Finding steps = Bubble({4, 5, 6, 7}, 10, 26);
  steps.detector = "steps.stage_idle";
  steps.Add("extra_idle_share", 0.10);
  Finding inherited = Bubble({8, 9, 10, 11}, 10, 26);
  inherited.Add("extra_idle_share", 0.10);
  std::vector<Finding> fs = {steps, inherited};
  EXPECT_EQ(DemoteBubbles(p, 100000, &fs), 1);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].detector, "steps.stage_idle");
}

}  // namespace
}  // namespace collscope::diagnose
