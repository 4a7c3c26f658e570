// Detectors on hand-built inputs with known answers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/hang.h"
#include "analysis/diagnose/share_ccld.h"
#include "analysis/diagnose/steps.h"

namespace collscope::diagnose {
namespace {

// 4 hosts x 2 ranks; comms: tp (per host, 2 ranks), dp pairs across hosts {0,2,4,6} and {1,3,5,7},
// and cross pairs (h0,h1) (h2,h3) for ranks 0/2 and 4/6 so a host can be localized.
CommData Job() {
  CommData d;
  d.hosts = {"h0", "h1", "h2", "h3"};
  for (int r = 0; r < 8; ++r) d.procs.push_back({r / 2, r});
  auto comm = [&](std::string id, std::vector<int> ps) {
    Comm c;
    c.id = id;
    c.procs = ps;
    c.n_ranks = static_cast<int>(ps.size());
    for (int p : ps) c.hosts.push_back(p / 2);
    SortUnique(&c.hosts);
    c.nnodes = static_cast<int>(c.hosts.size());
    d.comms.push_back(c);
  };
  for (int h = 0; h < 4; ++h) comm("0xt" + std::to_string(h), {2 * h, 2 * h + 1});
  comm("0xd0", {0, 2, 4, 6});
  comm("0xd1", {1, 3, 5, 7});
  comm("0xp01", {0, 2});
  comm("0xp23", {4, 6});
  comm("0xp02", {1, 5});
  comm("0xp13", {3, 7});
  return d;
}

// Adds `steps` rounds of one collective per comm, 1 ms apart per step. slow_host: transfer x5
// for comms spanning it in [s0, s1); late_proc: arrives 2 ms late in [l0, l1).
void Fill(CommData* d, int steps, int slow_host, int s0, int s1, int late_proc, int l0, int l1,
          double late_us = 2000) {
  uint64_t seed = 7;
  auto noise = [&]() {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return 1.0 + 0.02 * ((seed >> 33) % 1000) / 1000.0;
  };
  for (int s = 0; s < steps; ++s)
    for (size_t c = 0; c < d->comms.size(); ++c) {
      const Comm& cm = d->comms[c];
      Inst x;
      x.comm = static_cast<int>(c);
      x.op = 0;
      x.sn = s;
      x.bytes = 1 << 24;
      x.n = static_cast<int>(cm.procs.size());
      double t = (cm.nnodes > 1 ? 400 : 100) * noise();
      if (s >= s0 && s < s1 &&
          std::find(cm.hosts.begin(), cm.hosts.end(), slow_host) != cm.hosts.end() && cm.nnodes > 1)
        t *= 5;
      double wait = 10 * noise();
      x.pmin = cm.procs[s % cm.procs.size()];
      if (s >= l0 && s < l1 &&
          std::find(cm.procs.begin(), cm.procs.end(), late_proc) != cm.procs.end()) {
        wait = late_us;
        x.pmin = late_proc;  // the synchronisation trap: the late rank shows the shortest time
      }
      x.tmin = t;
      x.tmed = t + wait;
      x.tmax = t + wait * 1.1;
      x.ts = 1000000000 + static_cast<int64_t>(s) * 100000 + static_cast<int64_t>(c) * 100;
      d->insts.push_back(x);
    }
  d->t0 = d->insts.front().ts;
  d->t1 = d->insts.back().ts + 1000;
}

CommOptions Opts() {
  CommOptions o;
  o.window_us = 1000000;  // 10 steps per window
  return o;
}

// Two processes on two hosts, one communicator of the two, no operation yet.
CommData TwoHosts() {
  CommData d;
  d.hosts = {"a", "b"};
  d.procs = {{0, 0}, {1, 1}};
  d.comms.push_back({});
  d.comms[0].procs = {0, 1};
  d.comms[0].n_ranks = 2;
  return d;
}

// Two processes on two hosts; Sends from 0 to 1 with sequence numbers `send_sn`, the matching
// Recvs with `recv_sn`. Transfer k takes 100 + k us on both sides, so a misaligned pair shows.
CommData PairData(const std::vector<int64_t>& send_sn, const std::vector<int64_t>& recv_sn) {
  CommData d = TwoHosts();
  for (int64_t sn : send_sn)
    d.p2p.push_back({0, 0, 1, true, 1 << 20, 100.0 + static_cast<double>(sn), sn, sn, 0});
  for (int64_t sn : recv_sn)
    d.p2p.push_back({1, 0, 0, false, 1 << 20, 100.0 + static_cast<double>(sn), sn, sn, 0});
  return d;
}

TEST(P2pPairs, AMissingSideDropsItsPartnerInsteadOfShiftingEveryPair) {
  // The first Send is missing (cut by a window's edge): every other transfer still pairs with its
  // own Recv, so both sides' times agree.
  const std::vector<P2pTransfer> t = CrossHostP2pTransfers(PairData(
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  ASSERT_EQ(t.size(), 12u);
  for (const P2pTransfer& p : t) EXPECT_EQ(p.send, p.recv);
  // Numbers that do not agree (each side numbers its own operations): the k-th pairs with the k-th.
  const std::vector<P2pTransfer> u = CrossHostP2pTransfers(PairData({0, 2, 4, 6}, {1, 3, 5, 7, 9}));
  ASSERT_EQ(u.size(), 4u);
  EXPECT_EQ(u[0].send, 100);
  EXPECT_EQ(u[0].recv, 101);
}

// Paired once per CommData (three detectors read the pairs), and anew for other records: a copy
// whose records differ, or records read again, never gets the pairs of the records before.
TEST(P2pPairs, ArePairedOnceAndAnewForOtherRecords) {
  CommData d = PairData({0, 1, 2}, {0, 1, 2});
  const std::vector<P2pTransfer>& first = CrossHostP2pTransfers(d);
  EXPECT_EQ(&CrossHostP2pTransfers(d), &first);  // not paired again
  ASSERT_EQ(first.size(), 3u);
  CommData more = d;
  more.p2p.push_back({0, 0, 1, true, 1 << 20, 103.0, 3, 3, 0});
  more.p2p.push_back({1, 0, 0, false, 1 << 20, 103.0, 3, 3, 0});
  EXPECT_EQ(CrossHostP2pTransfers(more).size(), 4u);
  d.p2p.resize(2);  // two Sends left, no Recv
  EXPECT_EQ(CrossHostP2pTransfers(d).size(), 0u);
}

TEST(P2pPairs, NumbersThatAgreeWhereTheyOverlapPairEvenWhenTheEdgesCutTheSidesApart) {
  // A window's edges fall on each process's own dump times: the Sends lost their first 30
  // transfers, the Recvs their last 30. Of the 70 on each side only 40 can pair, and all 40 do.
  std::vector<int64_t> send_sn, recv_sn;
  for (int64_t k = 30; k < 100; ++k) send_sn.push_back(k);
  for (int64_t k = 0; k < 70; ++k) recv_sn.push_back(k);
  const std::vector<P2pTransfer> t = CrossHostP2pTransfers(PairData(send_sn, recv_sn));
  ASSERT_EQ(t.size(), 40u);
  for (const P2pTransfer& p : t) EXPECT_EQ(p.send, p.recv);
}

TEST(P2pPairs, WithoutAgreeingNumbersALostHeadIsFoundByTheWaits) {
  // Each side numbers its own operations (Sends even, Recvs odd: the numbers pair nothing). In
  // transfer k the sender waits when k % 3 == 0, else the receiver does; the wire takes 100 us.
  CommData d = TwoHosts();
  for (int k = 0; k < 40; ++k) {
    const double send = k % 3 == 0 ? 1000 : 100, recv = k % 3 == 0 ? 100 : 1000;
    if (k > 0)
      d.p2p.push_back({0, 0, 1, true, 1 << 20, send, k, 2 * k, 0});  // the first Send is lost
    d.p2p.push_back({1, 0, 0, false, 1 << 20, recv, k, 2 * k + 1, 0});
  }
  const std::vector<P2pTransfer> t = CrossHostP2pTransfers(d);
  ASSERT_EQ(t.size(), 39u);
  for (const P2pTransfer& p : t) EXPECT_EQ(p.Wire(), 100) << p.order;
}

// A window whose edges cut the two sides of a channel apart: the sender's clock runs 4 ms ahead,
// so at the window's start the first Recv is out while its Send is in, and at its end the last
// Send is out while its Recv is in. Both sides are as long; pairing them as they stand would join
// every Send with the next transfer's Recv. `exact`: records with start times; otherwise only dump
// times (each side dumps every 50 ms, at its own phase: finer than the transfers, 60 ms apart, or
// time could not tell the pairings apart).
CommData CutApartByTheEdges(bool exact) {
  CommData d = TwoHosts();
  const int64_t t0 = 1'000'000'000, skew = 4'000;
  auto dump_after = [](int64_t t, int64_t phase) {
    const int64_t every = 50'000;
    return ((t - phase) / every + 1) * every + phase;
  };
  for (int k = 0; k < 40; ++k) {
    const int64_t done = t0 + 60'000 * k;  // completion of transfer k
    const double send = k % 3 == 0 ? 1000 : 100, recv = k % 3 == 0 ? 100 : 1000;
    P2p s{0, 0, 1, true, 1 << 20, send, 0, 2 * k, 0};
    P2p r{1, 0, 0, false, 1 << 20, recv, 0, 2 * k + 1, 0};
    if (exact) {
      s.ts = s.earliest_ts = done + skew - static_cast<int64_t>(send);
      r.ts = r.earliest_ts = done - static_cast<int64_t>(recv);
    } else {
      s.ts = dump_after(done + skew, 0);
      s.earliest_ts = s.ts - 50'000;  // after the previous dump
      r.ts = dump_after(done, 17'000);
      r.earliest_ts = r.ts - 50'000;
    }
    if (k > 0) d.p2p.push_back(s);   // the first Recv is out of the window: its Send is in
    if (k < 39) d.p2p.push_back(r);  // the last Send is out: its Recv is in
  }
  return d;
}

TEST(P2pPairs, SidesCutApartByAWindowsEdgesPairByWhenTheyCompleted) {
  for (bool exact : {true, false}) {
    const std::vector<P2pTransfer> t = CrossHostP2pTransfers(CutApartByTheEdges(exact));
    ASSERT_EQ(t.size(), 38u) << "exact " << exact;
    for (const P2pTransfer& p : t) EXPECT_EQ(p.Wire(), 100) << "exact " << exact << " " << p.order;
  }
}

// Transfers whose sizes never repeat (an expert all-to-all's follow the tokens routed): each is
// timed against its siblings' rate within a factor of two of its size, so the one that took 5x its
// time is slow, and the others are not.
TEST(P2pPairs, ASizeThatNeverRepeatsIsTimedAtItsSiblingsRate) {
  CommData d = TwoHosts();
  for (int k = 0; k < 40; ++k) {
    const int64_t bytes = (1 << 20) + 5000 * k;
    const double wire = static_cast<double>(bytes) / 1000 * (k == 7 ? 5 : 1);
    d.p2p.push_back({0, 0, 1, true, bytes, wire, k, k, 0});
    d.p2p.push_back({1, 0, 0, false, bytes, wire + 50, k, k, 0});
  }
  const std::vector<P2pTransfer> t = CrossHostP2pTransfers(d);
  const std::vector<double> usual = UsualWireOfSiblings(d, t);
  ASSERT_EQ(t.size(), 40u);
  for (size_t k = 0; k < t.size(); ++k)
    EXPECT_EQ(t[k].Wire() > 1.2 * usual[k], t[k].bytes == (1 << 20) + 5000 * 7) << t[k].bytes;
}

TEST(SlowLink, LocalizesHostFromCommunicatorsSpanningIt) {
  CommData d = Job();
  Fill(&d, 100, /*slow_host=*/2, 30, 70, -1, 0, 0);
  auto f = DetectSlowLink(d, Opts());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kSlowLink);
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"h2"}));
  EXPECT_EQ(f[0].ranks, std::vector<int>({4, 5}));
  EXPECT_NEAR(f[0].start_us, 1000000000 + 3000000, 1000000);
  EXPECT_NEAR(f[0].end_us, 1000000000 + 7000000, 1000000);
  EXPECT_TRUE(DetectSlowCompute(d, Opts()).empty()) << "a slow link is not a late rank";
}

TEST(SlowLink, HostsTheDataCannotTellApartAreSuspectsNotACulprit) {
  // Cross-host traffic on record only within host pairs (h0,h1) and (h2,h3): a slow NIC on h2
  // slows exactly the communicators that h3 spans too.
  CommData d;
  d.hosts = {"h0", "h1", "h2", "h3"};
  for (int r = 0; r < 8; ++r) d.procs.push_back({r / 2, r});
  for (std::vector<int> ps : std::vector<std::vector<int>>{
           {0, 1}, {2, 3}, {4, 5}, {6, 7}, {0, 2}, {1, 3}, {4, 6}, {5, 7}}) {
    Comm c;
    c.id = "0x" + std::to_string(ps[0]) + std::to_string(ps[1]);
    c.procs = ps;
    c.n_ranks = 2;
    c.hosts = {ps[0] / 2, ps[1] / 2};
    SortUnique(&c.hosts);
    c.nnodes = static_cast<int>(c.hosts.size());
    d.comms.push_back(c);
  }
  Fill(&d, 100, /*slow_host=*/2, 30, 70, -1, 0, 0);
  std::vector<Finding> f = DetectSlowLink(d, Opts());
  Consolidate(&f);
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].kind, Kind::kSlowNetwork) << FindingsToText(f);
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"h2", "h3"}));
  EXPECT_TRUE(f[0].ranks.empty())
      << "naming both hosts' ranks would send someone to drain a healthy host";
  EXPECT_NE(f[0].summary.find("none is named as the cause"), std::string::npos) << f[0].summary;
}

