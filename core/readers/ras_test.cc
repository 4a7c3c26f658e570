#include "core/readers/ras.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/input_files.h"
#include "core/readers/hang_evidence.h"
#include "core/store.h"
#include "tests/ras_samples.h"
#include "tests/test_util.h"

namespace collscope::readers {
namespace {

const RasRank* Find(const RasComm& c, int rank) {
  for (const RasRank& k : c.ranks)
    if (k.rank == rank) return &k;
  return nullptr;
}

TEST(Ras, TextMismatch) {
  auto r = ParseRasReport(testing::kRasTextMismatch, "ras.txt");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->format, "text");
  EXPECT_EQ(r->nccl_version, "2.30.7");
  EXPECT_EQ(r->job_processes, 8);
  EXPECT_EQ(r->job_nodes, 2);
  EXPECT_DOUBLE_EQ(r->collection_s, 5.012);
  EXPECT_EQ(r->unused, 0u) << (r->unused_named.empty() ? "" : r->unused_named[0]);
  ASSERT_EQ(r->comms.size(), 1u);
  const RasComm& c = r->comms[0];
  EXPECT_EQ(c.hash, "0x00c0ffee12345678");
  EXPECT_EQ(c.label, "#0-0");
  EXPECT_EQ(c.size, 8);
  EXPECT_EQ(c.errors, "MISMATCH");
  ASSERT_EQ(c.ranks.size(), 2u);
  EXPECT_EQ(c.ranks[0].rank, -1);
  EXPECT_EQ(c.ranks[0].n_ranks, 7);
  EXPECT_EQ(c.ranks[0].Launched("AllReduce"), 912);
  const RasRank* k = Find(c, 5);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->Launched("AllReduce"), 911);
  EXPECT_EQ(k->host, "10.0.0.2");
  EXPECT_EQ(k->pid, 4242);
  EXPECT_EQ(k->cuda_dev, 1);
}

TEST(Ras, TextIncompleteDeadErrorTimeout) {
  auto r = ParseRasReport(testing::kRasTextIncomplete, "ras.txt");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->unused, 0u) << (r->unused_named.empty() ? "" : r->unused_named[0]);
  EXPECT_EQ(r->nccl_version, "2.26.2+cuda12.8");
  EXPECT_EQ(r->timeouts, 2);
  ASSERT_EQ(r->processes.size(), 3u);
  EXPECT_EQ(r->processes[0].state, "missing");
  EXPECT_EQ(r->processes[2].state, "dead");
  EXPECT_EQ(r->processes[2].pid, 5252);
  ASSERT_EQ(r->comms.size(), 2u);
  EXPECT_EQ(r->comms[0].missing, 2);
  EXPECT_EQ(r->comms[0].size, 8);
  const RasRank* six = Find(r->comms[0], 6);
  const RasRank* seven = Find(r->comms[0], 7);
  ASSERT_TRUE(six && seven);
  EXPECT_EQ(six->state, "missing");
  EXPECT_EQ(seven->state, "dead") << "its process is in the DEAD block";
  const RasRank* two = Find(r->comms[1], 2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->state, "error");
  EXPECT_NE(two->detail.find("async error: remote process exited"), std::string::npos)
      << two->detail;
  EXPECT_EQ(two->cuda_dev, 2);
  EXPECT_EQ(two->nvml_dev, 6);
}

TEST(Ras, Text224CollectiveCounts) {
  auto r = ParseRasReport(testing::kRasText224, "ras.txt");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->unused, 0u) << (r->unused_named.empty() ? "" : r->unused_named[0]);
  EXPECT_EQ(r->job_processes, 32);
  ASSERT_EQ(r->comms.size(), 1u);
  const RasRank* nine = Find(r->comms[0], 9);
  ASSERT_NE(nine, nullptr);
  EXPECT_EQ(nine->Launched("collective"), 0);
  EXPECT_EQ(nine->pid, -1) << "process information not found";
  EXPECT_EQ(Find(r->comms[0], 17)->Launched("collective"), 76);
}

