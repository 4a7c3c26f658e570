// The taxonomy: every stored column, its table, SQL type, role and meaning, as one table of data.
// The store's DDL and COMMENTs, `collscope schema` and the docs are all generated from it, so a
// column cannot exist without a role and a description.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace collscope {

// What a field is for. The first five are the taxonomy of collective records; `provenance` marks
// bookkeeping about where a row came from (files, ingests, rejected lines).
enum class Role { kIdentifier, kConfiguration, kWorkload, kMeasurement, kCounter, kProvenance };

std::string_view RoleName(Role role);

struct FieldSpec {
  std::string_view table;
  std::string_view name;
  std::string_view sql_type;     // DuckDB type; enums name one of the types in EnumTypes()
  Role role;
  std::string_view source;       // where it comes from in the input ("header.rank"), or "derived"
  std::string_view description;  // one sentence, becomes the column COMMENT
};

struct TableSpec {
  std::string_view name;
  std::string_view primary_key;  // column list, may be empty
  std::string_view description;
};

struct EnumSpec {
  std::string_view name;
  std::span<const std::string_view> values;
};

std::span<const FieldSpec> Fields();
std::span<const TableSpec> Tables();
std::span<const EnumSpec> EnumTypes();

// Position of `column` among the columns of `table` (the store's column order), or -1.
int ColumnIndex(std::string_view table, std::string_view column);

// CREATE TYPE / CREATE TABLE / COMMENT ON statements for the whole store, in dependency order.
// Without comments for a store in memory: nobody can read them before it is gone, and a comment
// per table and column took about two thirds of this DDL's time (80 of 120 ms, release build).
std::string SchemaDdl(bool with_comments = true);
// CREATE TABLE IF NOT EXISTS and COMMENT ON statements for one table ("" for no such table):
// a store made by an older collscope gets the tables added since.
std::string TableDdl(std::string_view table, bool with_comments = true);

}  // namespace collscope
