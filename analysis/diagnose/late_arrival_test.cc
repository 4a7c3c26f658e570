// The statistics of comm.late_arrival on hand-built instances: how often a rank must arrive last,
// against chance and against the number of ranks that could have done so by luck.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "analysis/diagnose/late_arrival.h"

namespace collscope::diagnose {
namespace {

// `comms` communicators of `n` processes each, one host per process.
CommData Comms(int comms, int n) {
  CommData d;
  for (int c = 0; c < comms; ++c) {
    Comm cm;
    cm.id = "0x" + std::to_string(c + 1);
    cm.n_ranks = n;
    cm.nnodes = n;
    for (int k = 0; k < n; ++k) {
      const int p = static_cast<int>(d.procs.size());
      d.hosts.push_back("h" + std::to_string(p));
      d.procs.push_back({p, p});
      cm.procs.push_back(p);
      cm.hosts.push_back(p);
    }
    d.comms.push_back(cm);
  }
  return d;
}

// Instances of every communicator of `d` over 10 windows of 200 ms, 8 a window: instance i of
// window w of communicator c makes the others wait wait_us(c, w, i) for its member last(c, w, i).
void AddInstances(CommData* d, const std::function<double(int, int, int)>& wait_us,
                  const std::function<int(int, int, int)>& last) {
  const int64_t W = 200000;
  for (int c = 0; c < static_cast<int>(d->comms.size()); ++c) {
    const std::vector<int>& members = d->comms[static_cast<size_t>(c)].procs;
    for (int w = 0; w < 10; ++w)
      for (int i = 0; i < 8; ++i) {
        Inst x;
        x.comm = c;
        x.sn = w * 8 + i;
        x.bytes = 1 << 20;
        x.n = static_cast<int>(members.size());
        x.tmin = 100;
        x.tmed = x.tmax = 100 + wait_us(c, w, i);
        x.pmin = members[static_cast<size_t>(last(c, w, i))];
        x.ts = w * W + i * (W / 8);
        d->insts.push_back(x);
      }
  }
  d->t0 = 0;
  d->t1 = 10 * W - 1;
}

// `comms` communicators of 8 processes each (one host per process). Most instances end within
// noise (10 us); two per window, and all 8 of window 4 of communicator 0, make the others wait
// `wait_us` for their last member: process `late` at `late_count` of window 4's, and otherwise
// the members in turn.
CommData Job(int comms, int late, int late_count, double wait_us) {
  const int n = 8;
  CommData d = Comms(comms, n);
  AddInstances(
      &d, [&](int c, int w, int i) { return i < 2 || (c == 0 && w == 4) ? wait_us : 10; },
      [&](int c, int w, int i) {
        const int turn = (i + w + c) % n;
        if (c != 0 || w != 4) return turn;
        return i < late_count ? late : turn == late ? (turn + 1) % n : turn;
      });
  return d;
}

int EventsOf(const CommData& d, int proc) {
  LateOptions o;
  int k = 0;
  for (const LateEvent& e : FindLateEvents(d, o)) k += e.proc == proc;
  return k;
}

TEST(LateArrival, ARunThatChanceExplainsAmongManyRanksIsNoEvent) {
  // 6 of 8 at chance 1/8 reads z = 5.3, but its exact tail is 8.5e-5: a real signal among the 8
  // ranks of one communicator, and what luck gives some rank among 1,600 (the 256-GPU pipeline
  // job whose tensor-parallel rank was blamed for one window).
  EXPECT_EQ(EventsOf(Job(1, 3, 6, 300), 3), 1);
  EXPECT_EQ(EventsOf(Job(200, 3, 6, 300), 3), 0);
}

TEST(LateArrival, ConsistentLatenessCheapInOneCommunicatorIsAnEvent) {
  // Last at every instance of one window, each making the others wait 150 us: under 0.6% of their time
  // is below the old 1% share, and is about what a host 1.8x slower in compute cost its
  // data-parallel peers while it cost the job 4.6% of its step.
  CommData d = Job(200, 3, 8, 150);
  LateOptions o;
  bool found = false;
  for (const LateEvent& e : FindLateEvents(d, o))
    if (e.proc == 3) {
      found = true;
      EXPECT_LT(e.wait_share, 0.01);
    }
  EXPECT_TRUE(found);
}

TEST(LateArrival, ConsistentButNegligibleLatenessIsNoFinding) {
  // Last at all 8 instances of one window, significant, but each wait 25 us or 75 us: its peers
  // lose 0.1% or 0.3% of their time, below the 0.5% floor (healthy GPUs' speed spread costs as
  // much); at 300 us (1.2%) it is a finding.
  LateOptions o;
  EXPECT_TRUE(DetectLateArrivals(Job(200, 3, 8, 25), o).empty());
  EXPECT_TRUE(DetectLateArrivals(Job(200, 3, 8, 75), o).empty());
  auto f = DetectLateArrivals(Job(200, 3, 8, 300), o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>({3}));
}

// `hosts` hosts of `gpus` processes; GPU g of hosts b*n .. b*n+n-1 make communicator (g, b) of n
// members, one a host. 10 windows of 200 ms with 8 instances each; two of a window's instances,
// and in windows 2-7 all of them, make the others wait `wait_us` for their last member: every
// process of host 0 there, else the members in turn.
CommData HostJob(int hosts, int gpus, int n, double wait_us) {
  CommData d;
  for (int h = 0; h < hosts; ++h) {
    d.hosts.push_back("h" + std::to_string(h));
    for (int g = 0; g < gpus; ++g) d.procs.push_back({h, h * gpus + g});
  }
  for (int b = 0; b < hosts / n; ++b)
    for (int g = 0; g < gpus; ++g) {
      Comm cm;
      cm.id = "0x" + std::to_string(d.comms.size() + 1);
      cm.n_ranks = cm.nnodes = n;
      for (int k = 0; k < n; ++k) {
        cm.procs.push_back((b * n + k) * gpus + g);
        cm.hosts.push_back(b * n + k);
      }
      d.comms.push_back(cm);
    }
  // Host 0's processes are member 0 of communicators (g, 0), the first `gpus` of them.
  auto late_host = [=](int c, int w) { return w >= 2 && w <= 7 && c < gpus; };
  AddInstances(
      &d, [&](int c, int w, int i) { return i < 2 || late_host(c, w) ? wait_us : 10; },
      [&](int c, int w, int i) { return late_host(c, w) ? 0 : (i + w + c) % n; });
  return d;
}

TEST(LateArrival, EveryRankOfAHostLateInAGroupOfItsOwnIsAFindingThoughCheap) {
  // Each of host 0's 8 ranks last at every instance of its own 8-member group for 6 windows,
  // costing those peers 0.3% of their time: under the floor for one rank, but one healthy GPU
  // makes one rank last, not all 8 of a host (chance 8^-8).
  LateOptions o;
  auto f = DetectLateArrivals(HostJob(8, 8, 8, 75), o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"h0"}));
  EXPECT_EQ(f[0].ranks, std::vector<int>({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_LT(f[0].Number("peer_wait_share"), 0.005);
}

TEST(LateArrival, BothRanksOfAHostLateInPairsIsWithinChance) {
  // Each of host 0's 2 ranks last in its own pair: one host in four is so by the GPUs' speeds
  // alone, so the floor holds for them.
  LateOptions o;
  EXPECT_TRUE(DetectLateArrivals(HostJob(8, 2, 2, 75), o).empty());
}

// Process 0 is last in communicator A for 10 windows of 8 instances: at all of them, making the
// others wait 600 us, in the first 4, where it waited on process 8, last in communicator B; in the
// 6 after them at `own_lasts` of each window's 8 (else the others in turn), making them wait
// `own_wait_us`.
CommData WaitedThenLate(int own_lasts, double own_wait_us) {
  CommData d;
  for (int p = 0; p < 16; ++p) {
    d.hosts.push_back("h" + std::to_string(p));
    d.procs.push_back({p, p});
  }
  Comm a, b;
  a.id = "0xa";
  b.id = "0xb";
  for (int k = 0; k < 8; ++k) {
    a.procs.push_back(k);
    b.procs.push_back(k == 0 ? 0 : 7 + k);
  }
  for (Comm* c : {&a, &b}) {
    c->n_ranks = c->nnodes = 8;
    c->hosts = c->procs;
    d.comms.push_back(*c);
  }
  AddInstances(
      &d, [&](int c, int w, int) { return w < 4    ? 600
                                          : c == 0 ? own_wait_us
                                                   : 10; },
      [&](int c, int w, int i) {
        return w < 4 ? (c == 0 ? 0 : 1) : c == 0 && i < own_lasts ? 0 : 1 + (i + w) % 7;
      });
  return d;
}

TEST(LateArrival, LatenessAfterTheWaitThatExplainedItEndedIsTheRanksOwn) {
  // What process 0 waited explains more than half of what it made A wait, so its run is
  // propagated lateness; the 6 windows after the wait, all of them late, are its own (an
  // independent generator's host slowed for 12 steps of a job whose straggler on its pipeline
  // partner host held it throughout, x5019).
  std::vector<Suppressed> dropped;
  LateOptions o;
  o.suppressed = &dropped;
  std::set<std::vector<int>> culprits;
  int64_t own_start = -1;
  for (const Finding& f : DetectLateArrivals(WaitedThenLate(8, 300), o)) {
    culprits.insert(f.ranks);
    if (f.ranks == std::vector<int>({0})) own_start = f.start_us;
  }
  EXPECT_EQ(culprits, std::set<std::vector<int>>({{0}, {8}}));
  EXPECT_EQ(own_start, 4 * 200000);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_NE(dropped[0].reason.find("which no wait explains, stays its own"), std::string::npos)
      << dropped[0].reason;
  // Last at 2 of each window's 8 there (12 of 48 at chance 1/8): no evidence alone, however costly.
  o.suppressed = nullptr;
  auto f = DetectLateArrivals(WaitedThenLate(2, 1000), o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>({8}));
}

// A sampled record (the 2.29 Inspector's latest-snapshot dumps): member `k` of communicator `c`
// alone recorded instance `sn`.
Inst SampledRecord(const CommData& d, int c, int k, int64_t sn, int64_t bytes, double exec,
                   int64_t ts) {
  Inst x;
  x.comm = c;
  x.sn = sn;
  x.bytes = bytes;
  x.n = 1;
  x.pmin = d.comms[static_cast<size_t>(c)].procs[static_cast<size_t>(k)];
  x.tmin = x.tmed = x.tmax = exec;
  x.ts = ts;
  return x;
}

// Sampled records: each process of 16 pair
// communicators (tensor-parallel pairs) leaves one record per window, never of the same instance
// as its partner's. In pair 0, process 1 arrives late at all of them: its records are the
// shortest. The others are late in turn, by chance.
CommData SampledPairs(double late_exec_us) {
  CommData d = Comms(16, 2);
  const int64_t W = 200000;
  for (int c = 0; c < 16; ++c)
    for (int w = 0; w < 10; ++w)
      for (int k = 0; k < 2; ++k) {
        const bool late_in_turn = (w + k + c) % 2 == 0;
        const double exec = c == 0 ? (k == 1 ? late_exec_us : 300) : (late_in_turn ? 60 : 300);
        d.insts.push_back(
            SampledRecord(d, c, k, w * 100 + k * 50, 1 << 24, exec, w * W + k * (W / 2) + c * 100));
      }
  d.t0 = 0;
  d.t1 = 10 * W - 1;
  return d;
}

TEST(LateArrival, ASampledPairsStragglerIsAnEventThoughItsPartnerIsItsOnlyPeer) {
  // Shorter than its partner's nearest record has chance 1/2 per record: 10 of 10 reads z = 3.2.
  // Against the partner's 8 nearest records, chance is 1/9 each and 10 of 10 is beyond luck.
  LateOptions o;
  std::vector<LateEvent> ev = FindLateEvents(SampledPairs(60), o);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].proc, 1);
  EXPECT_EQ(ev[0].last, 10);
  // As short as its partner at times: no event.
  EXPECT_TRUE(FindLateEvents(SampledPairs(300), o).empty());
}

// Sampled records of a 1 s dump: 50 communicators of 8 (400 memberships, a 128-GPU job's), each
// process one record per dump for 13 dumps, healthy ones 750-950 us. In communicator 0, the
// members wait for dumps 5-9 (`late_dumps`): their records grow to 2,500-2,700 us, while process
// 5's are `late_exec` (700 us: it is who they wait for).
CommData SampledStraggler(int late_dumps, double late_exec = 700) {
  CommData d = Comms(50, 8);
  for (int c = 0; c < 50; ++c)
    for (int t = 0; t < 13; ++t)
      for (int k = 0; k < 8; ++k) {
        const double healthy = 750 + 50 * ((t * 7 + k * 3 + c) % 5);
        const bool late = c == 0 && t >= 5 && t < 5 + late_dumps;
        const double exec = late ? (k == 5 ? late_exec : 1750 + healthy) : healthy;
        d.insts.push_back(
            SampledRecord(d, c, k, t * 100 + k * 10, 1 << 27, exec, t * 1000000 + k * 100 + c));
      }
  d.t0 = 0;
  d.t1 = 13 * 1000000;
  return d;
}

TEST(LateArrival, ASampledStragglerIsAnEventAmongTheMembersOfCommunicatorsWhoseRecordsWait) {
  // Shortest of its 16 nearest neighbours in 5 records: e^-14 by chance, against the e^-18 that
  // every one of 400 memberships and every run of its 13 records' windows needs. Its peers'
  // records wait, which only communicator 0's do: against its 8 members, it is beyond luck.
  LateOptions o;
  bool found = false;
  for (const LateEvent& e : FindLateEvents(SampledStraggler(5), o)) {
    EXPECT_EQ(e.proc, 5);
    EXPECT_EQ(e.comm, 0);
    found = true;
  }
  EXPECT_TRUE(found);
  // Three records are within luck even there.
  EXPECT_TRUE(FindLateEvents(SampledStraggler(3), o).empty());
  EXPECT_TRUE(FindLateEvents(SampledStraggler(0), o).empty());
  // The group waits for someone else for 7 dumps, and process 5's records are shorter than its
  // peers' by 10-210 us: no more than the collective's records differ anyway (3x their median
  // deviation, 150 us), as a healthy GPU's speed spread makes them; it says nothing of whom they
  // wait for.
  EXPECT_TRUE(FindLateEvents(SampledStraggler(7, 2490), o).empty());
}

// Process 0 arrives last at half of its 8-member group's collectives for 10 windows of 200 ms:
// by 1 ms in windows 0-3, by 100 us after. Each member also has a 2-member group of its own,
// whose transfers are slow: process 0's at every collective of windows 0-3 (79 ms in all), the
// others' at two a window in windows 4-9 (84 ms). Over the whole run process 0 was held by slow
// transfers no more than its peers; where it was late (windows 0-3), far longer. So its lateness
// is propagated, and the reason must say what it waited where it was weighed: one that says it
// waited 0 ms and that this explains 16 ms reads as nonsense.
TEST(LateArrival, APropagatedLatenessSaysWhatItWaitedWhereItWasWeighed) {
  CommData d;
  const int n = 8;
  for (int p = 0; p < 2 * n; ++p) {
    d.hosts.push_back("h" + std::to_string(p));
    d.procs.push_back({p, p});
  }
  auto add_comm = [&](std::vector<int> procs) {
    Comm c;
    c.id = "0x" + std::to_string(d.comms.size() + 1);
    c.n_ranks = c.nnodes = static_cast<int>(procs.size());
    c.procs = c.hosts = std::move(procs);
    d.comms.push_back(c);
  };
  add_comm({0, 1, 2, 3, 4, 5, 6, 7});
  for (int p = 0; p < n; ++p) add_comm({p, n + p});
  const int64_t W = 200000;
  for (int w = 0; w < 10; ++w)
    for (int i = 0; i < 8; ++i) {
      Inst x;
      x.sn = w * 8 + i;
      x.bytes = 1 << 20;
      x.n = n;
      x.tmin = 100;
      x.tmed = x.tmax = 100 + (i >= 4 ? 10 : w < 4 ? 1000 : 100);
      x.pmin = i < 4 ? 0 : (i + w) % n;
      x.ts = w * W + i * (W / 8);
      d.insts.push_back(x);
      for (int p = 0; p < n; ++p) {
        Inst y;
        y.comm = 1 + p;
        y.sn = x.sn;
        y.bytes = 1 << 16;
        y.n = 2;
        const bool slow = p == 0 ? w < 4 : w >= 4 && i < 2;
        y.tmin = y.tmed = y.tmax = 100 + (p == 0 ? 2500 : 7000) * slow;
        y.pmin = p;
        y.ts = x.ts;
        d.insts.push_back(y);
      }
    }
  d.t0 = 0;
  d.t1 = 10 * W - 1;
  std::vector<Suppressed> suppressed;
  LateOptions o;
  o.suppressed = &suppressed;
  EXPECT_TRUE(DetectLateArrivals(d, o).empty());
  ASSERT_EQ(suppressed.size(), 1u);
  EXPECT_EQ(suppressed[0].finding.ranks, std::vector<int>{0});
  const std::string& why = suppressed[0].reason;
  double waited = -1, explained = -1;
  ASSERT_EQ(std::sscanf(why.c_str(), "propagated lateness: it waited %lf ms", &waited), 1) << why;
  const size_t at = why.find("that explains ");
  ASSERT_NE(at, std::string::npos) << why;
  ASSERT_EQ(std::sscanf(why.c_str() + at, "that explains %lf ms", &explained), 1) << why;
  EXPECT_GE(explained, 8) << why;
  EXPECT_GE(waited, explained) << why;
}

// A tensor-parallel group of 4 on one host, each member with its own pipeline (a partner on
// another host) and its own expert all-to-all of 3 (sibling groups: same size and positions).
// Member 0 arrives last at every collective of its group in windows 2-7, making the others wait
// 500 us each time. With `slow_expert_group`, a member of its expert group posts late at every
// all-to-all, and member 0 waits 400 us on it each time, twice a call (what its siblings' same
// transfers do not). Its pipeline receives take 100 us, its partners' 2.1 ms. Less waiting on its
// pipeline does not make up for more on its expert group: what it waited on each kind is weighed
// against its peers' same kind.
CommData TensorGroupWithPipelinesAndExpertGroups(bool slow_expert_group) {
  CommData d;
  auto add_proc = [&](int host) {
    while (static_cast<int>(d.hosts.size()) <= host)
      d.hosts.push_back("h" + std::to_string(d.hosts.size()));
    d.procs.push_back({host, static_cast<int>(d.procs.size())});
    return static_cast<int>(d.procs.size()) - 1;
  };
  auto add_comm = [&](std::vector<int> procs) {
    Comm c;
    c.id = "0x" + std::to_string(d.comms.size() + 1);
    c.n_ranks = static_cast<int>(procs.size());
    for (int p : procs) c.hosts.push_back(d.procs[static_cast<size_t>(p)].host);
    SortUnique(&c.hosts);
    c.nnodes = static_cast<int>(c.hosts.size());
    c.procs = std::move(procs);
    d.comms.push_back(c);
    return static_cast<int>(d.comms.size()) - 1;
  };
  std::vector<int> tp;
  for (int i = 0; i < 4; ++i) tp.push_back(add_proc(0));
  add_comm(tp);
  AddInstances(
      &d, [](int, int, int) { return 500.0; },
      [](int, int w, int i) { return w >= 2 && w <= 7 ? 0 : (i + w) % 4; });
  const int64_t W = 200000;
  for (int i = 0; i < 4; ++i) {
    const int partner = add_proc(1);
    const int pipe = add_comm({tp[static_cast<size_t>(i)], partner});
    const int expert =
        add_comm({tp[static_cast<size_t>(i)], add_proc(2 + 2 * i), add_proc(3 + 2 * i)});
    const std::vector<int>& members = d.comms[static_cast<size_t>(expert)].procs;
    for (int call = 0; call < 40; ++call) {
      const int64_t ts = call * (W / 4);
      d.p2p.push_back({tp[static_cast<size_t>(i)], pipe, partner, false, 1 << 20,
                       i == 0 ? 100.0 : 2100.0, ts, call, 0});
      d.p2p.push_back({partner, pipe, tp[static_cast<size_t>(i)], true, 1 << 20, 100, ts, call, 0});
      // Its second member posts late: the others wait 400 us on it, the wire is as fast as ever.
      for (int me : members)
        for (int peer : members)
          if (peer != me)
            for (bool send : {true, false}) {
              const bool held = i == 0 && slow_expert_group && peer == members[1];
              d.p2p.push_back(
                  {me, expert, peer, send, 1 << 18, held ? 600.0 : 200.0, ts, 2 * call + !send, 0});
            }
    }
  }
  return d;
}

TEST(LateArrival, WaitingOnEachKindOfTransferIsWeighedAgainstItsPeersSameKind) {
  LateOptions o;
  // Its expert group's all-to-all held it: propagated, though its pipeline waited less than its
  // partners' (in sum it waited no more than they did).
  std::vector<Suppressed> suppressed;
  o.suppressed = &suppressed;
  EXPECT_TRUE(DetectLateArrivals(TensorGroupWithPipelinesAndExpertGroups(true), o).empty());
  ASSERT_EQ(suppressed.size(), 1u);
  EXPECT_EQ(suppressed[0].finding.ranks, std::vector<int>{0});
  EXPECT_NE(suppressed[0].reason.find("propagated lateness"), std::string::npos)
      << suppressed[0].reason;
  // The same lateness with its expert group as fast as the others' is its own.
  o.suppressed = nullptr;
  const auto f = DetectLateArrivals(TensorGroupWithPipelinesAndExpertGroups(false), o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{0});
}

// Four data-parallel groups of 4, one member per host (hosts 0-3, GPU g of each in group g), each
// member with a pipeline partner on a host of its own. In windows 2-7 host 0's GPU g is last at
// every instance of its group where wait_us[g] > 0, making the others wait that long each time,
// while its pipeline receives wait hold_us[g] a call on its partner beyond its sibling pipelines'
// same transfers, four calls a window (8 instances a window: a hold of 2 x wait_us explains all
// of its lateness).
CommData HostLateInItsSiblingGroupsOnItsPipelines(std::array<double, 4> wait_us,
                                                  std::array<double, 4> hold_us) {
  CommData d;
  for (int h = 0; h < 8; ++h) d.hosts.push_back("h" + std::to_string(h));
  for (int h = 0; h < 4; ++h)
    for (int g = 0; g < 4; ++g) d.procs.push_back({h, 4 * h + g});
  for (int g = 0; g < 4; ++g) {
    Comm c;
    c.id = "0x" + std::to_string(g + 1);
    c.name = "DATA_PARALLEL_GROUP";
    c.n_ranks = c.nnodes = 4;
    for (int h = 0; h < 4; ++h) {
      c.procs.push_back(4 * h + g);
      c.hosts.push_back(h);
    }
    d.comms.push_back(c);
  }
  auto late = [&](int c, int w) { return w >= 2 && w <= 7 && wait_us[static_cast<size_t>(c)] > 0; };
  AddInstances(
      &d,
      [&](int c, int w, int i) {
        return late(c, w) ? wait_us[static_cast<size_t>(c)] : i < 2 ? 500.0 : 10.0;
      },
      [&](int c, int w, int i) { return late(c, w) ? 0 : (i + w + c) % 4; });
  const int64_t W = 200000;
  for (int p = 0; p < 16; ++p) {
    const int partner = static_cast<int>(d.procs.size());
    d.procs.push_back({4 + p / 4, 100 + p});
    Comm c;
    c.id = "0x" + std::to_string(d.comms.size() + 1);
    c.name = "PIPELINE_MODEL_PARALLEL_GROUP";
    c.n_ranks = c.nnodes = 2;
    c.procs = {p, partner};
    c.hosts = {p / 4, 4 + p / 4};
    d.comms.push_back(c);
    const int pipe = static_cast<int>(d.comms.size()) - 1;
    for (int call = 0; call < 40; ++call) {
      const int64_t ts = call * (W / 4);
      const bool held = p < 4 && late(p, static_cast<int>(ts / W));
      d.p2p.push_back({p, pipe, partner, false, 1 << 20,
                       100.0 + (held ? hold_us[static_cast<size_t>(p)] : 0.0), ts, call, 0});
      d.p2p.push_back({partner, pipe, p, true, 1 << 20, 100, ts, call, 0});
    }
  }
  return d;
}

TEST(LateArrival, AHostLateInItsSiblingGroupsIsExplainedTogether) {
  LateOptions o;
  std::vector<Suppressed> suppressed;
  o.suppressed = &suppressed;
  // Every GPU of host 0 late by 500 us an instance; GPUs 1-3 wait 600 us a call (60% of their
  // lateness), GPU 0 450 us (45%): a downstream host, late in all its groups at once by its share
  // of the same waits.
  EXPECT_TRUE(
      DetectLateArrivals(
          HostLateInItsSiblingGroupsOnItsPipelines({500, 500, 500, 500}, {450, 600, 600, 600}), o)
          .empty());
  bool rank0 = false;
  for (const Suppressed& s : suppressed)
    if (s.finding.ranks == std::vector<int>{0}) {
      rank0 = true;
      EXPECT_NE(s.reason.find("propagated lateness of its host"), std::string::npos) << s.reason;
    }
  EXPECT_TRUE(rank0);
  // GPU 0 late three times as much as its host's other ranks, beyond what its waits explain,
  // stands apart from them: its own.
  o.suppressed = nullptr;
  auto f = DetectLateArrivals(
      HostLateInItsSiblingGroupsOnItsPipelines({1500, 500, 500, 500}, {450, 600, 600, 600}), o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{0});
  // A mate held far longer than it was late (a flapping link) explains no more than its own
  // lateness: GPU 0, late 1.5 times as much and waiting on nothing, stays a straggler.
  f = DetectLateArrivals(
      HostLateInItsSiblingGroupsOnItsPipelines({750, 500, 0, 0}, {0, 6000, 0, 0}), o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{0});
}

// Two sibling expert groups of 4 (one host per process), each an all-to-all: every member sends to
// and receives from every other, 10 calls, the sizes following the tokens routed (a transfer's
// size is never its sibling's). In group 1, member 2's receives from member 0 wait 3 ms for it at calls
// 3-6: that is what member 2 waited on its expert peers, beyond its sibling group's same transfers,
// and on no side of them.
TEST(SiblingP2pWaits, AnAllToAllsTransfersCompareWithTheirSiblingsWhateverTheirSizes) {
  CommData d = Comms(2, 4);
  for (Comm& c : d.comms) c.name = "EXPERT_MODEL_PARALLEL_GROUP";
  const int64_t t0 = 1'000'000'000;
  for (int c = 0; c < 2; ++c)
    for (int call = 0; call < 10; ++call)
      for (int me = 0; me < 4; ++me)
        for (int peer = 0; peer < 4; ++peer) {
          if (peer == me) continue;
          const int p = d.comms[c].procs[me], q = d.comms[c].procs[peer];
          for (bool send : {true, false}) {
            const int from = send ? me : peer, to = send ? peer : me;
            const int64_t bytes = (1 << 20) + 4096 * ((7 * c + 5 * call + 3 * from + to) % 13);
            double exec = 500 + static_cast<double>(bytes) / 1e4;
            if (c == 1 && me == 2 && peer == 0 && !send && call >= 3 && call <= 6) exec += 3000;
            d.p2p.push_back({p, c, q, send, bytes, exec, t0 + call * 100'000, 2 * call + !send, 0});
          }
        }
  d.t0 = t0;
  d.t1 = t0 + 1'000'000;
  PipelineSideWaits sides;
  const std::vector<std::vector<double>> waits = SiblingP2pWaits(d, 200'000, &sides);
  EXPECT_TRUE(sides.empty()) << "an all-to-all has no sides: each member waits on every other";
  double waited = 0;
  for (double w : waits[static_cast<size_t>(d.comms[1].procs[2])]) waited += w;
  EXPECT_NEAR(waited, 4 * 3000, 1500);
  for (int me : {0, 1, 3}) {
    double other = 0;
    for (double w : waits[static_cast<size_t>(d.comms[1].procs[me])]) other += w;
    EXPECT_LT(other, 1500) << "member " << me;
  }
}

}  // namespace
}  // namespace collscope::diagnose