TEST(Ras, Json) {
  auto r = ParseRasReport(testing::kRasJson, "ras.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->format, "json");
  EXPECT_EQ(r->timestamp, "2026-07-01 10:00:00");
  EXPECT_EQ(r->unused, 0u) << (r->unused_named.empty() ? "" : r->unused_named[0]);
  ASSERT_EQ(r->comms.size(), 1u);
  const RasComm& c = r->comms[0];
  EXPECT_EQ(c.hash, "0x00c0ffee12345678") << "the same hash as the text form prints";
  EXPECT_EQ(c.size, 4);
  EXPECT_EQ(c.ranks_reported, 3);
  ASSERT_EQ(c.ranks.size(), 4u);
  EXPECT_EQ(Find(c, 1)->Launched("AllReduce"), 911);
  EXPECT_EQ(Find(c, 2)->nvml_dev, 3);
  EXPECT_EQ(Find(c, 3)->state, "dead");
  EXPECT_EQ(Find(c, 3)->host, "10.0.0.4");
}

TEST(Ras, JsonErrorStates) {
  std::string j = testing::kRasJson;
  j.replace(j.find("\"async_error\": 0"), 16, "\"async_error\": 6");
  auto r = ParseRasReport(j, "ras.json");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Find(r->comms[0], 0)->state, "error");
  EXPECT_EQ(Find(r->comms[0], 0)->detail, "async error: remote error");
}

TEST(Ras, Detection) {
  EXPECT_TRUE(LooksLikeRasReport(testing::kRasTextMismatch));
  EXPECT_TRUE(LooksLikeRasReport(testing::kRasJson));
  EXPECT_FALSE(LooksLikeRasReport("NCCL version 2.30.7\nno sections\n"));
  EXPECT_FALSE(LooksLikeRasReport(R"({"nccl_version": "2.21", "entries": []})"))
      << "a Flight Recorder dump";
  EXPECT_FALSE(LooksLikeRasReport(R"({"header":{"id":"0x1"}})"));
  testing::TempDir dir;
  testing::WriteFile(dir / "ras.log", testing::kRasTextMismatch);
  testing::WriteFile(dir / "x.log", "NCCL INFO something\n");
  EXPECT_TRUE(IsRasReportFile(dir / "ras.log"));
  EXPECT_FALSE(IsRasReportFile(dir / "x.log"));
}

// Gzipped reports and MONITOR logs (kept as `ncclras ... | gzip`) are found by their content and
// read as the plain ones; a gzip file that is not one, or not valid gzip, is not taken.
TEST(Ras, GzippedReportsAndMonitorLogsAreRead) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "job");
  testing::WriteGzip(dir / "job/ras.txt.gz", testing::kRasTextMismatch);
  testing::WriteGzip(dir / "job/monitor.out.gz", testing::kRasMonitorText);
  testing::WriteGzip(dir / "job/other.log.gz", "NCCL INFO something\n");
  testing::WriteFile(dir / "job/broken.txt.gz", "NCCL version 2.30.7 but not gzip\n");
  EXPECT_TRUE(IsRasReportFile(dir / "job/ras.txt.gz"));
  EXPECT_TRUE(IsRasReportFile(dir / "job/monitor.out.gz"));
  EXPECT_FALSE(IsRasReportFile(dir / "job/other.log.gz"));
  EXPECT_FALSE(IsRasReportFile(dir / "job/broken.txt.gz"));
  auto gz = ReadRasReport(dir / "job/ras.txt.gz");
  ASSERT_TRUE(gz.ok()) << gz.status().message();
  auto plain = ParseRasReport(testing::kRasTextMismatch, dir / "job/ras.txt.gz");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(gz->format, plain->format);
  EXPECT_EQ(gz->comms.size(), plain->comms.size());
  EXPECT_EQ(gz->processes.size(), plain->processes.size());
  EXPECT_FALSE(gz->comms.empty());
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto rep = IngestHangEvidence(**store, {dir / "job"}, "r");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->ras_seen, 2u);
  EXPECT_EQ(rep->ras_read, 2u);
}

const RasProcess* FindProcess(const RasReport& r, const std::string& host) {
  for (const RasProcess& p : r.processes)
    if (p.host == host) return &p;
  return nullptr;
}

