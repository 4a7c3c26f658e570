#include "core/readers/kernel_summary.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "core/ingest.h"

namespace collscope::readers {
namespace {

namespace fs = std::filesystem;

class KernelSummaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("collscope-kernelsummary-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto s = Store::Open(":memory:");
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(*s);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  // Every row of `sql`, its columns joined by '|', NULL as "NULL".
  std::vector<std::string> Rows(const std::string& sql) {
    auto r = store_->Query(sql);
    EXPECT_TRUE(r.ok()) << r.status().message();
    std::vector<std::string> out;
    if (!r.ok()) return out;
    for (const auto& row : r->rows) {
      std::string s;
      for (size_t i = 0; i < row.size(); ++i) s += (i ? "|" : "") + row[i].value_or("NULL");
      out.push_back(s);
    }
    return out;
  }
  fs::path dir_;
  std::unique_ptr<Store> store_;
};

const char kProcess[] =
    "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":1,\"host\":\"node7\",\"pid\":4242,"
    "\"rank\":3,\"local_rank\":3,\"world_size\":16,\"window\":\"step\",\"window_ms\":10000,\"clock\":\"realtime\"}\n";
const char kGemm[] =
    "{\"type\":\"kernel\",\"id\":5,\"name\":\"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn\",\"kind\":\"compute\","
    "\"grid\":[132,1,1],\"block\":[256,1,1]}\n";
const char kCopy[] = "{\"type\":\"kernel\",\"id\":6,\"name\":\"memcpy HtoD\",\"kind\":\"memcpy\"}\n";

std::string Summary(const std::string& step, const std::string& start, const std::string& end, int kernel, int count,
                    const std::string& total, const std::string& min, const std::string& max, const std::string& modes,
                    int stream = 7) {
  return "{\"type\":\"summary\",\"step\":" + step + ",\"start_ns\":" + start + ",\"end_ns\":" + end +
         ",\"kernel\":" + std::to_string(kernel) + ",\"device\":0,\"stream\":" + std::to_string(stream) +
         ",\"count\":" + std::to_string(count) + ",\"total_ns\":" + total + ",\"min_ns\":" + min + ",\"max_ns\":" + max +
         ",\"modes\":" + modes + "}\n";
}

TEST_F(KernelSummaryTest, FoundByContentWhateverTheName) {
  const std::string a = Write("anything.txt", std::string(kProcess) + kGemm);
  const std::string v2 = Write("v2.jsonl", "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":2}\n");
  const std::string other = Write("node1-pid7.log", "{\"type\":\"process\",\"format\":\"something-else\"}\n");
  const std::string steps = Write("s.jsonl", "{\"collscope_steps_version\":1,\"type\":\"process\"}\n");
  EXPECT_TRUE(IsKernelSummaryFile(a));
  EXPECT_TRUE(IsKernelSummaryFile(v2));  // found, so that it is refused with its reason
  EXPECT_FALSE(IsKernelSummaryFile(other));
  EXPECT_FALSE(IsKernelSummaryFile(steps));
  // The Inspector reader passes them by: none of their lines is an Inspector record.
  Write("node7-pid4242.kernels.jsonl", std::string(kProcess) + kGemm);
  auto inputs = DiscoverInputs({dir_.string()});
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  EXPECT_EQ(inputs->files, std::vector<std::string>{other});
}

TEST_F(KernelSummaryTest, RoundTripsIntoTheTablesWithExactValues) {
  const std::string path = Write("node7-pid4242.kernels.jsonl",
      std::string(kProcess) + kGemm + kCopy +
      Summary("1234", "1764666000000000000", "1764666000500000000", 5, 812, "93380000", "101200", "161000",
              "[[790,114800,0.021],[22,158300,0.012]]") +
      Summary("null", "1764665990000000000", "1764666000000000000", 6, 3, "30000", "9000", "11000", "[[3,9950.5,0.08]]") +
      "{\"type\":\"future_type\",\"x\":1}\n" +
      "{\"type\":\"stats\",\"records\":10,\"kernels\":9,\"dropped_by_cupti\":0,\"buffers_refused\":0,"
      "\"invalid_records\":0,\"late\":0}\n" +
      // A late kernel of step 1234's window: added to the window's row.
      Summary("1234", "1764666000600000000", "1764666000600200000", 5, 1, "200000", "200000", "200000",
              "[[1,200000,0]]") +
      "{\"type\":\"stats\",\"records\":11,\"kernels\":10,\"dropped_by_cupti\":2,\"buffers_refused\":1,"
      "\"invalid_records\":3,\"late\":1}\n");
  auto rep = IngestKernelSummaries(*store_, {dir_.string()}, "job");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->files_seen, 1u);
  EXPECT_EQ(rep->files_read, 1u);
  EXPECT_EQ(rep->summaries, 2u);
  EXPECT_EQ(rep->lines_rejected, 0u) << (rep->first_rejections.empty() ? "" : rep->first_rejections[0]);
  EXPECT_EQ(rep->lines_unknown, 1u);
  EXPECT_EQ(Rows("SELECT * EXCLUDE (bytes) FROM kernel_summary_files"),
            std::vector<std::string>{"1|0|" + path +
                                     "|node7|4242|3|3|16|step|10000|realtime|9|0|1|2|11|10|NULL|2|1|3|1"});
  EXPECT_EQ(Rows("SELECT * EXCLUDE (modes) FROM kernel_summaries ORDER BY line"),
            (std::vector<std::string>{
                "1|0|4|node7|3|0|7|ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn|compute|[132, 1, 1]|[256, 1, 1]|1234|"
                "1764666000000000.0|1764666000600200.0|813|93580.0|101.2|200.0",
                "1|0|5|node7|3|0|7|memcpy HtoD|memcpy|NULL|NULL|NULL|1764665990000000.0|1764666000000000.0|3|30.0|9.0|"
                "11.0"}));
  EXPECT_EQ(Rows("SELECT len(modes), modes[1].count, modes[1].centre_us, modes[1].spread, modes[3].count, "
                 "modes[3].centre_us FROM kernel_summaries ORDER BY line"),
            (std::vector<std::string>{"3|790|114.8|0.021|1|200.0", "1|3|9.9505|0.08|NULL|NULL"}));
}

TEST_F(KernelSummaryTest, BadLinesAreCountedAndNamedWithFileAndLine) {
  const std::string good = Summary("1", "1000000", "2000000", 5, 2, "300000", "100000", "200000", "[[2,141421,0.3]]");
  const std::string path = Write("bad.kernels.jsonl",
      std::string(kProcess) + kGemm + "{not json\n" +
      Summary("2", "1000000", "2000000", 5, 3, "300000", "100000", "100000", "[[2,100000,0]]") +
      Summary("3", "1000000", "2000000", 9, 1, "100000", "100000", "100000", "[[1,100000,0]]") +
      Summary("4", "1000000", "2000000", 5, 1, "100000", "200000", "100000", "[[1,100000,0]]") +
      Summary("5", "1000000", "2000000", 5, 2, "900000", "100000", "200000", "[[2,141421,0.3]]") +
      "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":1}\n" + good +
      "{\"type\":\"kernel\",\"id\":6,\"name\":\"k\",\"kind\":\"compute\",\"grid\":[0,1,1],\"block\":[1,1,1]}\n" +
      Summary("6", "1000000", "2000000", 5, 1, "100000", "100000", "100000", "[[1,100000,0]]").substr(0, 40));
  auto f = ReadKernelSummaryFile(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->rejected.size(), 8u);
  const std::vector<std::pair<uint64_t, std::string>> want = {
      {3, "not a JSON object"},
      {4, "the modes' counts add up to 2, not to \"count\" 3"},
      {5, "kernel 9 is not defined by an earlier kernel line"},
      {6, "\"min_ns\" above \"max_ns\""},
      {7, "\"total_ns\" outside count x [min_ns, max_ns]"},
      {8, "a second process line (a file holds one process)"},
      {10, "\"grid\" is not [x, y, z] of launch dimensions"},
      {11, "incomplete last line (no newline: still being written, or cut)"},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f->rejected[i].line, want[i].first) << i;
    EXPECT_EQ(f->rejected[i].reason, want[i].second) << i;
  }
  ASSERT_EQ(f->rows.size(), 1u);  // line 9 only
  EXPECT_EQ(f->rows[0].line, 9u);
  // Stored: each rejected line in ingest_log, named by file and line in the report.
  auto rep = IngestKernelSummaries(*store_, {path}, "job");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->lines_rejected, 8u);
  ASSERT_EQ(rep->first_rejections.size(), 8u);
  EXPECT_EQ(rep->first_rejections[2], path + ":5: kernel 9 is not defined by an earlier kernel line");
  EXPECT_EQ(Rows("SELECT count(*), min(line), max(line) FROM ingest_log WHERE path = '" + path + "'"),
            std::vector<std::string>{"8|3|11"});
  EXPECT_EQ(Rows("SELECT lines, lines_rejected, summaries FROM kernel_summary_files"), std::vector<std::string>{"11|8|1"});
}

