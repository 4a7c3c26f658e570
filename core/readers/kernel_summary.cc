#include "core/readers/kernel_summary.h"

#include <simdjson.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "core/line_reader.h"
#include "core/readers/rows.h"

namespace collscope::readers {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

constexpr int64_t kFormatVersion = 1;
constexpr int64_t kMaxId = int64_t{1} << 31;

bool U64(const object& o, const char* key, uint64_t* out) {
  return o[key].get_uint64().get(*out) == simdjson::SUCCESS;
}

bool I64(const object& o, const char* key, int64_t* out) {
  return o[key].get_int64().get(*out) == simdjson::SUCCESS;
}

bool Number(element e, double* out) {
  if (e.get_double().get(*out) == simdjson::SUCCESS) return std::isfinite(*out);
  int64_t i;
  if (e.get_int64().get(i) == simdjson::SUCCESS) { *out = static_cast<double>(i); return true; }
  uint64_t u;
  if (e.get_uint64().get(u) == simdjson::SUCCESS) { *out = static_cast<double>(u); return true; }
  return false;
}

// An integer field in [lo, hi); `why` names the field when it is missing or out of range.
bool Bounded(const object& o, const char* key, int64_t lo, int64_t hi, int64_t* out, std::string* why) {
  if (!I64(o, key, out)) { *why = std::string("no integer \"") + key + "\""; return false; }
  if (*out < lo || *out >= hi) { *why = std::string("\"") + key + "\" out of range"; return false; }
  return true;
}

bool Count(const object& o, const char* key, uint64_t* out, std::string* why) {
  if (!U64(o, key, out)) { *why = std::string("no count \"") + key + "\" (an integer >= 0)"; return false; }
  return true;
}

Status ReadProcess(const object& o, KernelSummaryProcess* p) {
  std::string why;
  int64_t version;
  if (!I64(o, "format_version", &version)) return Status::Corruption("no integer \"format_version\"");
  if (version != kFormatVersion)
    return Status::Unsupported("kernel-summary format version " + std::to_string(version) + "; this collscope reads version " +
                         std::to_string(kFormatVersion));
  std::string_view s;
  if (o["host"].get_string().get(s) != simdjson::SUCCESS || s.empty()) return Status::Corruption("no string \"host\"");
  p->host = std::string(s);
  int64_t v;
  if (!Bounded(o, "pid", 0, kMaxId, &p->pid, &why) || !Bounded(o, "rank", -1, kMaxId, &v, &why))
    return Status::Corruption(why);
  p->rank = static_cast<int32_t>(v);
  // Unknown to the launcher: -1, as the library writes it when no variable names them.
  if (I64(o, "local_rank", &v) && v >= 0 && v < kMaxId) p->local_rank = static_cast<int32_t>(v);
  if (I64(o, "world_size", &v) && v > 0 && v < kMaxId) p->world_size = static_cast<int32_t>(v);
  if (o["window"].get_string().get(s) != simdjson::SUCCESS || (s != "step" && s != "time"))
    return Status::Corruption("\"window\" is neither \"step\" nor \"time\"");
  p->window_kind = std::string(s);
  if (I64(o, "window_ms", &v) && v > 0) p->window_ms = v;
  if (o["clock"].get_string().get(s) == simdjson::SUCCESS) p->clock = std::string(s);
  return Status::Ok();
}

struct WindowKey {
  int64_t step;
  uint64_t start_ns;  // a time window's; 0 for a step window (its bounds differ between lines)
  size_t kernel;
  int32_t device, stream;
  bool operator==(const WindowKey&) const = default;
};

struct WindowKeyHash {
  size_t operator()(const WindowKey& k) const {
    size_t h = std::hash<int64_t>{}(k.step);
    for (uint64_t v : {k.start_ns, static_cast<uint64_t>(k.kernel), static_cast<uint64_t>(k.device),
                       static_cast<uint64_t>(k.stream)})
      h = h * 1000003u ^ std::hash<uint64_t>{}(v);
    return h;
  }
};

struct Reader {
  KernelSummaryFile f;
  bool first = true;  // the next line is the first (the process line)
  std::unordered_map<int64_t, size_t> kernel_at;  // kernel id -> index in f.kernels
  std::unordered_map<WindowKey, size_t, WindowKeyHash> row_at;

