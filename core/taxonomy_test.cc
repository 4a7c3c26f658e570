#include "core/taxonomy.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "core/store.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

TEST(Taxonomy, EveryTableHasColumnsAndEveryColumnADescription) {
  for (const TableSpec& t : Tables()) {
    int columns = 0;
    for (const FieldSpec& f : Fields())
      if (f.table == t.name) ++columns;
    EXPECT_GT(columns, 0) << t.name;
  }
  std::set<std::string> seen;
  for (const FieldSpec& f : Fields()) {
    EXPECT_FALSE(f.description.empty()) << f.table << "." << f.name;
    EXPECT_TRUE(seen.insert(std::string(f.table) + "." + std::string(f.name)).second)
        << "duplicate " << f.table << "." << f.name;
  }
}

TEST(Taxonomy, RecordRolesMatchTheModel) {
  auto role = [](const char* table, const char* name) {
    for (const FieldSpec& f : Fields())
      if (f.table == table && f.name == name) return std::string(RoleName(f.role));
    return std::string("missing");
  };
  EXPECT_EQ(role("processes", "hostname"), "identifier");
  EXPECT_EQ(role("records", "rank"), "identifier");
  EXPECT_EQ(role("communicators", "n_ranks"), "configuration");
  EXPECT_EQ(role("communicators", "comm_name"), "configuration");
  EXPECT_EQ(role("operations", "op"), "workload");
  EXPECT_EQ(role("operations", "msg_size_bytes"), "workload");
  EXPECT_EQ(role("records", "exec_time_us"), "measurement");
  EXPECT_EQ(role("records", "timing_source"), "measurement");
  EXPECT_EQ(role("records", "sn"), "counter");
  EXPECT_EQ(role("records", "dump_ts_us"), "counter");
}

TEST(Taxonomy, StoreSchemaCarriesRolesAsComments) {
  testing::TempDir dir;
  auto store = Store::Open(dir / "store.duckdb");
  ASSERT_TRUE(store.ok()) << store.status().message();
  const std::string comment =
      "SELECT comment FROM duckdb_columns() WHERE table_name = 'records' AND column_name = "
      "'exec_time_us'";
  auto r = (*store)->Query(comment);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->rows.size(), 1u);
  ASSERT_TRUE(r->rows[0][0].has_value());
  EXPECT_EQ(r->rows[0][0]->rfind("measurement: ", 0), 0u) << *r->rows[0][0];
  // A store in memory, gone when its command ends, is made without them.
  auto temporary = Store::Open(":memory:");
  ASSERT_TRUE(temporary.ok()) << temporary.status().message();
  auto none = (*temporary)->Query(comment);
  ASSERT_TRUE(none.ok());
  ASSERT_EQ(none->rows.size(), 1u);
  EXPECT_FALSE(none->rows[0][0].has_value()) << *none->rows[0][0];
  // The taxonomy table lists exactly the fields of the code.
  auto n = (*store)->QueryInt("SELECT count(*) FROM taxonomy");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(static_cast<size_t>(*n), Fields().size());
  EXPECT_EQ(ColumnIndex("records", "run_id"), 0);
  // ENUM values print as their names, NULL stays NULL.
  auto e = (*store)->Query(
      "SELECT 'nic-only'::coll_type AS t, NULL::coll_type AS n FROM range(3000)");
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e->rows.size(), 3000u);
  EXPECT_EQ(e->rows[2999][0].value_or("NULL"), "nic-only");
  EXPECT_FALSE(e->rows[2999][1].has_value());
  // ...and the other columns of a result with an ENUM column keep their values.
  auto mixed = (*store)->Query("SELECT 'nic-only'::coll_type AS t, 42 AS n, 'x' AS s FROM range(3)");
  ASSERT_TRUE(mixed.ok());
  ASSERT_EQ(mixed->rows.size(), 3u);
  EXPECT_EQ(mixed->rows[2][0].value_or("NULL"), "nic-only");
  EXPECT_EQ(mixed->rows[2][1].value_or("NULL"), "42");
  EXPECT_EQ(mixed->rows[2][2].value_or("NULL"), "x");
  auto read_only = (*store)->QueryReadOnly("SELECT 'nic-only'::coll_type AS t, 42 AS n FROM range(3);");
  ASSERT_TRUE(read_only.ok()) << read_only.status().message();
  EXPECT_EQ(read_only->rows[2][0].value_or("NULL"), "nic-only");
  EXPECT_EQ(read_only->rows[2][1].value_or("NULL"), "42");
  EXPECT_EQ(ColumnIndex("records", "nope"), -1);
}

}  // namespace
}  // namespace collscope

namespace collscope {
namespace {

// docs/schema.md documents every column; keep it in step with the code.
TEST(Taxonomy, SchemaDocListsEveryColumn) {
  std::ifstream f(std::string(COLLSCOPE_SOURCE_DIR) + "/docs/schema.md");
  ASSERT_TRUE(f.good());
  std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const TableSpec& t : Tables())
    EXPECT_NE(doc.find("### " + std::string(t.name) + "\n"), std::string::npos) << t.name;
  for (const FieldSpec& f : Fields())
    EXPECT_NE(doc.find("| `" + std::string(f.name) + "` | " + std::string(f.sql_type)),
              std::string::npos)
        << f.table << "." << f.name;
}

}  // namespace
}  // namespace collscope