// Sampled dumps (the 2.29 Inspector's) record an instance on some members only, whose times hold
// their wait for the last to arrive. Where a host's ranks are late at every collective, they
// record the usual transfer time while the others record their wait for them: their
// communicators are not slow. A slow link holds every member, the last too.
TEST(SlowLink, SampledRecordsOfMembersWaitingForALateOneAreNoSlowLink) {
  auto sampled = [](int slow_host, int late_host) {
    CommData d = Job();
    Fill(&d, 100, slow_host, 30, 70, -1, 0, 0);
    for (Inst& x : d.insts) {
      const Comm& c = d.comms[static_cast<size_t>(x.comm)];
      if (c.hosts.size() < 2) continue;
      const int p = c.procs[static_cast<size_t>(x.sn) % c.procs.size()];  // each member in turn
      const bool waits = std::count(c.hosts.begin(), c.hosts.end(), late_host) &&
                         d.procs[static_cast<size_t>(p)].host != late_host;
      x.tmin = x.tmed = x.tmax = x.tmin + (waits ? 2000 : 0);
      x.pmin = p;
      x.n = 1;
    }
    return d;
  };
  // Both four-member groups span host 2, so they are no baseline for each other: its pipeline
  // pairs, half of its communicators, are what can show it slow.
  CommOptions o = Opts();
  o.host_cover = 0.5;
  EXPECT_TRUE(DetectSlowLink(sampled(-1, 2), o).empty())
      << FindingsToText(DetectSlowLink(sampled(-1, 2), o));
  std::vector<Finding> f = DetectSlowLink(sampled(2, -1), o);
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"h2"})) << FindingsToText(f);
}

// A member whose dumps fell mostly outside a NIC's window records mostly the usual times, beside
// the others' slow ones in it: its records are compared with the others' nearest in time, not
// over its whole span, so the window still shows.
TEST(SlowLink, SampledRecordsOfAMemberDumpedMostlyOutsideANicWindowStillShowIt) {
  CommData d = Job();
  Fill(&d, 100, /*slow_host=*/2, 30, 70, -1, 0, 0);
  for (Inst& x : d.insts) {
    const Comm& c = d.comms[static_cast<size_t>(x.comm)];
    if (c.hosts.size() < 2) continue;
    const bool in_window = x.sn >= 30 && x.sn < 70;
    // Member 0 records every other instance outside the window, the others the rest in turn.
    const size_t m =
        !in_window && x.sn % 2 == 0 ? 0 : 1 + static_cast<size_t>(x.sn) % (c.procs.size() - 1);
    x.pmin = c.procs[m];
    x.n = 1;
  }
  CommOptions o = Opts();
  o.host_cover = 0.5;
  std::vector<Finding> f = DetectSlowLink(d, o);
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"h2"})) << FindingsToText(f);
}

TEST(SlowCompute, SynchronisationTrapBlamesTheRankWithTheShortestTime) {
  CommData d = Job();
  Fill(&d, 100, -1, 0, 0, /*late_proc=*/5, 20, 80);
  auto f = DetectSlowCompute(d, Opts());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kSlowCompute);
  EXPECT_EQ(f[0].ranks, std::vector<int>({5}));
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"h2"}));
  // Its peers show the longest times but are victims, not causes.
  EXPECT_NE(std::find(f[0].victims.begin(), f[0].victims.end(), 4), f[0].victims.end());
  EXPECT_TRUE(DetectSlowLink(d, Opts()).empty());
}

TEST(Overlap, SlowLinkAndStragglerAtOnce) {
  CommData d = Job();
  Fill(&d, 100, /*slow_host=*/0, 10, 60, /*late_proc=*/7, 40, 90);
  auto link = DetectSlowLink(d, Opts());
  auto comp = DetectSlowCompute(d, Opts());
  ASSERT_EQ(link.size(), 1u);
  EXPECT_EQ(link[0].hosts, std::vector<std::string>({"h0"}));
  ASSERT_EQ(comp.size(), 1u);
  EXPECT_EQ(comp[0].ranks, std::vector<int>({7}));
}

// Makes `proc` arrive 2 ms late in steps [s0, s1) in every communicator it shares with none of
// `not_with` (a host's ranks slowed independently: their shared tensor-parallel group stays
// balanced).
void MakeLate(CommData* d, int proc, int not_with, int s0, int s1) {
  for (Inst& x : d->insts) {
    const auto& ps = d->comms[x.comm].procs;
    if (x.sn < s0 || x.sn >= s1 || std::find(ps.begin(), ps.end(), proc) == ps.end() ||
        std::find(ps.begin(), ps.end(), not_with) != ps.end())
      continue;
    x.pmin = proc;
    x.tmed = x.tmin + 2000;
    x.tmax = x.tmin + 2200;
  }
}

// A slow transfer keeps every member of its communicator busy: ranks 4 and 6 (cross-host pair
// 0xp23, 5x slower in steps 20-80) then arrive last in their tensor-parallel groups. They waited
// on the link, not the other way round: no compute straggler.
TEST(SlowCompute, LatenessFromASlowTransferIsNoStraggler) {
  CommData d = Job();
  Fill(&d, 100, -1, 0, 0, -1, 0, 0);
  for (Inst& x : d.insts) {
    if (x.sn < 20 || x.sn >= 80) continue;
    const std::string& id = d.comms[x.comm].id;
    if (id == "0xp23") {
      x.tmin *= 5;
      x.tmed = x.tmin + 10;
      x.tmax = x.tmin + 11;
    } else if (id == "0xt2" || id == "0xt3") {
      x.pmin = id == "0xt2" ? 4 : 6;
      x.tmax = x.tmin + 1500;
      x.tmed = x.tmax;
    }
  }
  EXPECT_TRUE(DetectSlowCompute(d, Opts()).empty()) << FindingsToText(DetectSlowCompute(d, Opts()));
}

TEST(SlowCompute, RanksOfOneHostWithOverlappingWindowsAreOneFinding) {
  CommData d = Job();
  Fill(&d, 100, -1, 0, 0, -1, 0, 0);
  MakeLate(&d, 2, 3, 20, 60);
  MakeLate(&d, 3, 2, 40, 80);
  auto f = DetectSlowCompute(d, Opts());
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].kind, Kind::kSlowCompute);
  EXPECT_EQ(f[0].ranks, std::vector<int>({2, 3}));
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"h1"}));
  EXPECT_NEAR(f[0].start_us, 1000000000 + 2000000, 1000000);
  EXPECT_NEAR(f[0].end_us, 1000000000 + 8000000, 1000000);
  for (int r : f[0].ranks)
    EXPECT_EQ(std::find(f[0].victims.begin(), f[0].victims.end(), r), f[0].victims.end());
}

TEST(SlowCompute, SameHostRanksAtDifferentTimesStaySeparate) {
  CommData d = Job();
  Fill(&d, 100, -1, 0, 0, -1, 0, 0);
  MakeLate(&d, 2, 3, 10, 30);
  MakeLate(&d, 3, 2, 70, 90);
  auto f = DetectSlowCompute(d, Opts());
  ASSERT_EQ(f.size(), 2u) << FindingsToText(f);
  std::vector<int> ranks;
  for (const Finding& x : f) {
    ASSERT_EQ(x.ranks.size(), 1u);
    EXPECT_EQ(x.hosts, std::vector<std::string>({"h1"}));
    ranks.push_back(x.ranks[0]);
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, std::vector<int>({2, 3}));
}