  // An optional [x, y, z] of launch dimensions (kernels have them, memcpys and memsets not).
  static bool Dims(const object& o, const char* key, std::array<int32_t, 3>* out, std::string* why) {
    element e;
    if (o[key].get(e) != simdjson::SUCCESS) return true;
    simdjson::dom::array a;
    size_t n = 0;
    if (e.get_array().get(a) == simdjson::SUCCESS)
      for (element x : a) {
        int64_t v;
        if (n < 3 && (x.get_int64().get(v) != simdjson::SUCCESS || v < 1 || v >= kMaxId)) break;
        if (n < 3) (*out)[n] = static_cast<int32_t>(v);
        ++n;
      }
    if (n == 3) return true;
    *out = {-1, -1, -1};
    *why = std::string("\"") + key + "\" is not [x, y, z] of launch dimensions";
    return false;
  }

  bool Kernel(const object& o, std::string* why) {
    KernelDefinition k;
    std::string_view name, kind;
    if (!Bounded(o, "id", 0, kMaxId, &k.id, why)) return false;
    if (o["name"].get_string().get(name) != simdjson::SUCCESS || name.empty()) { *why = "no kernel \"name\""; return false; }
    if (o["kind"].get_string().get(kind) != simdjson::SUCCESS ||
        (kind != "compute" && kind != "nccl" && kind != "memcpy" && kind != "memset")) {
      *why = "\"kind\" is none of compute, nccl, memcpy, memset";
      return false;
    }
    if (!Dims(o, "grid", &k.grid, why) || !Dims(o, "block", &k.block, why)) return false;
    k.name = std::string(name);
    k.kind = std::string(kind);
    auto [it, fresh] = kernel_at.try_emplace(k.id, f.kernels.size());
    if (fresh) {
      f.kernels.push_back(std::move(k));
      return true;
    }
    const KernelDefinition& was = f.kernels[it->second];
    if (was.name == k.name && was.kind == k.kind && was.grid == k.grid && was.block == k.block)
      return true;  // written again: the same kernel
    *why = "kernel id " + std::to_string(k.id) + " defined again as another kernel";
    return false;
  }

  // The modes, checked whole: [[count, centre_ns, spread], ...], counts adding up to `count`.
  static bool Modes(const object& o, uint64_t count, std::vector<SummaryMode>* out, std::string* why) {
    simdjson::dom::array modes;
    if (o["modes"].get_array().get(modes) != simdjson::SUCCESS) { *why = "no \"modes\" array"; return false; }
    uint64_t sum = 0;
    for (element m : modes) {
      simdjson::dom::array a;
      element e[3];
      size_t n = 0;
      if (m.get_array().get(a) == simdjson::SUCCESS)
        for (element x : a) {
          if (n < 3) e[n] = x;
          ++n;
        }
      SummaryMode md;
      if (n != 3 || e[0].get_uint64().get(md.count) != simdjson::SUCCESS || md.count == 0 ||
          !Number(e[1], &md.centre_ns) || !(md.centre_ns > 0) || !Number(e[2], &md.spread) || md.spread < 0) {
        *why = "a mode is not [count > 0, centre_ns > 0, spread >= 0]";
        return false;
      }
      if (__builtin_add_overflow(sum, md.count, &sum)) {
        *why = "the modes' counts overflow";
        return false;
      }
      out->push_back(md);
    }
    if (sum != count) {
      *why = "the modes' counts add up to " + std::to_string(sum) + ", not to \"count\" " + std::to_string(count);
      return false;
    }
    return true;
  }

