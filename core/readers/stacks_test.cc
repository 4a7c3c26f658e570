#include "core/readers/stacks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/ingest.h"
#include "core/readers/ingest_inputs.h"

namespace collscope::readers {
namespace {

namespace fs = std::filesystem;

class StackFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("collscope-stackfile-" + std::to_string(::getpid()) + "-" +
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
    fs::create_directories(p.parent_path());
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
  Result<InputsReport> IngestAll(const std::vector<std::string>& paths,
                                 const std::string& run = "job") {
    IngestOptions o;
    o.run = run;
    o.threads = 1;
    return IngestInputs(*store_, paths, o);
  }
  fs::path dir_;
  std::unique_ptr<Store> store_;
};

// As agent/stacks/stack_session.cc writes them.
std::string Process(const std::string& host = "node3", int pid = 4711, int rank = 12,
                    const std::string& python = "\"3.11.2\"", int version = 1) {
  return "{\"collscope_stacks\":" + std::to_string(version) + ",\"type\":\"process\",\"host\":\"" +
         host + "\",\"pid\":" + std::to_string(pid) + ",\"rank\":" + std::to_string(rank) +
         ",\"exe\":\"/usr/bin/python3.11\",\"command\":\"python3 train.py --steps "
         "10\",\"python\":" +
         python + ",\"python_unread\":\"" +
         (python == "null" ? "no libpython in the process" : "") +
         "\",\"interval_us\":100000,\"native\":true}\n";
}

std::string Stacks(int64_t tid, const std::string& thread, int64_t start, int64_t end,
                   int64_t first, int64_t last, int64_t count, const std::string& frames) {
  return "{\"type\":\"stacks\",\"tid\":" + std::to_string(tid) + ",\"thread\":\"" + thread +
         "\",\"window_start_us\":" + std::to_string(start) +
         ",\"window_end_us\":" + std::to_string(end) + ",\"first_us\":" + std::to_string(first) +
         ",\"last_us\":" + std::to_string(last) + ",\"count\":" + std::to_string(count) +
         ",\"frames\":\"" + frames + "\"}\n";
}

const char kEnd[] =
    "{\"type\":\"end\",\"samples\":300,\"failed\":2,\"dropped\":1,\"mean_sample_us\":850,\"mean_"
    "stopped_us\":420,"
    "\"max_stopped_us\":2100,\"exited\":false}\n";

// A main thread waiting in an all-reduce below the program's own frame, and a native-only thread.
const std::string kWaiting =
    "_start;Py_RunMain;<module> (train.py:80);train_step (train.py:42);"
    "wait (python3.11/threading.py:320);pthread_cond_wait;libc.so.6+0x8f2a1";
const std::string kNative = "start_thread;ncclProxyService;poll;libc.so.6+0x10a1b";
constexpr int64_t kW = 1764666000000000;  // a window start, us since the epoch

TEST_F(StackFileTest, FoundByContentWhateverTheName) {
  const std::string a =
      Write("anything.txt", Process() + Stacks(4711, "python3", kW, kW + 10000000, kW, kW, 1, "a"));
  // Another writer's key order: parsed.
  const std::string reordered =
      Write("r.jsonl", "{\"type\":\"process\",\"host\":\"h\",\"collscope_stacks\":1,\"pid\":1}\n");
  const std::string v2 = Write("v2.jsonl", Process("h", 1, 0, "null", 2));
  const std::string kernels = Write(
      "k.jsonl", "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":1}\n");
  const std::string steps =
      Write("s.jsonl", "{\"collscope_steps_version\":1,\"type\":\"process\"}\n");
  const std::string log = Write("node1-pid7.log", "{\"header\":{\"id\":\"0x1\",\"rank\":0}}\n");
  EXPECT_TRUE(IsStackFile(a));
  EXPECT_TRUE(IsStackFile(reordered));
  EXPECT_TRUE(IsStackFile(v2));  // found, so that it is refused with its reason
  EXPECT_FALSE(IsStackFile(kernels));
  EXPECT_FALSE(IsStackFile(steps));
  EXPECT_FALSE(IsStackFile(log));
  EXPECT_FALSE(IsKernelSummaryFile(a));
  EXPECT_FALSE(IsStepSeriesFile(a));
  // The Inspector reader passes them by, named or found in a folder.
  auto inputs = DiscoverInputs({dir_.string(), a});
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  EXPECT_EQ(inputs->files, std::vector<std::string>{log});
}

// A stack file written by hand -> IngestInputs -> the tables, with exact values.
TEST_F(StackFileTest, EndToEndThroughIngestInputs) {
  const std::string path = Write(
      "node3-pid4711.stacks.jsonl",
      Process() +
          Stacks(4711, "python3", kW, kW + 10000000, kW + 100000, kW + 9900000, 99, kWaiting) +
          Stacks(4730, "nccl proxy", kW, kW + 10000000, kW + 100000, kW + 100000, 1, kNative) +
          "{\"type\":\"gpu\",\"x\":1}\n" +  // a later writer's type: counted, not rejected
          Stacks(4711, "python3", kW + 10000000, kW + 20000000, kW + 10000000, kW + 19900000, 100,
                 kWaiting) +
          kEnd);
  // Another process without a rank or Python frames, still being written (no end line yet).
  const std::string open =
      Write("node4-pid5000.stacks.jsonl",
            Process("node4", 5000, -1, "null") +
                Stacks(5000, "main", kW, kW + 10000000, kW, kW + 500000, 6, "_start;main;spin"));
  auto in = IngestAll({dir_.string()});
  ASSERT_TRUE(in.ok()) << in.status().message();
  const StackIngestReport& rep = in->stacks;
  EXPECT_EQ(rep.files_seen, 2u);
  EXPECT_EQ(rep.files_read, 2u);
  EXPECT_EQ(rep.files_incomplete, 1u);
  EXPECT_EQ(rep.stacks, 4u);
  EXPECT_EQ(rep.lines_rejected, 0u)
      << (rep.first_rejections.empty() ? "" : rep.first_rejections[0]);
  EXPECT_EQ(rep.lines_unknown, 1u);
  EXPECT_EQ(in->records.files_seen, 0u);  // no Inspector log among them
  EXPECT_FALSE(in->NoInputs());
  EXPECT_FALSE(in->NothingStored());
  EXPECT_FALSE(in->AnythingLost());
  EXPECT_TRUE(HasStackTables(*store_));
  EXPECT_EQ(Rows("SELECT * EXCLUDE (bytes) FROM stack_files ORDER BY file_id"),
            (std::vector<std::string>{
                "1|0|" + path +
                    "|node3|4711|12|/usr/bin/python3.11|python3 train.py --steps "
                    "10|3.11.2|NULL|100000|true|6|0|1|3|"
                    "300|2|1|850|420|2100|false|true",
                "1|1|" + open +
                    "|node4|5000|NULL|/usr/bin/python3.11|python3 train.py --steps 10|NULL|no "
                    "libpython in the "
                    "process|100000|true|2|0|0|1|NULL|NULL|NULL|NULL|NULL|NULL|NULL|false"}));
  EXPECT_EQ(Rows("SELECT bytes = " + std::to_string(fs::file_size(path)) +
                 " FROM stack_files WHERE file_id = 0"),
            std::vector<std::string>{"true"});
  const std::string w = std::to_string(kW);
  EXPECT_EQ(
      Rows("SELECT * EXCLUDE (frames, step_first, step_last) FROM stack_samples ORDER BY file_id, "
           "line"),
      (std::vector<std::string>{
          "1|0|2|node3|4711|12|4711|python3|" + w + "|" + std::to_string(kW + 10000000) + "|" +
              std::to_string(kW + 100000) + "|" + std::to_string(kW + 9900000) +
              "|99|train_step (train.py)|train_step (train.py:42) -> pthread_cond_wait",
          "1|0|3|node3|4711|12|4730|nccl proxy|" + w + "|" + std::to_string(kW + 10000000) + "|" +
              std::to_string(kW + 100000) + "|" + std::to_string(kW + 100000) + "|1|poll|poll",
          "1|0|5|node3|4711|12|4711|python3|" + std::to_string(kW + 10000000) + "|" +
              std::to_string(kW + 20000000) + "|" + std::to_string(kW + 10000000) + "|" +
              std::to_string(kW + 19900000) +
              "|100|train_step (train.py)|train_step (train.py:42) -> "
              "pthread_cond_wait",
          "1|1|2|node4|5000|NULL|5000|main|" + w + "|" + std::to_string(kW + 10000000) + "|" + w +
              "|" + std::to_string(kW + 500000) + "|6|spin|spin"}));
  EXPECT_EQ(Rows("SELECT frames FROM stack_samples WHERE file_id = 0 AND line = 2"),
            std::vector<std::string>{kWaiting});
  // SQL groups threads by where they were.
  EXPECT_EQ(
      Rows("SELECT position, sum(count) FROM stack_samples WHERE tid = pid GROUP BY 1 ORDER BY 1"),
      (std::vector<std::string>{"spin|6", "train_step (train.py)|199"}));
  // ...and the consumers' view: folded stacks as the sampler made them.
  auto stored = ReadStoredStacks(*store_, "job");
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  ASSERT_EQ(stored->size(), 4u);
  const FoldedStack& s = (*stored)[0];
  EXPECT_EQ(s.host, "node3");
  EXPECT_EQ(s.pid, 4711);
  EXPECT_EQ(s.rank, 12);
  EXPECT_EQ(s.tid, 4711);
  EXPECT_EQ(s.thread, "python3");
  EXPECT_EQ(s.window_start_us, kW);
  EXPECT_EQ(s.window_end_us, kW + 10000000);
  EXPECT_EQ(s.first_us, kW + 100000);
  EXPECT_EQ(s.last_us, kW + 9900000);
  EXPECT_EQ(s.count, 99);
  EXPECT_EQ(s.frames, kWaiting);
  EXPECT_EQ(s.position, "train_step (train.py)");
  EXPECT_EQ(s.position_label, "train_step (train.py:42) -> pthread_cond_wait");
  EXPECT_EQ((*stored)[3].rank, -1);  // NULL in the store, -1 in the model
  EXPECT_EQ((*stored)[3].frames, "_start;main;spin");
  // The reader's rows are the stored ones.
  auto f = ReadStackFile(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->rows.size(), 3u);
  EXPECT_EQ(f->rows[0].stack.position_label, s.position_label);
  EXPECT_TRUE(f->end.seen);
}

TEST_F(StackFileTest, BadLinesAreRejectedWithFileLineAndReason) {
  const std::string good = Stacks(4711, "python3", kW, kW + 10, kW, kW + 5, 3, "main;f");
  std::string text =
      Process() + good +    // 1, 2
      "{not json\n" +       // 3
      "{\"tid\":4711}\n" +  // 4
      "{\"type\":\"stacks\",\"thread\":\"t\",\"window_start_us\":1,\"window_end_us\":2,"
      "\"first_us\":1,\"last_us\":1,\"count\":1,\"frames\":\"a\"}\n" +      // 5: no tid
      Stacks(-4, "t", kW, kW + 10, kW, kW, 1, "a") +                        // 6
      Stacks(4711, "t", kW, kW + 10, kW, kW, 0, "a") +                      // 7
      Stacks(4711, "t", kW, kW + 10, kW, kW, -2, "a") +                     // 8
      Stacks(4711, "t", kW, kW + 10, kW + 6, kW + 5, 1, "a") +              // 9
      Stacks(4711, "t", kW, kW, kW, kW, 1, "a") +                           // 10
      Stacks(4711, "t", kW + 10, kW, kW, kW, 1, "a") +                      // 11
      Stacks(4711, "t", kW, kW + 10, kW, kW, 1, "") +                       // 12
      Stacks(4711, "t", kW, kW + 10, kW, kW, 1, std::string(65537, 'f')) +  // 13
      "{\"type\":\"stacks\",\"tid\":1,\"thread\":\"t\",\"window_start_us\":1,\"window_end_us\":2,"
      "\"first_us\":1,\"last_us\":1,\"count\":1,\"frames\":7}\n" +  // 14
      Process() +                                                   // 15
      kEnd +                                                        // 16
      kEnd +                                                        // 17
      "{\"type\":\"end\",\"samples\":-1}\n" +  // 18 (after the end: still read)
      "\n" +                                   // 19: no data, passed by
      good.substr(0, 30);                      // 20
  const std::string path = Write("bad.stacks.jsonl", text);
  auto f = ReadStackFile(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  const std::vector<std::pair<uint64_t, std::string>> want = {
      {3, "not a JSON object"},
      {4, "no \"type\""},
      {5, "no \"tid\""},
      {6, "\"tid\" is negative"},
      {7, "\"count\" is not positive"},
      {8, "\"count\" is not positive"},
      {9, "\"first_us\" is after \"last_us\""},
      {10, "\"window_end_us\" is not after \"window_start_us\""},
      {11, "\"window_end_us\" is not after \"window_start_us\""},
      {12, "\"frames\" is empty"},
      {13, "\"frames\" over 65536 bytes"},
      {14, "no string \"frames\""},
      {15, "a second process line (a file holds one process)"},
      {17, "a second end line (a file holds one session)"},
      {18, "a second end line (a file holds one session)"},
      {20, "incomplete last line (no newline: still being written, or cut)"},
  };
  ASSERT_EQ(f->rejected.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f->rejected[i].line, want[i].first) << i;
    EXPECT_EQ(f->rejected[i].reason, want[i].second) << i;
  }
  ASSERT_EQ(f->rows.size(), 1u);  // line 2 only
  EXPECT_EQ(f->rows[0].line, 2u);
  EXPECT_EQ(f->lines, 20u);
  EXPECT_TRUE(f->end.seen);

  // Stored: each rejected line in ingest_log, named by file and line in the report.
  auto in = IngestAll({path});
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->stacks.lines_rejected, want.size());
  EXPECT_TRUE(in->AnythingLost());
  ASSERT_EQ(in->stacks.first_rejections.size(), 10u);
  EXPECT_EQ(in->stacks.first_rejections[4], path + ":7: \"count\" is not positive");
  EXPECT_EQ(
      Rows("SELECT count(*), min(line), max(line) FROM ingest_log WHERE path = '" + path + "'"),
      std::vector<std::string>{"16|3|20"});
  EXPECT_EQ(Rows("SELECT reason FROM ingest_log WHERE line = 8"),
            std::vector<std::string>{"\"count\" is not positive"});
  EXPECT_EQ(Rows("SELECT lines, lines_rejected, lines_unknown, stacks, complete FROM stack_files"),
            std::vector<std::string>{"20|16|0|1|true"});
  EXPECT_EQ(Rows("SELECT line, count FROM stack_samples"), std::vector<std::string>{"2|3"});
}

TEST_F(StackFileTest, AnotherVersionRefusesTheFileWithItsReason) {
  const std::string path =
      Write("node3-pid4711.stacks.jsonl",
            Process("node3", 4711, 0, "null", 2) + Stacks(1, "t", kW, kW + 10, kW, kW, 1, "a"));
  auto f = ReadStackFile(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(),
            path + ":1: stack file version 2; this collscope reads version 1");
  auto in = IngestAll({dir_.string()});
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->stacks.files_seen, 1u);
  EXPECT_EQ(in->stacks.files_read, 0u);
  EXPECT_EQ(in->stacks.failed, std::vector<std::string>{f.status().message()});
  EXPECT_EQ(in->records.files_seen, 0u);  // not read as an Inspector log either
  EXPECT_TRUE(in->NothingStored());
  EXPECT_EQ(in->NotStored(), std::vector<std::string>{"not stored: " + f.status().message()});
  EXPECT_EQ(Rows("SELECT count(*) FROM stack_files"), std::vector<std::string>{"0"});
}