TEST(Consolidate, TheCauseComesBeforeASurerStepSymptom) {
  Finding symptom;
  symptom.kind = Kind::kStepRegression;
  symptom.confidence = 1.0;
  Finding cause;
  cause.kind = Kind::kSlowLink;
  cause.confidence = 0.8;
  cause.hosts = {"node-001"};
  std::vector<Finding> fs = {symptom, cause};
  Consolidate(&fs);
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].kind, Kind::kSlowLink);
  EXPECT_EQ(fs[1].kind, Kind::kStepRegression);
}

// The records' stall (who the others waited for) and the step phases' (whose own time grew) are
// one finding; another rank's, or a later one, stays apart.
TEST(Consolidate, OneRanksStallFromRecordsAndStepsIsOneFinding) {
  auto mk = [](std::string det, int rank, int64_t a, int64_t b, double conf) {
    Finding f;
    f.kind = Kind::kHostStall;
    f.detector = std::move(det);
    f.ranks = {rank};
    f.start_us = a;
    f.end_us = b;
    f.confidence = conf;
    return f;
  };
  std::vector<Finding> fs = {
      mk("comm.stall", 13, 100, 300, 0.8), mk("steps.stall", 13, 200, 250, 0.8),
      mk("steps.stall", 13, 900, 950, 0.8), mk("steps.stall", 12, 200, 250, 0.8)};
  std::vector<Suppressed> merged_away;
  Consolidate(&fs, &merged_away);
  ASSERT_EQ(fs.size(), 3u) << FindingsToText(fs);
  ASSERT_EQ(merged_away.size(), 1u);
  EXPECT_EQ(merged_away[0].finding.detector, "steps.stall");
  EXPECT_EQ(merged_away[0].finding.start_us, 200);
}

// A stage whose host's link is slow hands its activations late, and the records see a bubble of
// that stage: the link's effect, folded into the link finding without the stage's other host. A
// bubble of another stage, or at another time, stays its own.
// A slow network whose hosts the data could not tell apart takes its one late host as the
// link's, unless that host is late inside itself too (its tensor-parallel group), where no NIC is
// on the path: then it is a straggler of its own, beside the network. A network whose every slow
// communicator is one where that straggler is late is its members waiting for it: the straggler's.
TEST(Consolidate, ASlowNetworksLateHostIsItsLinkUnlessLateInsideItself) {
  auto network = [](std::vector<std::string> comms = {"0xd"}) {
    Finding f;
    f.kind = Kind::kSlowNetwork;
    f.detector = "comm.slow_link";
    f.hosts = {"h1", "h2"};
    f.comms = std::move(comms);
    f.start_us = 1000;
    f.end_us = 5000;
    f.confidence = 0.5;
    return f;
  };
  auto late = [](double within_host) {
    Finding f;
    f.kind = Kind::kSlowCompute;
    f.detector = "comm.late_arrival";
    f.hosts = {"h2"};
    f.ranks = {9};
    f.comms = {"0xd", "0xt"};
    f.start_us = 2000;
    f.end_us = 4000;
    f.confidence = 0.9;
    f.Add("late_within_its_host", within_host);
    return f;
  };
  std::vector<Finding> nic = {network(), late(0)};
  Consolidate(&nic);
  ASSERT_EQ(nic.size(), 1u) << FindingsToText(nic);
  EXPECT_EQ(nic[0].kind, Kind::kSlowLink);
  EXPECT_EQ(nic[0].hosts, std::vector<std::string>({"h2"}));
  std::vector<Finding> straggler = {network({"0xd", "0xe"}), late(1)};
  Consolidate(&straggler);
  ASSERT_EQ(straggler.size(), 2u) << FindingsToText(straggler);
  for (const Finding& f : straggler) EXPECT_NE(f.kind, Kind::kSlowLink) << FindingsToText(straggler);
  std::vector<Suppressed> folded;
  std::vector<Finding> waiting = {network(), late(1)};
  Consolidate(&waiting, &folded);
  ASSERT_EQ(waiting.size(), 1u) << FindingsToText(waiting);
  EXPECT_EQ(waiting[0].kind, Kind::kSlowCompute);
  EXPECT_EQ(waiting[0].ranks, std::vector<int>({9}));
  EXPECT_EQ(waiting[0].hosts, std::vector<std::string>({"h2"}));
  ASSERT_EQ(folded.size(), 1u);
  EXPECT_EQ(folded[0].finding.kind, Kind::kSlowNetwork);
}

// Two findings of one host's ranks in overlapping windows are one straggler (a host's ranks,
// found one by one), unless one of them is late inside its host: whatever slows a host slows its
// ranks alike, so that one is a straggler of its own, beside the other (x44022: a rank late at
// every op and a straggler for 7 steps on its host were merged into one finding naming both).
TEST(Consolidate, TwoRanksOfAHostAreTwoStragglersWhenOneIsLateInsideIt) {
  auto late = [](int rank, double within_host, int64_t start) {
    Finding f;
    f.kind = Kind::kSlowCompute;
    f.detector = "comm.late_arrival";
    f.hosts = {"h2"};
    f.ranks = {rank};
    f.comms = {"0xd" + std::to_string(rank)};
    f.start_us = start;
    f.end_us = start + 3000;
    f.confidence = 0.9;
    f.Add("late_within_its_host", within_host);
    return f;
  };
  std::vector<Finding> host = {late(9, 0, 1000), late(10, 0, 2000)};
  Consolidate(&host);
  ASSERT_EQ(host.size(), 1u) << FindingsToText(host);
  EXPECT_EQ(host[0].ranks, std::vector<int>({9, 10}));
  std::vector<Finding> two = {late(9, 0, 1000), late(10, 1, 2000)};
  Consolidate(&two);
  ASSERT_EQ(two.size(), 2u) << FindingsToText(two);
  std::vector<Finding> same = {late(9, 0, 1000), late(9, 1, 2000)};  // one rank, seen twice
  Consolidate(&same);
  EXPECT_EQ(same.size(), 1u) << FindingsToText(same);
}

// A slow network whose every slow communicator spans a named link's host, while the link is slow,
// is that link: it adds no suspect. One with a slow communicator the link's host is not in is
// another fault, and stays.
TEST(Consolidate, ASlowNetworkOfTheSlowLinksCommunicatorsIsThatLink) {
  auto link = [] {
    Finding f;
    f.kind = Kind::kSlowLink;
    f.detector = "comm.slow_link";
    f.hosts = {"h2"};
    f.ranks = {8, 9};
    f.comms = {"0xa", "0xb", "0xc"};
    f.start_us = 1000;
    f.end_us = 5000;
    f.confidence = 1;
    return f;
  };
  auto network = [](std::vector<std::string> comms) {
    Finding f;
    f.kind = Kind::kSlowNetwork;
    f.detector = "comm.slow_link";
    f.hosts = {"h1", "h2", "h3", "h4"};
    f.comms = std::move(comms);
    f.start_us = 5000;
    f.end_us = 5400;
    f.confidence = 0.12;
    return f;
  };
  std::vector<Finding> one = {link(), network({"0xb", "0xc"})};
  Consolidate(&one);
  ASSERT_EQ(one.size(), 1u) << FindingsToText(one);
  EXPECT_EQ(one[0].kind, Kind::kSlowLink);
  EXPECT_EQ(one[0].hosts, std::vector<std::string>({"h2"}));
  EXPECT_EQ(one[0].end_us, 5400);
  std::vector<Finding> two = {link(), network({"0xb", "0xe"})};
  Consolidate(&two);
  EXPECT_EQ(two.size(), 2u) << FindingsToText(two);
}

// One slow network seen among 4 hosts, then among 2 of them, in the same communicators, is one
// network among the 2, spanning both stretches; one among other hosts, or in other communicators,
// stays its own.
TEST(Consolidate, OneNetworkNarrowedIsOneFindingAmongTheFewerHosts) {
  auto network = [](std::vector<std::string> hosts, std::vector<std::string> comms, int64_t a,
                    int64_t b) {
    Finding f;
    f.kind = Kind::kSlowNetwork;
    f.detector = "comm.slow_link";
    f.hosts = std::move(hosts);
    f.comms = std::move(comms);
    f.start_us = a;
    f.end_us = b;
    f.confidence = 0.1 * static_cast<double>(f.hosts.size());
    return f;
  };
  std::vector<Finding> one = {network({"h1", "h2", "h3", "h4"}, {"0xa", "0xb"}, 1000, 2000),
                              network({"h2", "h3"}, {"0xb", "0xc"}, 2000, 6000)};
  Consolidate(&one);
  ASSERT_EQ(one.size(), 1u) << FindingsToText(one);
  EXPECT_EQ(one[0].hosts, std::vector<std::string>({"h2", "h3"}));
  EXPECT_EQ(one[0].comms, std::vector<std::string>({"0xa", "0xb", "0xc"}));
  EXPECT_EQ(one[0].start_us, 1000);
  EXPECT_EQ(one[0].end_us, 6000);
  std::vector<Finding> apart = {network({"h1", "h2", "h3", "h4"}, {"0xa", "0xb"}, 1000, 2000),
                                network({"h2", "h5"}, {"0xb"}, 2000, 6000),
                                network({"h2", "h3"}, {"0xd"}, 2000, 6000)};
  Consolidate(&apart);
  EXPECT_EQ(apart.size(), 3u) << FindingsToText(apart);
}

// One stage's bubble seen in several runs of windows is one finding (one root cause), spanning
// them; another stage's stays its own.
TEST(Consolidate, OneStagesBubblesAreOneFinding) {
  auto bubble = [](std::vector<int> ranks, int64_t a, int64_t b) {
    Finding f;
    f.kind = Kind::kPipelineBubble;
    f.detector = "comm.pipeline_bubble";
    f.ranks = std::move(ranks);
    f.start_us = a;
    f.end_us = b;
    f.confidence = 0.4;
    return f;
  };
  std::vector<Finding> fs = {bubble({72, 73}, 1000, 2000), bubble({72, 73}, 5000, 6000),
                             bubble({72, 73}, 9000, 9500), bubble({60, 61}, 5000, 6000)};
  Consolidate(&fs);
  ASSERT_EQ(fs.size(), 2u) << FindingsToText(fs);
  std::sort(fs.begin(), fs.end(), [](const Finding& a, const Finding& b) { return a.ranks < b.ranks; });
  EXPECT_EQ(fs[1].ranks, std::vector<int>({72, 73}));
  EXPECT_EQ(fs[1].start_us, 1000);
  EXPECT_EQ(fs[1].end_us, 9500);
}