  bool Summary(const object& o, uint64_t line, std::string* why) {
    KernelSummaryRow r;
    r.line = line;
    int64_t id, v;
    if (!I64(o, "kernel", &id)) { *why = "no integer \"kernel\""; return false; }
    auto k = kernel_at.find(id);
    if (k == kernel_at.end()) {
      *why = "kernel " + std::to_string(id) + " is not defined by an earlier kernel line";
      return false;
    }
    r.kernel = k->second;
    element step;
    if (o["step"].get(step) != simdjson::SUCCESS) { *why = "no \"step\" (a number, or null)"; return false; }
    if (!step.is_null() && (step.get_int64().get(r.step) != simdjson::SUCCESS || r.step < 0)) {
      *why = "\"step\" is neither null nor a step number";
      return false;
    }
    if (!Count(o, "start_ns", &r.start_ns, why) || !Count(o, "end_ns", &r.end_ns, why)) return false;
    if (r.end_ns < r.start_ns) { *why = "\"end_ns\" before \"start_ns\""; return false; }
    if (!Bounded(o, "device", 0, kMaxId, &v, why)) return false;
    r.device = static_cast<int32_t>(v);
    if (!Bounded(o, "stream", 0, kMaxId, &v, why)) return false;
    r.stream = static_cast<int32_t>(v);
    if (!Count(o, "count", &r.count, why) || !Count(o, "total_ns", &r.total_ns, why) ||
        !Count(o, "min_ns", &r.min_ns, why) || !Count(o, "max_ns", &r.max_ns, why))
      return false;
    if (r.count == 0) { *why = "\"count\" is 0"; return false; }
    if (r.min_ns > r.max_ns) { *why = "\"min_ns\" above \"max_ns\""; return false; }
    // The totals are exact: they lie between count x min and count x max.
    using Wide = unsigned __int128;
    if (Wide{r.total_ns} < Wide{r.count} * r.min_ns || Wide{r.total_ns} > Wide{r.count} * r.max_ns) {
      *why = "\"total_ns\" outside count x [min_ns, max_ns]";
      return false;
    }
    if (!Modes(o, r.count, &r.modes, why)) return false;
    return Add(std::move(r), why);
  }

  // A window's first line makes its row; a later one (late kernels) is added in.
  bool Add(KernelSummaryRow r, std::string* why) {
    const WindowKey key{r.step, r.step < 0 ? r.start_ns : 0, r.kernel, r.device, r.stream};
    auto [it, fresh] = row_at.try_emplace(key, f.rows.size());
    if (fresh) {
      f.rows.push_back(std::move(r));
      return true;
    }
    KernelSummaryRow& row = f.rows[it->second];
    uint64_t count, total;
    if (__builtin_add_overflow(row.count, r.count, &count) || __builtin_add_overflow(row.total_ns, r.total_ns, &total)) {
      *why = "adding it to the window's line " + std::to_string(row.line) + " overflows its totals";
      return false;
    }
    row.count = count;
    row.total_ns = total;
    row.min_ns = std::min(row.min_ns, r.min_ns);
    row.max_ns = std::max(row.max_ns, r.max_ns);
    row.start_ns = std::min(row.start_ns, r.start_ns);
    row.end_ns = std::max(row.end_ns, r.end_ns);
    row.modes.insert(row.modes.end(), r.modes.begin(), r.modes.end());
    return true;
  }

  // One line: an error refuses the file (its first line only); other problems reject the line.
  // `readable`: bytes readable from `line`'s start (simdjson reads past the end, never uses it).
  Status Line(simdjson::dom::parser& parser, std::string_view line, size_t readable) {
    const uint64_t n = ++f.lines;
    if (line.empty() && !first) return Status::Ok();
    object o;
    std::string_view type, format;
    std::string why;
    const bool parsed = parser.parse(line.data(), line.size(), readable < line.size() + simdjson::SIMDJSON_PADDING)
                            .get_object()
                            .get(o) == simdjson::SUCCESS;
    if (first) {
      if (!parsed || o["type"].get_string().get(type) != simdjson::SUCCESS || type != "process" ||
          o["format"].get_string().get(format) != simdjson::SUCCESS || format != "collscope-kernels")
        return Status::Corruption("not a kernel-summary file (its first line is no process line)");
      first = false;
      return ReadProcess(o, &f.process);
    }
    if (!parsed) why = "not a JSON object";
    else if (o["type"].get_string().get(type) != simdjson::SUCCESS) why = "no \"type\"";
    else if (type == "summary") Summary(o, n, &why);
    else if (type == "kernel") Kernel(o, &why);
    else if (type == "stats") Stats(o, &why);
    else if (type == "process") why = "a second process line (a file holds one process)";
    else ++f.lines_unknown;
    if (!why.empty()) f.rejected.push_back({n, why, std::string(line.substr(0, 200))});
    return Status::Ok();
  }

