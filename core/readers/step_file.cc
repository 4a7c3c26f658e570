#include "core/readers/step_file.h"

#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "core/readers/iteration_log.h"
#include "core/readers/rows.h"

namespace collscope::readers {
namespace {

constexpr double kMaxTimeUs = 9007199254740992.0;  // 2^53
constexpr double kMaxDurUs = 1099511627776.0;      // 2^40

using simdjson::dom::element;
using simdjson::dom::object;

bool Int(const object& o, const char* key, int64_t* out) {
  int64_t v;
  if (o[key].get_int64().get(v) != simdjson::SUCCESS) return false;
  *out = v;
  return true;
}

bool Num(const object& o, const char* key, double* out) {
  element e;
  if (o[key].get(e) != simdjson::SUCCESS) return false;
  double d;
  if (e.get_double().get(d) == simdjson::SUCCESS) { *out = d; return true; }
  int64_t i;
  if (e.get_int64().get(i) == simdjson::SUCCESS) { *out = static_cast<double>(i); return true; }
  uint64_t u;
  if (e.get_uint64().get(u) == simdjson::SUCCESS) { *out = static_cast<double>(u); return true; }
  return false;
}

// A rank field: -1 (the file's process) up to 2^24.
bool Rank(const object& o, const char* key, int32_t* out, std::string* why) {
  int64_t v;
  if (!Int(o, key, &v)) { *why = std::string("no integer \"") + key + "\""; return false; }
  if (v < -1 || v >= (int64_t{1} << 24)) { *why = std::string("\"") + key + "\" out of range"; return false; }
  *out = static_cast<int32_t>(v);
  return true;
}

bool Time(const object& o, const char* key, double limit, double* out, std::string* why) {
  if (!Num(o, key, out)) { *why = std::string("no number \"") + key + "\""; return false; }
  if (!(*out >= 0 && *out < limit)) { *why = std::string("\"") + key + "\" out of range"; return false; }
  return true;
}

struct Reader {
  StepFile f;
  int32_t proc_rank = -1;  // rank of the last process line
  std::map<std::tuple<int32_t, int64_t, std::string>, size_t> phase_at;

  bool Process(const object& o, std::string* why) {
    StepFileProcess p;
    std::string_view host;
    if (o["hostname"].get_string().get(host) != simdjson::SUCCESS) { *why = "no string \"hostname\""; return false; }
    p.hostname = std::string(host);
    if (!Int(o, "pid", &p.pid) || p.pid < 0 || p.pid > 0x7fffffff) { *why = "no pid"; return false; }
    if (!Rank(o, "rank", &p.rank, why) || !Rank(o, "world_size", &p.world_size, why)) return false;
    int64_t lr;
    if (Int(o, "local_rank", &lr) && lr >= 0 && lr < (1 << 24)) p.local_rank = static_cast<int32_t>(lr);
    object par;
    if (o["parallel"].get_object().get(par) == simdjson::SUCCESS) {
      static const char* const kDims[] = {"dp", "tp", "pp", "ep", "cp"};
      for (int d = 0; d < 5; ++d) {
        simdjson::dom::array a;
        if (par[kDims[d]].get_array().get(a) != simdjson::SUCCESS) continue;
        int64_t v[2] = {-1, -1};
        size_t k = 0;
        for (element x : a) {
          if (k < 2 && x.get_int64().get(v[k]) != simdjson::SUCCESS) v[k] = -1;
          ++k;
        }
        if (k != 2 || v[0] < -1 || v[1] < -1 || v[0] >= (1 << 24) || v[1] > (1 << 24)) {
          *why = std::string("\"parallel.") + kDims[d] + "\" is not [rank, size]";
          return false;
        }
        p.parallel[2 * d] = static_cast<int32_t>(v[0]);
        p.parallel[2 * d + 1] = static_cast<int32_t>(v[1]);
      }
    }
    proc_rank = p.rank;
    f.procs.push_back(std::move(p));
    return true;
  }