// MONITOR logs: each peer's events fold into its last state; only peers left dead or in trouble
// become processes, with their events; a recovered peer and a reconnected address do not.
TEST(RasMonitor, TextEventsFoldIntoEachPeersLastState) {
  EXPECT_TRUE(LooksLikeRasMonitorLog(testing::kRasMonitorText));
  EXPECT_FALSE(LooksLikeRasReport(testing::kRasMonitorText));
  auto r = ParseRasReport(testing::kRasMonitorText, "monitor.log");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->format, "monitor");
  EXPECT_EQ(r->lines, 7u);
  EXPECT_EQ(r->unused, 0u) << (r->unused_named.empty() ? "" : r->unused_named[0]);
  EXPECT_EQ(r->timestamp, "2026-07-01 10:02:22");
  ASSERT_EQ(r->processes.size(), 1u);
  const RasProcess& p = r->processes[0];
  EXPECT_EQ(p.host, "10.0.0.3");
  EXPECT_EQ(p.pid, 301);
  EXPECT_EQ(p.gpus, "1");
  EXPECT_EQ(p.state, "dead");
  EXPECT_NE(p.events.find("2026-07-01 10:02:13 PEER_SEND_STUCK: send operation stuck for 10s"),
            std::string::npos)
      << p.events;
  EXPECT_NE(p.events.find("PEER_TIMEOUT_DEAD: peer failed to respond for 20s, declaring dead"),
            std::string::npos)
      << p.events;
  // Without its recovery, 10.0.0.4 stays unresponsive.
  std::string cut = testing::kRasMonitorText;
  cut.erase(cut.find("[2026-07-01 10:02:07]"),
            cut.find("[2026-07-01 10:02:13]") - cut.find("[2026-07-01 10:02:07]"));
  auto c = ParseRasReport(cut, "monitor.log");
  ASSERT_TRUE(c.ok());
  ASSERT_NE(FindProcess(*c, "10.0.0.4"), nullptr);
  EXPECT_EQ(FindProcess(*c, "10.0.0.4")->state, "unresponsive");
  EXPECT_EQ(FindProcess(*c, "10.0.0.4")->gpus, "2,3");
  // A peer's last 8 events are kept, whole, whatever its details hold.
  std::string many;
  for (int i = 0; i < 10; ++i)
    many += "[2026-07-01 10:03:0" + std::to_string(i) +
            "] PEER_RETRY: Process 7 on node n7 managing GPU 0 try " + std::to_string(i) +
            "; again\n";
  auto m = ParseRasReport(many, "many.log");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->processes.size(), 1u);
  EXPECT_EQ(m->processes[0].events.find("2026-07-01 10:03:02 PEER_RETRY: try 2; again"), 0u)
      << m->processes[0].events;
  EXPECT_NE(m->processes[0].events.find("10:03:09 PEER_RETRY: try 9; again"), std::string::npos)
      << m->processes[0].events;
  EXPECT_EQ(m->processes[0].events.find("try 1;"), std::string::npos) << m->processes[0].events;
}

TEST(RasMonitor, JsonEventsAreAStreamOfObjects) {
  EXPECT_TRUE(LooksLikeRasMonitorLog(testing::kRasMonitorJson));
  EXPECT_FALSE(LooksLikeRasReport(testing::kRasMonitorJson));
  auto r = ParseRasReport(testing::kRasMonitorJson, "monitor.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->format, "monitor-json");
  EXPECT_EQ(r->lines, 2u);
  EXPECT_EQ(r->unused, 0u) << (r->unused_named.empty() ? "" : r->unused_named[0]);
  ASSERT_EQ(r->processes.size(), 2u);
  EXPECT_EQ(FindProcess(*r, "10.0.0.2")->state, "unresponsive");
  EXPECT_EQ(FindProcess(*r, "10.0.0.5")->state, "dead");
  EXPECT_EQ(FindProcess(*r, "10.0.0.5")->pid, 500);
  EXPECT_EQ(FindProcess(*r, "10.0.0.5")->gpus, "4,5");
}

// What a MONITOR log cannot be read as is counted and named; an unescaped quote in details (NCCL
// inserts them raw) stops the JSON stream there, said so.
TEST(RasMonitor, LinesAndEventsNotUnderstoodAreCountedAndNamed) {
  std::string t = testing::kRasMonitorText +
                  "[2026-07-01 10:03:00] PEER_FROM_THE_FUTURE: something\nnot an event\n";
  auto r = ParseRasReport(t, "m.log");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->unused, 2u);
  ASSERT_EQ(r->unused_named.size(), 2u);
  EXPECT_NE(
      r->unused_named[0].find("m.log:10: event PEER_FROM_THE_FUTURE is not one collscope knows"),
      std::string::npos)
      << r->unused_named[0];
  EXPECT_NE(r->unused_named[1].find("m.log:11: not a MONITOR event line"), std::string::npos)
      << r->unused_named[1];
  std::string j = testing::kRasMonitorJson;
  j.insert(j.find("peer not responding"), "\"");
  auto bad = ParseRasReport(j, "m.json");
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  EXPECT_EQ(bad->unused, 1u);
  EXPECT_NE(bad->unused_named.at(0).find("m.json: event[0]: JSON does not parse"),
            std::string::npos)
      << bad->unused_named[0];
}