  bool Stats(const object& o, std::string* why) {
    KernelSummaryStats s;
    s.seen = true;
    if (!Count(o, "records", &s.records, why) || !Count(o, "kernels", &s.kernels, why) ||
        !Count(o, "dropped_by_cupti", &s.dropped_by_cupti, why) || !Count(o, "buffers_refused", &s.buffers_refused, why) ||
        !Count(o, "invalid_records", &s.invalid_records, why) || !Count(o, "late", &s.late, why))
      return false;
    // Written by later versions of the library only.
    if (o["untimed"].error() != simdjson::NO_SUCH_FIELD) {
      if (!Count(o, "untimed", &s.untimed, why)) return false;
      s.has_untimed = true;
    }
    f.stats = s;
    return true;
  }
};

}  // namespace

Result<KernelSummaryFile> ReadKernelSummaryFile(const std::string& path) {
  LineReader lines(size_t{1} << 20);
  COLLSCOPE_RETURN_IF_ERROR(lines.Open(path, 0));
  Reader r;
  r.f.path = path;
  std::error_code ec;
  r.f.bytes = std::filesystem::file_size(path, ec);
  simdjson::dom::parser parser;
  LineBlock block;
  for (;;) {
    Result<bool> more = lines.Next(&block);
    if (!more.ok()) {
      // A corrupt gzip block: the lines before it are kept, and the damage is said.
      if (r.first) return more.status();
      r.f.rejected.push_back({r.f.lines + 1, more.status().message(), ""});
      break;
    }
    if (!*more) break;
    if (block.overlong) {
      if (r.first) return Status::Corruption(path + ":1: not a kernel-summary file (its first line is over 16 MiB)");
      r.f.rejected.push_back({++r.f.lines, "a line of " + std::to_string(block.overlong) + " bytes (over 16 MiB)", ""});
      continue;
    }
    for (size_t at = 0; at < block.size;) {
      const char* line = block.data + at;
      const size_t len = static_cast<size_t>(static_cast<const char*>(std::memchr(line, '\n', block.size - at)) - line);
      // The block's padding follows its last line, and later lines follow the others.
      Status st = r.Line(parser, std::string_view(line, len), block.readable - at);
      at += len + 1;
      if (!st.ok()) return st.WithPrefix(path + ":" + std::to_string(r.f.lines) + ": ");
    }
  }
  if (lines.pending() > 0) {
    // The library writes whole lines: a last line without its newline is still being written
    // (a live job) or was cut (a crash). A later ingest reads the file again whole.
    if (r.first) return Status::Corruption(path + ":1: no complete first line yet");
    r.f.rejected.push_back({++r.f.lines, "incomplete last line (no newline: still being written, or cut)", ""});
  }
  if (r.first) return Status::Corruption(path + ": empty");
  return std::move(r.f);
}

}  // namespace collscope::readers

// ------------------------------------------------------------------------------------------------
// Store