  bool LineRank(const object& o, int32_t* rank, std::string* why) {
    if (!Rank(o, "rank", rank, why)) return false;
    if (*rank < 0) *rank = proc_rank;
    if (*rank < 0) { *why = "rank unknown (neither the line nor its process line names it)"; return false; }
    return true;
  }

  StepFilePhase& PhaseRow(int32_t rank, int64_t step, const std::string& name) {
    auto [it, fresh] = phase_at.try_emplace({rank, step, name}, f.phases.size());
    if (fresh) {
      StepFilePhase p;
      p.rank = rank;
      p.step = step;
      p.phase = name;
      f.phases.push_back(p);
    }
    return f.phases[it->second];
  }

  bool Step(const object& o, std::string* why) {
    StepFileStep s;
    if (!LineRank(o, &s.rank, why)) return false;
    if (!Int(o, "step", &s.step) || s.step < 0 || s.step >= (int64_t{1} << 53)) { *why = "no step number"; return false; }
    if (!Time(o, "start_us", kMaxTimeUs, &s.start_us, why) || !Time(o, "wall_us", kMaxDurUs, &s.wall_us, why)) return false;
    simdjson::dom::array phases;
    if (o["phases"].get_array().get(phases) != simdjson::SUCCESS) { *why = "no \"phases\" array"; return false; }
    // Checked in full before anything is kept: a line is stored whole or not at all.
    std::vector<StepFilePhase> rows;
    for (element pe : phases) {
      object po;
      std::string_view name;
      if (pe.get_object().get(po) != simdjson::SUCCESS || po["name"].get_string().get(name) != simdjson::SUCCESS ||
          name.empty()) {
        *why = "a phase without a name";
        return false;
      }
      StepFilePhase p;
      p.phase = std::string(name);
      if (!Time(po, "start_us", kMaxTimeUs, &p.start_us, why) || !Time(po, "wall_us", kMaxDurUs, &p.wall_us, why)) return false;
      int64_t c = 1;
      if (po["count"].error() != simdjson::NO_SUCH_FIELD && (!Int(po, "count", &c) || c < 0 || c > (1 << 30))) {
        *why = "phase \"count\" out of range";
        return false;
      }
      p.count = static_cast<int32_t>(c);
      rows.push_back(std::move(p));
    }
    for (StepFilePhase& p : rows) {
      StepFilePhase& row = PhaseRow(s.rank, s.step, p.phase);
      row.start_us = row.wall_us < 0 ? p.start_us : std::min(row.start_us, p.start_us);
      row.wall_us = std::max(row.wall_us, 0.0) + p.wall_us;
      row.count += p.count;
    }
    f.steps.push_back(s);
    return true;
  }