TEST_F(StackFileTest, AProcessLineWithoutItsFieldsRefusesTheFile) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"collscope_stacks\":1,\"type\":\"process\",\"pid\":1}\n", "no string \"host\""},
      {"{\"collscope_stacks\":1,\"type\":\"stacks\"}\n",
       "not a stack file (its first line is no process line)"},
      {"{\"collscope_stacks\":\"1\",\"type\":\"process\"}\n",
       "\"collscope_stacks\" is not a version number"},
      {Process("h", -5), "\"pid\" is negative"},
      {Process("h", 1, -2), "\"rank\" is below -1"},
      {Process("h", 1, 0, "3"), "\"python\" is neither a version nor null"},
      {"{\"collscope_stacks\":1,\"type\":\"process\",\"host\":\"h\",\"pid\":1,\"rank\":0,\"exe\":"
       "\"e\",\"command\":"
       "\"c\",\"python\":null,\"python_unread\":\"\",\"interval_us\":0,\"native\":true}\n",
       "\"interval_us\" is below 1"},
      {"{\"collscope_stacks\":1,\"type\":\"process\",\"host\":\"h\",\"pid\":1,\"rank\":0,\"exe\":"
       "\"e\",\"command\":"
       "\"c\",\"python\":null,\"python_unread\":\"\",\"interval_us\":10}\n",
       "no true or false \"native\""},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = Write("p" + std::to_string(i) + ".stacks.jsonl", cases[i].first);
    auto f = ReadStackFile(path);
    ASSERT_FALSE(f.ok()) << i;
    EXPECT_EQ(f.status().message(), path + ":1: " + cases[i].second) << i;
  }
  const std::string cut = Write("cut.stacks.jsonl", Process().substr(0, 40));
  auto f = ReadStackFile(cut);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), cut + ":1: no complete first line yet");
}