TEST(RasMonitor, FoundByContentAndStored) {
  testing::TempDir dir;
  testing::WriteFile(dir / "job/monitor.out", testing::kRasMonitorText);
  testing::WriteFile(dir / "job/monitor-json.out", testing::kRasMonitorJson);
  EXPECT_TRUE(IsRasReportFile(dir / "job/monitor.out"));
  EXPECT_TRUE(IsRasReportFile(dir / "job/monitor-json.out"));
  auto store = Store::Open(dir / "s.duckdb");
  ASSERT_TRUE(store.ok());
  auto rep = IngestHangEvidence(**store, {dir / "job"}, "job");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->ras_read, 2u);
  auto back = LoadRasReports(**store, "job");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  const RasReport& text = (*back)[0].format == "monitor" ? (*back)[0] : (*back)[1];
  ASSERT_EQ(text.processes.size(), 1u);
  EXPECT_EQ(text.processes[0].state, "dead");
  EXPECT_NE(text.processes[0].events.find("PEER_TIMEOUT_DEAD"), std::string::npos)
      << text.processes[0].events;
}

// Hostile and damaged reports: refused with a reason, or each bad line counted and named; never a
// crash, never a size taken from the input.
TEST(Ras, HostileInput) {
  // Garbage lines and absurd values are counted, named with file and line; the good lines stay.
  std::string t = testing::kRasTextMismatch;
  t.insert(
      t.find("  7 ranks"),
      "  Rank 99999999999 has launched up to operation 1 -- GPU 0 managed by process 1 on node h\n"
      "  Rank 9 has launched up to operation 1 -- GPU 0 managed by process 1 on node h\n"
      "  Rank 3 has launched up to operation 99999999999999999999 -- GPU 0 managed by process 1 on "
      "node h\n"
      "\x01\xff garbage\n");
  t += "bogus trailing line\n";
  auto r = ParseRasReport(t, "bad.txt");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->unused, 5u);
  ASSERT_EQ(r->unused_named.size(), 5u);
  EXPECT_EQ(r->unused_named[0].rfind("bad.txt:26: a rank number over", 0), 0u)
      << r->unused_named[0];
  EXPECT_NE(r->unused_named[1].find("rank 9 outside its communicator of 8 ranks"),
            std::string::npos)
      << r->unused_named[1];
  EXPECT_NE(r->unused_named[2].find("operation count"), std::string::npos) << r->unused_named[2];
  EXPECT_EQ(r->unused_named[3].rfind("bad.txt:29: ", 0), 0u) << r->unused_named[3];
  EXPECT_NE(r->unused_named[4].find("bogus trailing line"), std::string::npos);
  ASSERT_EQ(r->comms.size(), 1u);
  EXPECT_EQ(Find(r->comms[0], 5)->Launched("AllReduce"), 911);

  // Truncated anywhere: still a report or refused, never a crash.
  for (const std::string* s :
       {&testing::kRasTextMismatch, &testing::kRasTextIncomplete, &testing::kRasJson})
    for (size_t n = 0; n < s->size(); n += 7)
      (void)ParseRasReport(std::string_view(*s).substr(0, n), "cut");
  auto cut = ParseRasReport(std::string_view(testing::kRasJson).substr(0, 300), "cut.json");
  EXPECT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("cut.json: not a RAS report: JSON does not parse"),
            std::string::npos);

  // JSON with absurd values: each counted with its path.
  std::string j = testing::kRasJson;
  j.replace(j.find("\"rank\": 2,"), 10, "\"rank\": 2147483647,");
  j.replace(j.find("\"AllReduce\": 912}"), 17, "\"AllReduce\": 18446744073709551615}");
  j.replace(j.find("\"pid\": 100"), 10, "\"pid\": \"x\"");
  auto jr = ParseRasReport(j, "bad.json");
  ASSERT_TRUE(jr.ok()) << jr.status().message();
  EXPECT_EQ(jr->unused, 3u);
  bool named_rank = false, named_count = false, named_pid = false;
  for (const std::string& u : jr->unused_named) {
    named_rank |= u.find("bad.json: communicators[0].ranks[2].rank") == 0;
    named_count |= u.find("bad.json: communicators[0].ranks[0].collective_counts.AllReduce") == 0;
    named_pid |= u.find("bad.json: communicators[0].ranks[0].pid: not an integer") == 0;
  }
  EXPECT_TRUE(named_rank && named_count && named_pid) << [&] {
    std::string all;
    for (const std::string& u : jr->unused_named) all += u + "\n";
    return all;
  }();
  ASSERT_EQ(jr->comms[0].ranks.size(), 3u) << "the rank outside the communicator is not kept";

  // A huge communicator size is no allocation: it is refused as a value.
  std::string big = testing::kRasJson;
  big.replace(big.find("\"size\": 4"), 9, "\"size\": 4000000000000");
  auto br = ParseRasReport(big, "big.json");
  ASSERT_TRUE(br.ok());
  EXPECT_EQ(br->comms[0].size, -1);
  EXPECT_GE(br->unused, 1u);

  // Many bad lines: all counted, only the first kMaxRasUnusedNamed named.
  std::string many = testing::kRasTextMismatch;
  for (int i = 0; i < 5000; ++i) many += "junk\n";
  auto mr = ParseRasReport(many, "many.txt");
  ASSERT_TRUE(mr.ok());
  EXPECT_EQ(mr->unused, 5000u);
  EXPECT_EQ(mr->unused_named.size(), kMaxRasUnusedNamed);

  EXPECT_FALSE(ParseRasReport("", "empty").ok());
  EXPECT_FALSE(ParseRasReport("{\"nccl_version\": 1, \"communicators\": []}", "v").ok());
}

