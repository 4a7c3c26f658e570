#include "core/line_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"

namespace collscope {
namespace {

using testing::TempDir;
using testing::WriteFile;
using testing::WriteGzip;

// Reads every complete line from `offset`, returning them joined and the reader's counters.
std::string ReadAll(LineReader& r, const std::string& path, uint64_t offset, uint64_t* consumed,
                    uint64_t* pending) {
  EXPECT_TRUE(r.Open(path, offset).ok());
  std::string out;
  LineBlock b;
  for (;;) {
    Result<bool> more = r.Next(&b);
    EXPECT_TRUE(more.ok());
    if (!more.ok() || !*more) break;
    if (b.overlong) {
      out += "<" + std::to_string(b.overlong) + " bytes skipped>\n";
      continue;
    }
    EXPECT_EQ(b.data[b.size - 1], '\n');
    EXPECT_GE(b.readable, b.size + 64);
    out.append(b.data, b.size);
  }
  *consumed = r.consumed();
  *pending = r.pending();
  return out;
}

TEST(LineReader, LeavesIncompleteLastLine) {
  TempDir dir;
  WriteFile(dir / "a.log", "one\ntwo\nthr");
  LineReader r;
  uint64_t consumed, pending;
  EXPECT_EQ(ReadAll(r, dir / "a.log", 0, &consumed, &pending), "one\ntwo\n");
  EXPECT_EQ(consumed, 8u);
  EXPECT_EQ(pending, 3u);
  // The writer finishes the line: a read from the old offset sees exactly the new line.
  WriteFile(dir / "a.log", "ee\n", true);
  EXPECT_EQ(ReadAll(r, dir / "a.log", consumed, &consumed, &pending), "three\n");
  EXPECT_EQ(consumed, 14u);
  EXPECT_EQ(pending, 0u);
}

TEST(LineReader, SmallBlocksAndLinesLongerThanTheBlock) {
  TempDir dir;
  std::string long_line(1000, 'x');
  std::string content = "a\n" + long_line + "\nb\n" + long_line + long_line + "\nc\n";
  WriteFile(dir / "a.log", content);
  LineReader r(64);  // far smaller than a line: the reader must grow, not split lines
  uint64_t consumed, pending;
  EXPECT_EQ(ReadAll(r, dir / "a.log", 0, &consumed, &pending), content);
  EXPECT_EQ(consumed, content.size());
}

TEST(LineReader, GzipFromOffset) {
  TempDir dir;
  WriteGzip(dir / "a.log.gz", "first\nsecond\nthird\npart");
  LineReader r;
  uint64_t consumed, pending;
  EXPECT_EQ(ReadAll(r, dir / "a.log.gz", 6, &consumed, &pending), "second\nthird\n");
  EXPECT_EQ(consumed, 19u);
  EXPECT_EQ(pending, 4u);
}

TEST(LineReader, MissingFileIsAnErrorNamingIt) {
  LineReader r;
  Status st = r.Open("/nonexistent/x.log", 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/x.log"), std::string::npos);
}

TEST(LineReader, FingerprintCoversOnlyThePrefix) {
  TempDir dir;
  WriteFile(dir / "a.log", "hello world\n");
  Result<uint64_t> a = FingerprintPrefix(dir / "a.log", 5);
  WriteFile(dir / "a.log", "hello there\n");
  Result<uint64_t> b = FingerprintPrefix(dir / "a.log", 5);
  Result<uint64_t> c = FingerprintPrefix(dir / "a.log", 11);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

TEST(LineReader, SkipsALineLongerThanTheLimitAndKeepsTheRest) {
  TempDir dir;
  const std::string huge(kMaxLineBytes + 5, 'x');
  WriteFile(dir / "a.log", "one\n" + huge + "\ntwo\n" + huge);
  LineReader r(1 << 20);
  uint64_t consumed, pending;
  EXPECT_EQ(ReadAll(r, dir / "a.log", 0, &consumed, &pending),
            "one\n<" + std::to_string(huge.size() + 1) + " bytes skipped>\ntwo\n");
  EXPECT_EQ(consumed, 4 + huge.size() + 1 + 4);
  EXPECT_EQ(pending, huge.size()) << "the unfinished overlong last line waits, unread";
}

TEST(LineReader, StopsAGzipThatExpandsLikeABomb) {
  TempDir dir;
  WriteGzip(dir / "bomb.log.gz", std::string(8 << 20, '\n'));  // ~1000x
  LineReader r(1 << 20, 1 << 20);
  ASSERT_TRUE(r.Open(dir / "bomb.log.gz", 0).ok());
  LineBlock b;
  Result<bool> more = true;
  while (more.ok() && *more) more = r.Next(&b);
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.status().message().find("decompression bomb"), std::string::npos) << more.status().message();
  // An ordinary gzip of the same size reads to its end.
  std::string lines;
  for (int i = 0; i < 100000; ++i) lines += "{\"line\": " + std::to_string(i * 7919 % 100003) + "}\n";
  WriteGzip(dir / "ok.log.gz", lines);
  uint64_t consumed, pending;
  EXPECT_EQ(ReadAll(r, dir / "ok.log.gz", 0, &consumed, &pending), lines);
}

// A corrupt member after a good one (two gzip members, as `cat a.gz b.gz` makes): the good
// member's lines are read, then the error says where the damage is and what was lost.
TEST(LineReader, ACorruptGzipBlockKeepsTheLinesBeforeItAndSaysWhatIsLost) {
  TempDir dir;
  std::string good, bad_text;
  for (int i = 0; i < 2000; ++i) good += "{\"good\": " + std::to_string(i) + "}\n";
  for (int i = 0; i < 2000; ++i) bad_text += "{\"bad\": " + std::to_string(i * 7919 % 100003) + "}\n";
  WriteGzip(dir / "a.gz", good);
  WriteGzip(dir / "b.gz", bad_text);
  std::string a = testing::ReadFile(dir / "a.gz"), b = testing::ReadFile(dir / "b.gz");
  for (size_t i = 20; i < 60; ++i) b[i] = static_cast<char>(b[i] ^ 0xff);  // inside its first deflate block
  WriteFile(dir / "c.log.gz", a + b);
  LineReader r;
  ASSERT_TRUE(r.Open(dir / "c.log.gz", 0).ok());
  std::string read;
  LineBlock blk;
  Result<bool> more = true;
  while (more.ok() && *more) {
    more = r.Next(&blk);
    if (more.ok() && *more) read.append(blk.data, blk.size);
  }
  ASSERT_FALSE(more.ok());
  const std::string msg = more.status().message();
  EXPECT_NE(msg.find("c.log.gz: gzip error at compressed byte"), std::string::npos) << msg;
  EXPECT_NE(msg.find("compressed bytes after it are lost"), std::string::npos) << msg;
  // All but at most one 4 KiB read of the good member's lines, and none of the damaged one's.
  EXPECT_GE(read.size() + 4096, good.size());
  EXPECT_EQ(read, good.substr(0, read.size()));
}

}  // namespace
}  // namespace collscope
