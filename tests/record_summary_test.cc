// Record summaries (core/readers/record_summary.h, docs/scale.md): what per-host agents ship to an
// aggregator must diagnose exactly as the logs themselves, ship every row once, and never lose a
// file without naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "core/readers/ingest_inputs.h"
#include "core/readers/record_summary.h"
#include "core/store.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

namespace fs = std::filesystem;
using testing::CollLine;
using testing::CollscopeBinary;
using testing::RunShell;
using testing::TempDir;

std::string Findings(const std::string& db) {
  // Exit status 1: findings were made (the command's contract); 0: none; anything else failed.
  auto out = RunShell(CollscopeBinary() + " diagnose --db " + db + " --run job --json 2>/dev/null");
  EXPECT_TRUE(out.code == 0 || out.code == 1) << out.text;
  return out.text;
}

std::map<std::string, std::string> RowsPerHost(const std::string& db, const char* table) {
  auto store = Store::Open(db, Store::Options::ReadOnly());
  EXPECT_TRUE(store.ok());
  std::map<std::string, std::string> out;
  if (!store.ok()) return out;
  auto r = (*store)->Query(std::string("SELECT p.hostname, count(*) FROM ") + table +
                           " x JOIN processes p USING (run_id, process_id) GROUP BY 1 ORDER BY 1");
  EXPECT_TRUE(r.ok());
  if (r.ok())
    for (const auto& row : r->rows) out[*row[0]] = *row[1];
  return out;
}

// A simulated job with a slow NIC, ingested directly and through one host agent per host (each
// reading the shared folder, keeping its own host's files), must give the same findings and the
// same records and dump_stats per host.
TEST(RecordSummary, PerHostAgentsThenAnAggregatorDiagnoseLikeTheLogs) {
  TempDir dir;
  const std::string bin = CollscopeBinary();
  ASSERT_EQ(RunShell(bin + " simulate -o " + (dir / "job") +
                     " --hosts 4 --steps 30 --kineto-max-ranks 0 --no-steps --inspector-flavor 2.30 "
                     "--fault kind=nic_degrade,host=1,factor=0.25,start_step=10,end_step=20 >/dev/null 2>&1")
                .code,
            0);
  ASSERT_EQ(RunShell(bin + " ingest " + (dir / "job") + " --db " + (dir / "direct.duckdb") +
                     " --run job >/dev/null 2>&1")
                .code,
            0);
  for (int h = 0; h < 4; ++h) {
    const std::string host = "node-00" + std::to_string(h);
    auto out = RunShell(bin + " agent --watch " + (dir / "job") + " --db " + (dir / (host + ".duckdb")) +
                        " --run job --host " + host + " --export-summaries " + (dir / "summaries") +
                        " --no-diagnose --listen '' --ticks 1 --interval 0.1s 2>&1");
    ASSERT_EQ(out.code, 0) << out.text;
    // Each agent wrote its own host's partition and nobody else's.
    int files = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir / "summaries"))
      if (e.is_regular_file()) ++files;
    EXPECT_EQ(files, h + 1);
    EXPECT_TRUE(fs::is_directory(dir / ("summaries/host=" + host)));
  }
  auto agg = RunShell(bin + " ingest " + (dir / "summaries") + " --db " + (dir / "agg.duckdb") + " --run job 2>&1");
  ASSERT_EQ(agg.code, 0) << agg.text;
  // It says what it loaded: the records came from the summaries, not from logs.
  EXPECT_NE(agg.text.find("record summaries (host agents'): 4 files (4 read, 0 unchanged, 0 not stored) in 1 batches"),
            std::string::npos)
      << agg.text;

  const std::string direct = Findings(dir / "direct.duckdb"), summarised = Findings(dir / "agg.duckdb");
  EXPECT_NE(direct.find("\"slow_link\""), std::string::npos) << direct;
  EXPECT_NE(direct.find("node-001"), std::string::npos) << direct;
  EXPECT_EQ(summarised, direct);
  const auto records = RowsPerHost(dir / "direct.duckdb", "records");
  EXPECT_EQ(records.size(), 4u);
  EXPECT_EQ(RowsPerHost(dir / "agg.duckdb", "records"), records);
  EXPECT_EQ(RowsPerHost(dir / "agg.duckdb", "dump_stats"), RowsPerHost(dir / "direct.duckdb", "dump_stats"));
}