  bool Gpu(const object& o, std::string* why) {
    int32_t rank;
    int64_t step;
    std::string_view name;
    double us;
    if (!LineRank(o, &rank, why)) return false;
    if (!Int(o, "step", &step) || step < 0) { *why = "no step number"; return false; }
    if (o["phase"].get_string().get(name) != simdjson::SUCCESS || name.empty()) { *why = "no phase name"; return false; }
    if (!Time(o, "gpu_us", kMaxDurUs, &us, why)) return false;
    StepFilePhase& row = PhaseRow(rank, step, std::string(name));
    row.gpu_us = std::max(row.gpu_us, 0.0) + us;
    return true;
  }
};

}  // namespace

Result<InputFiles> FindStepFiles(const std::vector<std::string>& paths) {
  return FindInputFiles(paths, [](const std::string& p, bool) { return IsStepSeriesFile(p) || IsIterationLog(p); });
}

Result<StepFile> ReadStepFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  Reader r;
  r.f.path = path;
  simdjson::dom::parser parser;
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    r.f.bytes += line.size() + 1;
    const uint64_t n = ++r.f.lines;
    if (line.empty()) continue;
    std::string why;
    object o;
    std::string_view type;
    if (in.eof() && !first) {
      // The writer writes whole lines: a last line without its newline is still being written
      // (a live job) or was cut (a crash). A later ingest reads the file again whole.
      why = "incomplete last line (no newline: still being written, or cut)";
    } else if (parser.parse(line).get_object().get(o) != simdjson::SUCCESS) {
      why = "not a JSON object";
    } else if (o["type"].get_string().get(type) != simdjson::SUCCESS) {
      why = "no \"type\"";
    } else if (first) {
      int64_t v = 0;
      if (type != "process" || !Int(o, "collscope_steps_version", &v))
        return Status::Corruption(path + ":" + std::to_string(n) + ": not a step/phase series file (its first line is no process line)");
      if (v != 1)
        return Status::Corruption(path + ":" + std::to_string(n) + ": step/phase series format version " + std::to_string(v) +
                             "; this collscope reads version 1");
      if (!r.Process(o, &why)) return Status::Corruption(path + ":" + std::to_string(n) + ": " + why);
      first = false;
      continue;
    } else if (type == "process") {
      r.Process(o, &why);
    } else if (type == "step") {
      r.Step(o, &why);
    } else if (type == "gpu") {
      r.Gpu(o, &why);
    } else if (type == "dropped") {
      int64_t e;
      if (Int(o, "events", &e) && e >= 0) r.f.dropped_events = static_cast<uint64_t>(e);
      else why = "no \"events\" count";
    } else {
      why = "unknown line type \"" + std::string(type) + "\"";
    }
    if (first && why.empty()) why = "not a step/phase series file";
    if (first) return Status::Corruption(path + ":" + std::to_string(n) + ": " + why);
    if (!why.empty()) r.f.rejected.push_back({n, why, line.substr(0, 200)});
  }
  if (first) return Status::Corruption(path + ": empty");
  return std::move(r.f);
}

}  // namespace collscope::readers

// ------------------------------------------------------------------------------------------------
// Store

