#include "core/readers/stacks.h"

#include <simdjson.h>

#include <cstring>
#include <filesystem>

#include "core/line_reader.h"
#include "core/readers/rows.h"

namespace collscope::readers {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

// A string as stored: a NUL (JSON \u0000) as the four characters \x00, since SQL text and C
// strings end at a NUL. Everything else as it is (simdjson returns valid UTF-8 only).
std::string Text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\0')
      out += "\\x00";
    else
      out += c;
  }
  return out;
}

// A required integer >= `lo`; `why` names the field when it is missing or below.
bool Int(const object& o, const char* key, int64_t lo, int64_t* out, std::string* why) {
  element e;
  if (o[key].get(e) != simdjson::SUCCESS) {
    *why = std::string("no \"") + key + "\"";
    return false;
  }
  if (e.get_int64().get(*out) != simdjson::SUCCESS) {
    uint64_t big;
    *why = std::string("\"") + key + "\" is " +
           (e.get_uint64().get(big) == simdjson::SUCCESS ? "out of range" : "not an integer");
    return false;
  }
  if (*out < lo) {
    *why =
        std::string("\"") + key + "\" is " + (lo == 0 ? "negative" : "below " + std::to_string(lo));
    return false;
  }
  return true;
}

bool String(const object& o, const char* key, std::string* out, std::string* why) {
  std::string_view s;
  if (o[key].get_string().get(s) != simdjson::SUCCESS) {
    *why = std::string("no string \"") + key + "\"";
    return false;
  }
  *out = Text(s);
  return true;
}

bool Bool(const object& o, const char* key, bool* out, std::string* why) {
  if (o[key].get_bool().get(*out) != simdjson::SUCCESS) {
    *why = std::string("no true or false \"") + key + "\"";
    return false;
  }
  return true;
}

Status ReadProcess(const object& o, StackFileProcess* p) {
  std::string why;
  int64_t version;
  if (!Int(o, "collscope_stacks", 0, &version, &why))
    return Status::Corruption("\"collscope_stacks\" is not a version number");
  if (version != kStackFileVersion)
    return Status::Corruption("stack file version " + std::to_string(version) +
                         "; this collscope reads version " + std::to_string(kStackFileVersion));
  std::string_view type;
  if (o["type"].get_string().get(type) != simdjson::SUCCESS || type != "process")
    return Status::Corruption("not a stack file (its first line is no process line)");
  constexpr int64_t kMaxId = int64_t{1} << 31;
  if (!String(o, "host", &p->host, &why)) return Status::Corruption(why);
  if (p->host.empty()) return Status::Corruption("an empty \"host\"");
  if (!Int(o, "pid", 0, &p->pid, &why) || !Int(o, "rank", -1, &p->rank, &why))
    return Status::Corruption(why);
  if (p->pid >= kMaxId) return Status::Corruption("\"pid\" out of range");
  if (p->rank >= kMaxId) return Status::Corruption("\"rank\" out of range");
  if (!String(o, "exe", &p->exe, &why) || !String(o, "command", &p->command, &why) ||
      !String(o, "python_unread", &p->python_unread, &why))
    return Status::Corruption(why);
  element python;
  if (o["python"].get(python) != simdjson::SUCCESS)
    return Status::Corruption("no \"python\" (a version, or null)");
  if (!python.is_null()) {
    std::string_view v;
    if (python.get_string().get(v) != simdjson::SUCCESS)
      return Status::Corruption("\"python\" is neither a version nor null");
    p->python_version = Text(v);
    p->python_read = true;
  }
  if (!Int(o, "interval_us", 1, &p->interval_us, &why) || !Bool(o, "native", &p->native, &why))
    return Status::Corruption(why);
  return Status::Ok();
}

struct Reader {
  StackFile f;
  bool first = true;  // the next line is the first (the process line)

