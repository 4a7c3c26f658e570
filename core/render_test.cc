// RenderResult against DuckDB itself: for each expression, the chunk renderer's text must equal
// what DuckDB's CAST(expr AS VARCHAR) gives.
#include "core/render.h"

#include <gtest/gtest.h>

namespace collscope {
namespace {

class RenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(duckdb_open(nullptr, &db_), DuckDBSuccess);
    ASSERT_EQ(duckdb_connect(db_, &conn_), DuckDBSuccess);
    Exec("SET TimeZone = 'UTC'");
    Exec("CREATE TYPE op AS ENUM ('AllReduce', 'AllGather', 'Send')");
  }
  void TearDown() override {
    duckdb_disconnect(&conn_);
    duckdb_close(&db_);
  }
  void Exec(const std::string& sql) {
    duckdb_result r;
    ASSERT_EQ(duckdb_query(conn_, sql.c_str(), &r), DuckDBSuccess) << duckdb_result_error(&r);
    duckdb_destroy_result(&r);
  }
  QueryResult Render(const std::string& sql) {
    duckdb_result r;
    EXPECT_EQ(duckdb_query(conn_, sql.c_str(), &r), DuckDBSuccess) << duckdb_result_error(&r);
    Result<QueryResult> out = RenderResult(&r);
    duckdb_destroy_result(&r);
    EXPECT_TRUE(out.ok());
    return out.ok() ? *out : QueryResult{};
  }
  duckdb_database db_ = nullptr;
  duckdb_connection conn_ = nullptr;
};

TEST_F(RenderTest, EveryTypeAsDuckDBWritesIt) {
  const char* exprs[] = {
      "true", "false", "(-7)::TINYINT", "200::UTINYINT", "(-32000)::SMALLINT", "65000::USMALLINT",
      "(-2147483648)::INTEGER", "4294967295::UINTEGER", "(-9223372036854775808)::BIGINT",
      "18446744073709551615::UBIGINT", "(-170141183460469231731687303715884105727)::HUGEINT",
      "340282366920938463463374607431768211455::UHUGEINT", "0.1::DOUBLE", "3.0::DOUBLE",
      "1e300::DOUBLE", "1e16::DOUBLE", "1e15::DOUBLE", "100000.0::DOUBLE", "0.0001::DOUBLE",
      "0.00001::DOUBLE", "(-2.5e-7)::DOUBLE", "'inf'::DOUBLE", "'-inf'::DOUBLE", "'nan'::DOUBLE",
      "0.1::FLOAT", "3.0::FLOAT", "123456.7::FLOAT", "1.50::DECIMAL(5,2)", "(-0.05)::DECIMAL(4,3)",
      "12345678901234.5678::DECIMAL(18,4)", "(-1234567890123456789012345.678)::DECIMAL(38,3)",
      "'plain'", "'with ''quote'' and, comma'", "''", "'multi\nline'",
      "'\\x00\\xFFab'::BLOB", "'ab\"c'::BLOB", "'AllGather'::op",
      "'5f8c2a3e-0b1d-4c6e-9f00-123456789abc'::UUID", "'00000000-0000-0000-0000-000000000000'::UUID",
      "'ffffffff-ffff-ffff-ffff-ffffffffffff'::UUID", "DATE '2026-12-01'", "DATE '0001-01-01'",
      "TIME '13:45:07.25'", "TIME '00:00:00'", "TIMESTAMP '2026-12-01 11:54:56.575793'",
      "TIMESTAMP '1969-12-31 23:59:59.5'", "TIMESTAMP '2026-12-01 00:00:00'",
      "TIMESTAMP_S '2026-12-01 11:54:56'", "TIMESTAMP_MS '2026-12-01 11:54:56.123'",
      "TIMESTAMP_NS '2026-12-01 11:54:56.123456789'", "TIMESTAMPTZ '2026-12-01 11:54:56.5+00'",
      "INTERVAL 3 DAY", "INTERVAL 14 MONTH", "INTERVAL '1 year 2 months 3 days 04:05:06.5'",
      "INTERVAL (-90) MINUTE", "INTERVAL 0 SECOND", "[1, 2, NULL]", "[]::INT[]",
      "['a', 'b,c', '', NULL]", "[['x'], []]", "{'a': 1, 'b': 'x'}", "{'k': [1, 2], 'v': {'n': NULL}}",
      "MAP {'k': 1, 'j': 2}", "[1, 2, 3]::INT[3]", "['AllReduce'::op, 'Send'::op]",
      "union_value(num := 2)::UNION(num INT, str VARCHAR)", "TIMETZ '12:00:00+05:30'",
      "TIMETZ '12:00:00-08'",
  };
  for (const char* e : exprs) {
    QueryResult ours = Render(std::string("SELECT ") + e);
    QueryResult duck = Render(std::string("SELECT CAST(") + e + " AS VARCHAR)");
    ASSERT_EQ(ours.rows.size(), 1u) << e;
    ASSERT_EQ(duck.rows.size(), 1u) << e;
    EXPECT_EQ(ours.rows[0][0], duck.rows[0][0]) << e;
  }
}

TEST_F(RenderTest, NullsAndEnumsBesideOtherColumnsInEveryChunk) {
  // More rows than one chunk holds, an ENUM column first: every column keeps its values.
  QueryResult r = Render(
      "SELECT (CASE WHEN i % 2 = 0 THEN 'AllReduce' ELSE 'Send' END)::op AS op, i AS n, "
      "CASE WHEN i % 3 = 0 THEN NULL ELSE 'v' || i END AS s FROM range(5000) t(i) ORDER BY i");
  ASSERT_EQ(r.rows.size(), 5000u);
  ASSERT_EQ(r.columns, (std::vector<std::string>{"op", "n", "s"}));
  EXPECT_EQ(r.types[0], DUCKDB_TYPE_ENUM);
  for (size_t i : {size_t{0}, size_t{1}, size_t{2047}, size_t{2048}, size_t{4999}}) {
    EXPECT_EQ(r.rows[i][0], i % 2 == 0 ? "AllReduce" : "Send") << i;
    EXPECT_EQ(r.rows[i][1], std::to_string(i)) << i;
    if (i % 3 == 0) EXPECT_FALSE(r.rows[i][2].has_value()) << i;
    else EXPECT_EQ(r.rows[i][2], "v" + std::to_string(i)) << i;
  }
}

}  // namespace
}  // namespace collscope