namespace collscope::readers {
namespace {

std::string Opt(int32_t v) { return v < 0 ? "NULL" : std::to_string(v); }

// Every file in one transaction: DuckDB's cost is per statement and commit, not per row.
Status StoreFiles(Store& store, int32_t run_id, const std::vector<StepFile>& files) {
  const std::string rid = std::to_string(run_id);
  std::map<std::string, int64_t> known;
  auto r = store.Query("SELECT path, file_id FROM step_files WHERE run_id = " + rid);
  if (!r.ok()) return r.status();
  for (const auto& row : r->rows)
    if (row[0] && row[1]) known[*row[0]] = std::stoll(*row[1]);
  auto next = store.QueryInt("SELECT CAST(coalesce(max(file_id) + 1, 0) AS BIGINT) FROM step_files WHERE run_id = " + rid);
  if (!next.ok()) return next.status();
  int64_t next_id = *next;
  std::vector<int64_t> ids;
  std::string replaced, replaced_paths;
  std::string rows_files, rows_ranks, rows_log;
  for (const StepFile& f : files) {
    const std::string path = StorablePath(f.path);
    auto it = known.find(path);
    const int64_t id = it != known.end() ? it->second : next_id++;
    if (it != known.end()) {
      replaced += (replaced.empty() ? "" : ", ") + std::to_string(id);
      replaced_paths += (replaced_paths.empty() ? "" : ", ") + SqlString(path);
    }
    ids.push_back(id);
    const std::string fid = std::to_string(id);
    rows_files += std::string(rows_files.empty() ? "" : ", ") + "(" + rid + ", " + fid + ", " + SqlString(path) + ", " +
                  std::to_string(f.bytes) + ", " + std::to_string(f.lines) + ", " + std::to_string(f.rejected.size()) +
                  ", " + std::to_string(f.dropped_events) + ")";
    for (const StepFileProcess& p : f.procs) {
      rows_ranks += std::string(rows_ranks.empty() ? "" : ", ") + "(" + rid + ", " + fid + ", " + std::to_string(p.rank) +
                    ", " + (p.hostname.empty() ? "NULL" : SqlString(p.hostname)) + ", " + (p.pid < 0 ? "NULL" : std::to_string(p.pid)) + ", " + std::to_string(p.world_size) +
                    ", " + Opt(p.local_rank);
      for (int32_t v : p.parallel) rows_ranks += ", " + Opt(v);
      rows_ranks += ")";
    }
    AppendIngestLogValues(rid, path, f.rejected, &rows_log);
  }
  std::string sql = "BEGIN TRANSACTION;\n";
  if (!replaced.empty()) {
    for (const char* t : {"step_files", "step_ranks", "steps", "step_phases"})
      sql += std::string("DELETE FROM ") + t + " WHERE run_id = " + rid + " AND file_id IN (" + replaced + ");\n";
    sql += "DELETE FROM ingest_log WHERE run_id = " + rid + " AND path IN (" + replaced_paths + ");\n";
  }
  if (!rows_files.empty()) sql += "INSERT INTO step_files VALUES " + rows_files + ";\n";
  if (!rows_ranks.empty()) sql += "INSERT INTO step_ranks VALUES " + rows_ranks + ";\n";
  if (!rows_log.empty()) sql += "INSERT INTO ingest_log VALUES " + rows_log + ";\n";
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(sql));
  auto fail = [&](Status st) {
    store.Exec("ROLLBACK").IgnoreError();
    return st;
  };
  ChunkAppender sa, pa;
  if (Status st = sa.Open(store.connection(), "steps"); !st.ok()) return fail(st);
  if (Status st = pa.Open(store.connection(), "step_phases"); !st.ok()) return fail(st);
  size_t sn = 0, pn = 0;
  for (size_t k = 0; k < files.size(); ++k) {
    const int32_t id = static_cast<int32_t>(ids[k]);
    for (const StepFileStep& s : files[k].steps) {
      sa.Column<int32_t>(0)[sn] = run_id;
      sa.SetNull(1, sn);
      sa.Column<int32_t>(2)[sn] = s.rank;
      sa.Column<int64_t>(3)[sn] = s.step;
      if (s.start_us < 0) sa.SetNull(4, sn);
      else sa.Column<double>(4)[sn] = s.start_us;
      sa.Column<double>(5)[sn] = s.wall_us;
      sa.SetString(6, sn, files[k].source);
      for (size_t c = 7; c <= 10; ++c) sa.SetNull(c, sn);
      sa.Column<int32_t>(11)[sn] = id;
      if (++sn == sa.capacity()) {
        if (Status st = sa.Append(sn); !st.ok()) return fail(st);
        sn = 0;
      }
    }
    for (const StepFilePhase& p : files[k].phases) {
      pa.Column<int32_t>(0)[pn] = run_id;
      pa.Column<int32_t>(1)[pn] = id;
      pa.Column<int32_t>(2)[pn] = p.rank;
      pa.Column<int64_t>(3)[pn] = p.step;
      pa.SetString(4, pn, p.phase);
      if (p.wall_us >= 0) {
        pa.Column<double>(5)[pn] = p.start_us;
        pa.Column<double>(6)[pn] = p.wall_us;
      } else {
        pa.SetNull(5, pn);
        pa.SetNull(6, pn);
      }
      pa.Column<int32_t>(7)[pn] = p.count;
      if (p.gpu_us >= 0) pa.Column<double>(8)[pn] = p.gpu_us; else pa.SetNull(8, pn);
      if (++pn == pa.capacity()) {
        if (Status st = pa.Append(pn); !st.ok()) return fail(st);
        pn = 0;
      }
    }
  }
  if (sn) if (Status st = sa.Append(sn); !st.ok()) return fail(st);
  if (pn) if (Status st = pa.Append(pn); !st.ok()) return fail(st);
  sa.Close();
  pa.Close();
  return store.Exec("COMMIT");
}

}  // namespace

