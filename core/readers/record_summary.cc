#include "core/readers/record_summary.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "core/input_files.h"
#include "core/line_reader.h"

namespace collscope::readers {
namespace {

namespace fs = std::filesystem;

// One column of the format: its name and type in the file (and in the importer's staging
// table), and what the exporter writes for a record row and for a dump_stats row. The order is
// the file's column order; it is fixed for a format version.
struct Column {
  const char* name;
  const char* type;
  const char* record;      // over records r, processes p, operations o, communicators c
  const char* dump_stats;  // over dump_stats d, processes p, communicators c
};

constexpr Column kColumns[] = {
    {"row_type", "VARCHAR", "'record'", "'dump_stats'"},
    {"hostname", "VARCHAR", "p.hostname", "p.hostname"},
    {"pid", "UBIGINT", "p.pid", "p.pid"},
    {"git_rev", "VARCHAR", "p.git_rev", "p.git_rev"},
    {"rec_mechanism", "VARCHAR", "p.rec_mechanism", "p.rec_mechanism"},
    {"format_version", "VARCHAR", "p.format_version", "p.format_version"},
    {"comm_id", "VARCHAR", "c.id", "c.id"},
    {"comm_hash", "UBIGINT", "c.comm_hash", "c.comm_hash"},
    {"comm_name", "VARCHAR", "c.comm_name", "c.comm_name"},
    {"n_ranks", "INTEGER", "c.n_ranks", "c.n_ranks"},
    {"nnodes", "INTEGER", "c.nnodes", "c.nnodes"},
    {"kind", "VARCHAR", "CAST(o.kind AS VARCHAR)", "NULL"},
    {"op", "VARCHAR", "CAST(o.op AS VARCHAR)", "NULL"},
    {"algo", "VARCHAR", "CAST(o.algo AS VARCHAR)", "NULL"},
    {"proto", "VARCHAR", "CAST(o.proto AS VARCHAR)", "NULL"},
    {"peer", "INTEGER", "o.peer", "NULL"},
    {"msg_size_bytes", "UBIGINT", "o.msg_size_bytes", "NULL"},
    {"rank", "INTEGER", "r.rank", "d.rank"},
    {"global_rank", "INTEGER", "r.global_rank", "NULL"},
    {"local_rank", "INTEGER", "r.local_rank", "NULL"},
    {"gpu", "INTEGER", "r.gpu", "NULL"},
    {"n_channels", "INTEGER", "r.n_channels", "NULL"},
    {"sn", "UBIGINT", "r.sn", "NULL"},
    {"exec_time_us", "UBIGINT", "r.exec_time_us", "NULL"},
    {"timing_source", "VARCHAR", "CAST(r.timing_source AS VARCHAR)", "NULL"},
    {"algbw_gbs_override", "DOUBLE", "r.algbw_gbs_override", "NULL"},
    {"busbw_gbs_override", "DOUBLE", "r.busbw_gbs_override", "NULL"},
    {"dump_ts_us", "UBIGINT", "r.dump_ts_us", "d.dump_ts_us"},
    {"start_ts_us", "UBIGINT", "r.start_ts_us", "NULL"},
    {"stop_ts_us", "UBIGINT", "r.stop_ts_us", "NULL"},
    {"kernel_start_ts_us", "UBIGINT", "r.kernel_start_ts_us", "NULL"},
    {"kernel_stop_ts_us", "UBIGINT", "r.kernel_stop_ts_us", "NULL"},
    {"coll_records", "UBIGINT", "NULL", "d.coll_records"},
    {"coll_dropped_total", "UBIGINT", "NULL", "d.coll_dropped_total"},
    {"coll_dropped_since_last_dump", "UBIGINT", "NULL", "d.coll_dropped_since_last_dump"},
    {"p2p_records", "UBIGINT", "NULL", "d.p2p_records"},
    {"p2p_dropped_total", "UBIGINT", "NULL", "d.p2p_dropped_total"},
    {"p2p_dropped_since_last_dump", "UBIGINT", "NULL", "d.p2p_dropped_since_last_dump"},
};

std::string MetaKey(const char* what, const std::string& run) {
  return std::string("summary.") + what + "." + run;
}

// A host name as a folder name: bytes outside [A-Za-z0-9._-] as %HH, so no name escapes ROOT.
std::string EncodeHost(const std::string& host) {
  std::string out;
  for (unsigned char ch : host) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || (ch == '.' && !out.empty())) {
      out += static_cast<char>(ch);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", ch);
      out += buf;
    }
  }
  return out.empty() ? "%" : out;
}