TEST_F(StackFileTest, IngestedAgainAFileReplacesItsRows) {
  const std::string one = Stacks(4711, "python3", kW, kW + 10, kW, kW + 5, 3, "main;f");
  const std::string two = Stacks(4711, "python3", kW + 10, kW + 20, kW + 10, kW + 15, 4, "main;g");
  const std::string path =
      Write("node3-pid4711.stacks.jsonl", Process() + one + "{bad\n" + two.substr(0, 20));
  Write("node4-pid5000.stacks.jsonl", Process("node4", 5000) + one + kEnd);
  ASSERT_TRUE(IngestAll({dir_.string()}).ok());
  EXPECT_EQ(Rows("SELECT file_id, count(*) FROM stack_samples GROUP BY 1 ORDER BY 1"),
            (std::vector<std::string>{"0|1", "1|1"}));
  EXPECT_EQ(Rows("SELECT file_id, complete, lines_rejected FROM stack_files ORDER BY 1"),
            (std::vector<std::string>{"0|false|2", "1|true|0"}));
  EXPECT_EQ(Rows("SELECT count(*) FROM ingest_log"), std::vector<std::string>{"2"});
  // The session went on and finished: read again whole, its rows and rejected lines replaced,
  // its id kept, the other file untouched.
  Write("node3-pid4711.stacks.jsonl", Process() + one + two + kEnd);
  auto in = IngestAll({path});
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->stacks.stacks, 2u);
  EXPECT_EQ(Rows("SELECT file_id, line, count, frames FROM stack_samples ORDER BY 1, 2"),
            (std::vector<std::string>{"0|2|3|main;f", "0|3|4|main;g", "1|2|3|main;f"}));
  EXPECT_EQ(
      Rows("SELECT file_id, host, lines, stacks, complete, samples FROM stack_files ORDER BY 1"),
      (std::vector<std::string>{"0|node3|4|2|true|300", "1|node4|3|1|true|300"}));
  EXPECT_EQ(Rows("SELECT count(*) FROM ingest_log"), std::vector<std::string>{"0"});
  // Once more, unchanged: the same rows, not twice.
  ASSERT_TRUE(IngestAll({dir_.string()}).ok());
  EXPECT_EQ(Rows("SELECT count(*) FROM stack_samples"), std::vector<std::string>{"3"});
  EXPECT_EQ(Rows("SELECT count(*) FROM stack_files"), std::vector<std::string>{"2"});
}