// A raw NUL byte in a rejected line is stored as the text \x00: SQL text is a C string, and the
// NUL once ended the statement mid-literal, failing the whole ingest.
TEST_F(KernelSummaryTest, ARejectedLineWithANulByteIsStoredNotFatal) {
  const std::string path = Write("nul.kernels.jsonl", std::string(kProcess) + kGemm + std::string("{bad\0line\n", 10));
  auto rep = IngestKernelSummaries(*store_, {path}, "job");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->lines_rejected, 1u);
  EXPECT_EQ(Rows("SELECT excerpt FROM ingest_log WHERE path = '" + path + "'"), std::vector<std::string>{"{bad\\x00line"});
}

TEST_F(KernelSummaryTest, AnotherFormatVersionRefusesTheFileWithItsReason) {
  const std::string path = Write("v2.kernels.jsonl",
      "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":2,\"host\":\"n\",\"pid\":1,\"rank\":0,"
      "\"window\":\"time\"}\n" + std::string(kGemm));
  auto f = ReadKernelSummaryFile(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), path + ":1: kernel-summary format version 2; this collscope reads version 1");
  auto rep = IngestKernelSummaries(*store_, {dir_.string()}, "job");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->files_seen, 1u);
  EXPECT_EQ(rep->files_read, 0u);
  EXPECT_EQ(rep->failed, std::vector<std::string>{f.status().message()});
  EXPECT_EQ(Rows("SELECT count(*) FROM kernel_summary_files"), std::vector<std::string>{"0"});
}