std::string Padded(int64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016lld", static_cast<long long>(v));
  return buf;
}

// "a\tb\n" pairs (the renames owed) and "id:n;" maps (export progress) kept in collscope_meta.
std::vector<std::pair<std::string, std::string>> ParsePairs(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    const std::string line = text.substr(at, eol - at);
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
    at = eol + 1;
  }
  return out;
}

std::map<int64_t, uint64_t> ParseProgress(const std::string& text) {
  std::map<int64_t, uint64_t> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(';', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    const size_t colon = item.find(':');
    if (colon != std::string::npos)
      out[std::stoll(item.substr(0, colon))] = std::stoull(item.substr(colon + 1));
    at = end + 1;
  }
  return out;
}

// Renames owed by an export whose progress was committed; a temporary already gone was renamed.
Status FinishRenames(Store& store, const std::string& run) {
  auto owed = store.MetaValue(MetaKey("pending", run));
  if (!owed.ok()) return owed.status();
  if (owed->empty()) return Status::Ok();
  for (const auto& [from, to] : ParsePairs(*owed)) {
    std::error_code ec;
    if (!fs::exists(from, ec)) continue;
    fs::rename(from, to, ec);
    if (ec) return Status::IOError("summary " + to + ": " + ec.message());
  }
  return store.SetMetaValue(MetaKey("pending", run), "");
}

}  // namespace

bool IsRecordSummaryPath(const std::string& path) {
  const fs::path p(path);
  const std::string name = p.filename().string();
  return name.ends_with(".parquet") && !name.starts_with(".") &&
         p.parent_path().filename().string().starts_with("host=");
}

bool IsRecordSummaryRoot(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  bool any = false;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(".")) continue;
    if (!name.starts_with("host=") || !e.is_directory(ec)) return false;
    any = true;
  }
  return any && !ec;
}