  bool Stacks(const object& o, uint64_t line, std::string* why) {
    StackRow r;
    r.line = line;
    FoldedStack& s = r.stack;
    std::string_view frames;
    if (!Int(o, "tid", 0, &s.tid, why) || !String(o, "thread", &s.thread, why) ||
        !Int(o, "window_start_us", 0, &s.window_start_us, why) ||
        !Int(o, "window_end_us", 0, &s.window_end_us, why) ||
        !Int(o, "first_us", 0, &s.first_us, why) || !Int(o, "last_us", 0, &s.last_us, why) ||
        !Int(o, "count", INT64_MIN, &s.count, why))
      return false;
    if (s.count <= 0) {
      *why = "\"count\" is not positive";
      return false;
    }
    if (s.window_end_us <= s.window_start_us) {
      *why = "\"window_end_us\" is not after \"window_start_us\"";
      return false;
    }
    if (s.first_us > s.last_us) {
      *why = "\"first_us\" is after \"last_us\"";
      return false;
    }
    if (!o["step_first"].error() || !o["step_last"].error()) {  // a step window
      if (!Int(o, "step_first", 0, &s.step_first, why) ||
          !Int(o, "step_last", 0, &s.step_last, why))
        return false;
      if (s.step_first > s.step_last) {
        *why = "\"step_first\" is after \"step_last\"";
        return false;
      }
    }
    if (o["frames"].get_string().get(frames) != simdjson::SUCCESS) {
      *why = "no string \"frames\"";
      return false;
    }
    if (frames.empty()) {
      *why = "\"frames\" is empty";
      return false;
    }
    if (frames.size() > kMaxStackFramesBytes) {
      *why = "\"frames\" over " + std::to_string(kMaxStackFramesBytes) + " bytes";
      return false;
    }
    s.frames = Text(frames);
    std::vector<std::string> split;
    for (size_t at = 0;;) {
      const size_t semi = s.frames.find(';', at);
      split.push_back(
          s.frames.substr(at, semi == std::string::npos ? std::string::npos : semi - at));
      if (semi == std::string::npos) break;
      at = semi + 1;
    }
    StackPosition pos = PositionOf(split);
    s.position = std::move(pos.key);
    s.position_label = std::move(pos.label);
    s.host = f.process.host;
    s.pid = f.process.pid;
    s.rank = f.process.rank;
    f.rows.push_back(std::move(r));
    return true;
  }

  bool End(const object& o, std::string* why) {
    if (f.end.seen) {
      *why = "a second end line (a file holds one session)";
      return false;
    }
    StackFileEnd e;
    if (!Int(o, "samples", 0, &e.samples, why) || !Int(o, "failed", 0, &e.failed, why) ||
        !Int(o, "dropped", 0, &e.dropped, why) ||
        !Int(o, "mean_sample_us", 0, &e.mean_sample_us, why) ||
        !Int(o, "mean_stopped_us", 0, &e.mean_stopped_us, why) ||
        !Int(o, "max_stopped_us", 0, &e.max_stopped_us, why) || !Bool(o, "exited", &e.exited, why))
      return false;
    e.seen = true;
    f.end = e;
    return true;
  }

  // One line: an error refuses the file (its first line only); other problems reject the line.
  // `readable`: bytes readable from `line`'s start (simdjson reads past the end, never uses it).
  Status Line(simdjson::dom::parser& parser, std::string_view line, size_t readable) {
    const uint64_t n = ++f.lines;
    if (line.empty() && !first) return Status::Ok();
    object o;
    std::string_view type;
    std::string why;
    const bool parsed =
        parser.parse(line.data(), line.size(), readable < line.size() + simdjson::SIMDJSON_PADDING)
            .get_object()
            .get(o) == simdjson::SUCCESS;
    if (first) {
      if (!parsed || o["collscope_stacks"].error() == simdjson::NO_SUCH_FIELD)
        return Status::Corruption("not a stack file (its first line is no process line)");
      first = false;
      return ReadProcess(o, &f.process);
    }
    if (!parsed)
      why = "not a JSON object";
    else if (o["type"].get_string().get(type) != simdjson::SUCCESS)
      why = "no \"type\"";
    else if (type == "stacks")
      Stacks(o, n, &why);
    else if (type == "end")
      End(o, &why);
    else if (type == "process")
      why = "a second process line (a file holds one process)";
    else
      ++f.lines_unknown;
    if (!why.empty()) f.rejected.push_back({n, why, std::string(line.substr(0, 200))});
    return Status::Ok();
  }
};

}  // namespace

Result<StackFile> ReadStackFile(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxStackFileBytes)
    return Status::Corruption(path + ": a stack file over 1 GiB is refused");
  LineReader lines(size_t{1} << 20);
  COLLSCOPE_RETURN_IF_ERROR(lines.Open(path, 0));
  Reader r;
  r.f.path = path;
  r.f.bytes = ec ? 0 : size;
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
    if (block.offset + block.size + block.overlong > kMaxStackFileBytes)
      return Status::Corruption(path + ": a stack file over 1 GiB (uncompressed) is refused");
    if (block.overlong) {
      if (r.first)
        return Status::Corruption(path + ":1: not a stack file (its first line is over 16 MiB)");
      r.f.rejected.push_back(
          {++r.f.lines, "a line of " + std::to_string(block.overlong) + " bytes (over 16 MiB)",
           ""});
      continue;
    }
    for (size_t at = 0; at < block.size;) {
      const char* line = block.data + at;
      const size_t len = static_cast<size_t>(
          static_cast<const char*>(std::memchr(line, '\n', block.size - at)) - line);
      // The block's padding follows its last line, and later lines follow the others.
      Status st = r.Line(parser, std::string_view(line, len), block.readable - at);
      at += len + 1;
      if (!st.ok())
        return st.WithPrefix(path + ":" + std::to_string(r.f.lines) + ": ");
    }
  }
  if (lines.pending() > 0) {
    // The writer writes whole lines: a last line without its newline is still being written
    // (a session still running) or was cut. A later ingest reads the file again whole.
    if (r.first) return Status::Corruption(path + ":1: no complete first line yet");
    r.f.rejected.push_back(
        {++r.f.lines, "incomplete last line (no newline: still being written, or cut)", ""});
  }
  if (r.first) return Status::Corruption(path + ": empty");
  return std::move(r.f);
}

}  // namespace collscope::readers

