// The collscope store: one DuckDB file holding every run, with the tables and column comments of
// the taxonomy (core/taxonomy.h) and SQL views on top (docs/schema.md). Any DuckDB client opens it.
#pragma once

#include <duckdb.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace collscope {

// A query result rendered to text, for printing and tests. NULL is std::nullopt.
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<duckdb_type> types;
  std::vector<std::vector<std::optional<std::string>>> rows;
};

class Store {
 public:
  struct Options {
    bool read_only = false;
    // The one directory outside the store that SQL may write (ExportParquet's).
    std::string writable_dir;
    // Directories SQL may also read (a folder of Parquet files an importer loads): DuckDB's
    // allowed_directories, which grants access without distinguishing reads from writes, so only
    // callers that issue reads there (core/readers/record_summary.cc) set it.
    std::vector<std::string> readable_dirs;
    // Another process holding the store (a live agent, an ingest) makes DuckDB refuse the open;
    // it is retried for this long before the lock error is returned, so reading commands wait
    // instead of failing. While it waits it leaves WantedPath(path), which a long-lived holder
    // (the live agent) watches for and answers by closing the store.
    double lock_wait_s = 60;
    // DuckDB's memory_limit ("512MB"); empty: DuckDB's default (80% of RAM).
    std::string memory_limit;
    static Options ReadOnly() {
      Options o;
      o.read_only = true;
      return o;
    }
  };
  // The file a process waiting for the store's lock leaves beside it: `path` + ".wanted".
  static std::string WantedPath(const std::string& path) { return path + ".wanted"; }
  // Opens (creating if needed, unless read-only) the store at `path`; ":memory:" for a temporary.
  // Every connection is sandboxed: no file access outside the store (and `writable_dir`), no
  // extension installed or loaded, and no setting changed after Open.
  static Result<std::unique_ptr<Store>> Open(const std::string& path, Options options);
  static Result<std::unique_ptr<Store>> Open(const std::string& path) { return Open(path, {}); }
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Runs statements that return nothing the caller needs.
  Status Exec(const std::string& sql);
  Result<QueryResult> Query(const std::string& sql);
  // Runs one or more statements, refusing any that is not a query (SELECT, EXPLAIN, DESCRIBE,
  // SHOW, PRAGMA): the `collscope sql` contract. Returns the last statement's result.
  Result<QueryResult> QueryReadOnly(const std::string& sql);
  // A single value of a one-row query, or an error.
  Result<int64_t> QueryInt(const std::string& sql);

  // Writes every table, plus the flattened `inspector_rows` view, as DIR/<name>.parquet (zstd).
  Status ExportParquet(const std::string& dir);

  // The id of run `name`, creating it unless `create` is false.
  Result<int32_t> RunId(const std::string& name, bool create);
  // A value of collscope_meta (empty when the key is absent), and setting one (writable stores).
  Result<std::string> MetaValue(const std::string& key);
  Status SetMetaValue(const std::string& key, const std::string& value);

  // The run every command uses when none is named: the one with the most NCCL records (the
  // production job, not a benchmark sweep stored beside it), the first ingested on a tie.
  Result<std::string> DefaultRun();

  const std::string& path() const { return path_; }
  // A store in memory is gone when its process ends: what only a later reader would use (the
  // columns' comments) is left out of it.
  bool in_memory() const { return path_ == ":memory:"; }
  duckdb_connection connection() const { return conn_; }

 private:
  Store() = default;
  Status EnsureSchema();

  std::string path_;
  duckdb_database db_ = nullptr;
  duckdb_connection conn_ = nullptr;
};

// Quotes a string as an SQL literal. A NUL byte becomes the text \x00: SQL text is a C string.
std::string SqlString(const std::string& s);

// A fingerprint of definitions (view and macro SQL): a store that records the fingerprint of what
// it holds lets later opens skip re-creating identical definitions, which costs DuckDB a parse
// and bind of each (about 0.6 s for the analysis library, several seconds under the sanitizers).
std::string DefinitionsFingerprint(std::string_view definitions);

// Appends rows to one table through DuckDB's data-chunk API: the caller writes column arrays
// of up to capacity() rows directly, then calls Append(rows).
class ChunkAppender {
 public:
  ChunkAppender() = default;
  ~ChunkAppender();
  ChunkAppender(const ChunkAppender&) = delete;
  ChunkAppender& operator=(const ChunkAppender&) = delete;

  Status Open(duckdb_connection conn, const char* table);
  size_t capacity() const { return capacity_; }
  size_t columns() const { return types_.size(); }
  template <typename T>
  T* Column(size_t col) {
    return static_cast<T*>(duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk_, col)));
  }
  void SetNull(size_t col, size_t row);
  // The column's validity bitmap (bit i = row i is not NULL), made writable.
  uint64_t* WritableValidity(size_t col);
  void SetString(size_t col, size_t row, const std::string& s);
  // Appends the first `rows` rows written since the last Append.
  Status Append(size_t rows);
  Status Flush();
  // Flushes whatever is buffered into the connection's current transaction and releases the
  // appender. To discard buffered rows, close inside a transaction and roll it back.
  void Close();

 private:
  std::string table_;
  duckdb_appender appender_ = nullptr;
  duckdb_data_chunk chunk_ = nullptr;
  std::vector<duckdb_logical_type> types_;
  size_t capacity_ = 0;
};

}  // namespace collscope
