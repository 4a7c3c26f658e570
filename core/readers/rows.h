// Rows appended one value at a time through DuckDB's appender into the connection's open
// transaction (a rollback discards them): the readers that store whole files (state files, dumps,
// RAS reports, Prometheus files) write their tables through this.
#pragma once

#include <duckdb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "core/input_files.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::readers {

// VALUES of ingest_log rows for a file's rejected lines (each with line, reason and excerpt), for
// "INSERT INTO ingest_log VALUES ..."; appended to *values, comma-separated.
template <typename Rejections>
void AppendIngestLogValues(const std::string& run_id, const std::string& path, const Rejections& rejected,
                           std::string* values) {
  for (const auto& x : rejected)
    *values += std::string(values->empty() ? "" : ", ") + "(" + run_id + ", NULL, " + SqlString(path) + ", " +
               std::to_string(x.line) + ", " + SqlString(x.reason) + ", " + SqlString(StorablePath(x.excerpt)) + ")";
}

class Rows {
 public:
  Rows() = default;
  Rows(const Rows&) = delete;
  Rows& operator=(const Rows&) = delete;
  ~Rows() {
    if (a_) duckdb_appender_destroy(&a_);
  }
  Status Open(Store& store, const char* table) {
    table_ = table;
    if (duckdb_appender_create(store.connection(), nullptr, table, &a_) != DuckDBSuccess)
      return Status::Corruption(std::string(table) + ": cannot append");
    return Status::Ok();
  }
  Rows& I32(int32_t v) { return Check(duckdb_append_int32(a_, v)); }
  Rows& I64(int64_t v) { return Check(duckdb_append_int64(a_, v)); }
  Rows& U64(uint64_t v) { return Check(duckdb_append_uint64(a_, v)); }
  Rows& F64(double v) { return Check(duckdb_append_double(a_, v)); }
  Rows& Bool(bool v) { return Check(duckdb_append_bool(a_, v)); }
  Rows& Null() { return Check(duckdb_append_null(a_)); }
  // VARCHAR holds UTF-8 only: text is stored as StorablePath writes a path (valid UTF-8 as it
  // is, other bytes as \xHH), the same for every file, so names still match.
  Rows& Str(const std::string& v) {
    const std::string s = StorablePath(v);
    return Check(duckdb_append_varchar_length(a_, s.data(), s.size()));
  }
  template <typename T>
  Rows& Opt(const std::optional<T>& v) {
    if (!v) return Null();
    if constexpr (std::is_same_v<T, std::string>) return Str(*v);
    else if constexpr (std::is_same_v<T, int32_t>) return I32(*v);
    else if constexpr (std::is_same_v<T, int64_t>) return I64(*v);
    else return U64(*v);
  }
  Status EndRow() {
    Check(duckdb_appender_end_row(a_));
    return Error();
  }
  Status Close() {
    if (ok_ && duckdb_appender_close(a_) != DuckDBSuccess) Check(DuckDBError);
    return Error();
  }

 private:
  Rows& Check(duckdb_state st) {
    if (st != DuckDBSuccess && ok_) {
      ok_ = false;
      const char* e = duckdb_appender_error(a_);
      error_ = table_ + ": " + (e ? e : "append failed");
    }
    return *this;
  }
  Status Error() const { return ok_ ? Status::Ok() : Status::Corruption(error_); }
  duckdb_appender a_ = nullptr;
  std::string table_, error_;
  bool ok_ = true;
};

}  // namespace collscope::readers