// Ten records of one rank: dump times 1..n s, so a later call can add more.
std::string Lines(const std::string& host, int first, int n) {
  std::string s;
  for (int i = first; i < first + n; ++i)
    s += CollLine(host, 7, "0xabc", 0, 2, 2, "AllReduce", static_cast<uint64_t>(i), 1 << 20, 100, "10.485760",
                  "10.485760", 1760000000000000ull + static_cast<uint64_t>(i) * 1000000);
  return s;
}

// Every row ships once: a second export with nothing new writes nothing, rows added later go in
// the next file only, and an aggregator that sees a file twice loads it once.
TEST(RecordSummary, EveryRowShipsOnceAndLoadsOnce) {
  TempDir dir;
  testing::WriteFile(dir / "logs/a-pid7.log", Lines("a", 0, 10));
  Store::Options so;
  so.writable_dir = dir / "sums";
  fs::create_directories(dir / "sums");
  auto host = Store::Open(dir / "host.duckdb", so);
  ASSERT_TRUE(host.ok()) << host.status().message();
  auto agg = Store::Open(dir / "agg.duckdb");
  ASSERT_TRUE(agg.ok());
  IngestOptions io;
  io.run = "job";
  io.threads = 1;
  readers::SummaryExportOptions eo;
  eo.run = "job";
  eo.root = dir / "sums";
  eo.now_us = 100;

  ASSERT_TRUE(readers::IngestInputs(**host, {dir / "logs"}, io).ok());
  auto first = readers::ExportRecordSummaries(**host, eo);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->files_written, 1u);
  EXPECT_EQ(first->records, 10u);
  EXPECT_TRUE(fs::exists(dir / "sums/host=a/0000000000000100.parquet"));
  // Nothing new: nothing written.
  auto again = readers::ExportRecordSummaries(**host, eo);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_written, 0u);

  auto in1 = readers::IngestInputs(**agg, {dir / "sums"}, io);
  ASSERT_TRUE(in1.ok()) << in1.status().message();
  EXPECT_EQ(in1->summaries.records_stored, 10u);
  EXPECT_TRUE(in1->summaries.failed.empty());

  testing::WriteFile(dir / "logs/a-pid7.log", Lines("a", 10, 5), true);
  ASSERT_TRUE(readers::IngestInputs(**host, {dir / "logs"}, io).ok());
  eo.now_us = 50;  // a clock that stepped back still names the file after the previous one
  auto second = readers::ExportRecordSummaries(**host, eo);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->records, 5u);
  ASSERT_EQ(second->paths.size(), 1u);
  EXPECT_EQ(fs::path(second->paths[0]).filename(), "0000000000000101.parquet");

  auto in2 = readers::IngestInputs(**agg, {dir / "sums"}, io);
  ASSERT_TRUE(in2.ok());
  EXPECT_EQ(in2->summaries.records_stored, 5u);
  EXPECT_EQ(in2->summaries.files_unchanged, 1u);
  auto in3 = readers::IngestInputs(**agg, {dir / "sums"}, io);
  ASSERT_TRUE(in3.ok());
  EXPECT_EQ(in3->summaries.records_stored, 0u);
  EXPECT_EQ(*(*agg)->QueryInt("SELECT count(*) FROM records"), 15);
  EXPECT_EQ(*(*agg)->QueryInt("SELECT count(DISTINCT sn) FROM records"), 15);
  EXPECT_EQ(*(*agg)->QueryInt("SELECT count(*) FROM processes"), 1);
  EXPECT_EQ(*(*agg)->QueryInt("SELECT count(*) FROM operations"), 1);
}