// ------------------------------------------------------------------------------------------------
// Store

namespace collscope::readers {
namespace {

std::string Opt(int64_t v, bool given) { return given ? std::to_string(v) : std::string("NULL"); }
std::string SqlBool(bool v) { return v ? "true" : "false"; }

std::string FileRow(const std::string& rid, int64_t id, const std::string& path,
                    const StackFile& f) {
  const StackFileProcess& p = f.process;
  const StackFileEnd& e = f.end;
  return "(" + rid + ", " + std::to_string(id) + ", " + SqlString(path) + ", " +
         std::to_string(f.bytes) + ", " + SqlString(p.host) + ", " + std::to_string(p.pid) + ", " +
         Opt(p.rank, p.rank >= 0) + ", " + SqlString(p.exe) + ", " + SqlString(p.command) + ", " +
         (p.python_read ? SqlString(p.python_version) : "NULL") + ", " +
         (p.python_unread.empty() ? "NULL" : SqlString(p.python_unread)) + ", " +
         std::to_string(p.interval_us) + ", " + SqlBool(p.native) + ", " + std::to_string(f.lines) +
         ", " + std::to_string(f.rejected.size()) + ", " + std::to_string(f.lines_unknown) + ", " +
         std::to_string(f.rows.size()) + ", " + Opt(e.samples, e.seen) + ", " +
         Opt(e.failed, e.seen) + ", " + Opt(e.dropped, e.seen) + ", " +
         Opt(e.mean_sample_us, e.seen) + ", " + Opt(e.mean_stopped_us, e.seen) + ", " +
         Opt(e.max_stopped_us, e.seen) + ", " + (e.seen ? SqlBool(e.exited) : "NULL") + ", " +
         SqlBool(e.seen) + ")";
}

Status AppendRows(Store& store, int32_t run_id, int32_t file_id, const StackFile& f) {
  ChunkAppender rows;
  COLLSCOPE_RETURN_IF_ERROR(rows.Open(store.connection(), "stack_samples"));
  size_t rn = 0;
  for (const StackRow& r : f.rows) {
    const FoldedStack& s = r.stack;
    rows.Column<int32_t>(0)[rn] = run_id;
    rows.Column<int32_t>(1)[rn] = file_id;
    rows.Column<uint64_t>(2)[rn] = r.line;
    rows.SetString(3, rn, s.host);
    rows.Column<int64_t>(4)[rn] = s.pid;
    if (s.rank < 0)
      rows.SetNull(5, rn);
    else
      rows.Column<int32_t>(5)[rn] = static_cast<int32_t>(s.rank);
    rows.Column<int64_t>(6)[rn] = s.tid;
    rows.SetString(7, rn, s.thread);
    rows.Column<int64_t>(8)[rn] = s.window_start_us;
    rows.Column<int64_t>(9)[rn] = s.window_end_us;
    rows.Column<int64_t>(10)[rn] = s.first_us;
    rows.Column<int64_t>(11)[rn] = s.last_us;
    rows.Column<int64_t>(12)[rn] = s.count;
    rows.SetString(13, rn, s.frames);
    rows.SetString(14, rn, s.position);
    rows.SetString(15, rn, s.position_label);
    for (size_t c : {size_t{16}, size_t{17}}) {
      const int64_t step = c == 16 ? s.step_first : s.step_last;
      if (step < 0)
        rows.SetNull(c, rn);
      else
        rows.Column<int64_t>(c)[rn] = step;
    }
    if (++rn == rows.capacity()) {
      COLLSCOPE_RETURN_IF_ERROR(rows.Append(rn));
      rn = 0;
    }
  }
  if (rn) COLLSCOPE_RETURN_IF_ERROR(rows.Append(rn));
  COLLSCOPE_RETURN_IF_ERROR(rows.Flush());
  rows.Close();
  return Status::Ok();
}

// One file in one transaction, replacing what was stored from its path.
Status StoreFile(Store& store, int32_t run_id, const StackFile& f) {
  const std::string rid = std::to_string(run_id);
  const std::string path = StorablePath(f.path);
  auto known = store.Query("SELECT file_id FROM stack_files WHERE run_id = " + rid +
                           " AND path = " + SqlString(path));
  if (!known.ok()) return known.status();
  auto next = store.QueryInt(
      "SELECT CAST(coalesce(max(file_id) + 1, 0) AS BIGINT) FROM stack_files WHERE run_id = " +
      rid);
  if (!next.ok()) return next.status();
  const int64_t id = known->rows.empty() ? *next : std::stoll(*known->rows[0][0]);
  const std::string where =
      " WHERE run_id = " + rid + " AND file_id = " + std::to_string(id) + ";\n";
  std::string sql = "BEGIN TRANSACTION;\n";
  sql += "DELETE FROM stack_files" + where + "DELETE FROM stack_samples" + where;
  sql += "DELETE FROM ingest_log WHERE run_id = " + rid + " AND path = " + SqlString(path) + ";\n";
  sql += "INSERT INTO stack_files VALUES " + FileRow(rid, id, path, f) + ";\n";
  std::string log;
  AppendIngestLogValues(rid, path, f.rejected, &log);
  if (!log.empty()) sql += "INSERT INTO ingest_log VALUES " + log + ";\n";
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(sql));
  Status st = AppendRows(store, run_id, static_cast<int32_t>(id), f);
  if (st.ok()) st = store.Exec("COMMIT");
  if (!st.ok()) store.Exec("ROLLBACK").IgnoreError();
  return st;
}

}  // namespace

