#include "core/store.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <utility>

#include "core/bandwidth.h"
#include "core/render.h"
#include "core/store_views.h"
#include "core/taxonomy.h"

namespace collscope {

namespace {
constexpr int kSchemaVersion = 2;  // 2: step/phase series tables

std::string ResultError(duckdb_result* r, const std::string& context) {
  const char* e = duckdb_result_error(r);
  return context + ": " + (e ? e : "unknown DuckDB error");
}

}  // namespace

std::string SqlString(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\0') {  // SQL text is a C string: a NUL would end the statement mid-literal
      out += "\\x00";
      continue;
    }
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, Options options) {
  // DuckDB reads an empty path as "in memory": a `--db ''` would store nothing, silently.
  if (path.empty()) return Status::InvalidArgument("no store given (an empty --db path)");
  std::unique_ptr<Store> s(new Store());
  s->path_ = path;
  if (options.read_only && path != ":memory:" && !std::filesystem::exists(path))
    return Status::NotFound(path + ": no such store");
  duckdb_config config;
  if (duckdb_create_config(&config) != DuckDBSuccess) return Status::Internal("DuckDB config failed");
  if (options.read_only) duckdb_set_config(config, "access_mode", "READ_ONLY");
  // collscope never installs or loads an extension at run time: what it needs is built in.
  for (const char* off : {"autoinstall_known_extensions", "autoload_known_extensions",
                          "allow_community_extensions", "allow_unsigned_extensions"})
    duckdb_set_config(config, off, "false");
  // COLLSCOPE_DUCKDB_THREADS caps DuckDB's worker threads (default: one per core). Beside a
  // training job, or with several collscope processes on one machine at once (CI runs tests two at
  // a time), parallel plans over small stores cost more CPU in scheduling than they save.
  if (const char* threads = std::getenv("COLLSCOPE_DUCKDB_THREADS"); threads && *threads) {
    char* end = nullptr;
    const long n = std::strtol(threads, &end, 10);
    if (*end != '\0' || n < 1 || n > 4096) {
      duckdb_destroy_config(&config);
      return Status::InvalidArgument(std::string("COLLSCOPE_DUCKDB_THREADS=") + threads +
                                     ": not a thread count (1-4096)");
    }
    duckdb_set_config(config, "threads", threads);
  }
  if (!options.memory_limit.empty() &&
      duckdb_set_config(config, "memory_limit", options.memory_limit.c_str()) != DuckDBSuccess) {
    duckdb_destroy_config(&config);
    return Status::InvalidArgument("invalid memory limit " + options.memory_limit);
  }
  const char* open_path = path == ":memory:" ? nullptr : path.c_str();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options.lock_wait_s);
  auto pause = std::chrono::milliseconds(20);
  bool asked = false;
  for (;;) {
    char* err = nullptr;
    const duckdb_state st = duckdb_open_ext(open_path, &s->db_, config, &err);
    if (st == DuckDBSuccess) break;
    std::string why = err ? err : "unknown error";
    if (err) duckdb_free(err);
    s->db_ = nullptr;
    const bool locked = why.find("Could not set lock") != std::string::npos;
    if (!locked || std::chrono::steady_clock::now() + pause > deadline) {
      duckdb_destroy_config(&config);
      return Status::IOError(
          path + ": cannot open store: " + why +
          (locked ? " (waited " + std::to_string(static_cast<int>(options.lock_wait_s)) + " s)"
                  : ""));
    }
    if (!asked) {
      // Ask a long-lived holder to let go (best effort: a read-only folder just means waiting).
      asked = true;
      std::FILE* f = std::fopen(WantedPath(path).c_str(), "a");
      if (f) std::fclose(f);
    }
    std::this_thread::sleep_for(pause);
    // Short retries: a holder that lets go (the agent) takes the store back at its next tick.
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  duckdb_destroy_config(&config);
  if (duckdb_connect(s->db_, &s->conn_) != DuckDBSuccess)
    return Status::IOError(path + ": cannot connect");
  // The sandbox: the store's own files (and its spill directory) are the only files DuckDB may
  // touch, plus `writable_dir` for an export; then no statement may change that.
  std::string sandbox, allowed;
  std::vector<std::string> dirs = options.readable_dirs;
  if (!options.writable_dir.empty()) dirs.push_back(options.writable_dir);
  for (const std::string& d : dirs) {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::weakly_canonical(d, ec);
    if (ec) return Status::IOError(d + ": " + ec.message());
    std::string text = dir.string();
    if (!text.ends_with("/")) text += "/";
    allowed += (allowed.empty() ? "" : ", ") + SqlString(text);
  }
  if (!allowed.empty()) sandbox += "SET allowed_directories = [" + allowed + "];\n";
  sandbox += "SET enable_external_access = false;\n";
  sandbox += "SET lock_configuration = true;\n";
  COLLSCOPE_RETURN_IF_ERROR(s->Exec(sandbox));
  if (!options.read_only) COLLSCOPE_RETURN_IF_ERROR(s->EnsureSchema());
  return s;
}