TEST_F(StackFileTest, ReadStoredStacksByRun) {
  Write("a/node3-pid1.stacks.jsonl",
        Process("node3", 1) + Stacks(1, "m", kW, kW + 10, kW, kW, 1, "main;a") + kEnd);
  Write("b/node4-pid2.stacks.jsonl",
        Process("node4", 2) + Stacks(2, "m", kW, kW + 10, kW, kW, 2, "main;b") +
            Stacks(2, "m", kW + 10, kW + 20, kW + 10, kW + 10, 3, "main;b") + kEnd);
  ASSERT_TRUE(IngestAll({(dir_ / "a").string()}, "first").ok());
  ASSERT_TRUE(IngestAll({(dir_ / "b").string()}, "second").ok());
  auto first = ReadStoredStacks(*store_, "first");
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].frames, "main;a");
  auto second = ReadStoredStacks(*store_, "second");
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ((*second)[1].count, 3);
  auto all = ReadStoredStacks(*store_, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
  auto none = ReadStoredStacks(*store_, "no such run");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // A run name is a value, not SQL.
  auto quoted = ReadStoredStacks(*store_, "x' OR '1'='1");
  ASSERT_TRUE(quoted.ok());
  EXPECT_TRUE(quoted->empty());
}

// Step windows (`collscope stacks --steps-dir`) keep their steps in the store and back; a line
// with one bound of the two, or its steps the wrong way round, is rejected with its reason.
TEST_F(StackFileTest, StepWindowsKeepTheirSteps) {
  auto with_steps = [](const std::string& line, const std::string& steps) {
    return line.substr(0, line.find(",\"first_us\"")) + steps +
           line.substr(line.find(",\"first_us\""));
  };
  const std::string time_window = Stacks(1, "m", kW, kW + 10, kW, kW, 1, "main;a");
  Write("node3-pid1.stacks.jsonl",
        Process("node3", 1) + time_window +
            with_steps(Stacks(1, "m", kW + 10, kW + 25, kW + 12, kW + 20, 2, "main;b"),
                       ",\"step_first\":7,\"step_last\":9") +
            with_steps(Stacks(1, "m", kW + 25, kW + 30, kW + 26, kW + 26, 1, "main;c"),
                       ",\"step_first\":10") +
            with_steps(Stacks(1, "m", kW + 30, kW + 40, kW + 31, kW + 31, 1, "main;d"),
                       ",\"step_first\":12,\"step_last\":11") +
            kEnd);
  auto in = IngestAll({dir_.string()});
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->stacks.lines_rejected, 2u);
  ASSERT_EQ(in->stacks.first_rejections.size(), 2u);
  EXPECT_NE(in->stacks.first_rejections[0].find(":4: no \"step_last\""), std::string::npos)
      << in->stacks.first_rejections[0];
  EXPECT_NE(in->stacks.first_rejections[1].find(":5: \"step_first\" is after \"step_last\""),
            std::string::npos)
      << in->stacks.first_rejections[1];
  EXPECT_EQ(Rows("SELECT frames, step_first, step_last FROM stack_samples ORDER BY line"),
            (std::vector<std::string>{"main;a|NULL|NULL", "main;b|7|9"}));
  auto back = ReadStoredStacks(*store_, "job");
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].step_first, -1);
  EXPECT_EQ((*back)[1].step_first, 7);
  EXPECT_EQ((*back)[1].step_last, 9);
}