TEST(Consolidate, TheBubbleOfASlowLinksStageIsTheLinks) {
  auto link = [] {
    Finding f;
    f.kind = Kind::kSlowLink;
    f.detector = "comm.slow_link";
    f.hosts = {"h5"};
    f.start_us = 1000;
    f.end_us = 5000;
    f.confidence = 1;
    return f;
  };
  auto bubble = [](std::vector<std::string> hosts, int64_t a, int64_t b) {
    Finding f;
    f.kind = Kind::kPipelineBubble;
    f.detector = "comm.pipeline_bubble";
    f.hosts = std::move(hosts);
    f.ranks = {8, 9, 10, 11};
    f.victims = {12, 13};
    f.start_us = a;
    f.end_us = b;
    f.confidence = 0.35;
    return f;
  };
  std::vector<Finding> fs = {link(), bubble({"h4", "h5"}, 2000, 4000)};
  std::vector<Suppressed> folded;
  Consolidate(&fs, &folded);
  ASSERT_EQ(fs.size(), 1u) << FindingsToText(fs);
  EXPECT_EQ(fs[0].kind, Kind::kSlowLink);
  EXPECT_EQ(fs[0].hosts, std::vector<std::string>({"h5"}));
  EXPECT_EQ(fs[0].victims, std::vector<int>({12, 13}));
  ASSERT_EQ(folded.size(), 1u);
  EXPECT_EQ(folded[0].finding.kind, Kind::kPipelineBubble);
  for (auto other : {bubble({"h2", "h3"}, 2000, 4000), bubble({"h4", "h5"}, 9000, 9900)}) {
    std::vector<Finding> two = {link(), other};
    Consolidate(&two);
    EXPECT_EQ(two.size(), 2u) << FindingsToText(two);
  }
  // The step phases' bubble finding of that stage is the link's effect as well.
  Finding from_steps = bubble({"h4", "h5"}, 2000, 4000);
  from_steps.detector = "steps.stage_idle";
  std::vector<Finding> with_steps = {link(), from_steps};
  Consolidate(&with_steps);
  EXPECT_EQ(with_steps.size(), 1u) << FindingsToText(with_steps);
  // A slow network that cannot tell its hosts apart, all of them the stage's: whichever has the
  // slow NIC is that stage's. One suspect outside the stage leaves the bubble standing.
  auto network = [&](std::vector<std::string> hosts) {
    Finding f = link();
    f.kind = Kind::kSlowNetwork;
    f.hosts = std::move(hosts);
    return f;
  };
  std::vector<Finding> net = {network({"h4", "h5"}), from_steps};
  Consolidate(&net);
  ASSERT_EQ(net.size(), 1u) << FindingsToText(net);
  EXPECT_EQ(net[0].kind, Kind::kSlowNetwork);
  EXPECT_EQ(net[0].victims, std::vector<int>({12, 13}));
  std::vector<Finding> wider = {network({"h3", "h4", "h5"}), from_steps};
  Consolidate(&wider);
  EXPECT_EQ(wider.size(), 2u) << FindingsToText(wider);
}

// A step regression that lasted as long as a slow link is its impact: folded into it, said in its
// summary, and kept in the suppressed list with the reason. A straggler of the whole job did not
// make the step time rise then; a regression nothing coincides with stays a symptom.
TEST(Consolidate, AStepRegressionIsTheImpactOfTheCauseItCoincidesWith) {
  Finding regression;
  regression.kind = Kind::kStepRegression;
  regression.detector = "steps.pelt";
  regression.start_us = 1'000'000;
  regression.end_us = 2'300'000;
  regression.confidence = 0.94;
  regression.Add("step_us_before", 80800);
  regression.Add("step_us_after", 116700);
  Finding link;
  link.kind = Kind::kSlowLink;
  link.detector = "comm.slow_link";
  link.hosts = {"node-000"};
  link.start_us = 1'040'000;
  link.end_us = 2'240'000;
  link.confidence = 1.0;
  link.summary = "The link of node-000 is degraded.";
  Finding straggler;
  straggler.kind = Kind::kSlowCompute;
  straggler.detector = "comm.late_arrival";
  straggler.ranks = {11};
  straggler.start_us = 0;
  straggler.end_us = 4'000'000;
  straggler.confidence = 0.95;
  Finding later = regression;
  later.start_us = 5'000'000;
  later.end_us = 6'000'000;
  std::vector<Finding> fs = {regression, straggler, link, later};
  std::vector<Suppressed> suppressed;
  Consolidate(&fs, &suppressed);
  ASSERT_EQ(fs.size(), 3u) << FindingsToText(fs);
  EXPECT_EQ(fs[0].kind, Kind::kSlowLink);
  EXPECT_EQ(fs[0].summary,
            "The link of node-000 is degraded. Meanwhile the job's step time rose 44% (80.8 -> "
            "116.7 ms).");
  EXPECT_EQ(fs[0].Number("job_step_time_rise_pct", -1), 44);
  EXPECT_EQ(fs[1].kind, Kind::kSlowCompute);
  EXPECT_EQ(fs[1].Number("job_step_time_rise_pct", -1), -1);
  EXPECT_EQ(fs[2].kind, Kind::kStepRegression);
  EXPECT_EQ(fs[2].start_us, 5'000'000);
  ASSERT_EQ(suppressed.size(), 1u);
  EXPECT_EQ(suppressed[0].finding.kind, Kind::kStepRegression);
  EXPECT_NE(suppressed[0].reason.find("the impact of the slow_link (comm.slow_link) finding"),
            std::string::npos)
      << suppressed[0].reason;
}

TEST(Consolidate, SlowComputeOfOneHostMergesAcrossDetectors) {
  auto mk = [](std::string det, std::vector<std::string> hosts, std::vector<int> ranks, int64_t a,
               int64_t b, double conf) {
    Finding f;
    f.kind = Kind::kSlowCompute;
    f.detector = std::move(det);
    f.hosts = std::move(hosts);
    f.ranks = std::move(ranks);
    f.victims = {0, 1, 2, 3, 4, 5};
    f.start_us = a;
    f.end_us = b;
    f.confidence = conf;
    return f;
  };
  std::vector<Finding> fs = {
      mk("comm.late_arrival", {"h1"}, {2}, 100, 300, 0.6),
      mk("comm.stall", {"h1"}, {3}, 250, 400, 0.8),          // overlaps: same straggler host
      mk("comm.late_arrival", {"h1"}, {3}, 900, 1000, 0.5),  // same host, later: separate
      mk("comm.late_arrival", {"h2"}, {4}, 100, 300, 0.7),   // other host: separate
  };
  Finding bubble = mk("comm.pipeline_bubble", {"h1"}, {2, 3}, 100, 300, 0.9);
  bubble.kind = Kind::kPipelineBubble;  // other kinds are never merged
  fs.push_back(bubble);
  std::vector<Suppressed> merged_away;
  Consolidate(&fs, &merged_away);
  ASSERT_EQ(fs.size(), 4u) << FindingsToText(fs);
  // The folded finding is kept with the rule that merged it.
  ASSERT_EQ(merged_away.size(), 1u) << SuppressedToText(merged_away);
  EXPECT_EQ(merged_away[0].finding.ranks, std::vector<int>({2}));
  EXPECT_NE(merged_away[0].reason.find("merged into the comm.stall finding"), std::string::npos)
      << merged_away[0].reason;
  const std::string json = FindingsToJson(fs, merged_away);
  EXPECT_NE(json.find("\"suppressed\": [\n  {\"reason\": \"merged into the comm.stall finding"),
            std::string::npos)
      << json;
  std::vector<Finding> back;
  ASSERT_EQ(FindingsFromJson(json, &back).message(), "");
  EXPECT_EQ(back.size(), 4u);
  const Finding* merged = nullptr;
  for (const Finding& f : fs)
    if (f.kind == Kind::kSlowCompute && f.ranks.size() == 2) merged = &f;
  ASSERT_NE(merged, nullptr) << FindingsToText(fs);
  EXPECT_EQ(merged->ranks, std::vector<int>({2, 3}));
  EXPECT_EQ(merged->hosts, std::vector<std::string>({"h1"}));
  EXPECT_EQ(merged->detector, "comm.stall");  // the more confident one leads
  EXPECT_EQ(merged->start_us, 100);
  EXPECT_EQ(merged->end_us, 400);
  EXPECT_DOUBLE_EQ(merged->confidence, 0.8);
  EXPECT_EQ(merged->victims, std::vector<int>({0, 1, 4, 5}));
  bool also = false;
  for (const Evidence& e : merged->evidence)
    also |= e.key == "also_detected_by" && e.text == "comm.late_arrival";
  EXPECT_TRUE(also);
}

TEST(HostStall, OneHugeWaitIsAStall) {
  CommData d = Job();
  Fill(&d, 100, -1, 0, 0, /*late_proc=*/3, 50, 51, /*late_us=*/3e6);
  auto f = DetectSlowCompute(d, Opts());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kHostStall);
  EXPECT_EQ(f[0].ranks, std::vector<int>({3}));
}

TEST(Healthy, NoFindings) {
  CommData d = Job();
  Fill(&d, 100, -1, 0, 0, -1, 0, 0);
  EXPECT_TRUE(DetectSlowLink(d, Opts()).empty());
  EXPECT_TRUE(DetectSlowCompute(d, Opts()).empty());
  EXPECT_TRUE(DetectMismatch(d).empty());
  EXPECT_TRUE(DetectHangFromRecords(d).empty());
}

// "An op only one rank issued" needs one rank: an op that several ranks recorded one at a time
// (sampled records) was issued by all of them.
TEST(Mismatch, AnOpRecordedByRanksOneAtATimeIsNoMismatch) {
  CommData d = Job();
  Fill(&d, 20, -1, 0, 0, -1, 0, 0);
  for (int k = 0; k < 4; ++k) {
    Inst x;
    x.comm = 4;  // 0xd0 {0, 2, 4, 6}; its op 0 is complete
    x.op = 2;
    x.sn = k;
    x.bytes = 1 << 20;
    x.n = 1;
    x.pmin = 2 * k;
    x.tmin = x.tmed = x.tmax = 100;
    x.ts = d.t0 + k * 100000;
    d.insts.push_back(x);
  }
  EXPECT_TRUE(DetectMismatch(d).empty()) << FindingsToText(DetectMismatch(d));
}

// ...and records that are sampled everywhere cannot say that the others never issued it.
// One instance of op `op` of communicator `comm`, sequence number `sn`, recorded by `n` ranks
// with the shortest time at process `pmin`.
Inst Record(int comm, int op, int64_t sn, int n, int pmin, int64_t ts) {
  Inst x;
  x.comm = comm;
  x.op = op;
  x.sn = sn;
  x.bytes = 1 << 20;
  x.n = n;
  x.pmin = pmin;
  x.tmin = x.tmed = x.tmax = 100;
  x.ts = ts;
  return x;
}