Result<SummaryExportReport> ExportRecordSummaries(Store& store, const SummaryExportOptions& o) {
  SummaryExportReport report;
  COLLSCOPE_RETURN_IF_ERROR(FinishRenames(store, o.run));
  auto run_id = store.QueryInt("SELECT CAST(coalesce(max(run_id), -1) AS BIGINT) FROM runs WHERE name = " +
                               SqlString(o.run));
  if (!run_id.ok()) return run_id.status();
  if (*run_id < 0) return report;
  const std::string rid = std::to_string(*run_id);
  // What was exported (per input file, through which line) and what is stored now: rows and file
  // progress are committed together (core/ingest.h), so every line up to lines_consumed is in.
  auto held = store.MetaValue(MetaKey("exported", o.run));
  if (!held.ok()) return held.status();
  const std::map<int64_t, uint64_t> done = ParseProgress(*held);
  auto now = store.Query("SELECT CAST(file_id AS BIGINT), CAST(lines_consumed AS UBIGINT) FROM files WHERE run_id = " +
                         rid + " ORDER BY 1");
  if (!now.ok()) return now.status();
  std::string spans, progress;
  for (const auto& row : now->rows) {
    const int64_t id = std::stoll(*row[0]);
    const uint64_t hi = std::stoull(*row[1]);
    auto it = done.find(id);
    // A file rewritten in place (its progress went back) ships again from its start.
    const uint64_t lo = it == done.end() || it->second > hi ? 0 : it->second;
    progress += std::to_string(id) + ":" + std::to_string(hi) + ";";
    if (hi > lo)
      spans += std::string(spans.empty() ? "" : ", ") + "(" + std::to_string(id) + ", " + std::to_string(lo) +
               ", " + std::to_string(hi) + ")";
  }
  if (spans.empty()) return report;
  std::string record_cols, stats_cols;
  for (const Column& c : kColumns) {
    record_cols += std::string("CAST(") + c.record + " AS " + c.type + ") AS " + c.name + ", ";
    stats_cols += std::string("CAST(") + c.dump_stats + " AS " + c.type + ") AS " + c.name + ", ";
  }
  std::string host_filter;
  for (const std::string& h : o.hosts) host_filter += (host_filter.empty() ? "" : ", ") + SqlString(h);
  if (!host_filter.empty()) host_filter = " AND p.hostname IN (" + host_filter + ")";
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(
      "CREATE OR REPLACE TEMP TABLE summary_span AS SELECT * FROM (VALUES " + spans + ") t(file_id, lo, hi);\n"
      "CREATE OR REPLACE TEMP TABLE summary_out AS "
      "SELECT " + record_cols + "r.file_id AS _file, r.line AS _line FROM records r "
      "JOIN summary_span w ON r.file_id = w.file_id AND r.line > w.lo AND r.line <= w.hi "
      "JOIN processes p ON p.run_id = r.run_id AND p.process_id = r.process_id "
      "JOIN operations o ON o.run_id = r.run_id AND o.op_id = r.op_id "
      "JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id "
      "WHERE r.run_id = " + rid + host_filter +
      " UNION ALL SELECT " + stats_cols + "d.file_id, d.line FROM dump_stats d "
      "JOIN summary_span w ON d.file_id = w.file_id AND d.line > w.lo AND d.line <= w.hi "
      "JOIN processes p ON p.run_id = d.run_id AND p.process_id = d.process_id "
      "JOIN communicators c ON c.run_id = d.run_id AND c.comm_id = d.comm_id "
      "WHERE d.run_id = " + rid + host_filter + ";"));
  auto hosts = store.Query("SELECT hostname, CAST(count(*) FILTER (WHERE row_type = 'record') AS BIGINT), "
                           "CAST(count(*) FILTER (WHERE row_type = 'dump_stats') AS BIGINT) "
                           "FROM summary_out GROUP BY 1 ORDER BY 1");
  if (!hosts.ok()) return hosts.status();
  // Names sort in the order they were written, even when the clock steps back.
  auto last = store.MetaValue(MetaKey("last_until_us", o.run));
  if (!last.ok()) return last.status();
  const int64_t until = std::max<int64_t>(o.now_us, last->empty() ? 0 : std::stoll(*last) + 1);
  std::string owed;
  for (const auto& row : hosts->rows) {
    const std::string host = row[0].value_or("");
    std::error_code ec;
    // Absolute, as the store's sandbox names its writable folder.
    const fs::path dir = fs::weakly_canonical(fs::absolute(o.root), ec) / ("host=" + EncodeHost(host));
    fs::create_directories(dir, ec);
    if (ec) return Status::IOError(dir.string() + ": " + ec.message());
    const std::string tmp = (dir / ("." + Padded(until) + ".parquet.tmp")).string();
    const std::string final_path = (dir / (Padded(until) + ".parquet")).string();
    COLLSCOPE_RETURN_IF_ERROR(store.Exec(
        "COPY (SELECT * EXCLUDE (_file, _line) FROM summary_out WHERE hostname = " + SqlString(host) +
        " ORDER BY _file, _line) TO " + SqlString(tmp) +
        " (FORMAT parquet, COMPRESSION zstd, KV_METADATA {'collscope.format': " + SqlString(kRecordSummaryFormat) +
        ", 'collscope.format_version': '" + std::to_string(kRecordSummaryVersion) + "'})"));
    owed += tmp + "\t" + final_path + "\n";
    report.records += std::stoull(*row[1]);
    report.dump_stats += std::stoull(*row[2]);
    report.bytes += fs::file_size(tmp, ec);
    report.paths.push_back(final_path);
  }
  // The progress and the renames it owes commit together; the renames follow.
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(
      "BEGIN TRANSACTION;\n"
      "INSERT OR REPLACE INTO collscope_meta VALUES (" + SqlString(MetaKey("exported", o.run)) + ", " +
      SqlString(progress) + "), (" + SqlString(MetaKey("last_until_us", o.run)) + ", '" + std::to_string(until) +
      "'), (" + SqlString(MetaKey("pending", o.run)) + ", " + SqlString(owed) + ");\n"
      "COMMIT;"));
  COLLSCOPE_RETURN_IF_ERROR(FinishRenames(store, o.run));
  report.files_written = report.paths.size();
  COLLSCOPE_RETURN_IF_ERROR(store.Exec("DROP TABLE IF EXISTS summary_out; DROP TABLE IF EXISTS summary_span;"));
  return report;
}