bool HasStackTables(Store& store) {
  auto n = store.QueryInt(
      "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND "
      "table_name IN ('stack_files', 'stack_samples')");
  return n.ok() && *n == 2;
}

Result<StackIngestReport> IngestStackFiles(Store& store, const std::vector<std::string>& paths,
                                           const std::string& run) {
  StackIngestReport rep;
  auto found = FindInputFiles(paths, [](const std::string& p, bool) { return IsStackFile(p); });
  if (!found.ok()) return found.status();
  rep.files_seen = found->files.size();
  if (found->files.empty()) return rep;
  auto run_id = store.RunId(run, true);
  if (!run_id.ok()) return run_id.status();
  // One file at a time: a file's rows are held in memory only while it is stored.
  for (const std::string& path : found->files) {
    auto f = ReadStackFile(path);
    if (!f.ok()) {
      rep.failed.push_back(f.status().message());
      continue;
    }
    COLLSCOPE_RETURN_IF_ERROR(StoreFile(store, *run_id, *f));
    ++rep.files_read;
    rep.stacks += f->rows.size();
    rep.lines_rejected += f->rejected.size();
    rep.lines_unknown += f->lines_unknown;
    if (!f->end.seen) ++rep.files_incomplete;
    for (const StackFile::Rejection& r : f->rejected)
      if (rep.first_rejections.size() < 10)
        rep.first_rejections.push_back(path + ":" + std::to_string(r.line) + ": " + r.reason);
  }
  return rep;
}

Result<std::vector<FoldedStack>> ReadStoredStacks(Store& store, const std::string& run) {
  std::vector<FoldedStack> out;
  if (!HasStackTables(store)) return out;
  std::string sql =
      "SELECT s.host, s.pid, coalesce(s.rank, -1), s.tid, s.thread, s.window_start_us, "
      "s.window_end_us, s.first_us, "
      "s.last_us, s.count, s.frames, s.position, s.position_label, coalesce(s.step_first, -1), "
      "coalesce(s.step_last, -1) FROM stack_samples s";
  if (!run.empty()) sql += " JOIN runs r USING (run_id) WHERE r.name = " + SqlString(run);
  sql += " ORDER BY s.run_id, s.file_id, s.line";
  auto q = store.Query(sql);
  if (!q.ok()) return q.status();
  out.reserve(q->rows.size());
  for (const auto& row : q->rows) {
    auto text = [&](size_t i) { return row[i].value_or(""); };
    auto num = [&](size_t i) { return row[i] ? std::stoll(*row[i]) : int64_t{0}; };
    FoldedStack s;
    s.host = text(0);
    s.pid = num(1);
    s.rank = num(2);
    s.tid = num(3);
    s.thread = text(4);
    s.window_start_us = num(5);
    s.window_end_us = num(6);
    s.first_us = num(7);
    s.last_us = num(8);
    s.count = num(9);
    s.frames = text(10);
    s.position = text(11);
    s.position_label = text(12);
    s.step_first = num(13);
    s.step_last = num(14);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace collscope::readers