namespace collscope::readers {
namespace {

// Staging tables: the summaries' rows with flat launch dimensions and without their modes, and
// the modes one per row; one INSERT ... SELECT then builds each row's lists (DuckDB's chunk
// appender fills flat columns only).
constexpr const char* kStagedRows = "collscope_staged_kernel_summaries";
constexpr const char* kStagedModes = "collscope_staged_kernel_summary_modes";

std::string Opt(int64_t v) { return v < 0 ? "NULL" : std::to_string(v); }
std::string OptText(const std::string& s) { return s.empty() ? "NULL" : SqlString(StorablePath(s)); }

std::string FileRow(const std::string& rid, int64_t id, const std::string& path, const KernelSummaryFile& f) {
  const KernelSummaryProcess& p = f.process;
  const KernelSummaryStats& s = f.stats;
  std::string row = "(" + rid + ", " + std::to_string(id) + ", " + SqlString(path) + ", " + std::to_string(f.bytes) +
                    ", " + OptText(p.host) + ", " + Opt(p.pid) + ", " + Opt(p.rank) + ", " + Opt(p.local_rank) + ", " +
                    Opt(p.world_size) + ", " + OptText(p.window_kind) + ", " + Opt(p.window_ms) + ", " +
                    OptText(p.clock) + ", " + std::to_string(f.lines) + ", " + std::to_string(f.rejected.size()) +
                    ", " + std::to_string(f.lines_unknown) + ", " + std::to_string(f.rows.size());
  auto counter = [&](uint64_t v, bool given) { row += ", " + (given ? std::to_string(v) : std::string("NULL")); };
  counter(s.records, s.seen);
  counter(s.kernels, s.seen);
  counter(s.untimed, s.has_untimed);
  for (uint64_t v : {s.dropped_by_cupti, s.buffers_refused, s.invalid_records, s.late}) counter(v, s.seen);
  return row + ")";
}

Status AppendRows(Store& store, int32_t run_id, int32_t file_id, const KernelSummaryFile& f) {
  ChunkAppender rows, modes;
  COLLSCOPE_RETURN_IF_ERROR(rows.Open(store.connection(), kStagedRows));
  COLLSCOPE_RETURN_IF_ERROR(modes.Open(store.connection(), kStagedModes));
  const std::string host = StorablePath(f.process.host);
  size_t rn = 0, mn = 0;
  for (const KernelSummaryRow& r : f.rows) {
    const KernelDefinition& k = f.kernels[r.kernel];
    rows.Column<int32_t>(0)[rn] = run_id;
    rows.Column<int32_t>(1)[rn] = file_id;
    rows.Column<uint64_t>(2)[rn] = r.line;
    rows.SetString(3, rn, host);
    if (f.process.rank < 0) rows.SetNull(4, rn);
    else rows.Column<int32_t>(4)[rn] = f.process.rank;
    rows.Column<int32_t>(5)[rn] = r.device;
    rows.Column<int32_t>(6)[rn] = r.stream;
    rows.SetString(7, rn, StorablePath(k.name));
    rows.SetString(8, rn, k.kind);
    if (r.step < 0) rows.SetNull(9, rn);
    else rows.Column<int64_t>(9)[rn] = r.step;
    rows.Column<double>(10)[rn] = static_cast<double>(r.start_ns) / 1e3;
    rows.Column<double>(11)[rn] = static_cast<double>(r.end_ns) / 1e3;
    rows.Column<int64_t>(12)[rn] = static_cast<int64_t>(r.count);
    rows.Column<double>(13)[rn] = static_cast<double>(r.total_ns) / 1e3;
    rows.Column<double>(14)[rn] = static_cast<double>(r.min_ns) / 1e3;
    rows.Column<double>(15)[rn] = static_cast<double>(r.max_ns) / 1e3;
    for (size_t d = 0; d < 3; ++d) {
      if (k.grid[d] < 0) rows.SetNull(16 + d, rn);
      else rows.Column<int32_t>(16 + d)[rn] = k.grid[d];
      if (k.block[d] < 0) rows.SetNull(19 + d, rn);
      else rows.Column<int32_t>(19 + d)[rn] = k.block[d];
    }
    if (++rn == rows.capacity()) {
      COLLSCOPE_RETURN_IF_ERROR(rows.Append(rn));
      rn = 0;
    }
    for (size_t i = 0; i < r.modes.size(); ++i) {
      modes.Column<uint64_t>(0)[mn] = r.line;
      modes.Column<int32_t>(1)[mn] = static_cast<int32_t>(i);
      modes.Column<int64_t>(2)[mn] = static_cast<int64_t>(r.modes[i].count);
      modes.Column<double>(3)[mn] = r.modes[i].centre_ns / 1e3;
      modes.Column<double>(4)[mn] = r.modes[i].spread;
      if (++mn == modes.capacity()) {
        COLLSCOPE_RETURN_IF_ERROR(modes.Append(mn));
        mn = 0;
      }
    }
  }
  if (rn) COLLSCOPE_RETURN_IF_ERROR(rows.Append(rn));
  if (mn) COLLSCOPE_RETURN_IF_ERROR(modes.Append(mn));
  COLLSCOPE_RETURN_IF_ERROR(rows.Flush());
  COLLSCOPE_RETURN_IF_ERROR(modes.Flush());
  rows.Close();
  modes.Close();
  return Status::Ok();
}

// One file in one transaction, replacing what was stored from its path.
Status StoreFile(Store& store, int32_t run_id, const KernelSummaryFile& f) {
  const std::string rid = std::to_string(run_id);
  const std::string path = StorablePath(f.path);
  auto known = store.Query("SELECT file_id FROM kernel_summary_files WHERE run_id = " + rid + " AND path = " + SqlString(path));
  if (!known.ok()) return known.status();
  auto next = store.QueryInt("SELECT CAST(coalesce(max(file_id) + 1, 0) AS BIGINT) FROM kernel_summary_files WHERE run_id = " + rid);
  if (!next.ok()) return next.status();
  const int64_t id = known->rows.empty() ? *next : std::stoll(*known->rows[0][0]);
  const std::string where = " WHERE run_id = " + rid + " AND file_id = " + std::to_string(id) + ";\n";
  std::string sql = "BEGIN TRANSACTION;\n";
  sql += "DELETE FROM kernel_summary_files" + where + "DELETE FROM kernel_summaries" + where;
  sql += "DELETE FROM ingest_log WHERE run_id = " + rid + " AND path = " + SqlString(path) + ";\n";
  sql += "INSERT INTO kernel_summary_files VALUES " + FileRow(rid, id, path, f) + ";\n";
  std::string log;
  AppendIngestLogValues(rid, path, f.rejected, &log);
  if (!log.empty()) sql += "INSERT INTO ingest_log VALUES " + log + ";\n";
  sql += std::string("CREATE OR REPLACE TEMP TABLE ") + kStagedRows +
         " AS SELECT * EXCLUDE (grid, block, modes), 0::INTEGER AS grid_x, 0::INTEGER AS grid_y, 0::INTEGER AS grid_z, "
         "0::INTEGER AS block_x, 0::INTEGER AS block_y, 0::INTEGER AS block_z FROM kernel_summaries LIMIT 0;\n";
  sql += std::string("CREATE OR REPLACE TEMP TABLE ") + kStagedModes +
         " (line UBIGINT, k INTEGER, count BIGINT, centre_us DOUBLE, spread DOUBLE);\n";
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(sql));
  Status st = AppendRows(store, run_id, static_cast<int32_t>(id), f);
  if (st.ok())
    st = store.Exec(std::string("INSERT INTO kernel_summaries BY NAME SELECT r.* EXCLUDE (grid_x, grid_y, grid_z, "
                    "block_x, block_y, block_z), CASE WHEN grid_x IS NOT NULL THEN [grid_x, grid_y, grid_z] END AS grid, "
                    "CASE WHEN block_x IS NOT NULL THEN [block_x, block_y, block_z] END AS block, m.modes FROM ") +
                    kStagedRows +
                    " r LEFT JOIN (SELECT line, list(struct_pack(count := count, centre_us := centre_us, "
                    "spread := spread) ORDER BY k) AS modes FROM " + kStagedModes +
                    " GROUP BY line) m USING (line) ORDER BY r.line;\nDROP TABLE " + kStagedRows + ";\nDROP TABLE " +
                    kStagedModes + ";\nCOMMIT");
  if (!st.ok()) store.Exec("ROLLBACK").IgnoreError();
  return st;
}

}  // namespace