namespace {

struct SummaryFile {
  std::string path;
  uint64_t bytes = 0, fingerprint = 0;
  int64_t mtime_ns = 0;
};

std::string PathList(const std::vector<SummaryFile>& files) {
  std::string out;
  for (const SummaryFile& f : files) out += (out.empty() ? "" : ", ") + SqlString(f.path);
  return "[" + out + "]";
}

// Moves a query's result from the reader database into `table` of the store, chunk by chunk.
Status Transfer(Store& from, const std::string& query, Store& to, const char* table) {
  duckdb_result result;
  if (duckdb_query(from.connection(), query.c_str(), &result) != DuckDBSuccess) {
    const char* e = duckdb_result_error(&result);
    std::string msg = e ? e : "unknown DuckDB error";
    duckdb_destroy_result(&result);
    return Status::Corruption(msg);
  }
  duckdb_appender app = nullptr;
  if (duckdb_appender_create_ext(to.connection(), "temp", "main", table, &app) != DuckDBSuccess) {
    std::string msg = std::string("cannot append to ") + table + ": " + (app ? duckdb_appender_error(app) : "");
    duckdb_appender_destroy(&app);
    duckdb_destroy_result(&result);
    return Status::Corruption(msg);
  }
  Status st = Status::Ok();
  for (;;) {
    duckdb_data_chunk chunk = duckdb_fetch_chunk(result);
    if (!chunk) break;
    const bool ok = duckdb_append_data_chunk(app, chunk) == DuckDBSuccess;
    duckdb_destroy_data_chunk(&chunk);
    if (!ok) {
      st = Status::Corruption(std::string("staging: ") + duckdb_appender_error(app));
      break;
    }
  }
  if (st.ok() && duckdb_appender_close(app) != DuckDBSuccess)
    st = Status::Corruption(std::string("staging: ") + duckdb_appender_error(app));
  duckdb_appender_destroy(&app);
  duckdb_destroy_result(&result);
  return st;
}

// The files' format and version from their key-value metadata; "" when they are this format's.
std::map<std::string, std::string> CheckVersions(Store& reader, const std::vector<SummaryFile>& files) {
  std::map<std::string, std::string> wrong;
  std::map<std::string, std::map<std::string, std::string>> kv;
  auto r = reader.Query("SELECT file_name, decode(key), decode(value) FROM parquet_kv_metadata(" + PathList(files) + ")");
  if (!r.ok()) {
    for (const SummaryFile& f : files) wrong[f.path] = r.status().message();
    return wrong;
  }
  for (const auto& row : r->rows)
    if (row[0] && row[1]) kv[*row[0]][*row[1]] = row[2].value_or("");
  for (const SummaryFile& f : files) {
    auto& m = kv[f.path];
    if (m["collscope.format"] != kRecordSummaryFormat)
      wrong[f.path] = "not a collscope record summary (no collscope.format metadata)";
    else if (m["collscope.format_version"] != std::to_string(kRecordSummaryVersion))
      wrong[f.path] = "record summary format version " + m["collscope.format_version"] +
                      ", this collscope reads version " + std::to_string(kRecordSummaryVersion);
  }
  return wrong;
}

// Loads `files` into run `rid` in one transaction; the staging and interning are set-based SQL.
Status LoadFiles(Store& store, Store& reader, const std::string& rid, const std::vector<SummaryFile>& files,
                 RecordSummaryIngestReport* report) {
  std::string stage = "CREATE OR REPLACE TEMP TABLE summary_stage (path VARCHAR, row_number BIGINT";
  std::string select = "SELECT filename, CAST(file_row_number AS BIGINT)";
  for (const Column& c : kColumns) {
    stage += std::string(", ") + c.name + " " + c.type;
    select += std::string(", CAST(") + c.name + " AS " + c.type + ")";
  }
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(stage + ")"));
  COLLSCOPE_RETURN_IF_ERROR(Transfer(reader,
                                     select + " FROM read_parquet(" + PathList(files) +
                                         ", filename = true, file_row_number = true, hive_partitioning = false)",
                                     store, "summary_stage"));
  auto next = store.QueryInt("SELECT CAST(coalesce(max(file_id), 0) + 1 AS BIGINT) FROM files WHERE run_id = " + rid);
  if (!next.ok()) return next.status();
  std::string file_rows;
  for (size_t i = 0; i < files.size(); ++i)
    file_rows += std::string(i ? ", " : "") + "(" + SqlString(files[i].path) + ", " + SqlString(StorablePath(files[i].path)) +
                 ", " + std::to_string(*next + static_cast<int64_t>(i)) + ", " + std::to_string(files[i].bytes) + ", " +
                 std::to_string(files[i].fingerprint) + ", " + std::to_string(files[i].mtime_ns) + ")";
  const std::string comm_key =
      "c.comm_hash = s.comm_hash AND c.n_ranks = s.n_ranks AND c.nnodes = s.nnodes AND c.comm_name IS NOT DISTINCT FROM "
      "s.comm_name";
  const std::string sql =
      "BEGIN TRANSACTION;\n"
      "CREATE OR REPLACE TEMP TABLE summary_files AS SELECT * FROM (VALUES " + file_rows +
      ") t(path, stored_path, file_id, bytes, fingerprint, mtime_ns);\n"
      // Processes by (hostname, pid), as the Inspector ingest interns them.
      "INSERT INTO processes (run_id, process_id, hostname, pid, git_rev, rec_mechanism, format_version) "
      "SELECT " + rid + ", (SELECT coalesce(max(process_id), 0) FROM processes WHERE run_id = " + rid +
      ") + row_number() OVER (ORDER BY hostname, pid), hostname, pid, git_rev, rec_mechanism, format_version FROM "
      "(SELECT hostname, pid, any_value(git_rev) AS git_rev, any_value(rec_mechanism) AS rec_mechanism, "
      "any_value(format_version) AS format_version FROM summary_stage GROUP BY hostname, pid) s "
      "WHERE NOT EXISTS (SELECT 1 FROM processes p WHERE p.run_id = " + rid +
      " AND p.hostname = s.hostname AND p.pid = s.pid);\n"
      // Communicators by (hash, ranks, nodes, name), with the derived interconnect class.
      "INSERT INTO communicators (run_id, comm_id, comm_hash, id, comm_name, n_ranks, nnodes, coll_type) "
      "SELECT " + rid + ", (SELECT coalesce(max(comm_id), 0) FROM communicators WHERE run_id = " + rid +
      ") + row_number() OVER (ORDER BY comm_id, n_ranks, nnodes, comm_name), comm_hash, comm_id, comm_name, n_ranks, "
      "nnodes, CASE WHEN n_ranks = 1 THEN 'single-rank' WHEN nnodes = 1 THEN 'nvlink-only' WHEN n_ranks = nnodes "
      "THEN 'nic-only' ELSE 'mixed' END FROM (SELECT DISTINCT comm_hash, comm_id, comm_name, n_ranks, nnodes FROM "
      "summary_stage) s WHERE NOT EXISTS (SELECT 1 FROM communicators c WHERE c.run_id = " + rid + " AND " + comm_key +
      ");\n"
      "CREATE OR REPLACE TEMP TABLE summary_keyed AS SELECT s.*, f.file_id, p.process_id, c.comm_id AS cid "
      "FROM summary_stage s JOIN summary_files f USING (path) "
      "JOIN processes p ON p.run_id = " + rid + " AND p.hostname = s.hostname AND p.pid = s.pid "
      "JOIN communicators c ON c.run_id = " + rid + " AND " + comm_key + ";\n"
      // Operations by their shape.
      "INSERT INTO operations (run_id, op_id, comm_id, kind, op, algo, proto, peer, msg_size_bytes) "
      "SELECT " + rid + ", (SELECT coalesce(max(op_id), 0) FROM operations WHERE run_id = " + rid +
      ") + row_number() OVER (ORDER BY cid, kind, op, algo, proto, peer, msg_size_bytes), cid, kind, op, algo, proto, "
      "peer, msg_size_bytes FROM (SELECT DISTINCT cid, kind, op, algo, proto, peer, msg_size_bytes FROM summary_keyed "
      "WHERE row_type = 'record') s WHERE NOT EXISTS (SELECT 1 FROM operations o WHERE o.run_id = " + rid +
      " AND o.comm_id = s.cid AND CAST(o.kind AS VARCHAR) = s.kind AND CAST(o.op AS VARCHAR) = s.op AND "
      "CAST(o.algo AS VARCHAR) IS NOT DISTINCT FROM s.algo AND CAST(o.proto AS VARCHAR) IS NOT DISTINCT FROM s.proto "
      "AND o.peer IS NOT DISTINCT FROM s.peer AND o.msg_size_bytes = s.msg_size_bytes);\n"
      "INSERT INTO records (run_id, file_id, line, process_id, op_id, rank, sn, exec_time_us, timing_source, "
      "algbw_gbs_override, busbw_gbs_override, dump_ts_us, start_ts_us, stop_ts_us, n_channels, global_rank, "
      "local_rank, gpu, kernel_start_ts_us, kernel_stop_ts_us) "
      "SELECT " + rid + ", s.file_id, s.row_number + 1, s.process_id, o.op_id, s.rank, s.sn, s.exec_time_us, "
      "s.timing_source, s.algbw_gbs_override, s.busbw_gbs_override, s.dump_ts_us, s.start_ts_us, s.stop_ts_us, "
      "s.n_channels, s.global_rank, s.local_rank, s.gpu, s.kernel_start_ts_us, s.kernel_stop_ts_us "
      "FROM summary_keyed s JOIN operations o ON o.run_id = " + rid +
      " AND o.comm_id = s.cid AND CAST(o.kind AS VARCHAR) = s.kind AND CAST(o.op AS VARCHAR) = s.op AND "
      "CAST(o.algo AS VARCHAR) IS NOT DISTINCT FROM s.algo AND CAST(o.proto AS VARCHAR) IS NOT DISTINCT FROM s.proto "
      "AND o.peer IS NOT DISTINCT FROM s.peer AND o.msg_size_bytes = s.msg_size_bytes "
      "WHERE s.row_type = 'record' ORDER BY s.file_id, s.row_number;\n"
      "INSERT INTO dump_stats (run_id, file_id, line, process_id, comm_id, rank, dump_ts_us, coll_records, "
      "coll_dropped_total, coll_dropped_since_last_dump, p2p_records, p2p_dropped_total, "
      "p2p_dropped_since_last_dump) SELECT " + rid + ", file_id, row_number + 1, process_id, cid, rank, dump_ts_us, "
      "coll_records, coll_dropped_total, coll_dropped_since_last_dump, p2p_records, p2p_dropped_total, "
      "p2p_dropped_since_last_dump FROM summary_keyed WHERE row_type = 'dump_stats' ORDER BY file_id, row_number;\n"
      // The files, loaded: their rows as the lines consumed.
      "INSERT INTO files (run_id, file_id, path, compressed, bytes_consumed, lines_consumed, fingerprint, size_seen, "
      "mtime_ns_seen) SELECT " + rid + ", f.file_id, f.stored_path, false, f.bytes, "
      "(SELECT count(*) FROM summary_stage s WHERE s.path = f.path), f.fingerprint, f.bytes, f.mtime_ns "
      "FROM summary_files f;\n";
  Status st = store.Exec(sql);
  if (st.ok()) {
    // Every staged row must have landed: a row of another type, or one whose keys did not join,
    // would otherwise vanish without a word.
    auto lost = store.QueryInt(
        "SELECT CAST((SELECT count(*) FROM summary_stage) - (SELECT count(*) FROM records r JOIN summary_files f "
        "USING (file_id) WHERE r.run_id = " + rid + ") - (SELECT count(*) FROM dump_stats d JOIN summary_files f "
        "USING (file_id) WHERE d.run_id = " + rid + ") AS BIGINT)");
    if (!lost.ok()) st = lost.status();
    else if (*lost != 0) st = Status::Corruption(std::to_string(*lost) + " rows with an unknown row_type or missing keys");
  }
  if (st.ok()) st = store.Exec("COMMIT");
  if (!st.ok()) {
    store.Exec("ROLLBACK").IgnoreError();
    return st;
  }
  auto counts = store.Query("SELECT CAST(count(*) FILTER (WHERE row_type = 'record') AS BIGINT), "
                            "CAST(count(*) FILTER (WHERE row_type = 'dump_stats') AS BIGINT) FROM summary_stage");
  if (counts.ok() && !counts->rows.empty()) {
    report->records_stored += std::stoull(counts->rows[0][0].value_or("0"));
    report->dump_stats_stored += std::stoull(counts->rows[0][1].value_or("0"));
  }
  report->files_read += files.size();
  return store.Exec("DROP TABLE IF EXISTS summary_stage; DROP TABLE IF EXISTS summary_keyed; "
                    "DROP TABLE IF EXISTS summary_files;");
}

}  // namespace

