#include "core/readers/hang_evidence.h"

#include <filesystem>
#include <map>
#include <optional>

#include "core/input_files.h"
#include "core/readers/rows.h"

namespace collscope::readers {
namespace {

uint64_t FileBytes(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

// The file ids of `table` by stored path, for replacing a file read again.
Result<std::map<std::string, int32_t>> KnownFiles(Store& store, const char* table, int32_t run_id,
                                                  int32_t* next_id) {
  auto r = store.Query(std::string("SELECT path, file_id FROM ") + table + " WHERE run_id = " + std::to_string(run_id));
  if (!r.ok()) return r.status();
  std::map<std::string, int32_t> known;
  *next_id = 0;
  for (const auto& row : r->rows) {
    const int32_t id = std::stoi(*row[1]);
    known[*row[0]] = id;
    *next_id = std::max(*next_id, id + 1);
  }
  return known;
}

// The id `path` gets, and the statements that delete what it stored before.
int32_t FileId(const std::map<std::string, int32_t>& known, const std::string& path, int32_t* next_id,
               int32_t run_id, std::initializer_list<const char*> tables, std::string* deletes) {
  auto it = known.find(path);
  if (it == known.end()) return (*next_id)++;
  for (const char* t : tables)
    *deletes += std::string("DELETE FROM ") + t + " WHERE run_id = " + std::to_string(run_id) +
                " AND file_id = " + std::to_string(it->second) + ";\n";
  return it->second;
}

Status StoreDumps(Store& store, int32_t run_id, const std::vector<FrDump>& dumps) {
  int32_t next = 0;
  auto known = KnownFiles(store, "fr_dumps", run_id, &next);
  if (!known.ok()) return known.status();
  std::string sql, pgs;
  std::vector<int32_t> ids;
  const std::string rid = std::to_string(run_id);
  for (const FrDump& d : dumps) {
    const std::string path = StorablePath(d.path);
    const int32_t id = FileId(*known, path, &next, run_id,
                              {"fr_dumps", "fr_process_groups", "fr_pg_status", "fr_entries"}, &sql);
    ids.push_back(id);
    for (const auto& [name, pg] : d.pgs) {
      std::string ranks;
      for (int r : pg.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      pgs += std::string(pgs.empty() ? "" : ", ") + "(" + rid + ", " + std::to_string(id) + ", " +
             SqlString(StorablePath(name)) + ", " + SqlString(StorablePath(pg.desc)) + ", [" + ranks + "])";
    }
  }
  if (!pgs.empty()) sql += "INSERT INTO fr_process_groups VALUES " + pgs + ";\n";
  if (!sql.empty()) COLLSCOPE_RETURN_IF_ERROR(store.Exec(sql));
  Rows files, status, entries;
  COLLSCOPE_RETURN_IF_ERROR(files.Open(store, "fr_dumps"));
  COLLSCOPE_RETURN_IF_ERROR(status.Open(store, "fr_pg_status"));
  COLLSCOPE_RETURN_IF_ERROR(entries.Open(store, "fr_entries"));
  for (size_t k = 0; k < dumps.size(); ++k) {
    const FrDump& d = dumps[k];
    files.I32(run_id).I32(ids[k]).Str(d.path).U64(FileBytes(d.path)).I32(d.rank).Str(d.version).Str(d.nccl_version);
    COLLSCOPE_RETURN_IF_ERROR(files.EndRow());
    for (const auto& [pg_id, s] : d.status) {
      status.I32(run_id).I32(ids[k]).I64(pg_id).I64(s.last_enqueued).I64(s.last_started).I64(s.last_completed);
      COLLSCOPE_RETURN_IF_ERROR(status.EndRow());
    }
    for (const FrEntry& e : d.entries) {
      entries.I32(run_id).I32(ids[k]).I64(e.record_id).I64(e.pg_id).Str(e.pg_name).Str(e.pg_desc)
          .I64(e.collective_seq_id).I64(e.p2p_seq_id).I64(e.op_id).Str(e.profiling_name).Bool(e.is_p2p)
          .Str(e.state).Bool(e.retired).I64(e.time_created_ns).I64(e.timeout_ms).Str(e.input_sizes)
          .Str(e.output_sizes).Str(e.input_dtypes).Str(e.output_dtypes);
      COLLSCOPE_RETURN_IF_ERROR(entries.EndRow());
    }
  }
  COLLSCOPE_RETURN_IF_ERROR(files.Close());
  COLLSCOPE_RETURN_IF_ERROR(status.Close());
  return entries.Close();
}

Status StoreStates(Store& store, int32_t run_id, const std::vector<InflightState>& states) {
  int32_t next = 0;
  auto known = KnownFiles(store, "inflight_files", run_id, &next);
  if (!known.ok()) return known.status();
  std::string sql;
  std::vector<int32_t> ids;
  for (const InflightState& s : states)
    ids.push_back(FileId(*known, StorablePath(s.path), &next, run_id,
                         {"inflight_files", "inflight_comms", "inflight_ops"}, &sql));
  if (!sql.empty()) COLLSCOPE_RETURN_IF_ERROR(store.Exec(sql));
  Rows files, comms, ops;
  COLLSCOPE_RETURN_IF_ERROR(files.Open(store, "inflight_files"));
  COLLSCOPE_RETURN_IF_ERROR(comms.Open(store, "inflight_comms"));
  COLLSCOPE_RETURN_IF_ERROR(ops.Open(store, "inflight_ops"));
  for (size_t k = 0; k < states.size(); ++k) {
    const InflightState& s = states[k];
    files.I32(run_id).I32(ids[k]).Str(s.path).U64(FileBytes(s.path)).Str(s.hostname).I64(s.pid)
        .I32(s.global_rank).Str(s.status).I64(s.heartbeat_ts_us);
    COLLSCOPE_RETURN_IF_ERROR(files.EndRow());
    for (size_t c = 0; c < s.comms.size(); ++c) {
      const InflightComm& cm = s.comms[c];
      comms.I32(run_id).I32(ids[k]).I32(static_cast<int32_t>(c)).Str(cm.id).Str(cm.name).I32(cm.rank)
          .I32(cm.n_ranks).U64(cm.ops_started).U64(cm.ops_completed).Bool(cm.finalized);
      COLLSCOPE_RETURN_IF_ERROR(comms.EndRow());
      for (const InflightOp& o : cm.ops) {
        ops.I32(run_id).I32(ids[k]).I32(static_cast<int32_t>(c)).Str(o.coll ? "coll" : "p2p").Str(o.op).I64(o.sn)
            .I32(o.peer).I64(o.bytes).I32(o.n_channels).I32(o.channels_started).I32(o.channels_stopped)
            .I64(o.start_ts_us).I64(o.enqueue_ts_us);
        COLLSCOPE_RETURN_IF_ERROR(ops.EndRow());
      }
    }
  }
  COLLSCOPE_RETURN_IF_ERROR(files.Close());
  COLLSCOPE_RETURN_IF_ERROR(comms.Close());
  return ops.Close();
}

Status StoreRas(Store& store, int32_t run_id, const std::vector<RasReport>& reports) {
  int32_t next = 0;
  auto known = KnownFiles(store, "ras_reports", run_id, &next);
  if (!known.ok()) return known.status();
  std::string sql;
  std::vector<int32_t> ids;
  for (const RasReport& r : reports)
    ids.push_back(FileId(*known, StorablePath(r.path), &next, run_id, {"ras_reports", "ras_comms", "ras_ranks"}, &sql));
  if (!sql.empty()) COLLSCOPE_RETURN_IF_ERROR(store.Exec(sql));
  Rows files, comms, ranks;
  COLLSCOPE_RETURN_IF_ERROR(files.Open(store, "ras_reports"));
  COLLSCOPE_RETURN_IF_ERROR(comms.Open(store, "ras_comms"));
  COLLSCOPE_RETURN_IF_ERROR(ranks.Open(store, "ras_ranks"));
  // One row per (entry, function with a count), or one row with no count.
  auto rank_rows = [&](int32_t id, int32_t comm, int32_t entry, const RasRank& k, const std::string& events) -> Status {
    const size_t n = std::max<size_t>(1, k.launched.size());
    for (size_t i = 0; i < n; ++i) {
      ranks.I32(run_id).I32(id).I32(comm).I32(entry).I32(k.rank).I32(k.n_ranks).Str(k.host).I64(k.pid)
          .I32(k.cuda_dev).I32(k.nvml_dev).Str(k.state).Str(k.detail)
          .Str(k.launched.empty() ? std::string() : k.launched[i].first)
          .I64(k.launched.empty() ? -1 : k.launched[i].second).Str(events);
      COLLSCOPE_RETURN_IF_ERROR(ranks.EndRow());
    }
    return Status::Ok();
  };
  for (size_t f = 0; f < reports.size(); ++f) {
    const RasReport& r = reports[f];
    files.I32(run_id).I32(ids[f]).Str(r.path).U64(FileBytes(r.path)).Str(r.format).Str(r.nccl_version)
        .Str(r.timestamp).I64(r.job_processes).I64(r.job_nodes).F64(r.collection_s).I64(r.timeouts).U64(r.lines)
        .U64(r.unused);
    COLLSCOPE_RETURN_IF_ERROR(files.EndRow());
    for (size_t c = 0; c < r.comms.size(); ++c) {
      const RasComm& cm = r.comms[c];
      comms.I32(run_id).I32(ids[f]).I32(static_cast<int32_t>(c)).Str(cm.hash).Str(cm.label).I32(cm.size)
          .I32(cm.ranks_reported).I32(cm.missing).Str(cm.status).Str(cm.errors);
      COLLSCOPE_RETURN_IF_ERROR(comms.EndRow());
      for (size_t e = 0; e < cm.ranks.size(); ++e)
        COLLSCOPE_RETURN_IF_ERROR(rank_rows(ids[f], static_cast<int32_t>(c), static_cast<int32_t>(e), cm.ranks[e], ""));
    }
    for (size_t e = 0; e < r.processes.size(); ++e) {
      const RasProcess& p = r.processes[e];
      RasRank k;
      k.host = p.host;
      k.pid = p.pid;
      k.state = p.state;
      k.detail = p.gpus;
      COLLSCOPE_RETURN_IF_ERROR(rank_rows(ids[f], -1, static_cast<int32_t>(e), k, p.events));
    }
  }
  COLLSCOPE_RETURN_IF_ERROR(files.Close());
  COLLSCOPE_RETURN_IF_ERROR(comms.Close());
  return ranks.Close();
}

// The run's id, or -1 when the store has no such run or (an older store opened read-only) not
// the tables.
Result<int32_t> StoredRun(Store& store, const std::string& run, const char* table) {
  auto has = store.QueryInt(std::string("SELECT count(*) FROM duckdb_tables() WHERE database_name = "
                                        "current_database() AND table_name = '") + table + "'");
  if (!has.ok()) return has.status();
  if (*has == 0) return -1;
  auto id = store.RunId(run, false);
  return id.ok() ? *id : -1;
}

int64_t Int(const std::optional<std::string>& v) { return v ? std::stoll(*v) : -1; }

// "0,1,-2" as array_to_string writes a stored INTEGER[].
std::vector<int> Ints(const std::string& s) {
  std::vector<int> out;
  for (size_t b = 0; b < s.size();) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    out.push_back(std::stoi(s.substr(b, e - b)));
    b = e + 1;
  }
  return out;
}
std::string Text(const std::optional<std::string>& v) { return v ? *v : std::string(); }

}  // namespace

bool IsHangEvidenceFile(const std::string& path) {
  return IsInflightStateName(path) || IsFlightRecorderDump(path) || IsEmptyFlightRecorderDump(path) ||
         IsRasReportFile(path);
}

Result<HangIngestReport> IngestHangEvidence(Store& store, const std::vector<std::string>& paths,
                                            const std::string& run) {
  HangIngestReport rep;
  auto found = FindInputFiles(paths, [](const std::string& p, bool) { return IsHangEvidenceFile(p); });
  if (!found.ok()) return found.status();
  rep.skipped = found->skipped;
  std::vector<FrDump> dumps;
  std::vector<InflightState> states;
  std::vector<RasReport> ras;
  for (const std::string& f : found->files) {
    if (IsRasReportFile(f)) {
      ++rep.ras_seen;
      auto r = ReadRasReport(f);
      if (!r.ok()) {
        rep.failed.push_back(r.status().message());
        continue;
      }
      rep.ras_lines_unused += r->unused;
      for (const std::string& u : r->unused_named)
        if (rep.ras_unused.size() < kMaxRasUnusedNamed) rep.ras_unused.push_back(u);
      ras.push_back(std::move(*r));
    } else if (IsInflightStateName(f)) {
      ++rep.states_seen;
      auto s = ReadInflightState(f);
      if (s.ok()) states.push_back(std::move(*s));
      else rep.failed.push_back(s.status().message());
    } else if (IsEmptyFlightRecorderDump(f)) {
      ++rep.dumps_seen;
      rep.failed.push_back(f + ": an empty Flight Recorder dump (0 bytes): its rank wrote nothing, and the hang "
                               "analysis treats it as a rank without a dump");
    } else {
      ++rep.dumps_seen;
      // A truncated or corrupt dump is named; the other ranks' dumps are still stored.
      auto d = ReadFlightRecorderDump(f);
      if (d.ok()) dumps.push_back(std::move(*d));
      else rep.failed.push_back(d.status().message());
    }
  }
  if (dumps.empty() && states.empty() && ras.empty()) return rep;
  auto run_id = store.RunId(run, true);
  if (!run_id.ok()) return run_id.status();
  COLLSCOPE_RETURN_IF_ERROR(store.Exec("BEGIN TRANSACTION"));
  Status st = StoreDumps(store, *run_id, dumps);
  if (st.ok()) st = StoreStates(store, *run_id, states);
  if (st.ok()) st = StoreRas(store, *run_id, ras);
  if (st.ok()) st = store.Exec("COMMIT");
  if (!st.ok()) {
    store.Exec("ROLLBACK").IgnoreError();
    return st;
  }
  rep.dumps_read = dumps.size();
  rep.states_read = states.size();
  rep.ras_read = ras.size();
  return rep;
}

Result<std::vector<FrDump>> LoadFlightRecorderDumps(Store& store, const std::string& run) {
  std::vector<FrDump> out;
  auto run_id = StoredRun(store, run, "fr_dumps");
  if (!run_id.ok()) return run_id.status();
  if (*run_id < 0) return out;
  const std::string where = " WHERE run_id = " + std::to_string(*run_id);
  auto files = store.Query("SELECT file_id, path, rank, version, nccl_version FROM fr_dumps" + where + " ORDER BY path");
  if (!files.ok()) return files.status();
  std::map<int64_t, size_t> at;
  for (const auto& row : files->rows) {
    at[Int(row[0])] = out.size();
    FrDump& d = out.emplace_back();
    d.path = Text(row[1]);
    d.rank = static_cast<int>(Int(row[2]));
    d.version = Text(row[3]);
    d.nccl_version = Text(row[4]);
  }
  auto pgs = store.Query("SELECT file_id, pg_name, pg_desc, array_to_string(ranks, ',') FROM fr_process_groups" + where);
  if (!pgs.ok()) return pgs.status();
  for (const auto& row : pgs->rows) {
    FrPg pg;
    pg.name = Text(row[1]);
    pg.desc = Text(row[2]);
    pg.ranks = Ints(Text(row[3]));
    out[at.at(Int(row[0]))].pgs[pg.name] = std::move(pg);
  }
  auto status = store.Query("SELECT file_id, pg_id, last_enqueued, last_started, last_completed FROM fr_pg_status" + where);
  if (!status.ok()) return status.status();
  for (const auto& row : status->rows)
    out[at.at(Int(row[0]))].status[Int(row[1])] = FrPgStatus{Int(row[2]), Int(row[3]), Int(row[4])};
  auto entries = store.Query(
      "SELECT file_id, record_id, pg_id, pg_name, pg_desc, collective_seq_id, p2p_seq_id, op_id, profiling_name, "
      "CAST(is_p2p AS INTEGER), state, CAST(retired AS INTEGER), time_created_ns, timeout_ms, input_sizes, "
      "output_sizes, input_dtypes, output_dtypes FROM fr_entries" + where + " ORDER BY file_id, record_id");
  if (!entries.ok()) return entries.status();
  for (const auto& row : entries->rows) {
    FrEntry e;
    e.record_id = Int(row[1]);
    e.pg_id = Int(row[2]);
    e.pg_name = Text(row[3]);
    e.pg_desc = Text(row[4]);
    e.collective_seq_id = Int(row[5]);
    e.p2p_seq_id = Int(row[6]);
    e.op_id = Int(row[7]);
    e.profiling_name = Text(row[8]);
    e.is_p2p = Int(row[9]) != 0;
    e.state = Text(row[10]);
    e.retired = Int(row[11]) != 0;
    e.time_created_ns = Int(row[12]);
    e.timeout_ms = Int(row[13]);
    e.input_sizes = Text(row[14]);
    e.output_sizes = Text(row[15]);
    e.input_dtypes = Text(row[16]);
    e.output_dtypes = Text(row[17]);
    out[at.at(Int(row[0]))].entries.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<InflightState>> LoadInflightStates(Store& store, const std::string& run) {
  std::vector<InflightState> out;
  auto run_id = StoredRun(store, run, "inflight_files");
  if (!run_id.ok()) return run_id.status();
  if (*run_id < 0) return out;
  const std::string where = " WHERE run_id = " + std::to_string(*run_id);
  auto files = store.Query("SELECT file_id, path, hostname, pid, global_rank, status, heartbeat_ts_us FROM "
                           "inflight_files" + where + " ORDER BY path");
  if (!files.ok()) return files.status();
  std::map<int64_t, size_t> at;
  for (const auto& row : files->rows) {
    at[Int(row[0])] = out.size();
    InflightState& s = out.emplace_back();
    s.path = Text(row[1]);
    s.hostname = Text(row[2]);
    s.pid = Int(row[3]);
    s.global_rank = static_cast<int>(Int(row[4]));
    s.status = Text(row[5]);
    s.heartbeat_ts_us = Int(row[6]);
  }
  auto comms = store.Query("SELECT file_id, comm_id, comm_name, rank, n_ranks, CAST(ops_started AS VARCHAR), "
                           "CAST(ops_completed AS VARCHAR), CAST(finalized AS INTEGER) FROM inflight_comms" + where +
                           " ORDER BY file_id, comm_index");
  if (!comms.ok()) return comms.status();
  for (const auto& row : comms->rows) {
    InflightComm c;
    c.id = Text(row[1]);
    c.name = Text(row[2]);
    c.rank = static_cast<int>(Int(row[3]));
    c.n_ranks = static_cast<int>(Int(row[4]));
    c.ops_started = std::stoull(Text(row[5]));
    c.ops_completed = std::stoull(Text(row[6]));
    c.finalized = Int(row[7]) != 0;
    out[at.at(Int(row[0]))].comms.push_back(std::move(c));
  }
  auto ops = store.Query("SELECT file_id, comm_index, kind, op, sn, peer, msg_size_bytes, n_channels, "
                         "channels_started, channels_stopped, start_ts_us, enqueue_ts_us FROM inflight_ops" + where +
                         " ORDER BY file_id, comm_index, rowid");
  if (!ops.ok()) return ops.status();
  for (const auto& row : ops->rows) {
    InflightOp o;
    o.coll = Text(row[2]) != "p2p";
    o.op = Text(row[3]);
    o.sn = Int(row[4]);
    o.peer = static_cast<int>(Int(row[5]));
    o.bytes = Int(row[6]);
    o.n_channels = static_cast<int>(Int(row[7]));
    o.channels_started = static_cast<int>(Int(row[8]));
    o.channels_stopped = static_cast<int>(Int(row[9]));
    o.start_ts_us = Int(row[10]);
    o.enqueue_ts_us = Int(row[11]);
    out[at.at(Int(row[0]))].comms[static_cast<size_t>(Int(row[1]))].ops.push_back(std::move(o));
  }
  return out;
}

}  // namespace collscope::readers

namespace collscope::readers {

Result<std::vector<RasReport>> LoadRasReports(Store& store, const std::string& run) {
  std::vector<RasReport> out;
  auto run_id = StoredRun(store, run, "ras_reports");
  if (!run_id.ok()) return run_id.status();
  if (*run_id < 0) return out;
  const std::string where = " WHERE run_id = " + std::to_string(*run_id);
  auto files = store.Query("SELECT file_id, path, format, nccl_version, timestamp, job_processes, job_nodes, "
                           "collection_s, timeouts, lines, lines_unused FROM ras_reports" + where + " ORDER BY path");
  if (!files.ok()) return files.status();
  std::map<int64_t, size_t> at;
  for (const auto& row : files->rows) {
    at[Int(row[0])] = out.size();
    RasReport& r = out.emplace_back();
    r.path = Text(row[1]);
    r.format = Text(row[2]);
    r.nccl_version = Text(row[3]);
    r.timestamp = Text(row[4]);
    r.job_processes = Int(row[5]);
    r.job_nodes = Int(row[6]);
    r.collection_s = row[7] ? std::stod(*row[7]) : -1;
    r.timeouts = Int(row[8]);
    r.lines = static_cast<uint64_t>(Int(row[9]));
    r.unused = static_cast<uint64_t>(Int(row[10]));
  }
  auto comms = store.Query("SELECT file_id, comm_index, comm_hash, label, size, ranks_reported, missing_ranks, status, "
                           "errors FROM ras_comms" + where + " ORDER BY file_id, comm_index");
  if (!comms.ok()) return comms.status();
  for (const auto& row : comms->rows) {
    RasComm c;
    c.hash = Text(row[2]);
    c.label = Text(row[3]);
    c.size = static_cast<int>(Int(row[4]));
    c.ranks_reported = static_cast<int>(Int(row[5]));
    c.missing = static_cast<int>(Int(row[6]));
    c.status = Text(row[7]);
    c.errors = Text(row[8]);
    out[at.at(Int(row[0]))].comms.push_back(std::move(c));
  }
  // (A store made before MONITOR logs were read, opened read-only, has no events column.)
  auto has_events = store.QueryInt("SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() "
                                   "AND table_name = 'ras_ranks' AND column_name = 'events'");
  if (!has_events.ok()) return has_events.status();
  auto ranks = store.Query("SELECT file_id, comm_index, entry, rank, n_ranks, host, pid, cuda_dev, nvml_dev, state, "
                           "detail, func, launched, " + std::string(*has_events ? "events" : "''") + " FROM ras_ranks" + where + " ORDER BY file_id, comm_index, entry, rowid");
  if (!ranks.ok()) return ranks.status();
  int64_t last_file = -1, last_comm = -2, last_entry = -1;
  for (const auto& row : ranks->rows) {
    RasReport& r = out[at.at(Int(row[0]))];
    const int64_t comm = Int(row[1]), entry = Int(row[2]);
    const bool same = Int(row[0]) == last_file && comm == last_comm && entry == last_entry;
    last_file = Int(row[0]);
    last_comm = comm;
    last_entry = entry;
    if (comm < 0) {
      if (same) continue;
      RasProcess& p = r.processes.emplace_back();
      p.host = Text(row[5]);
      p.pid = Int(row[6]);
      p.state = Text(row[9]);
      p.gpus = Text(row[10]);
      p.events = Text(row[13]);
      continue;
    }
    std::vector<RasRank>& list = r.comms.at(static_cast<size_t>(comm)).ranks;
    if (!same) {
      RasRank& k = list.emplace_back();
      k.rank = static_cast<int>(Int(row[3]));
      k.n_ranks = static_cast<int>(Int(row[4]));
      k.host = Text(row[5]);
      k.pid = Int(row[6]);
      k.cuda_dev = static_cast<int>(Int(row[7]));
      k.nvml_dev = static_cast<int>(Int(row[8]));
      k.state = Text(row[9]);
      k.detail = Text(row[10]);
    }
    if (!Text(row[11]).empty()) list.back().launched.emplace_back(Text(row[11]), Int(row[12]));
  }
  return out;
}

}  // namespace collscope::readers