Result<StepIngestReport> IngestStepFiles(Store& store, const std::vector<std::string>& paths, const std::string& run) {
  StepIngestReport rep;
  auto found = FindStepFiles(paths);
  if (!found.ok()) return found.status();
  rep.files_seen = found->files.size();
  if (found->files.empty()) return rep;
  auto run_id = store.RunId(run, true);
  if (!run_id.ok()) return run_id.status();
  std::vector<StepFile> files;
  for (const std::string& path : found->files) {
    auto f = IsStepSeriesFile(path) ? ReadStepFile(path) : ReadIterationLog(path);
    if (!f.ok()) {
      rep.failed.push_back(f.status().message());
      continue;
    }
    ++rep.files_read;
    rep.steps += f->steps.size();
    rep.phases += f->phases.size();
    rep.lines_rejected += f->rejected.size();
    rep.dropped_events += f->dropped_events;
    for (const StepFile::Rejection& r : f->rejected)
      if (rep.first_rejections.size() < 10)
        rep.first_rejections.push_back(path + ":" + std::to_string(r.line) + ": " + r.reason);
    files.push_back(std::move(*f));
  }
  if (!files.empty()) COLLSCOPE_RETURN_IF_ERROR(StoreFiles(store, *run_id, files));
  return rep;
}

Result<StepSeries> LoadStepSeries(Store& store, const std::string& run, std::map<int, std::string>* host_of) {
  StepSeries s;
  s.source = "annotation";
  auto run_id = store.RunId(run, false);
  if (!run_id.ok()) return run_id.status();
  const std::string rid = std::to_string(*run_id);
  auto h = store.Query("SELECT rank, hostname, pp_rank, pp_size FROM step_ranks WHERE run_id = " + rid + " AND rank >= 0");
  if (!h.ok()) return h.status();
  for (const auto& row : h->rows) {
    const int rank = std::stoi(*row[0]);
    if (host_of && row[1]) (*host_of)[rank] = *row[1];
    if (row[2] && row[3] && std::stoi(*row[3]) > 1) s.declared_stage[rank] = std::stoi(*row[2]);
  }
  // A step seen in two files (a process that wrote twice) keeps its longest record.
  auto st = store.Query("SELECT rank, step, min(start_us), max(dur_us) FROM steps WHERE run_id = " + rid +
                        " AND source <> 'kineto' GROUP BY rank, step ORDER BY rank, step");
  if (!st.ok()) return st.status();
  std::map<std::pair<int, int64_t>, size_t> at;
  for (const auto& row : st->rows) {
    StepRow r;
    r.rank = std::stoi(*row[0]);
    r.step = std::stoll(*row[1]);
    r.start_us = row[2] ? static_cast<int64_t>(std::llround(std::stod(*row[2]))) : 0;  // 0: unknown
    r.dur_us = std::stod(*row[3]);
    at[{r.rank, r.step}] = s.rows.size();
    s.rows.push_back(std::move(r));
  }
  auto ph = store.Query("SELECT rank, step, phase, sum(wall_us), sum(gpu_us) FROM step_phases WHERE run_id = " + rid +
                        " GROUP BY rank, step, phase");
  if (!ph.ok()) return ph.status();
  for (const auto& row : ph->rows) {
    auto it = at.find({std::stoi(*row[0]), std::stoll(*row[1])});
    if (it == at.end()) continue;  // GPU time of a step whose step line was never written
    StepRow& r = s.rows[it->second];
    if (row[3]) r.phases[*row[2]] = std::stod(*row[3]);
    if (row[4]) r.gpu_phases[*row[2]] = std::stod(*row[4]);
  }
  return s;
}

}  // namespace collscope::readers