Result<RecordSummaryIngestReport> IngestRecordSummaries(Store& store,
                                                        const std::vector<std::string>& paths,
                                                        const std::string& run,
                                                        uint64_t batch_bytes) {
  RecordSummaryIngestReport report;
  auto found = FindInputFiles(paths, [](const std::string& p, bool) { return IsRecordSummaryPath(p); });
  if (!found.ok()) return found.status();
  report.files_seen = found->files.size();
  if (found->files.empty()) return report;
  auto run_id = store.RunId(run, true);
  if (!run_id.ok()) return run_id.status();
  const std::string rid = std::to_string(*run_id);
  auto known_rows = store.Query("SELECT path FROM files WHERE run_id = " + rid + " AND path LIKE '%.parquet'");
  if (!known_rows.ok()) return known_rows.status();
  std::set<std::string> known;
  for (const auto& row : known_rows->rows)
    if (row[0]) known.insert(*row[0]);
  std::vector<SummaryFile> fresh;
  std::set<std::string> roots;
  for (const std::string& path : found->files) {
    if (known.contains(StorablePath(path))) {
      ++report.files_unchanged;
      continue;
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      report.failed.push_back(path + ": vanished before it could be read");
      continue;
    }
    SummaryFile f;
    f.path = path;
    f.bytes = static_cast<uint64_t>(st.st_size);
    f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    auto fp = FingerprintPrefix(path, std::min<uint64_t>(4096, f.bytes));
    f.fingerprint = fp.ok() ? *fp : 0;
    fresh.push_back(std::move(f));
    // The summary root: the reader may look there and nowhere else.
    roots.insert(fs::path(path).parent_path().parent_path().string());
  }
  if (fresh.empty()) return report;
  // DuckDB reads the files in a database of its own, sandboxed to the roots that hold them; the
  // store's own sandbox is left as it was opened.
  Store::Options ro;
  ro.readable_dirs.assign(roots.begin(), roots.end());
  ro.memory_limit = "256MB";
  auto reader = Store::Open(":memory:", ro);
  if (!reader.ok()) return reader.status();
  std::vector<SummaryFile> good;
  const std::map<std::string, std::string> wrong = CheckVersions(**reader, fresh);
  // One failing file of a batch names only the batch: the versions are checked file by file.
  if (wrong.size() == fresh.size() && fresh.size() > 1) {
    for (const SummaryFile& f : fresh) {
      auto one = CheckVersions(**reader, {f});
      if (one.empty()) good.push_back(f);
      else report.failed.push_back(f.path + ": " + one.begin()->second);
    }
  } else {
    for (const SummaryFile& f : fresh) {
      auto it = wrong.find(f.path);
      if (it == wrong.end()) good.push_back(f);
      else report.failed.push_back(f.path + ": " + it->second);
    }
  }
  if (good.empty()) return report;
  // In batches of bounded size, each its own transaction: a batch's rows are staged whole in
  // memory, so an aggregator that starts behind (a restart, a backlog of hosts' files) holds one
  // batch, not the backlog. A batch that fails is loaded file by file, so that only the bad files
  // are left out.
  for (size_t begin = 0; begin < good.size();) {
    size_t end = begin;
    uint64_t bytes = 0;
    while (end < good.size() && (end == begin || bytes + good[end].bytes <= batch_bytes))
      bytes += good[end++].bytes;
    const std::vector<SummaryFile> batch(good.begin() + begin, good.begin() + end);
    begin = end;
    ++report.batches;
    if (Status st = LoadFiles(store, **reader, rid, batch, &report); !st.ok()) {
      if (batch.size() == 1) {
        report.failed.push_back(batch[0].path + ": " + st.message());
        continue;
      }
      for (const SummaryFile& f : batch)
        if (Status one = LoadFiles(store, **reader, rid, {f}, &report); !one.ok())
          report.failed.push_back(f.path + ": " + one.message());
    }
  }
  return report;
}

}  // namespace collscope::readers