TEST(Mismatch, SampledRecordsCannotShowAMissingOp) {
  CommData d = Job();
  Fill(&d, 20, -1, 0, 0, -1, 0, 0);
  for (Inst& x : d.insts)
    if (x.comm == 4) {
      x.n = 1;
      x.pmin = d.comms[4].procs[static_cast<size_t>(x.sn % 4)];
    }
  d.insts.push_back(Record(4, 2, 0, 1, 4, d.t0));
  EXPECT_TRUE(DetectMismatch(d).empty()) << FindingsToText(DetectMismatch(d));
  // The same with complete records is a mismatch.
  for (Inst& x : d.insts)
    if (x.comm == 4 && x.op == 0) x.n = 4;
  EXPECT_EQ(DetectMismatch(d).size(), 1u);
}

TEST(Mismatch, AMostlySampledRunCannotShowAMissingOp) {
  // 2.29 snapshots: most instances of the run were caught by one rank, but one op of comm 4 (the
  // last before a long pause) by every member's dump. A rank's lone record of another op there is
  // no divergence: the others' dumps just missed theirs (a 128-GPU suite job blamed rank 95).
  CommData d = Job();
  Fill(&d, 20, -1, 0, 0, -1, 0, 0);
  for (Inst& x : d.insts) {
    x.n = 1;
    x.pmin = d.comms[static_cast<size_t>(x.comm)].procs[0];
  }
  d.insts.push_back(Record(4, 1, 4, 4, 2, d.t0 + 4));
  d.insts.push_back(Record(4, 2, 0, 1, 4, d.t0));
  EXPECT_TRUE(DetectMismatch(d).empty()) << FindingsToText(DetectMismatch(d));
}

// The same when the job's last op of the communicator was caught by every final dump (all members
// stopped at it) long after the lone record: a 24-GPU job with 2 s 2.29 dumps blamed rank 2 for
// the ReduceScatter its first dump happened to catch. Only a gap-free stretch of the others'
// records that spans the lone record's time says what they did then.
TEST(Mismatch, TheOthersRecordsMustSpanTheLoneRecordsTime) {
  CommData d = Job();
  Fill(&d, 20, -1, 0, 0, -1, 0, 0);
  std::erase_if(d.insts, [](const Inst& x) { return x.comm == 4 && x.sn != 19; });
  d.insts.push_back(Record(4, 2, 3, 1, 4, d.t0 + 1000));
  EXPECT_TRUE(DetectMismatch(d).empty()) << FindingsToText(DetectMismatch(d));
  // The others' complete records from the first through the last: a mismatch.
  CommData whole = Job();
  Fill(&whole, 20, -1, 0, 0, -1, 0, 0);
  whole.insts.push_back(Record(4, 2, 3, 1, 4, whole.t0 + 1000));
  ASSERT_EQ(DetectMismatch(whole).size(), 1u) << FindingsToText(DetectMismatch(whole));
  EXPECT_EQ(DetectMismatch(whole)[0].ranks, std::vector<int>({4}));
  // One instance missing before the lone record's time leaves no stretch that began before it.
  std::erase_if(whole.insts, [](const Inst& x) { return x.comm == 4 && x.sn == 0; });
  EXPECT_TRUE(DetectMismatch(whole).empty()) << FindingsToText(DetectMismatch(whole));
}

// A communicator behind its siblings says "hang" only when its records are complete.
TEST(HangFromRecords, SampledRecordsSayNothingOfProgress) {
  CommData d = Job();
  Fill(&d, 20, -1, 0, 0, -1, 0, 0);
  // Sampled dumps caught 0xd1's last instances nowhere: it looks 5 collectives behind 0xd0.
  std::erase_if(d.insts, [](const Inst& x) { return x.comm == 5 && x.sn >= 15; });
  for (Inst& x : d.insts)
    if (x.comm == 4 || x.comm == 5) x.n = 1;
  EXPECT_TRUE(DetectHangFromRecords(d).empty()) << FindingsToText(DetectHangFromRecords(d));
}

// Two-member communicators' 2.29 dumps, taken together, catch the same latest instance complete
// on both, every few instances: such a series says how far its communicator got only to within its
// widest skip. A 256-GPU job's pipeline pair was called hung 3 all-gathers behind its siblings,
// whose dumps had caught every fourth.
TEST(HangFromRecords, ALagWithinTheSamplingSkipIsNoHang) {
  auto sampled = [](int last_of_0xp02) {
    CommData d = Job();
    for (auto& c : d.comms) c.name = c.id.substr(0, 3);
    Fill(&d, 20, -1, 0, 0, -1, 0, 0);
    std::erase_if(d.insts, [&](const Inst& x) {
      if (d.comms[x.comm].name != "0xp") return false;
      if (d.comms[x.comm].id != "0xp02") return x.sn % 4 != 3;  // 3, 7, 11, 15, 19
      return x.sn % 4 != 0 || x.sn > last_of_0xp02;  // 0, 4, 8, ...: dumps at other times
    });
    return d;
  };
  EXPECT_TRUE(DetectHangFromRecords(sampled(16)).empty())
      << FindingsToText(DetectHangFromRecords(sampled(16)));
  // Stopped two skips behind: a hang.
  auto f = DetectHangFromRecords(sampled(12));
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].comms, std::vector<std::string>({"0xp02"}));
}

// A communicator runs its collectives in order: one op's series behind its siblings' while
// another op of the same communicator is level with theirs, and recorded later, is the dumps' (one
// record per communicator per dump), not a hang. A 1 s-dumped job's pipeline pair was called hung
// 8 reduce-scatters behind, its all-gathers level.
TEST(HangFromRecords, AnOpBehindWhileAnotherOfItsCommunicatorIsLevelIsNoHang) {
  auto job = [](bool all_gathers_stop_too) {
    CommData d = Job();
    for (auto& c : d.comms) c.name = c.id.substr(0, 3);
    Fill(&d, 20, -1, 0, 0, -1, 0, 0);
    std::vector<Inst> reduce_scatters;
    for (const Inst& x : d.insts)
      if (d.comms[x.comm].name == "0xp") {
        Inst y = x;
        y.op = 1;
        y.ts += 50;
        reduce_scatters.push_back(y);
      }
    d.insts.insert(d.insts.end(), reduce_scatters.begin(), reduce_scatters.end());
    std::erase_if(d.insts, [&](const Inst& x) {
      return d.comms[x.comm].id == "0xp02" && x.sn > 8 && (x.op == 1 || all_gathers_stop_too);
    });
    return d;
  };
  EXPECT_TRUE(DetectHangFromRecords(job(false)).empty())
      << FindingsToText(DetectHangFromRecords(job(false)));
  // Both ops stopped: a hang.
  auto f = DetectHangFromRecords(job(true));
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].comms, std::vector<std::string>({"0xp02"}));
}

TEST(Mismatch, MinorityMessageSizeIsTheRootCause) {
  CommData d = Job();
  Fill(&d, 20, -1, 0, 0, -1, 0, 0);
  // sn 7 of comm 0xd0: rank 4 used a different size.
  for (Inst& x : d.insts)
    if (d.comms[x.comm].id == "0xd0" && x.sn == 7) x.n = 3;
  Inst odd;
  odd.comm = 4;
  odd.sn = 7;
  odd.bytes = 1 << 25;
  odd.n = 1;
  odd.pmin = 4;
  odd.tmin = odd.tmed = odd.tmax = 400;
  odd.ts = d.t0 + 700000;
  d.insts.push_back(odd);
  auto f = DetectMismatch(d);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kCollectiveMismatch);
  EXPECT_EQ(f[0].ranks, std::vector<int>({4}));
  EXPECT_EQ(f[0].comms, std::vector<std::string>({"0xd0"}));
}

TEST(HangFromRecords, CommunicatorBehindItsSiblings) {
  CommData d = Job();
  for (auto& c : d.comms) c.name = c.id.substr(0, 3);
  Fill(&d, 20, -1, 0, 0, -1, 0, 0);
  // 0xd1 never completed its last two collectives.
  d.insts.erase(
      std::remove_if(d.insts.begin(), d.insts.end(),
                     [&](const Inst& x) { return d.comms[x.comm].id == "0xd1" && x.sn >= 18; }),
      d.insts.end());
  auto f = DetectHangFromRecords(d);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].comms, std::vector<std::string>({"0xd1"}));
}

TEST(Steps, PeltFindsAShiftAndSpikesFindTransients) {
  std::vector<double> x;
  for (int i = 0; i < 60; ++i) x.push_back((i < 30 ? 100 : 130) + (i % 3));
  auto cps = Pelt(x, 0, 5);
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_EQ(cps[0], 30u);
  std::vector<double> y(50, 100.0);
  y[25] = 400;
  EXPECT_TRUE(Pelt(y, 0, 5).size() <= 2u);
  y[3] = 400;  // too early for a window before it: judged against the steps after it
  auto sp = Spikes(y, 8, 1.5);
  ASSERT_EQ(sp.size(), 2u);
  EXPECT_EQ(sp[0], 3u);
  EXPECT_EQ(sp[1], 25u);
  // A series shorter than two windows: the first steps' window is what follows them.
  std::vector<double> short_series(10, 100.0);
  short_series[2] = 400;
  EXPECT_EQ(Spikes(short_series, 8, 1.5), std::vector<size_t>({2}));
}

// 4 ranks on 2 hosts (h0: 0, 1; h1: 2, 3), 40 steps of 100 ms: forward, backward and their
// communication phases. `tweak(rank, step, row)` applies a fault.
StepSeries FourRankSteps(const std::function<void(int, int, readers::StepRow*)>& tweak) {
  StepSeries s;
  s.source = "annotation";
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 40; ++i) {
      readers::StepRow row;
      row.rank = r;
      row.step = i;
      row.start_us = 1'000'000 + i * 100'000;
      row.phases = {{"forward", 30000 + 10.0 * r},
                    {"backward", 60000 - 10.0 * r},
                    {"dp_comm", 8000 + 100.0 * (i % 3)}};
      row.dur_us = 98000 + 100.0 * (i % 3);
      tweak(r, i, &row);
      s.rows.push_back(row);
    }
  return s;
}

TEST(Steps, RegressionWithPhaseAttribution) {
  const StepSeries s = FourRankSteps([](int, int i, readers::StepRow* row) {
    if (i < 20) return;
    row->phases["dp_comm"] += 40000;
    row->dur_us += 40000;
  });
  auto f = DetectStepAnomalies(s, StepOptions{});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kStepRegression);
  bool phase = false;
  for (auto& e : f[0].evidence) phase |= e.key == "phase_grew" && e.text == "dp_comm";
  EXPECT_TRUE(phase);
}

const std::map<int, std::string> kTwoHosts = {{0, "h0"}, {1, "h0"}, {2, "h1"}, {3, "h1"}};