Store::~Store() {
  if (conn_) duckdb_disconnect(&conn_);
  if (db_) duckdb_close(&db_);
}

namespace {

// The taxonomy rows of `table` (every table when empty; only `column` of it when given), as
// INSERT INTO taxonomy.
std::string TaxonomyInsert(std::string_view table, std::string_view column = {}) {
  std::string rows;
  for (const FieldSpec& f : Fields()) {
    if (!table.empty() && f.table != table) continue;
    if (!column.empty() && f.name != column) continue;
    rows += std::string(rows.empty() ? "" : ", ") + "(" + SqlString(std::string(f.table)) + ", " +
            SqlString(std::string(f.name)) + ", " + SqlString(std::string(f.sql_type)) + ", " +
            SqlString(std::string(RoleName(f.role))) + ", " + SqlString(std::string(f.source)) +
            ", " + SqlString(std::string(f.description)) + ")";
  }
  return rows.empty() ? "" : "INSERT INTO taxonomy VALUES " + rows + ";\n";
}

}  // namespace

Status Store::EnsureSchema() {
  Result<int64_t> n = QueryInt(
      "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND "
      "table_name = 'collscope_meta'");
  if (!n.ok()) return n.status();
  if (*n > 0) {
    Result<int64_t> v =
        QueryInt("SELECT CAST(value AS BIGINT) FROM collscope_meta WHERE key = 'schema_version'");
    if (!v.ok()) return v.status();
    if (*v != kSchemaVersion)
      return Status::Unsupported(path_ + ": store schema version " + std::to_string(*v) +
                           ", this collscope reads version " + std::to_string(kSchemaVersion));
    // Tables added to the taxonomy since the store was made (new input formats) are added.
    auto present =
        Query("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()");
    if (!present.ok()) return present.status();
    std::set<std::string> have;
    for (const auto& row : present->rows)
      if (row[0]) have.insert(*row[0]);
    std::string added;
    for (const TableSpec& t : Tables())
      if (!have.contains(std::string(t.name)))
        added += TableDdl(t.name, !in_memory()) + TaxonomyInsert(t.name);
    // Columns added to a table since (dump_stats' proxy counters): the taxonomy lists them at
    // the table's end, where ADD COLUMN puts them, so appenders see the same column order.
    auto columns = Query(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = "
        "current_database()");
    if (!columns.ok()) return columns.status();
    std::set<std::pair<std::string, std::string>> have_columns;
    for (const auto& row : columns->rows)
      if (row[0] && row[1]) have_columns.emplace(*row[0], *row[1]);
    for (const FieldSpec& f : Fields()) {
      const std::string table(f.table), column(f.name);
      if (!have.contains(table) || have_columns.contains({table, column})) continue;
      added += "ALTER TABLE " + table + " ADD COLUMN " + column + " " + std::string(f.sql_type) +
               ";\nCOMMENT ON COLUMN " + table + "." + column + " IS " +
               SqlString(std::string(RoleName(f.role)) + ": " + std::string(f.description)) +
               ";\n" + TaxonomyInsert(f.table, f.name);
    }
    if (!added.empty())
      COLLSCOPE_RETURN_IF_ERROR(Exec("BEGIN TRANSACTION;\n" + added + "COMMIT;\n"));
    const std::string definitions = std::string(kBandwidthMacrosSql) + kStoreViewsSql;
    const std::string fingerprint = DefinitionsFingerprint(definitions);
    Result<std::string> held = MetaValue("store_views");
    if (!held.ok()) return held.status();
    if (*held == fingerprint) return Status::Ok();
    COLLSCOPE_RETURN_IF_ERROR(Exec(definitions));
    return SetMetaValue("store_views", fingerprint);
  }
  std::string ddl = "BEGIN TRANSACTION;\n" + SchemaDdl(!in_memory());
  ddl += "CREATE TABLE collscope_meta (key VARCHAR PRIMARY KEY, value VARCHAR);\n";
  ddl += "INSERT INTO collscope_meta VALUES ('schema_version', '" + std::to_string(kSchemaVersion) +
         "');\n";
  ddl +=
      "CREATE TABLE taxonomy (table_name VARCHAR, column_name VARCHAR, sql_type VARCHAR, "
      "role VARCHAR, source VARCHAR, description VARCHAR);\n";
  ddl += "COMMENT ON TABLE taxonomy IS 'The role and meaning of every stored column';\n";
  ddl += TaxonomyInsert("");
  ddl += kBandwidthMacrosSql;
  ddl += kStoreViewsSql;
  ddl += "INSERT INTO collscope_meta VALUES ('store_views', " +
         SqlString(DefinitionsFingerprint(std::string(kBandwidthMacrosSql) + kStoreViewsSql)) +
         ");\n";
  ddl += "COMMIT;\n";
  Status st = Exec(ddl);
  if (!st.ok()) Exec("ROLLBACK").IgnoreError();
  return st;
}