// An export whose progress was committed but whose rename did not happen (a crash between the
// two) is finished by the next export: the rows are neither lost nor shipped twice.
TEST(RecordSummary, ARenameOwedByACrashIsFinishedByTheNextExport) {
  TempDir dir;
  testing::WriteFile(dir / "logs/a-pid7.log", Lines("a", 0, 4));
  Store::Options so;
  so.writable_dir = dir / "sums";
  fs::create_directories(dir / "sums");
  auto host = Store::Open(dir / "host.duckdb", so);
  ASSERT_TRUE(host.ok());
  IngestOptions io;
  io.run = "job";
  io.threads = 1;
  readers::SummaryExportOptions eo;
  eo.run = "job";
  eo.root = dir / "sums";
  eo.now_us = 100;
  ASSERT_TRUE(readers::IngestInputs(**host, {dir / "logs"}, io).ok());
  auto first = readers::ExportRecordSummaries(**host, eo);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->paths.size(), 1u);
  // Put the file back under its temporary name and owe the rename, as a crash would leave it.
  const std::string final_path = first->paths[0];
  const std::string tmp = (fs::path(final_path).parent_path() / ".0000000000000100.parquet.tmp").string();
  fs::rename(final_path, tmp);
  ASSERT_TRUE((*host)->SetMetaValue("summary.pending.job", tmp + "\t" + final_path + "\n").ok());
  auto next = readers::ExportRecordSummaries(**host, eo);
  ASSERT_TRUE(next.ok()) << next.status().message();
  EXPECT_EQ(next->files_written, 0u);  // nothing new to ship
  EXPECT_TRUE(fs::exists(final_path));
  EXPECT_FALSE(fs::exists(tmp));
}

// Logs of `hosts` (`n` records each) ingested into one host store and exported as summaries under
// dir/sums (`root`, canonical); the store stays open to write other files beside them. Null on
// failure.
struct Exported {
  std::unique_ptr<Store> host;
  std::string root;
  uint64_t files = 0;
};
Exported ExportLogs(const TempDir& dir, const std::vector<std::string>& hosts, int n) {
  for (const std::string& h : hosts)
    testing::WriteFile(dir / ("logs/" + h + "-pid7.log"), Lines(h, 0, n));
  Store::Options so;
  so.writable_dir = dir / "sums";
  fs::create_directories(dir / "sums");
  auto host = Store::Open(dir / "host.duckdb", so);
  if (!host.ok()) return {};
  IngestOptions io;
  io.run = "job";
  io.threads = 1;
  if (!readers::IngestInputs(**host, {dir / "logs"}, io).ok()) return {};
  readers::SummaryExportOptions eo;
  eo.run = "job";
  eo.root = dir / "sums";
  eo.now_us = 100;
  auto out = readers::ExportRecordSummaries(**host, eo);
  if (!out.ok()) return {};
  return {std::move(*host), fs::weakly_canonical(dir / "sums").string(), out->files_written};
}

// A file of this format and version whose rows lack all but two of its columns: it passes the
// version check and cannot be loaded.
Status WriteSummaryWithoutItsColumns(Store& store, const std::string& path) {
  return store.Exec(
      "COPY (SELECT 'record' AS row_type, 'e' AS hostname) TO " + SqlString(path) +
      " (FORMAT parquet, KV_METADATA {'collscope.format': 'collscope-record-summary', "
      "'collscope.format_version': '1'})");
}