// Rank 2 stalls 2 s in step 20 (its own time grows; its phases do not); the others wait for it
// in dp_comm, and rank 3, waiting, happens to end its step last: the one named is the rank whose
// own time grew, never the slowest.
TEST(Steps, AStallIsTheRankWhoseOwnTimeGrewNotTheSlowest) {
  const StepSeries s = FourRankSteps([](int r, int i, readers::StepRow* row) {
    if (i != 20) return;
    row->dur_us += 2e6 + (r == 3 ? 500 : 0);
    if (r != 2) row->phases["dp_comm"] += 2e6;
  });
  const auto f = DetectStepAnomalies(s, StepOptions{}, kTwoHosts);
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].kind, Kind::kHostStall);
  EXPECT_EQ(f[0].detector, "steps.stall");
  EXPECT_EQ(f[0].ranks, std::vector<int>({2}));
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"h1"}));
  EXPECT_EQ(f[0].victims, std::vector<int>({0, 1, 3}));
  EXPECT_EQ(f[0].confidence, 0.8);
  EXPECT_NEAR(f[0].Number("max_stall_us", -1), 2e6, 1e3);
  EXPECT_EQ(f[0].Number("worst_step", -1), 20);
  // Without its host, the rank alone.
  const auto alone = DetectStepAnomalies(s, StepOptions{});
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_TRUE(alone[0].hosts.empty());
  EXPECT_EQ(alone[0].ranks, std::vector<int>({2}));
}

// Both ranks of h1 stall together in steps 20 and 25, and rank 3 alone in step 30: the stalls
// of the same ranks are one finding, rank 3's alone another (one finding of the host would name
// ranks 2 and 3 for rank 3's stall, and neither culprit alone).
TEST(Steps, StallsOfTheSameRanksAreOneFindingAnothersItsOwn) {
  const StepSeries s = FourRankSteps([](int r, int i, readers::StepRow* row) {
    const bool stalled = ((i == 20 || i == 25) && r >= 2) || (i == 30 && r == 3);
    if (i != 20 && i != 25 && i != 30) return;
    row->dur_us += 1e6;
    if (!stalled) row->phases["dp_comm"] += 1e6;
  });
  const auto f = DetectStepAnomalies(s, StepOptions{}, kTwoHosts);
  ASSERT_EQ(f.size(), 2u) << FindingsToText(f);
  for (const Finding& x : f) {
    EXPECT_EQ(x.kind, Kind::kHostStall);
    EXPECT_EQ(x.hosts, std::vector<std::string>({"h1"}));
  }
  EXPECT_EQ(f[0].ranks, std::vector<int>({2, 3}));
  EXPECT_EQ(f[0].Number("stalls", -1), 2);
  EXPECT_EQ(f[1].ranks, std::vector<int>({3}));
  EXPECT_EQ(f[1].Number("stalls", -1), 1);
  EXPECT_EQ(f[1].Number("worst_step", -1), 30);
}

// A stall in step 3, before a window of steps precedes it, is judged against the steps after it;
// the warm-up of step 0, slow on every rank, is no finding.
TEST(Steps, AnEarlyStallIsFoundAndTheWarmUpIsNoJitter) {
  const StepSeries s = FourRankSteps([](int r, int i, readers::StepRow* row) {
    if (i == 0) row->dur_us += 3e6;  // every rank compiles
    if (i != 3) return;
    row->dur_us += 1e6;
    if (r != 1) row->phases["dp_comm"] += 1e6;
  });
  const auto f = DetectStepAnomalies(s, StepOptions{}, kTwoHosts);
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].kind, Kind::kHostStall);
  EXPECT_EQ(f[0].ranks, std::vector<int>({1}));
  EXPECT_EQ(f[0].Number("worst_step", -1), 3);
}

// A spike every rank spent in its own time (a job-wide pause), or one the series cannot place (no
// communication phases): jitter, naming no rank.
TEST(Steps, ASpikeNoRanksOwnTimeExplainsNamesNoRank) {
  const StepSeries everyone = FourRankSteps([](int r, int i, readers::StepRow* row) {
    if (i == 20) row->dur_us += 1e6 + 100 * r;
  });
  const StepSeries no_comm = FourRankSteps([](int r, int i, readers::StepRow* row) {
    row->phases.erase("dp_comm");
    if (i == 20) row->dur_us += 1e6 + (r == 2 ? 1000 : 0);
  });
  for (const StepSeries* s : {&everyone, &no_comm}) {
    const auto f = DetectStepAnomalies(*s, StepOptions{}, kTwoHosts);
    ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
    EXPECT_EQ(f[0].kind, Kind::kStepJitter);
    EXPECT_TRUE(f[0].ranks.empty()) << FindingsToText(f);
  }
}

// A framework's own iteration log is a job-level step series: `diagnose PATHS` stores it with the
// step series and the L1 detectors read it from there. No rank is named: the log has none.
TEST(Steps, AMegatronIterationLogUnderAnyNameGivesItsRegression) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("collscope-megatron-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "slurm-4711.out").string();
  {
    std::ofstream out(path);
    out << "using world size: 16, data-parallel-size: 16\n";
    for (int i = 1; i <= 60; ++i)
      out << "node-7:  iteration " << i << "/ 60 | consumed samples: " << 64 * i
          << " | elapsed time per iteration (ms): " << (i <= 30 ? 1000.0 : 1400.0) + (i % 3)
          << " | TFLOPs: 150.0 |\n";
  }
  InputSummary read;
  auto f = DiagnosePaths({path}, DiagnoseOptions{}, nullptr, nullptr, &read);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(read.iteration_logs, 1);
  EXPECT_EQ(read.step_series, 0);  // no per-rank series: not tier C
  EXPECT_NE(read.ToText().find("1 framework iteration log"), std::string::npos) << read.ToText();
  ASSERT_EQ(f->size(), 1u) << read.ToText();
  EXPECT_EQ((*f)[0].kind, Kind::kStepRegression);
  EXPECT_TRUE((*f)[0].ranks.empty());
  double first = 0;
  for (auto& e : (*f)[0].evidence)
    if (e.key == "first_step") first = e.value;
  EXPECT_EQ(first, 31);
}

TEST(FlightRecorder, WaitGraphRootCause) {
  using readers::FrDump;
  using readers::FrEntry;
  std::vector<FrDump> dumps(4);
  for (int r = 0; r < 4; ++r) {
    dumps[r].rank = r;
    dumps[r].pgs["7"] = {"7", "DP", {0, 1, 2, 3}};
    const int last = r == 2 ? 9 : 10;  // rank 2 never enqueued #10
    for (int s = 9; s <= last; ++s) {
      FrEntry e;
      e.pg_id = 1;
      e.pg_name = "7";
      e.pg_desc = "DP";
      e.collective_seq_id = s;
      e.profiling_name = "nccl:all_reduce";
      e.state = "scheduled";
      e.time_created_ns = s * 1000000;
      dumps[r].entries.push_back(e);
    }
    dumps[r].status[1] = {last, -1, 9};
  }
  auto f = AnalyzeFlightRecorder(dumps);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>({2}));
  EXPECT_EQ(f[0].victims, std::vector<int>({0, 1, 3}));
}

std::string Fixtures() {
  const char* e = std::getenv("COLLSCOPE_FIXTURES");
  return e ? e : COLLSCOPE_FIXTURES_DEFAULT;
}

TEST(FlightRecorder, RealDumpsNameRank12InGroup74) {
  const std::string dir = Fixtures() + "/flight-recorder/gpu_error_1st";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "fixture absent: " << dir;
  std::vector<std::string> paths;
  for (int r = 0; r < 16; ++r) paths.push_back(dir + "/_dump_" + std::to_string(r));
  auto f = DiagnosePaths(paths, DiagnoseOptions{});
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->size(), 1u) << FindingsToText(*f);
  EXPECT_EQ((*f)[0].ranks, std::vector<int>({12})) << FindingsToText(*f);
  EXPECT_EQ((*f)[0].comms, std::vector<std::string>({"74"})) << FindingsToText(*f);
  EXPECT_NE((*f)[0].summary.find("nccl:all_to_all"), std::string::npos) << (*f)[0].summary;
  EXPECT_NE((*f)[0].summary.find("4027x5120"), std::string::npos) << (*f)[0].summary;
}

// A rank that died before writing its dump: the others' dumps still show their group waiting in
// an op it never joined, so the hang does not vanish. A missing dump of a rank that did join
// blames nobody new: rank 12's own dump shows it behind.
TEST(FlightRecorder, ARankWithoutADumpIsNamedFromItsPeersDumps) {
  const std::string dir = Fixtures() + "/flight-recorder/gpu_error_1st";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "fixture absent: " << dir;
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("collscope-fr-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  for (int r = 0; r < 16; ++r)
    if (r != 12)
      std::filesystem::copy_file(dir + "/_dump_" + std::to_string(r),
                                 tmp / ("_dump_" + std::to_string(r)));
  std::ofstream(tmp / "_dump_12").flush();  // empty: rank 12 died while dumping
  InputSummary read;
  auto f = DiagnosePaths({tmp.string()}, DiagnoseOptions{}, nullptr, nullptr, &read);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->size(), 1u) << FindingsToText(*f);
  EXPECT_EQ((*f)[0].kind, Kind::kHang);
  EXPECT_EQ((*f)[0].ranks, std::vector<int>({12})) << FindingsToText(*f);
  EXPECT_EQ((*f)[0].comms, std::vector<std::string>({"74"}));
  EXPECT_NE((*f)[0].summary.find("left no Flight Recorder dump"), std::string::npos)
      << (*f)[0].summary;
  EXPECT_LT((*f)[0].confidence, 0.95);  // inferred, not shown
  EXPECT_NE(read.ToText().find("_dump_12: an empty Flight Recorder dump"), std::string::npos)
      << read.ToText();

  std::vector<std::string> without13;
  for (int r = 0; r < 16; ++r)
    if (r != 13) without13.push_back(dir + "/_dump_" + std::to_string(r));
  auto g = DiagnosePaths(without13, DiagnoseOptions{});
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->size(), 1u) << FindingsToText(*g);
  EXPECT_EQ((*g)[0].ranks, std::vector<int>({12})) << FindingsToText(*g);
  EXPECT_DOUBLE_EQ((*g)[0].confidence, 0.95);
  std::filesystem::remove_all(tmp);
}

