#include "analysis/diagnose/perfetto.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/duck.h"
#include "capture/common/json_escape.h"
#include "core/readers/kineto.h"
#include "core/readers/stacks.h"

namespace collscope::diagnose {
namespace {

constexpr int kTidFindings = 1, kTidSteps = 2, kTidCollectives = 3, kTidStreamBase = 100;
constexpr int kTidStacksBase = 10;  // lane i of a rank's main thread stacks: 10 + i
// A rank's i-th communicator's collectives per dump interval: beyond any stream id's track.
constexpr int kTidIntervalBase = 1 << 20;

std::string Num(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[48];
  if (v == std::floor(v) && std::fabs(v) < 1e17) std::snprintf(buf, sizeof(buf), "%.0f", v);
  else std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

// Builds {"k": v, ...} argument objects.
class Args {
 public:
  Args& Str(std::string_view k, std::string_view v) {
    Key(k);
    capture::AppendEscapedJsonString(v, &s_);
    return *this;
  }
  Args& Val(std::string_view k, double v) {
    Key(k);
    s_ += Num(v);
    return *this;
  }
  Args& Raw(std::string_view k, const std::string& json) {
    Key(k);
    s_ += json;
    return *this;
  }
  std::string Done() const { return "{" + s_ + "}"; }

 private:
  void Key(std::string_view k) {
    if (!s_.empty()) s_ += ", ";
    capture::AppendEscapedJsonString(k, &s_);
    s_ += ": ";
  }
  std::string s_;
};

// Every event of the trace. Complete slices go through Slice: on one track (a thread) Perfetto
// shows slices as a call stack, so two that overlap without one holding the other cannot both be
// shown (it drops one), and one inside another would read as called by it. Concurrent collectives
// of one rank, or a rank's findings that overlap in time, are not that: a slice that would overlap
// one already on its track goes to the track's next lane, a track of its own named after it
// ("findings (2)"). Tracks are named through Track, so that their lanes can be.
class Writer {
 public:
  // Writes the track's name and sort index (metadata events).
  void Track(int pid, int tid, const std::string& name, double sort_index) {
    Event("M", "thread_name", "", pid, tid, 0, 0, Args().Str("name", name).Done());
    Event("M", "thread_sort_index", "", pid, tid, 0, 0,
          Args().Val("sort_index", sort_index).Done());
    tracks_[{pid, tid}] = {name, sort_index};
  }
  // A complete slice on track (pid, tid) or its first lane free at ts; returns the lane's tid, and
  // where given, the start it was written with (*placed). A slice that starts at most kTouchUs
  // before a lane's last one ends starts where it ends instead (times rounded by their writer:
  // consecutive kernels of one stream overlap by a fraction of a microsecond in Kineto traces).
  int Slice(std::string_view name, std::string_view cat, int pid, int tid, double ts, double dur,
            const std::string& args, double* placed = nullptr) {
    constexpr double kTouchUs = 1.0;
    std::vector<double>& ends = lanes_[{pid, tid}];
    dur = std::max(0.0, dur);
    size_t lane = 0;
    for (; lane < ends.size(); ++lane) {
      if (ts >= ends[lane]) break;
      if (ends[lane] - ts <= kTouchUs && ts + dur > ends[lane]) {
        dur -= ends[lane] - ts;
        ts = ends[lane];
        break;
      }
    }
    if (lane == ends.size()) ends.push_back(ts);
    ends[lane] = std::max(ends[lane], ts + dur);
    const int lane_tid = tid + static_cast<int>(lane) * kLaneStride;
    Event("X", name, cat, pid, lane_tid, ts, dur, args);
    if (placed) *placed = ts;
    return lane_tid;
  }
  // Names the lanes opened beyond their tracks; call once, after every slice.
  void NameLanes() {
    for (const auto& [track, ends] : lanes_) {
      auto named = tracks_.find(track);
      for (size_t lane = 1; lane < ends.size(); ++lane) {
        const std::string n = " (" + std::to_string(lane + 1) + ")";
        const int tid = track.second + static_cast<int>(lane) * kLaneStride;
        if (named == tracks_.end())
          Track(track.first, tid, "lane" + n, track.second);
        else
          Track(track.first, tid, named->second.first + n, named->second.second);
      }
    }
  }
  void Event(std::string_view ph, std::string_view name, std::string_view cat, int pid, int tid,
             double ts, double dur, const std::string& args, std::string_view extra = {}) {
    s_ += n_++ ? ",\n" : "\n";
    s_ += "{\"ph\": ";
    capture::AppendEscapedJsonString(ph, &s_);
    s_ += ", \"name\": ";
    capture::AppendEscapedJsonString(name, &s_);
    if (!cat.empty()) {
      s_ += ", \"cat\": ";
      capture::AppendEscapedJsonString(cat, &s_);
    }
    s_ += ", \"pid\": " + std::to_string(pid) + ", \"tid\": " + std::to_string(tid) +
          ", \"ts\": " + Num(ts);
    if (ph == "X") s_ += ", \"dur\": " + Num(std::max(0.0, dur));
    if (!extra.empty()) {
      s_ += ", ";
      s_ += extra;
    }
    if (!args.empty()) s_ += ", \"args\": " + args;
    s_ += "}";
  }
  size_t count() const { return n_; }
  std::string& str() { return s_; }

 private:
  static constexpr int kLaneStride = 1 << 24;  // lane i of track t is t + i * kLaneStride
  std::string s_;
  size_t n_ = 0;
  std::map<std::pair<int, int>, std::vector<double>> lanes_;  // (pid, tid) -> each lane's end
  std::map<std::pair<int, int>, std::pair<std::string, double>> tracks_;  // -> name, sort index
};

struct StepSpan {
  int64_t step;
  double start, end;
};

std::string RanksIn(const std::set<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s.empty() ? "NULL" : s;
}

std::string WindowSql(const std::vector<std::pair<double, double>>& w, const std::string& start,
                      const std::string& end) {
  std::string s;
  for (const auto& [a, b] : w)
    s += (s.empty() ? "" : " OR ") + ("(" + start + " < " + Num(b) + " AND " + end + " > " + Num(a) + ")");
  return s.empty() ? "false" : "(" + s + ")";
}

bool EvidenceValue(const Finding& f, const std::string& key, double* v) {
  for (const Evidence& e : f.evidence)
    if (e.key == key && e.text.empty()) { *v = e.value; return true; }
  return false;
}

// What the trace is built from: the job's steps (Kineto's, over every rank), every rank and its
// host, and SQL giving each store process its global rank.
struct TraceInputs {
  bool kineto = false;
  std::vector<StepSpan> steps;
  std::map<int, std::string> host_of;
  std::set<int> all_ranks;
  std::string proc_rank_sql;  // WITH ... pr(process_id, hostname, g)
};

Status LoadTraceInputs(Store& store, duckdb_connection conn, const std::string& rid, TraceInputs* in) {
  in->kineto = readers::HasKinetoTables(store);
  const bool kineto = in->kineto;
  std::vector<StepSpan>& steps = in->steps;
  std::map<int, std::string>& host_of = in->host_of;
  std::set<int>& all_ranks = in->all_ranks;
  // Job-level steps (over every rank) and the hosts of the ranks.
  if (kineto) {
    auto s = Fetch(conn,
                   "SELECT CAST(step AS BIGINT), CAST(min(start_us) AS DOUBLE), "
                   "CAST(max(coalesce(greatest(start_us + dur_us, gpu_end_us), start_us + dur_us)) AS DOUBLE) "
                   "FROM steps WHERE run_id = " + rid + " AND start_us IS NOT NULL GROUP BY step ORDER BY 2",
                   "idd");
    if (!s.ok()) return s.status();
    for (size_t i = 0; i < s->rows; ++i) steps.push_back({s->i[0][i], s->d[0][i], s->d[1][i]});
    auto h = Fetch(conn,
                   "SELECT DISTINCT CAST(rank AS BIGINT), coalesce(hostname, '') FROM kineto_traces "
                   "WHERE run_id = " + rid,
                   "is");
    if (!h.ok()) return h.status();
    for (size_t i = 0; i < h->rows; ++i) {
      const int r = static_cast<int>(h->i[0][i]);
      all_ranks.insert(r);
      if (!h->s[0][i].empty()) host_of[r] = h->s[0][i];
    }
  }
  // Global ranks of the store's processes: the collscope plugin's, a Kineto trace of the same
  // host and pid, or the rank in the communicator that spans every process.
  in->proc_rank_sql =
      std::string("WITH ") +
      (kineto ? "kt AS (SELECT hostname, pid, min(rank) AS rank FROM kineto_traces WHERE run_id = " + rid +
                    " AND hostname IS NOT NULL AND pid IS NOT NULL GROUP BY ALL), "
              : "kt AS (SELECT NULL::VARCHAR AS hostname, NULL::BIGINT AS pid, NULL::INTEGER AS rank WHERE false), ") +
      "world AS (SELECT comm_id FROM communicators WHERE run_id = " + rid +
      " AND n_ranks = (SELECT count(*) FROM processes WHERE run_id = " + rid +
      ") ORDER BY comm_id LIMIT 1), "
      "wr AS (SELECT r.process_id, min(r.rank) AS g, max(r.global_rank) AS plugin FROM records r "
      "JOIN operations o USING (run_id, op_id) WHERE r.run_id = " + rid +
      " AND o.comm_id IN (SELECT comm_id FROM world) GROUP BY 1), "
      "pr AS (SELECT p.process_id, p.hostname, coalesce(wr.plugin, kt.rank, wr.g) AS g FROM processes p "
      "LEFT JOIN kt ON kt.hostname = p.hostname AND kt.pid = CAST(p.pid AS BIGINT) "
      "LEFT JOIN wr ON wr.process_id = p.process_id WHERE p.run_id = " + rid + ") ";
  {
    auto pr = Fetch(conn, in->proc_rank_sql + "SELECT CAST(g AS BIGINT), hostname FROM pr WHERE g IS NOT NULL", "is");
    if (!pr.ok()) return pr.status();
    for (size_t i = 0; i < pr->rows; ++i) {
      const int r = static_cast<int>(pr->i[0][i]);
      all_ranks.insert(r);
      if (!host_of.count(r)) host_of[r] = pr->s[0][i];
    }
  }

  return Status::Ok();
}

// The time windows to export (around each finding's steps, merged where they overlap) and the
// ranks to show (each finding's root causes and up to max_peers victims, else its hosts' ranks).
void ChooseWindowsAndRanks(const std::vector<Finding>& findings, const TraceInputs& in, const PerfettoOptions& o,
                           std::vector<std::pair<double, double>>* merged_out, std::set<int>* ranks_out) {
  const std::vector<StepSpan>& steps = in.steps;
  const std::map<int, std::string>& host_of = in.host_of;
  const std::set<int>& all_ranks = in.all_ranks;
  std::vector<std::pair<double, double>> windows;
  std::set<int> ranks;
  auto add_steps = [&](size_t first, size_t last) {  // indexes into steps, inclusive
    last = std::min(last, first + static_cast<size_t>(std::max(1, o.max_steps)) - 1);
    const size_t from = first >= static_cast<size_t>(std::max(0, o.context_steps))
                            ? first - static_cast<size_t>(std::max(0, o.context_steps))
                            : 0;
    windows.push_back({steps[from].start, steps[last].end});
  };
  for (const Finding& f : findings) {
    double fs = static_cast<double>(f.start_us), fe = static_cast<double>(f.end_us);
    if (fe < fs) fe = fs;
    if (!steps.empty()) {
      double s0, s1;
      size_t a = steps.size(), b = 0;
      const bool by_step = EvidenceValue(f, "first_step", &s0) && EvidenceValue(f, "last_step", &s1);
      for (size_t i = 0; i < steps.size(); ++i) {
        const bool in = by_step ? (steps[i].step >= s0 && steps[i].step <= s1)
                                : (steps[i].end > fs && steps[i].start <= fe);
        if (in) { a = std::min(a, i); b = std::max(b, i); }
      }
      if (a == steps.size()) {  // no overlap: the step nearest to the finding's start
        size_t best = 0;
        for (size_t i = 1; i < steps.size(); ++i)
          if (std::fabs(steps[i].start - fs) < std::fabs(steps[best].start - fs)) best = i;
        a = b = best;
      }
      add_steps(a, b);
    } else {
      windows.push_back({fs, std::min(std::max(fe, fs + 1), fs + o.max_window_us)});
    }
    std::set<int> mine(f.ranks.begin(), f.ranks.end());
    for (size_t i = 0; i < f.victims.size() && i < o.max_peers; ++i) mine.insert(f.victims[i]);
    if (mine.empty())
      for (const auto& [r, h] : host_of)
        if (std::find(f.hosts.begin(), f.hosts.end(), h) != f.hosts.end()) mine.insert(r);
    if (mine.empty())
      for (int r : all_ranks) {
        if (mine.size() >= o.max_peers) break;
        mine.insert(r);
      }
    ranks.insert(mine.begin(), mine.end());
  }
  if (findings.empty()) {
    if (!steps.empty()) add_steps(0, 0);
    for (int r : all_ranks) {
      if (ranks.size() >= o.max_peers) break;
      ranks.insert(r);
    }
  }
  // Merge overlapping windows.
  std::sort(windows.begin(), windows.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& w : windows) {
    if (!merged.empty() && w.first <= merged.back().second) merged.back().second = std::max(merged.back().second, w.second);
    else merged.push_back(w);
  }
  *merged_out = std::move(merged);
  *ranks_out = std::move(ranks);

}

// One process per rank, with its named tracks.
void WriteRankTracks(const std::set<int>& ranks, const std::map<int, std::string>& host_of, Writer& w) {
  for (int r : ranks) {
    auto h = host_of.find(r);
    const std::string pname = "rank " + std::to_string(r) + (h != host_of.end() && !h->second.empty() ? " (" + h->second + ")" : "");
    w.Event("M", "process_name", "", r, 0, 0, 0, Args().Str("name", pname).Done());
    w.Event("M", "process_sort_index", "", r, 0, 0, 0, Args().Val("sort_index", r).Done());
    w.Track(r, kTidFindings, "findings", kTidFindings);
    w.Track(r, kTidSteps, "steps", kTidSteps);
    w.Track(r, kTidCollectives, "NCCL collectives (records)", kTidCollectives);
  }
}

// The ranks' steps in the windows (Kineto's ProfilerStep ranges; for a rank without them, the
// steps of its step/phase series, which place its collectives without start times in their steps),
// and their GPU kernels.
Status WriteKinetoEvents(duckdb_connection conn, const std::string& rid, const std::string& in_ranks,
                         const std::vector<std::pair<double, double>>& merged, const PerfettoOptions& o, Writer& w,
                         PerfettoReport& rep) {
  auto s =
      Fetch(conn,
            "SELECT CAST(rank AS BIGINT), CAST(step AS BIGINT), CAST(start_us AS DOUBLE), "
            "CAST(dur_us AS DOUBLE), CAST(compute_us AS DOUBLE), CAST(nccl_us AS DOUBLE), source "
            "FROM steps WHERE run_id = " +
                rid +
                " AND (source = 'kineto' OR (source = 'annotation' AND rank NOT IN "
                "(SELECT rank FROM steps WHERE run_id = " +
                rid + " AND source = 'kineto'))) AND rank IN (" + in_ranks + ") AND " +
                WindowSql(merged, "start_us", "start_us + dur_us") + " ORDER BY 1, 3",
            "iidddds");
  if (!s.ok()) return s.status();
  for (size_t i = 0; i < s->rows; ++i) {
    const bool kineto = s->s[0][i] == "kineto";
    Args args;
    args.Val("step", static_cast<double>(s->i[1][i]));
    if (kineto)
      args.Val("compute_us", s->d[2][i]).Val("nccl_us", s->d[3][i]);
    else
      args.Str("from", "step/phase series");
    w.Slice((kineto ? "ProfilerStep#" : "step ") + std::to_string(s->i[1][i]), "step",
            static_cast<int>(s->i[0][i]), kTidSteps, s->d[0][i], s->d[1][i], args.Done());
    ++rep.steps;
  }
  auto k = Fetch(conn,
                 "SELECT CAST(rank AS BIGINT), CAST(coalesce(stream, -1) AS BIGINT), "
                 "CAST(coalesce(step, -1) AS BIGINT), CAST(coalesce(in_nelems, -1) AS BIGINT), "
                 "CAST(start_us AS DOUBLE), CAST(dur_us AS DOUBLE), name, kind, coalesce(coll, ''), "
                 "coalesce(dtype, ''), coalesce(pg_desc, '') FROM kernels WHERE run_id = " + rid +
                     " AND rank IN (" + in_ranks + ") AND " +
                     WindowSql(merged, "start_us", "start_us + dur_us") + " ORDER BY 1, 5 LIMIT " +
                     std::to_string(o.max_events + 1),
                 "iiiiddsssss");
  if (!k.ok()) return k.status();
  std::set<std::pair<int, int64_t>> streams;
  std::map<std::pair<int, int64_t>, std::string> stream_kind;
  for (size_t i = 0; i < k->rows; ++i) {
    if (w.count() >= o.max_events) { rep.truncated = true; break; }
    const int r = static_cast<int>(k->i[0][i]);
    const int64_t st = k->i[1][i];
    streams.insert({r, st});
    std::string& sk = stream_kind[{r, st}];
    if (sk.empty() || (sk != k->s[1][i] && k->s[1][i] == "nccl")) sk = k->s[1][i];
    Args a;
    if (k->i[2][i] >= 0) a.Val("step", static_cast<double>(k->i[2][i]));
    if (!k->s[2][i].empty()) a.Str("coll", k->s[2][i]);
    if (k->i[3][i] >= 0) a.Val("in_nelems", static_cast<double>(k->i[3][i]));
    if (!k->s[3][i].empty()) a.Str("dtype", k->s[3][i]);
    if (!k->s[4][i].empty()) a.Str("pg_desc", k->s[4][i]);
    w.Slice(k->s[0][i], k->s[1][i], r, kTidStreamBase + static_cast<int>(std::max<int64_t>(0, st)),
            k->d[0][i], k->d[1][i], a.Done());
    ++rep.kernels;
  }
  for (const auto& [r, st] : streams) {
    const int tid = kTidStreamBase + static_cast<int>(std::max<int64_t>(0, st));
    w.Track(r, tid, "GPU stream " + std::to_string(st) + " (" + stream_kind[{r, st}] + ")", tid);
  }
  return Status::Ok();
}

// The records' collectives with start and stop times, of the ranks in the windows.
Status WriteCollectives(duckdb_connection conn, const std::string& rid, const std::string& proc_rank_sql,
                        const std::string& in_ranks, const std::vector<std::pair<double, double>>& merged,
                        const PerfettoOptions& o, Writer& w, PerfettoReport& rep) {
  auto c = Fetch(conn,
                 proc_rank_sql +
                     ", rec AS (SELECT CAST(pr.g AS BIGINT) AS g, CAST(v.op AS VARCHAR) AS op, v.comm, "
                     "coalesce(v.comm_name, '') AS comm_name, CAST(v.sn AS BIGINT) AS sn, "
                     "CAST(v.msg_size_bytes AS BIGINT) AS bytes, "
                     "CAST(coalesce(v.start_ts_us, v.kernel_start_ts_us) AS DOUBLE) AS t0, "
                     "CAST(coalesce(v.stop_ts_us, v.kernel_stop_ts_us) AS DOUBLE) AS t1, "
                     "CAST(v.exec_time_us AS DOUBLE) AS exec, CAST(v.rank AS BIGINT) AS comm_rank "
                     "FROM records_v v JOIN pr ON pr.process_id = v.process_id WHERE v.run_id = " + rid +
                     " AND coalesce(v.start_ts_us, v.kernel_start_ts_us) IS NOT NULL) "
                     "SELECT g, sn, bytes, comm_rank, t0, coalesce(t1, t0 + exec), exec, op, comm, comm_name "
                     "FROM rec WHERE g IN (" + in_ranks + ") AND " +
                     WindowSql(merged, "t0", "coalesce(t1, t0 + exec)") + " ORDER BY 1, 5 LIMIT " +
                     std::to_string(o.max_events + 1),
                 "iiiidddsss");
  if (!c.ok()) return c.status();
  for (size_t i = 0; i < c->rows; ++i) {
    if (w.count() >= o.max_events) { rep.truncated = true; break; }
    w.Slice(c->s[0][i], "nccl_record", static_cast<int>(c->i[0][i]), kTidCollectives, c->d[0][i],
            c->d[1][i] - c->d[0][i],
            Args()
                .Str("comm", c->s[1][i])
                .Str("comm_name", c->s[2][i])
                .Val("sn", static_cast<double>(c->i[1][i]))
                .Val("msg_size_bytes", static_cast<double>(c->i[2][i]))
                .Val("comm_rank", static_cast<double>(c->i[3][i]))
                .Val("exec_time_us", c->d[2][i])
                .Done());
    ++rep.collectives;
  }
  return Status::Ok();
}

// The sampled stacks (collscope stacks) of the ranks' main threads in the windows: one slice per
// stored stack, from its first to its last sample, on lanes that never overlap.
Status WriteStacks(duckdb_connection conn, const std::string& rid, const std::string& in_ranks,
                   const std::vector<std::pair<double, double>>& merged, const PerfettoOptions& o, Writer& w,
                   PerfettoReport& rep) {
  std::string overlap;
  for (const auto& [a, b] : merged)
    overlap += (overlap.empty() ? "" : " OR ") + ("(first_us <= " + Num(b) + " AND last_us >= " + Num(a) + ")");
  auto s = Fetch(conn,
                 "SELECT CAST(rank AS BIGINT), CAST(pid AS BIGINT), CAST(count AS BIGINT), "
                 "CAST(window_start_us AS BIGINT), CAST(window_end_us AS BIGINT), CAST(first_us AS DOUBLE), "
                 "CAST(last_us AS DOUBLE), coalesce(position_label, ''), frames, coalesce(host, ''), "
                 "coalesce(thread, '') FROM stack_samples WHERE run_id = " + rid +
                     " AND tid = pid AND rank IN (" + in_ranks + ") AND (" + overlap +
                     ") ORDER BY 1, 6, 7 DESC, file_id, line LIMIT " + std::to_string(o.max_events + 1),
                 "iiiiiddssss");
  if (!s.ok()) return s.status();
  int rank = -1;
  std::vector<double> lane_end;  // of the current rank's lanes
  for (size_t i = 0; i < s->rows; ++i) {
    if (static_cast<int>(s->i[0][i]) != rank) {
      rank = static_cast<int>(s->i[0][i]);
      lane_end.clear();
    }
    const double ts = s->d[0][i], dur = std::max(s->d[1][i] - s->d[0][i], 1.0);
    size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > ts) ++lane;
    if (lane == kMaxStackLanes) {
      ++rep.stack_slices_left_out;
      continue;
    }
    const bool fresh = lane == lane_end.size();
    if (w.count() + (fresh ? 3 : 1) > o.max_events) {
      rep.truncated = true;
      break;
    }
    const int tid = kTidStacksBase + static_cast<int>(lane);
    if (fresh) {
      lane_end.push_back(0);
      w.Track(rank, tid,
              "main thread stacks" + (lane ? " (" + std::to_string(lane + 1) + ")" : std::string()),
              tid);
    }
    lane_end[lane] = ts + dur;
    w.Event("X", s->s[0][i].empty() ? "(no position)" : s->s[0][i], "stacks", rank, tid, ts, dur,
            Args().Str("frames", s->s[1][i]).Val("count", static_cast<double>(s->i[2][i]))
                .Raw("window", "{\"start_us\": " + std::to_string(s->i[3][i]) + ", \"end_us\": " +
                                   std::to_string(s->i[4][i]) + "}")
                .Val("pid", static_cast<double>(s->i[1][i])).Str("host", s->s[2][i]).Str("thread", s->s[3][i])
                .Done());
    ++rep.stack_slices;
  }
  if (s->rows > o.max_events) rep.truncated = true;  // more rows than could ever be written
  return Status::Ok();
}

// Records without start times (Inspector without NCCL_INSPECTOR_DUMP_VERBOSE=1) cannot be placed one
// by one: each is known only to have ended by the dump pass that wrote it (CreatePassTable's, as
// LoadCommData takes them). Per rank and communicator, the collectives of a pass become one slice
// from the start of the rank's previous pass to the start of this one, on a track of that
// communicator's. A rank's first pass has no interval.
Status WriteDumpIntervals(Store& store, duckdb_connection conn, const std::string& rid, const std::string& proc_rank_sql,
                          const std::string& in_ranks, const std::vector<std::pair<double, double>>& merged,
                          const PerfettoOptions& o, Writer& w, PerfettoReport& rep) {
  COLLSCOPE_RETURN_IF_ERROR(CreatePassTable(store, rid));
  auto c = Fetch(conn,
                 proc_rank_sql +
                     ", agg AS (SELECT CAST(pr.g AS BIGINT) AS g, v.comm, coalesce(v.comm_name, '') AS comm_name, "
                     "CAST(po.prev AS DOUBLE) AS t0, CAST(po.start AS DOUBLE) AS t1, count(*) AS n, "
                     "CAST(sum(v.exec_time_us) AS DOUBLE) AS exec, string_agg(DISTINCT CAST(v.op AS VARCHAR), ', ' ORDER BY CAST(v.op AS VARCHAR)) AS ops "
                     "FROM records_v v JOIN pr ON pr.process_id = v.process_id "
                     "JOIN collscope_pass_of po ON po.process_id = v.process_id AND po.t = v.dump_ts_us "
                     "WHERE v.run_id = " + rid + " AND coalesce(v.start_ts_us, v.kernel_start_ts_us) IS NULL "
                     "AND po.prev IS NOT NULL GROUP BY ALL) "
                     "SELECT g, n, t0, t1, exec, comm, comm_name, ops FROM agg WHERE g IN (" + in_ranks + ") AND " +
                     WindowSql(merged, "t0", "t1") + " ORDER BY g, comm, t0 LIMIT " + std::to_string(o.max_events + 1),
                 "iidddsss");
  if (!c.ok()) return c.status();
  std::map<std::pair<int, std::string>, int> track;  // (rank, comm) -> tid
  std::map<int, int> tracks_of;
  for (size_t i = 0; i < c->rows; ++i) {
    if (w.count() >= o.max_events) { rep.truncated = true; break; }
    const int r = static_cast<int>(c->i[0][i]);
    const std::string& comm = c->s[0][i];
    auto [it, added] = track.try_emplace({r, comm}, kTidIntervalBase + tracks_of[r]);
    if (added) {
      ++tracks_of[r];
      const std::string label = c->s[1][i].empty() ? comm : c->s[1][i] + " " + comm;
      // Beside the collectives they stand for.
      w.Track(r, it->second, "NCCL " + label + ", per dump interval", kTidCollectives);
    }
    const double n = static_cast<double>(c->i[1][i]);
    w.Slice(std::to_string(c->i[1][i]) + " x " + c->s[2][i], "nccl_dump_interval", r, it->second,
            c->d[0][i], c->d[1][i] - c->d[0][i],
            Args()
                .Str("comm", comm)
                .Str("comm_name", c->s[1][i])
                .Val("records", n)
                .Val("exec_time_us_sum", c->d[2][i])
                .Str("placed", "ended by the dump at the slice's end")
                .Done());
    ++rep.interval_slices;
  }
  return Status::Ok();
}

// Each finding: a global instant at its start, and slices on the findings track of its ranks.
void WriteFindings(const std::vector<Finding>& findings, const std::set<int>& ranks,
                   const std::vector<std::pair<double, double>>& merged, const PerfettoOptions& o, Writer& w,
                   PerfettoReport& rep) {
  for (const Finding& f : findings) {
    std::vector<int> causes;  // the root causes with tracks
    for (int r : f.ranks)
      if (ranks.count(r)) causes.push_back(r);
    const std::string kind(KindName(f.kind));
    double fs = static_cast<double>(f.start_us), fe = std::max(fs, static_cast<double>(f.end_us));
    Args a;
    a.Str("kind", kind).Val("confidence", f.confidence).Str("summary", f.summary)
        .Str("ranks", RankList(f.ranks)).Str("victims", RankList(f.victims))
        .Str("detector", f.detector);
    if (!f.hosts.empty()) {
      std::string h;
      for (const std::string& x : f.hosts) h += (h.empty() ? "" : ", ") + x;
      a.Str("hosts", h);
    }
    if (!f.comms.empty()) {
      std::string h;
      for (const std::string& x : f.comms) h += (h.empty() ? "" : ", ") + x;
      a.Str("comms", h);
    }
    for (const Evidence& e : f.evidence) {
      if (e.text.empty()) a.Val("evidence." + e.key, e.value);
      else a.Str("evidence." + e.key, e.text);
    }
    const std::string args = a.Done();
    const int anchor = ranks.empty() ? 0 : (f.ranks.empty() || !ranks.count(f.ranks[0]) ? *ranks.begin() : f.ranks[0]);
    const std::string title = kind + (f.ranks.empty() ? "" : ": rank " + RankList(f.ranks)) +
                              (f.ranks.empty() && !f.hosts.empty() ? ": " + f.hosts[0] : "");
    w.Event("i", title, "finding", anchor, kTidFindings, fs, 0, args, "\"s\": \"g\"");
    // Slices, clipped to the exported windows.
    for (const auto& [ws, we] : merged) {
      const double a0 = std::max(ws, fs), a1 = std::min(we, fe);
      if (a1 <= a0) continue;
      // Where each slice went (its lane, and its start if a lane's previous slice moved it), for
      // the arrows, which must begin and end inside their slices.
      int cause_tid = 0;
      double cause_ts = a0;
      for (int r : causes) {
        double placed = a0;
        const int tid =
            w.Slice(kind + " (root cause)", "finding", r, kTidFindings, a0, a1 - a0, args, &placed);
        if (r == causes.front()) {
          cause_tid = tid;
          cause_ts = placed;
        }
      }
      // An arrow from the first root cause's slice to each victim's: who waits for whom.
      size_t nv = 0;
      for (int r : f.victims) {
        if (nv++ >= o.max_peers) break;
        if (!ranks.count(r)) continue;
        double placed = a0;
        const int tid = w.Slice(
            "victim of " + kind, "finding", r, kTidFindings, a0, a1 - a0,
            Args().Str("root_cause_ranks", RankList(f.ranks)).Str("summary", f.summary).Done(),
            &placed);
        if (causes.empty()) continue;
        const std::string id = "\"id\": " + std::to_string(++rep.flows);
        w.Event("s", kind, "finding", causes.front(), cause_tid, cause_ts, 0, "", id);
        w.Event("f", kind, "finding", r, tid, std::max(cause_ts, placed), 0, "",
                id + ", \"bp\": \"e\"");
      }
    }
    ++rep.findings;
  }
}

}  // namespace

Result<PerfettoReport> ExportPerfetto(Store& store, const std::vector<Finding>& findings,
                                      const PerfettoOptions& o, std::string* json) {
  PerfettoReport rep;
  duckdb_connection conn = store.connection();
  std::string rid;
  {
    const std::string q = o.run.empty()
        ? "SELECT CAST(min(run_id) AS BIGINT) FROM runs"
        : "SELECT CAST(run_id AS BIGINT) FROM runs WHERE name = " + SqlString(o.run);
    auto r = Fetch(conn, q, "i");
    if (!r.ok()) return r.status();
    if (r->rows == 0 || r->null_i[0][0])
      return Status::NotFound(o.run.empty() ? "the store holds no run" : "no run named " + o.run);
    rid = std::to_string(r->i[0][0]);
  }
  TraceInputs in;
  COLLSCOPE_RETURN_IF_ERROR(LoadTraceInputs(store, conn, rid, &in));
  std::vector<std::pair<double, double>> merged;
  std::set<int> ranks;
  ChooseWindowsAndRanks(findings, in, o, &merged, &ranks);
  rep.windows = merged.size();
  rep.ranks = ranks.size();
  Writer w;
  WriteRankTracks(ranks, in.host_of, w);
  const std::string in_ranks = RanksIn(ranks);
  if (in.kineto && !ranks.empty() && !merged.empty())
    COLLSCOPE_RETURN_IF_ERROR(WriteKinetoEvents(conn, rid, in_ranks, merged, o, w, rep));
  if (!ranks.empty() && !merged.empty() && !rep.truncated)
    COLLSCOPE_RETURN_IF_ERROR(WriteCollectives(conn, rid, in.proc_rank_sql, in_ranks, merged, o, w, rep));
  if (!ranks.empty() && !merged.empty() && !rep.truncated)
    COLLSCOPE_RETURN_IF_ERROR(WriteDumpIntervals(store, conn, rid, in.proc_rank_sql, in_ranks, merged, o, w, rep));
  if (rep.interval_slices > 0)
    rep.note = "collectives without start times (NCCL Inspector without NCCL_INSPECTOR_DUMP_VERBOSE=1) are " +
               std::to_string(rep.interval_slices) +
               " slices, one per rank, communicator and dump interval, not one per collective (a rank's first "
               "dump, which no earlier dump bounds, is left out)";
  if (!ranks.empty() && !merged.empty() && !rep.truncated && readers::HasStackTables(store))
    COLLSCOPE_RETURN_IF_ERROR(WriteStacks(conn, rid, in_ranks, merged, o, w, rep));
  WriteFindings(findings, ranks, merged, o, w, rep);
  w.NameLanes();
  rep.events = w.count();
  std::string out = "{\"displayTimeUnit\": \"ms\",\n\"otherData\": ";
  out += Args().Str("generator", "collscope export --perfetto").Str("findings_schema", kFindingsSchema)
             .Val("findings", static_cast<double>(rep.findings)).Val("ranks", static_cast<double>(rep.ranks))
             .Val("windows", static_cast<double>(rep.windows))
             .Val("stack_slices", static_cast<double>(rep.stack_slices))
             .Val("dump_interval_slices", static_cast<double>(rep.interval_slices)).Str("note", rep.note).Done();
  out += ",\n\"traceEvents\": [";
  out += w.str();
  out += "\n]}\n";
  *json = std::move(out);
  return rep;
}


}  // namespace collscope::diagnose