Result<std::string> Store::MetaValue(const std::string& key) {
  Result<QueryResult> r = Query("SELECT value FROM collscope_meta WHERE key = " + SqlString(key));
  if (!r.ok()) return r.status();
  if (r->rows.empty() || !r->rows[0][0]) return std::string();
  return *r->rows[0][0];
}

Status Store::SetMetaValue(const std::string& key, const std::string& value) {
  return Exec("INSERT OR REPLACE INTO collscope_meta VALUES (" + SqlString(key) + ", " +
              SqlString(value) + ")");
}

std::string DefinitionsFingerprint(std::string_view definitions) {
  // FNV-1a, 64 bits: stable across builds and platforms, unlike std::hash.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : definitions) h = (h ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

Status Store::Exec(const std::string& sql) {
  duckdb_result r;
  if (duckdb_query(conn_, sql.c_str(), &r) != DuckDBSuccess) {
    std::string msg = ResultError(&r, path_);
    duckdb_destroy_result(&r);
    return Status::Internal(msg);
  }
  duckdb_destroy_result(&r);
  return Status::Ok();
}

Result<QueryResult> Store::Query(const std::string& sql) {
  duckdb_result r;
  if (duckdb_query(conn_, sql.c_str(), &r) != DuckDBSuccess) {
    std::string msg = ResultError(&r, "query failed");
    duckdb_destroy_result(&r);
    return Status::Internal(msg);
  }
  Result<QueryResult> out = RenderResult(&r);
  duckdb_destroy_result(&r);
  return out;
}

Result<QueryResult> Store::QueryReadOnly(const std::string& sql) {
  duckdb_extracted_statements stmts = nullptr;
  idx_t n = duckdb_extract_statements(conn_, sql.c_str(), &stmts);
  if (n == 0) {
    const char* why = stmts ? duckdb_extract_statements_error(stmts) : nullptr;
    std::string msg =
        std::string("cannot parse SQL: ") + (why && *why ? why : "no statement given");
    duckdb_destroy_extracted(&stmts);
    return Status::InvalidArgument(msg);
  }
  Result<QueryResult> last = QueryResult{};
  for (idx_t i = 0; i < n; ++i) {
    duckdb_prepared_statement prep = nullptr;
    if (duckdb_prepare_extracted_statement(conn_, stmts, i, &prep) != DuckDBSuccess) {
      const char* why = duckdb_prepare_error(prep);
      std::string msg = std::string("query failed: ") + (why ? why : "cannot prepare statement");
      duckdb_destroy_prepare(&prep);
      duckdb_destroy_extracted(&stmts);
      return Status::InvalidArgument(msg);
    }
    duckdb_statement_type type = duckdb_prepared_statement_type(prep);
    bool allowed = type == DUCKDB_STATEMENT_TYPE_SELECT || type == DUCKDB_STATEMENT_TYPE_EXPLAIN ||
                   type == DUCKDB_STATEMENT_TYPE_PRAGMA;
    if (!allowed) {
      duckdb_destroy_prepare(&prep);
      duckdb_destroy_extracted(&stmts);
      return Status::InvalidArgument("refused: `collscope sql` runs read-only queries only (statement " +
                           std::to_string(i + 1) + " would write or change state)");
    }
    duckdb_result r;
    if (duckdb_execute_prepared(prep, &r) != DuckDBSuccess) {
      std::string msg = ResultError(&r, "query failed");
      duckdb_destroy_result(&r);
      duckdb_destroy_prepare(&prep);
      duckdb_destroy_extracted(&stmts);
      return Status::InvalidArgument(msg);
    }
    last = RenderResult(&r);
    duckdb_destroy_result(&r);
    duckdb_destroy_prepare(&prep);
  }
  duckdb_destroy_extracted(&stmts);
  return last;
}

Result<int64_t> Store::QueryInt(const std::string& sql) {
  duckdb_result r;
  if (duckdb_query(conn_, sql.c_str(), &r) != DuckDBSuccess) {
    std::string msg = ResultError(&r, "query failed");
    duckdb_destroy_result(&r);
    return Status::Internal(msg);
  }
  if (duckdb_row_count(&r) < 1 || duckdb_column_count(&r) < 1) {
    duckdb_destroy_result(&r);
    return Status::Internal("query returned no value: " + sql);
  }
  int64_t v = duckdb_value_is_null(&r, 0, 0) ? 0 : duckdb_value_int64(&r, 0, 0);
  duckdb_destroy_result(&r);
  return v;
}

Result<std::string> Store::DefaultRun() {
  Result<QueryResult> r = Query(
      "SELECT ru.name FROM runs ru LEFT JOIN (SELECT run_id, count(*) n FROM records GROUP BY "
      "1) c USING (run_id) ORDER BY coalesce(c.n, 0) DESC, ru.run_id LIMIT 1");
  if (!r.ok()) return r.status();
  if (r->rows.empty() || !r->rows[0][0]) return Status::NotFound(path_ + ": the store holds no run");
  return *r->rows[0][0];
}

Result<int32_t> Store::RunId(const std::string& name, bool create) {
  Result<QueryResult> q = Query("SELECT run_id FROM runs WHERE name = " + SqlString(name));
  if (!q.ok()) return q.status();
  if (!q->rows.empty()) return static_cast<int32_t>(std::stoi(*q->rows[0][0]));
  if (!create) return Status::NotFound(path_ + ": no run named \"" + name + "\"");
  Status st = Exec("INSERT INTO runs SELECT coalesce(max(run_id), 0) + 1, " + SqlString(name) +
                   ", current_localtimestamp() FROM runs");
  if (!st.ok()) return st;
  return RunId(name, false);
}

Status Store::ExportParquet(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError(dir + ": cannot create directory: " + ec.message());
  // The sandbox admits the directory by its canonical name (Open's writable_dir).
  const std::filesystem::path out = std::filesystem::weakly_canonical(dir, ec);
  if (ec) return Status::IOError(dir + ": " + ec.message());
  std::vector<std::string> names;
  for (const TableSpec& t : Tables()) names.emplace_back(t.name);
  names.emplace_back("taxonomy");
  names.emplace_back("inspector_rows");
  for (const std::string& name : names) {
    std::string file = (out / (name + ".parquet")).string();
    COLLSCOPE_RETURN_IF_ERROR(Exec("COPY (SELECT * FROM " + name + ") TO " + SqlString(file) +
                                   " (FORMAT parquet, COMPRESSION zstd)"));
  }
  return Status::Ok();
}

ChunkAppender::~ChunkAppender() { Close(); }

void ChunkAppender::Close() {
  if (chunk_) duckdb_destroy_data_chunk(&chunk_);
  for (auto& t : types_) duckdb_destroy_logical_type(&t);
  types_.clear();
  if (appender_) duckdb_appender_destroy(&appender_);
  chunk_ = nullptr;
  appender_ = nullptr;
}

Status ChunkAppender::Open(duckdb_connection conn, const char* table) {
  table_ = table;
  if (duckdb_appender_create(conn, nullptr, table, &appender_) != DuckDBSuccess) {
    std::string msg = std::string("cannot append to ") + table + ": " +
                      (appender_ ? duckdb_appender_error(appender_) : "unknown");
    return Status::Internal(msg);
  }
  idx_t n = duckdb_appender_column_count(appender_);
  for (idx_t i = 0; i < n; ++i) types_.push_back(duckdb_appender_column_type(appender_, i));
  chunk_ = duckdb_create_data_chunk(types_.data(), types_.size());
  capacity_ = duckdb_vector_size();
  return Status::Ok();
}

void ChunkAppender::SetNull(size_t col, size_t row) {
  duckdb_vector v = duckdb_data_chunk_get_vector(chunk_, col);
  duckdb_vector_ensure_validity_writable(v);
  duckdb_validity_set_row_invalid(duckdb_vector_get_validity(v), row);
}

uint64_t* ChunkAppender::WritableValidity(size_t col) {
  duckdb_vector v = duckdb_data_chunk_get_vector(chunk_, col);
  duckdb_vector_ensure_validity_writable(v);
  return duckdb_vector_get_validity(v);
}

void ChunkAppender::SetString(size_t col, size_t row, const std::string& s) {
  duckdb_vector_assign_string_element_len(duckdb_data_chunk_get_vector(chunk_, col), row, s.data(),
                                          s.size());
}

Status ChunkAppender::Append(size_t rows) {
  duckdb_data_chunk_set_size(chunk_, rows);
  if (duckdb_append_data_chunk(appender_, chunk_) != DuckDBSuccess)
    return Status::Internal("append to " + table_ + " failed: " + duckdb_appender_error(appender_));
  duckdb_data_chunk_reset(chunk_);
  return Status::Ok();
}

Status ChunkAppender::Flush() {
  if (duckdb_appender_flush(appender_) != DuckDBSuccess)
    return Status::Internal("flush of " + table_ + " failed: " + duckdb_appender_error(appender_));
  return Status::Ok();
}

}  // namespace collscope