// PyTorch's JSON dumps (`_dump_nccl_trace_json`) hold the pickle's dict: 4 ranks of one group,
// rank 2 never enqueued all_reduce #5 that the others wait in.
TEST(FlightRecorder, JsonDumpsAreReadLikeThePickles) {
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("collscope-frjson-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  for (int r = 0; r < 4; ++r) {
    const int last = r == 2 ? 4 : 5;
    std::ofstream out(tmp / ("nccl_trace_rank_" + std::to_string(r) + ".json"));
    out << "{\"version\": \"2.9\", \"pg_config\": {\"0\": {\"name\": \"0\", \"desc\": "
           "\"default_pg\", \"ranks\": "
        << (r == 0 ? "[0, 1, 2, 3]" : "\"[0, 1, 2, 3]\"")
        << "}}, \"pg_status\": {\"0\": {\"last_enqueued_collective\": " << last
        << ", \"last_started_collective\": -1, \"last_completed_collective\": 4}}, \"entries\": [";
    for (int seq = 4; seq <= last; ++seq)
      out << (seq > 4 ? ", " : "") << "{\"record_id\": " << seq
          << ", \"pg_id\": 0, \"process_group\": [\"0\", \"default_pg\"], "
          << "\"collective_seq_id\": " << seq << ", \"p2p_seq_id\": 0, \"op_id\": " << seq
          << ", \"profiling_name\": \"nccl:all_reduce\", \"time_created_ns\": "
          << 1700000000000000000LL + seq * 1000000LL
          << ", \"input_sizes\": [[1024, 1024]], \"input_dtypes\": [\"Float\"], \"output_sizes\": "
             "[[1024, 1024]], "
          << "\"output_dtypes\": [\"Float\"], \"state\": \""
          << (seq == 4 ? "completed" : "scheduled")
          << "\", \"time_discovered_started_ns\": null, \"time_discovered_completed_ns\": null, "
             "\"retired\": false, "
          << "\"timeout_ms\": 600000, \"is_p2p\": false}";
    out << "]}\n";
  }
  InputSummary read;
  auto f = DiagnosePaths({tmp.string()}, DiagnoseOptions{}, nullptr, nullptr, &read);
  std::filesystem::remove_all(tmp);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(read.flight_recorder_dumps, 4) << read.ToText();
  ASSERT_EQ(f->size(), 1u) << FindingsToText(*f) << read.ToText();
  EXPECT_EQ((*f)[0].kind, Kind::kHang);
  EXPECT_EQ((*f)[0].ranks, std::vector<int>({2}));
  EXPECT_NE((*f)[0].summary.find("nccl:all_reduce (1024x1024 Float) #5"), std::string::npos)
      << (*f)[0].summary;
}

TEST(HostStall, PropagatedStallBlamesOnlyTheRoot) {
  // Rank 3 stalls 3 s; its tensor-parallel partner 2 waits for it, then arrives 3 s late in its
  // own data-parallel group: 2 is a victim, not a second stall.
  CommData d = Job();
  Fill(&d, 100, -1, 0, 0, /*late_proc=*/3, 50, 51, /*late_us=*/3e6);
  for (Inst& x : d.insts)
    if (d.comms[x.comm].id == "0xd0" && x.sn == 50) {
      x.pmin = 2;
      x.tmed = x.tmin + 3e6;
      x.tmax = x.tmed * 1.01;
    }
  auto f = DetectSlowCompute(d, Opts());
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].kind, Kind::kHostStall);
  EXPECT_EQ(f[0].ranks, std::vector<int>({3}));
}

// Ranks on two hosts that "stall" alike at the same moment were held by one cause the records
// lack: neither host is named. Apart in time, or unalike, each is its own host's stall.
TEST(HostStall, CoincidentStallsOnTwoHostsAreNoHostsStall) {
  std::vector<Suppressed> dropped;
  auto stalls = [&](int other_sn, double other_wait_us, double other_waited_us = 0) {
    CommData d = Job();
    Fill(&d, 200, -1, 0, 0, /*late_proc=*/0, 50, 51, /*late_us=*/3e6);
    for (Inst& x : d.insts) {
      if (d.comms[x.comm].id == "0xd1" && x.sn == other_sn) {
        x.pmin = 5;  // host h2, no communicator shared with rank 0's
        x.tmed = x.tmin + other_wait_us;
        x.tmax = x.tmed * 1.01;
      }
      if (other_waited_us > 0 && d.comms[x.comm].id == "0xt2" && x.sn == other_sn - 1) {
        x.pmin = 4;  // rank 5 waits on its tensor-parallel partner just before its own "stall"
        x.tmed = x.tmin + other_waited_us;
        x.tmax = x.tmed * 1.01;
      }
    }
    CommOptions o = Opts();
    o.suppressed = &dropped;
    std::vector<int> ranks;
    for (const Finding& f : DetectSlowCompute(d, o))
      if (f.kind == Kind::kHostStall) ranks.push_back(f.ranks[0]);
    return ranks;
  };
  EXPECT_TRUE(stalls(52, 3e6).empty());
  ASSERT_FALSE(dropped.empty());
  EXPECT_NE(dropped.back().reason.find("coincident stall"), std::string::npos) << dropped.back().reason;
  EXPECT_EQ(stalls(150, 3e6), (std::vector<int>{0, 5}));
  EXPECT_EQ(stalls(52, 2e6), (std::vector<int>{0, 5}));
  // Alike, but rank 5 waited on others around then (less than half its stall) and rank 0 did
  // not: rank 5's is an echo of rank 0's stall, which is kept.
  EXPECT_EQ(stalls(52, 3e6, 1e6), (std::vector<int>{0}));
  EXPECT_NE(dropped.back().reason.find("echo of rank 0"), std::string::npos) << dropped.back().reason;
  // Rank 5 waited on others, but a few percent of its stall (the usual waits around it): that
  // tells neither apart, and neither is named.
  EXPECT_TRUE(stalls(52, 3e6, 0.1e6).empty());
  EXPECT_NE(dropped.back().reason.find("coincident stall"), std::string::npos) << dropped.back().reason;
}

TEST(HostStall, TheStallsOwnEchoDoesNotExplainItAway) {
  // Rank 3 stalls 3 s before its collectives; it had posted a pipeline transfer with rank 7
  // before stalling, and rank 7, held by rank 3 in their data-parallel group, arrives there
  // 2 s late. Rank 3's wait on rank 7 is its own stall coming back (rank 7 waited on it
  // longer): rank 3 is the stall, rank 7 its victim.
  CommData d = Job();
  Fill(&d, 100, -1, 0, 0, /*late_proc=*/3, 50, 51, /*late_us=*/3e6);
  for (Inst& x : d.insts)
    if (d.comms[x.comm].id == "0xp13" && x.sn == 50) {
      x.pmin = 7;
      x.tmed = x.tmin + 2e6;
      x.tmax = x.tmed * 1.01;
    }
  std::vector<Suppressed> dropped;
  CommOptions o = Opts();
  o.suppressed = &dropped;
  auto f = DetectSlowCompute(d, o);
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f) << SuppressedToText(dropped);
  EXPECT_EQ(f[0].kind, Kind::kHostStall);
  EXPECT_EQ(f[0].ranks, std::vector<int>({3}));
}

// Two pipeline stages (processes 0,1 -> 2,3 over two pipeline communicators); 10 steps a window.
CommData Pipeline(int bubble_w0, int bubble_w1, double bubble_us) {
  CommData d;
  d.hosts = {"h0", "h1"};
  for (int r = 0; r < 4; ++r) d.procs.push_back({r / 2, r});
  for (int i = 0; i < 2; ++i) {
    Comm c;
    c.id = "0xpp" + std::to_string(i);
    c.procs = {i, 2 + i};
    c.n_ranks = 2;
    c.nnodes = 2;
    c.hosts = {0, 1};
    d.comms.push_back(c);
  }
  // a tensor-parallel collective per step so the data has a time range
  for (int i = 0; i < 2; ++i) {
    Comm c;
    c.id = "0xtp" + std::to_string(i);
    c.procs = {2 * i, 2 * i + 1};
    c.n_ranks = 2;
    c.nnodes = 1;
    c.hosts = {i};
    d.comms.push_back(c);
  }
  const int64_t t0 = 1000000000;
  for (int s = 0; s < 200; ++s) {
    const int64_t ts = t0 + s * 100000;
    const int w = s / 10;
    for (int i = 0; i < 2; ++i) {
      const double wait = (w >= bubble_w0 && w < bubble_w1) ? bubble_us : 0;
      for (int mb = 0; mb < 4; ++mb) {
        P2p snd{i, i, 2 + i, true, 1 << 24, 400.0 + mb, ts + mb * 1000};
        P2p rcv{2 + i, i, i, false, 1 << 24, 400.0 + mb + wait, ts + mb * 1000};
        d.p2p.push_back(snd);
        d.p2p.push_back(rcv);
      }
      Inst x;
      x.comm = 2 + i;
      x.sn = s;
      x.bytes = 1 << 24;
      x.n = 2;
      x.tmin = 100;
      x.tmed = x.tmax = 110;
      x.pmin = 2 * i + s % 2;
      x.ts = ts;
      d.insts.push_back(x);
    }
  }
  d.t0 = t0;
  d.t1 = t0 + 200 * 100000;
  return d;
}

TEST(PipelineBubble, LateActivationsFromOneStage) {
  CommData d = Pipeline(8, 14, 8000);  // 4 x 8 ms a step of 100 ms: 32% idle
  auto f = DetectPipelineBubble(d, Opts());
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].kind, Kind::kPipelineBubble);
  EXPECT_EQ(f[0].ranks, std::vector<int>({0, 1}));
  EXPECT_EQ(f[0].victims, std::vector<int>({2, 3}));
  EXPECT_NEAR(f[0].start_us, 1000000000 + 8000000, 1000000);
  EXPECT_NEAR(f[0].end_us, 1000000000 + 14000000, 1000000);
  EXPECT_TRUE(DetectPipelineBubble(Pipeline(0, 0, 0), Opts()).empty());
  EXPECT_TRUE(DetectPipelineBubble(Pipeline(8, 14, 500), Opts()).empty()) << "2% idle is noise";
}