TEST(Ras, StoreRoundTripAndReplace) {
  testing::TempDir dir;
  testing::WriteFile(dir / "job/ras.txt", testing::kRasTextIncomplete);
  testing::WriteFile(dir / "job/ras.json", testing::kRasJson);
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto rep = IngestHangEvidence(**store, {dir / "job"}, "r");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->ras_seen, 2u);
  EXPECT_EQ(rep->ras_read, 2u);
  auto back = LoadRasReports(**store, "r");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  // Ordered by path: ras.json, ras.txt.
  auto direct_json = ParseRasReport(testing::kRasJson, dir / "job/ras.json");
  auto direct_text = ParseRasReport(testing::kRasTextIncomplete, dir / "job/ras.txt");
  for (auto [loaded, direct] :
       {std::pair{&(*back)[0], &*direct_json}, std::pair{&(*back)[1], &*direct_text}}) {
    EXPECT_EQ(loaded->format, direct->format);
    EXPECT_EQ(loaded->timeouts, direct->timeouts);
    EXPECT_EQ(loaded->job_processes, direct->job_processes);
    ASSERT_EQ(loaded->processes.size(), direct->processes.size());
    ASSERT_EQ(loaded->comms.size(), direct->comms.size());
    for (size_t c = 0; c < direct->comms.size(); ++c) {
      const RasComm &a = loaded->comms[c], &b = direct->comms[c];
      EXPECT_EQ(a.hash, b.hash);
      EXPECT_EQ(a.size, b.size);
      EXPECT_EQ(a.missing, b.missing);
      ASSERT_EQ(a.ranks.size(), b.ranks.size());
      for (size_t k = 0; k < b.ranks.size(); ++k) {
        EXPECT_EQ(a.ranks[k].rank, b.ranks[k].rank);
        EXPECT_EQ(a.ranks[k].host, b.ranks[k].host);
        EXPECT_EQ(a.ranks[k].pid, b.ranks[k].pid);
        EXPECT_EQ(a.ranks[k].state, b.ranks[k].state);
        EXPECT_EQ(a.ranks[k].detail, b.ranks[k].detail);
        EXPECT_EQ(a.ranks[k].launched, b.ranks[k].launched);
      }
    }
  }
  // Read again (rewritten): its rows are replaced, not added.
  testing::WriteFile(dir / "job/ras.txt", testing::kRasTextMismatch);
  ASSERT_TRUE(IngestHangEvidence(**store, {dir / "job"}, "r").ok());
  auto n = (*store)->QueryInt("SELECT count(*) FROM ras_reports");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
  auto again = LoadRasReports(**store, "r");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[1].comms.size(), 1u);
  EXPECT_EQ((*again)[1].processes.size(), 0u);
  EXPECT_EQ((*again)[1].comms[0].ranks.size(), 2u);
}

}  // namespace
}  // namespace collscope::readers