TEST_F(KernelSummaryTest, IngestedAgainAFileReplacesItsRows) {
  const std::string one = Summary("1", "1000000", "2000000", 5, 2, "300000", "100000", "200000", "[[2,141421,0.3]]");
  const std::string two = Summary("2", "3000000", "4000000", 5, 1, "100000", "100000", "100000", "[[1,100000,0]]");
  const std::string path = Write("r.kernels.jsonl", std::string(kProcess) + kGemm + one + two + "{bad\n");
  Write("other.kernels.jsonl", std::string(kProcess) + kGemm + one);
  ASSERT_TRUE(IngestKernelSummaries(*store_, {dir_.string()}, "job").ok());
  EXPECT_EQ(Rows("SELECT file_id, count(*) FROM kernel_summaries GROUP BY 1 ORDER BY 1"),
            (std::vector<std::string>{"0|1", "1|2"}));
  // The library rewrote it (a longer job): its rows and rejected lines are replaced, its id kept.
  Write("r.kernels.jsonl", std::string(kProcess) + kGemm + two);
  auto rep = IngestKernelSummaries(*store_, {path}, "job");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(Rows("SELECT file_id, step FROM kernel_summaries ORDER BY 1, 2"),
            (std::vector<std::string>{"0|1", "1|2"}));
  EXPECT_EQ(Rows("SELECT file_id, lines FROM kernel_summary_files ORDER BY 1"),
            (std::vector<std::string>{"0|3", "1|3"}));
  EXPECT_EQ(Rows("SELECT count(*) FROM ingest_log"), std::vector<std::string>{"0"});
}

// The library's default: a gzip stream, sync-flushed at every tick. A job that died leaves it
// without its trailer; every complete line is still read.
TEST_F(KernelSummaryTest, ReadsTheGzipStreamEvenWithoutItsTrailer) {
  const std::string text = std::string(kProcess) + kGemm +
      Summary("1", "1000000", "2000000", 5, 2, "300000", "100000", "200000", "[[2,141421,0.3]]") +
      Summary("2", "3000000", "4000000", 5, 1, "100000", "100000", "100000", "[[1,1e+05,0]]");
  z_stream zs{};
  ASSERT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string gz(text.size() + 1024, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(gz.data());
  zs.avail_out = static_cast<uInt>(gz.size());
  ASSERT_EQ(deflate(&zs, Z_SYNC_FLUSH), Z_OK);  // no Z_FINISH: no trailer
  gz.resize(gz.size() - zs.avail_out);
  deflateEnd(&zs);
  const std::string path = Write("node7-pid4242.kernels.jsonl.gz", gz);
  EXPECT_TRUE(IsKernelSummaryFile(path));
  auto f = ReadKernelSummaryFile(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(f->rejected.empty()) << f->rejected[0].reason;
  EXPECT_EQ(f->lines, 4u);
  ASSERT_EQ(f->rows.size(), 2u);
  EXPECT_EQ(f->rows[1].modes[0].centre_ns, 100000);
  EXPECT_EQ(f->bytes, gz.size());  // the file's size on disk
}

}  // namespace
}  // namespace collscope::readers