// Three pipeline stages (processes 0,1 -> 2,3 -> 4,5 over two pipeline communicators), 10 steps
// a window. Stage 0's senders wait 2 ms for each handover, so its receivers never idle; over
// windows w0..w1 the middle stage's receivers wait `upstream_us` longer and the last stage's
// `downstream_us` longer.
CommData ThreeStages(int w0, int w1, double upstream_us, double downstream_us) {
  CommData d;
  d.hosts = {"h0", "h1", "h2"};
  for (int r = 0; r < 6; ++r) d.procs.push_back({r / 2, r});
  for (int i = 0; i < 2; ++i) {
    Comm c;
    c.id = "0xpp" + std::to_string(i);
    c.procs = {i, 2 + i, 4 + i};
    c.n_ranks = 3;
    c.nnodes = 3;
    c.hosts = {0, 1, 2};
    d.comms.push_back(c);
  }
  const int64_t t0 = 1000000000;
  for (int s = 0; s < 200; ++s) {
    const int64_t ts = t0 + s * 100000;
    const bool slow = s / 10 >= w0 && s / 10 < w1;
    for (int i = 0; i < 2; ++i)
      for (int mb = 0; mb < 4; ++mb) {
        const int64_t at = ts + mb * 1000;
        d.p2p.push_back({i, i, 2 + i, true, 1 << 24, 2400.0 + mb, at});
        d.p2p.push_back({2 + i, i, i, false, 1 << 24, 400.0 + mb + (slow ? upstream_us : 0), at});
        d.p2p.push_back({2 + i, i, 4 + i, true, 1 << 24, 400.0 + mb, at + 500});
        d.p2p.push_back(
            {4 + i, i, 2 + i, false, 1 << 24, 400.0 + mb + (slow ? downstream_us : 0), at + 500});
      }
  }
  d.t0 = t0;
  d.t1 = t0 + 200 * 100000;
  return d;
}

TEST(PipelineBubble, AStageWhoseOwnActivationsArriveLateAsMuchIsNoBubble) {
  // 4 x 2 ms a step of 100 ms: the last stage idles 8% more. The middle stage's own receivers
  // waiting 4 x 1.5 ms more (6%, under the bar, and no idle since stage 0's senders wait longer)
  // mean the delay came from upstream; without that, the middle stage is the bubble.
  std::vector<Suppressed> why;
  CommOptions o = Opts();
  o.suppressed = &why;
  EXPECT_TRUE(DetectPipelineBubble(ThreeStages(8, 14, 1500, 2000), o).empty())
      << FindingsToText(DetectPipelineBubble(ThreeStages(8, 14, 1500, 2000), Opts()));
  ASSERT_EQ(why.size(), 1u);
  EXPECT_EQ(why[0].finding.ranks, std::vector<int>({2, 3}));
  EXPECT_NE(why[0].reason.find("its own activations arrived late as well"), std::string::npos)
      << why[0].reason;
  auto f = DetectPipelineBubble(ThreeStages(8, 14, 0, 2000), Opts());
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].ranks, std::vector<int>({2, 3}));
  EXPECT_EQ(f[0].victims, std::vector<int>({4, 5}));
}

TEST(PipelineBubble, StageOfEveryRankFromThePipelineCommunicators) {
  // Processes 0,1 are stage 0 and 2,3 stage 1 of their pipeline communicators; the
  // tensor-parallel communicators carry no Send/Recv and place nobody.
  EXPECT_EQ(PipelineStageOfRank(Pipeline(0, 0, 0)),
            (std::map<int, int>{{0, 0}, {1, 0}, {2, 1}, {3, 1}}));
  CommData no_p2p = Pipeline(0, 0, 0);
  no_p2p.p2p.clear();
  EXPECT_TRUE(PipelineStageOfRank(no_p2p).empty());
}

TEST(Share, CclDAlphaBetaBoundaries) {
  EXPECT_STREQ(ShareClass(ShareP(1, 9)), "compute");
  EXPECT_STREQ(ShareClass(ShareP(4, 6)), "compute");  // P = 0.4: alpha is inclusive
  EXPECT_STREQ(ShareClass(ShareP(5, 5)), "mixed");
  EXPECT_STREQ(ShareClass(ShareP(6, 4)), "communication");
  EXPECT_STREQ(ShareClass(ShareP(0, 0)), "none");
  // Rank 1 computes 30 ms more; ranks 0 and 2 wait for it (their communication grows): the
  // synchronisation trap in step phases. The rank with the lowest P is the straggler.
  StepSeries s;
  s.source = "annotation";
  std::vector<int64_t> before, after;
  for (int i = 0; i < 20; ++i) (i < 10 ? before : after).push_back(i);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 20; ++i) {
      readers::StepRow row;
      row.rank = r;
      row.step = i;
      const bool slow = i >= 10;
      row.phases = {{"forward", 50000.0 + (slow && r == 1 ? 30000 : 0)},
                    {"dp_comm", 10000.0 + (slow && r != 1 ? 30000 : 0)}};
      s.rows.push_back(row);
    }
  auto v = ClassifySlowdown(s, after, before);
  EXPECT_EQ(v.cls, "compute");
  EXPECT_EQ(v.rank, 1);
  // Everyone's communication grows: a communication slowdown.
  for (auto& row : s.rows)
    if (row.step >= 10) {
      row.phases["forward"] = 50000;
      row.phases["dp_comm"] = 40000;
    }
  v = ClassifySlowdown(s, after, before);
  EXPECT_EQ(v.cls, "communication");
}

TEST(HangFromRecords, DependentCommunicatorsMakeOneFinding) {
  CommData d = Job();
  for (auto& c : d.comms) c.name = c.id.substr(0, 3);
  Fill(&d, 20, -1, 0, 0, -1, 0, 0);
  // 0xt1 hangs; 0xt3 (fed by it) stops too.
  d.insts.erase(
      std::remove_if(d.insts.begin(), d.insts.end(),
                     [&](const Inst& x) {
                       return (d.comms[x.comm].id == "0xt1" || d.comms[x.comm].id == "0xt3") &&
                              x.sn >= 15;
                     }),
      d.insts.end());
  auto f = DetectHangFromRecords(d);
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].comms, std::vector<std::string>({"0xt1", "0xt3"}));
  EXPECT_TRUE(f[0].ranks.empty()) << "completion records cannot name the member";
  EXPECT_TRUE(f[0].hosts.empty()) << "its ranks' hosts are the victims', not a culprit's";
}

TEST(Findings, TextPrintsIntegersAsIntegers) {
  Finding f;
  f.Add("collective_seq_id", 44791);
  f.Add("bytes", 40000000);
  f.Add("ratio", 2.815);
  const std::string t = FindingsToText({f});
  EXPECT_NE(t.find("collective_seq_id=44791 bytes=40000000 ratio=2.815"), std::string::npos) << t;
}

// Names and text from the logs reach a terminal: control bytes print as '?', so an escape
// sequence cannot recolour or rewrite the screen and a newline cannot fake a line.
TEST(Findings, TextPrintsNoControlBytesFromTheLogs) {
  Finding f;
  f.summary = "Rank 3 of \x1b[2J\x1b[31mdp\rgroup is late";
  f.hosts = {"node-1\nroot-cause ranks: 7"};
  f.comms = {"0x1\x07"};
  f.AddText("comm_name", "tp\x7f");
  Suppressed s{f, "merged into \x1b]0;title\x07 it"};
  const std::string t = FindingsToText({f}) + SuppressedToText({s});
  for (char c : t) EXPECT_TRUE(c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f)) << int(c) << "\n" << t;
  EXPECT_NE(t.find("Rank 3 of ?[2J?[31mdp?group is late"), std::string::npos) << t;
  EXPECT_NE(t.find("hosts: node-1?root-cause ranks: 7\n"), std::string::npos) << t;
  EXPECT_NE(t.find("comm_name=tp?"), std::string::npos) << t;
}

TEST(Findings, JsonRoundTrip) {
  Finding f;
  f.kind = Kind::kHang;
  f.confidence = 0.9;
  f.hosts = {"node-001"};
  f.ranks = {12};
  f.victims = {13, 14};
  f.comms = {"74"};
  f.start_us = 5;
  f.end_us = 9;
  f.summary = "Rank 12 \"never\" joined";
  f.Add("sn", 20537);
  f.AddText("op", "nccl:all_to_all");
  const std::string j = FindingsToJson({f});
  EXPECT_NE(j.find("\"schema\": \"collscope.findings.v1\""), std::string::npos);
  std::vector<Finding> back;
  ASSERT_EQ(FindingsFromJson(j, &back).message(), "");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].ranks, f.ranks);
  EXPECT_EQ(back[0].victims, f.victims);
  EXPECT_EQ(back[0].summary, f.summary);
  EXPECT_EQ(FindingsToJson(back), j);
}

}  // namespace
}  // namespace collscope::diagnose

namespace collscope::diagnose {
namespace {

// 16 ranks, 4 per host: TP groups of 4 (one per host), 2 pipeline stages of 8 ranks, DP pairs at
// stride 4 inside a stage, pipeline pairs at stride 8 carrying Send/Recv.
CommData Layout16(bool p2p) {
  CommData d;
  d.rank_source = "world-communicator";
  for (int h = 0; h < 4; ++h) d.hosts.push_back("node-00" + std::to_string(h));
  for (int r = 0; r < 16; ++r) d.procs.push_back({r / 4, r});
  auto add = [&](std::vector<int> ranks, const std::string& name) {
    Comm c;
    c.id = "0x" + std::to_string(d.comms.size() + 100);
    c.name = name;
    c.n_ranks = static_cast<int>(ranks.size());
    c.procs = ranks;
    d.comms.push_back(c);
    return static_cast<int>(d.comms.size()) - 1;
  };
  for (int g = 0; g < 4; ++g) add({4 * g, 4 * g + 1, 4 * g + 2, 4 * g + 3}, "");
  for (int s = 0; s < 2; ++s)
    for (int t = 0; t < 4; ++t) add({8 * s + t, 8 * s + t + 4}, "unknown");
  for (int r = 0; r < 8; ++r) {
    const int c = add({r, r + 8}, "");
    if (p2p) d.p2p.push_back({r, c, r + 8, true, 1 << 20, 100, 0, 0, 0});
  }
  add({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, "default_pg");
  return d;
}

TEST(CommLabel, NamesGroupsByTheirPlaceInTheInferredLayout) {
  for (bool p2p : {true, false}) {
    // Pipelines from their Send/Recv traffic, or, without it (2.29), from the data-parallel
    // groups that tile the world in blocks of one stage.
    CommData d = Layout16(p2p);
    InferLayout(&d);
    EXPECT_EQ(d.tp, 4);
    EXPECT_EQ(d.pp, 2) << "p2p " << p2p;
    EXPECT_EQ(CommLabel(d, 3), "TP group 1 of PP stage 1");
    EXPECT_EQ(CommLabel(d, 4 + 4 + 1), "DP group 1 of PP stage 1");  // ranks 9, 13
    EXPECT_EQ(CommLabel(d, 12 + 3), "PP group 3");
    EXPECT_EQ(CommLabel(d, 20), "default_pg");  // a comm_name wins
  }
  // Ranks guessed from file order say nothing of the layout: the id.
  CommData d = Layout16(true);
  d.rank_source = "ordinal";
  InferLayout(&d);
  EXPECT_EQ(d.tp, 0);
  EXPECT_EQ(CommLabel(d, 3), "communicator 0x103");
}

}  // namespace
}  // namespace collscope::diagnose
