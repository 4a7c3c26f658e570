// The SQL library's tests as data (DuckDB's sqllogictest form, a subset): each analysis/sql/*.test
// file runs on a fresh store with the analysis views installed, in order:
//
//   # a comment
//   statement ok            the statement, up to a blank line, must succeed
//   statement error         ... must fail
//   query                   the query, up to "----", then its expected rows, one a line, values
//                           tab-separated, NULL for a null, up to a blank line; order as written
//
// A mismatch names the file and line of the query, with both sets of rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/views.h"
#include "core/store.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

std::vector<std::string> TestFiles() {
  std::vector<std::string> out;
  const std::filesystem::path dir = std::filesystem::path(COLLSCOPE_SOURCE_DIR) / "analysis" / "sql";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".test") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

struct Block {
  enum Kind { kOk, kError, kQuery } kind = kOk;
  size_t line = 0;  // 1-based line of its header
  std::string sql;
  std::vector<std::string> expected;
};

// Parses a .test file; an unknown header fails the test with its line.
std::vector<Block> Parse(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<Block> out;
  size_t i = 0;
  auto blank = [&](size_t k) { return lines[k].find_first_not_of(" \t\r") == std::string::npos; };
  while (i < lines.size()) {
    if (blank(i) || lines[i][0] == '#') { ++i; continue; }
    Block b;
    b.line = i + 1;
    if (lines[i] == "statement ok") b.kind = Block::kOk;
    else if (lines[i] == "statement error") b.kind = Block::kError;
    else if (lines[i].rfind("query", 0) == 0) b.kind = Block::kQuery;
    else {
      ADD_FAILURE() << path << ":" << i + 1 << ": expected 'statement ok', 'statement error' or 'query', got: " << lines[i];
      return {};
    }
    for (++i; i < lines.size() && !blank(i) && lines[i] != "----"; ++i) b.sql += lines[i] + "\n";
    if (b.kind == Block::kQuery) {
      if (i >= lines.size() || lines[i] != "----") {
        ADD_FAILURE() << path << ":" << b.line << ": a query without its '----' line";
        return {};
      }
      for (++i; i < lines.size() && !blank(i); ++i) b.expected.push_back(lines[i]);
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::string Rows(const std::vector<std::string>& rows) {
  std::string s;
  for (const std::string& r : rows) s += "    " + r + "\n";
  return s.empty() ? "    (no rows)\n" : s;
}

class SqlLogic : public ::testing::TestWithParam<std::string> {};

TEST_P(SqlLogic, RowsAsExpected) {
  const std::string path = std::string(COLLSCOPE_SOURCE_DIR) + "/analysis/sql/" + GetParam();
  const std::vector<Block> blocks = Parse(path);
  ASSERT_FALSE(blocks.empty()) << path << ": no statement or query";
  testing::TempDir dir;
  auto store = Store::Open(dir / "s.duckdb");
  ASSERT_TRUE(store.ok()) << store.status().message();
  ASSERT_TRUE(InstallAnalysisViews(**store, false).ok());
  for (const Block& b : blocks) {
    const std::string where = path + ":" + std::to_string(b.line);
    if (b.kind != Block::kQuery) {
      const Status st = (*store)->Exec(b.sql);
      if (b.kind == Block::kOk) EXPECT_TRUE(st.ok()) << where << ": " << st.message();
      else EXPECT_FALSE(st.ok()) << where << ": the statement succeeded";
      continue;
    }
    auto q = (*store)->Query(b.sql);
    if (!q.ok()) {
      ADD_FAILURE() << where << ": " << q.status().message();
      continue;
    }
    std::vector<std::string> got;
    for (const auto& row : q->rows) {
      std::string line;
      for (size_t c = 0; c < row.size(); ++c) line += (c ? "\t" : "") + row[c].value_or("NULL");
      got.push_back(line);
    }
    EXPECT_EQ(got, b.expected) << where << ": expected\n" << Rows(b.expected) << "got\n" << Rows(got);
  }
}

INSTANTIATE_TEST_SUITE_P(Library, SqlLogic, ::testing::ValuesIn(TestFiles()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param.substr(0, i.param.size() - 5);
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace collscope