bool HasKernelSummaryTables(Store& store) {
  auto n = store.QueryInt(
      "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND "
      "table_name IN ('kernel_summary_files', 'kernel_summaries')");
  return n.ok() && *n == 2;
}

Result<KernelSummaryIngestReport> IngestKernelSummaries(Store& store, const std::vector<std::string>& paths,
                                                        const std::string& run) {
  KernelSummaryIngestReport rep;
  auto found = FindInputFiles(paths, [](const std::string& p, bool) { return IsKernelSummaryFile(p); });
  if (!found.ok()) return found.status();
  rep.files_seen = found->files.size();
  if (found->files.empty()) return rep;
  auto run_id = store.RunId(run, true);
  if (!run_id.ok()) return run_id.status();
  // One file at a time: a file's rows are held in memory only while it is stored.
  for (const std::string& path : found->files) {
    auto f = ReadKernelSummaryFile(path);
    if (!f.ok()) {
      rep.failed.push_back(f.status().message());
      continue;
    }
    COLLSCOPE_RETURN_IF_ERROR(StoreFile(store, *run_id, *f));
    ++rep.files_read;
    rep.summaries += f->rows.size();
    rep.lines_rejected += f->rejected.size();
    rep.lines_unknown += f->lines_unknown;
    for (const KernelSummaryFile::Rejection& r : f->rejected)
      if (rep.first_rejections.size() < 10)
        rep.first_rejections.push_back(path + ":" + std::to_string(r.line) + ": " + r.reason);
  }
  return rep;
}

}  // namespace collscope::readers