// A NUL in a string (JSON \u0000) or a raw NUL byte in a line must neither cut the SQL that
// stores the file nor be dropped.
TEST_F(StackFileTest, NulCharactersAreStoredEscaped) {
  const std::string path =
      Write("n.stacks.jsonl", Process() +
                                  Stacks(1, "a\\u0000b", kW, kW + 10, kW, kW, 1, "main;x\\u0000y") +
                                  std::string("{\"type\":\"stacks\",\0\"tid\":1}\n", 27) + kEnd);
  auto in = IngestAll({path});
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->stacks.files_read, 1u);
  EXPECT_EQ(Rows("SELECT thread, frames FROM stack_samples"),
            std::vector<std::string>{"a\\x00b|main;x\\x00y"});
  EXPECT_EQ(Rows("SELECT line, reason, excerpt FROM ingest_log"),
            std::vector<std::string>{"3|not a JSON object|{\"type\":\"stacks\",\\x00\"tid\":1}"});
}

TEST_F(StackFileTest, AFileOver1GiBIsRefused) {
  const std::string path = Write("big.stacks.jsonl", Process() + kEnd);
  fs::resize_file(path, kMaxStackFileBytes + 1);  // sparse: nothing is written
  auto f = ReadStackFile(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), path + ": a stack file over 1 GiB is refused");
  EXPECT_TRUE(IsStackFile(path));  // found, so that the refusal is said
}

}  // namespace
}  // namespace collscope::readers