// Files the aggregator cannot use are named with the reason, the good ones still load, and a
// bad file is tried again later (a newer collscope may read it).
TEST(RecordSummary, BadFilesAreNamedAndTheRestLoads) {
  TempDir dir;
  Exported ex = ExportLogs(dir, {"a"}, 3);
  ASSERT_TRUE(ex.host);
  auto& host = ex.host;
  const std::string& root = ex.root;
  IngestOptions io;
  io.run = "job";
  io.threads = 1;
  testing::WriteFile(root + "/host=b/0000000000000001.parquet", "not parquet at all");
  for (const char* h : {"c", "d", "e"}) fs::create_directories(root + "/host=" + h);
  ASSERT_TRUE(host->Exec("COPY (SELECT 1 AS x) TO " +
                         SqlString(root + "/host=c/0000000000000001.parquet") + " (FORMAT parquet)")
                  .ok());
  ASSERT_TRUE(
      host->Exec("COPY (SELECT 1 AS x) TO " + SqlString(root + "/host=d/0000000000000001.parquet") +
                 " (FORMAT parquet, KV_METADATA {'collscope.format': 'collscope-record-summary', "
                 "'collscope.format_version': '2'})")
          .ok());
  ASSERT_TRUE(WriteSummaryWithoutItsColumns(*host, root + "/host=e/0000000000000001.parquet").ok());
  auto agg = Store::Open(dir / "agg.duckdb");
  ASSERT_TRUE(agg.ok());
  auto in = readers::IngestInputs(**agg, {dir / "sums"}, io);
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->summaries.records_stored, 3u);
  EXPECT_TRUE(in->AnythingLost());
  std::string said;
  for (const std::string& s : in->NotStored()) said += s + "\n";
  ASSERT_EQ(in->summaries.failed.size(), 4u) << said;
  EXPECT_NE(said.find("host=b/0000000000000001.parquet: "), std::string::npos) << said;
  EXPECT_NE(said.find("host=c/0000000000000001.parquet: not a collscope record summary"), std::string::npos) << said;
  EXPECT_NE(said.find("host=d/0000000000000001.parquet: record summary format version 2"), std::string::npos) << said;
  EXPECT_NE(said.find("host=e/0000000000000001.parquet: "), std::string::npos) << said;
  auto later = readers::IngestInputs(**agg, {dir / "sums"}, io);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->summaries.failed.size(), 4u);
  EXPECT_EQ(later->summaries.records_stored, 0u);
}

// An aggregator that starts behind loads its backlog in batches of bounded size, each its own
// transaction, with the same rows as one load; a batch with a bad file still loads its good ones.
TEST(RecordSummary, ABacklogLoadsInBoundedBatches) {
  TempDir dir;
  Exported ex = ExportLogs(dir, {"a", "b", "c"}, 4);
  ASSERT_TRUE(ex.host);
  ASSERT_EQ(ex.files, 3u);
  auto& host = ex.host;
  const std::string& root = ex.root;
  fs::create_directories(root + "/host=e");
  ASSERT_TRUE(WriteSummaryWithoutItsColumns(*host, root + "/host=e/0000000000000001.parquet").ok());

  auto whole = Store::Open(dir / "whole.duckdb");
  ASSERT_TRUE(whole.ok());
  auto at_once = readers::IngestRecordSummaries(**whole, {root}, "job");
  ASSERT_TRUE(at_once.ok()) << at_once.status().message();
  EXPECT_EQ(at_once->batches, 1u);
  EXPECT_EQ(at_once->records_stored, 12u);
  EXPECT_EQ(at_once->failed.size(), 1u);

  auto batched = Store::Open(dir / "batched.duckdb");
  ASSERT_TRUE(batched.ok());
  auto one_by_one = readers::IngestRecordSummaries(**batched, {root}, "job", 1);
  ASSERT_TRUE(one_by_one.ok()) << one_by_one.status().message();
  EXPECT_EQ(one_by_one->batches, 4u);
  EXPECT_EQ(one_by_one->records_stored, 12u);
  ASSERT_EQ(one_by_one->failed.size(), 1u);
  EXPECT_NE(one_by_one->failed[0].find("host=e/"), std::string::npos) << one_by_one->failed[0];
  const char* rows =
      "SELECT count(*), count(DISTINCT process_id), count(DISTINCT file_id), sum(sn), "
      "sum(exec_time_us) FROM records";
  auto a = (*whole)->Query(rows), b = (*batched)->Query(rows);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->rows, b->rows);
  EXPECT_EQ(*(*batched)->QueryInt("SELECT count(*) FROM processes"), 3);
  EXPECT_EQ(*(*batched)->QueryInt("SELECT count(*) FROM files"), 3);
}

}  // namespace
}  // namespace collscope
