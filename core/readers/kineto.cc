#include "core/readers/kineto.h"

#include "core/input_files.h"

#include <zlib.h>

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "core/taxonomy.h"

namespace collscope::readers {
namespace {

namespace fs = std::filesystem;
using simdjson::dom::element;
using simdjson::dom::object;

struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Interner {
 public:
  explicit Interner(std::vector<std::string>* out) : out_(out) {}
  int32_t Add(std::string_view s) {
    auto it = index_.find(s);
    if (it != index_.end()) return it->second;
    const int32_t id = static_cast<int32_t>(out_->size());
    out_->emplace_back(s);
    index_.emplace(std::string(s), id);
    return id;
  }

 private:
  std::vector<std::string>* out_;
  std::unordered_map<std::string, int32_t, StrHash, std::equal_to<>> index_;
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Numbers may be written as integers, doubles or (rarely) strings.
bool Num(element e, double* out) {
  double d;
  if (e.get_double().get(d) == simdjson::SUCCESS) { *out = d; return true; }
  int64_t i;
  if (e.get_int64().get(i) == simdjson::SUCCESS) { *out = static_cast<double>(i); return true; }
  uint64_t u;
  if (e.get_uint64().get(u) == simdjson::SUCCESS) { *out = static_cast<double>(u); return true; }
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS && !s.empty()) {
    char* end = nullptr;
    const std::string tmp(s);
    const double v = std::strtod(tmp.c_str(), &end);
    if (end && *end == '\0') { *out = v; return true; }
  }
  return false;
}

bool Int(element e, int64_t* out) {
  int64_t i;
  if (e.get_int64().get(i) == simdjson::SUCCESS) { *out = i; return true; }
  double d;
  // A value outside int64 (or NaN) is no integer: converting it would be undefined.
  if (Num(e, &d) && d >= -9.2e18 && d <= 9.2e18) { *out = static_cast<int64_t>(d); return true; }
  return false;
}

bool Field(object o, std::string_view key, element* out) {
  return o.at_key(key).get(*out) == simdjson::SUCCESS;
}

bool NumField(object o, std::string_view key, double* out) {
  element e;
  return Field(o, key, &e) && Num(e, out);
}

bool IntField(object o, std::string_view key, int64_t* out) {
  element e;
  return Field(o, key, &e) && Int(e, out);
}

bool StrField(object o, std::string_view key, std::string_view* out) {
  element e;
  return Field(o, key, &e) && e.get_string().get(*out) == simdjson::SUCCESS;
}

bool ContainsNoCase(std::string_view s, std::string_view needle) {
  if (needle.size() > s.size()) return false;
  for (size_t i = 0; i + needle.size() <= s.size(); ++i) {
    size_t k = 0;
    while (k < needle.size() &&
           std::tolower(static_cast<unsigned char>(s[i + k])) == needle[k])
      ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

// "<host>_<pid>.<ms>" (PyTorch's tensorboard handler: worker name = "<hostname>_<pid>").
void HostPidFromName(const std::string& path, std::string* host, int64_t* pid) {
  std::string base = fs::path(path).filename().string();
  for (std::string_view suf : {".gz", ".json", ".trace", ".pt"})
    if (EndsWith(base, suf)) base.resize(base.size() - suf.size());
  const size_t dot = base.rfind('.');
  if (dot == std::string::npos) return;
  const std::string stem = base.substr(0, dot);
  const size_t us = stem.rfind('_');
  if (us == std::string::npos || us == 0 || us + 1 >= stem.size()) return;
  const std::string p = stem.substr(us + 1);
  if (!std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) return;
  // A "pid" too long for any pid is not one: the name is not of the <host>_<pid> form.
  int64_t v = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (ec != std::errc() || end != p.data() + p.size()) return;
  *host = StorablePath(stem.substr(0, us));
  *pid = v;
}

// The uncompressed size of a gzip file (its trailer's ISIZE, modulo 4 GiB), or the file size.
size_t SizeHint(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return 0;
  if (!EndsWith(path, ".gz") || size < 18) return static_cast<size_t>(size);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return 0;
  unsigned char t[4] = {0, 0, 0, 0};
  size_t hint = 0;
  if (std::fseek(f, -4, SEEK_END) == 0 && std::fread(t, 1, 4, f) == 4)
    hint = t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<size_t>(t[3]) << 24);
  std::fclose(f);
  return hint;
}

Status ReadWholeFile(const std::string& path, std::string* out) {
  const size_t hint = SizeHint(path);
  if (hint > 0 && hint < (size_t{1} << 34)) out->reserve(hint + simdjson::SIMDJSON_PADDING);
  gzFile gz = gzopen(path.c_str(), "rb");  // reads plain files too
  if (!gz) return Status::IOError(path + ": cannot open");
  gzbuffer(gz, 1 << 20);
  for (;;) {
    // Read straight into the output's spare capacity; near its end, probe for more first (an
    // exact size hint then needs no reallocation).
    if (out->capacity() - out->size() < 4096 + simdjson::SIMDJSON_PADDING) {
      char probe[4096];
      const int n = gzread(gz, probe, sizeof(probe));
      if (n < 0) break;  // reported below
      if (n == 0) break;
      out->reserve(out->capacity() * 2 + (1 << 20));
      out->append(probe, static_cast<size_t>(n));
      continue;
    }
    const size_t at = out->size();
    const size_t room = std::min<size_t>(out->capacity() - at, 1u << 30);
    out->resize(at + room);
    const int n = gzread(gz, out->data() + at, static_cast<unsigned>(room));
    out->resize(at + static_cast<size_t>(std::max(n, 0)));
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(gz, &err);
      gzclose(gz);
      return Status::Corruption(path + ": " + msg);
    }
    if (n == 0) break;
  }
  int err = 0;
  const char* msg = gzerror(gz, &err);
  if (err != Z_OK && err != Z_BUF_ERROR) {
    const std::string m = msg ? msg : "read error";
    gzclose(gz);
    return Status::Corruption(path + ": " + m);
  }
  gzclose(gz);
  return Status::Ok();
}

// Other *.json(.gz) files in a directory: Kineto starts every trace with "schemaVersion" and
// puts deviceProperties / distributedInfo / traceEvents near the top.
bool LooksLikeKineto(const std::string& path) {
  if (!(EndsWith(path, ".json") || EndsWith(path, ".json.gz")) || EndsWith(path, ".inflight.json"))
    return false;
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) return false;
  char buf[4096];
  const int n = gzread(gz, buf, sizeof(buf));
  gzclose(gz);
  if (n <= 0) return false;
  const std::string_view head(buf, static_cast<size_t>(n));
  return head.find("\"schemaVersion\"") != std::string_view::npos &&
         (head.find("\"traceEvents\"") != std::string_view::npos ||
          head.find("\"deviceProperties\"") != std::string_view::npos ||
          head.find("\"distributedInfo\"") != std::string_view::npos);
}

}  // namespace

std::vector<int> RankList(std::string_view s) {
  std::vector<int> out;
  int64_t v = 0;
  bool in = false;
  // A number past int is no rank: it is dropped (and not accumulated into an overflow).
  auto end = [&] {
    if (in && v <= INT32_MAX) out.push_back(static_cast<int>(v));
    v = 0;
    in = false;
  };
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      v = std::min<int64_t>(int64_t{INT32_MAX} + 1, v * 10 + (c - '0'));
      in = true;
    } else {
      end();
    }
  }
  end();
  return out;
}

std::string_view KernelKindName(KernelKind k) {
  switch (k) {
    case KernelKind::kCompute: return "compute";
    case KernelKind::kNccl: return "nccl";
    case KernelKind::kMemcpy: return "memcpy";
    case KernelKind::kMemset: return "memset";
  }
  return "compute";
}

const std::string& KinetoTrace::Str(int32_t i) const {
  static const std::string kEmpty;
  return i < 0 || static_cast<size_t>(i) >= strings.size() ? kEmpty : strings[i];
}

bool IsKinetoTraceName(std::string_view path) {
  return EndsWith(path, ".pt.trace.json") || EndsWith(path, ".pt.trace.json.gz");
}

Result<std::vector<std::string>> FindKinetoTraces(const std::vector<std::string>& paths) {
  auto found = FindInputFiles(paths, [](const std::string& path, bool) {
    return IsKinetoTraceName(fs::path(path).filename().string()) || LooksLikeKineto(path);
  });
  if (!found.ok()) return found.status();
  return found->files;
}

namespace {

// The trace's distributedInfo: rank, world size, NCCL version and process groups.
void ParseDistributedInfo(object top, KinetoTrace* t) {
  object dist;
  if (top.at_key("distributedInfo").get_object().get(dist) != simdjson::SUCCESS) return;
  int64_t v;
  if (IntField(dist, "rank", &v)) { t->rank = static_cast<int>(v); t->rank_source = "distributedInfo"; }
  if (IntField(dist, "world_size", &v)) t->world_size = static_cast<int>(v);
  std::string_view s;
  if (StrField(dist, "nccl_version", &s)) t->nccl_version = s;
  simdjson::dom::array pgs;
  if (dist.at_key("pg_config").get_array().get(pgs) == simdjson::SUCCESS) {
    t->pg_config_json = simdjson::minify(pgs);
    for (element pe : pgs) {
      object po;
      if (pe.get_object().get(po)) continue;
      KinetoPg pg;
      if (StrField(po, "pg_name", &s)) pg.name = s;
      if (StrField(po, "pg_desc", &s)) pg.desc = s;
      simdjson::dom::array rk;
      if (po.at_key("ranks").get_array().get(rk) == simdjson::SUCCESS) {
        for (element r : rk) {
          int64_t x;
          if (Int(r, &x)) pg.ranks.push_back(static_cast<int>(x));
        }
      } else if (StrField(po, "ranks", &s)) {
        pg.ranks = RankList(s);
      }
      t->pgs.push_back(std::move(pg));
    }
  }
}

// The name of the trace's device (its first kernel's), from deviceProperties.
void FindDeviceName(object top, KinetoTrace* t) {
  simdjson::dom::array props;
  if (t->kernels.empty() || top.at_key("deviceProperties").get_array().get(props) != simdjson::SUCCESS) return;
  for (element pe : props) {
    object po;
    int64_t id;
    std::string_view s;
    if (pe.get_object().get(po) == simdjson::SUCCESS && IntField(po, "id", &id) &&
        id == t->kernels.front().device && StrField(po, "name", &s)) {
      t->device_name = s;
      return;
    }
  }
}

// Each kernel's step: the ProfilerStep its CPU launch (else its start) falls in; each step's kernel
// count, compute and NCCL time, and its GPU end.
void AttributeKernelsToSteps(const std::unordered_map<int64_t, double>& launch_ts, KinetoTrace* t) {
  std::sort(t->steps.begin(), t->steps.end(),
            [](const KinetoStep& a, const KinetoStep& b) { return a.start_us < b.start_us; });
  std::stable_sort(t->kernels.begin(), t->kernels.end(),
                   [](const KinetoKernel& a, const KinetoKernel& b) { return a.start_us < b.start_us; });
  if (!t->steps.empty()) {
    std::vector<double> starts;
    starts.reserve(t->steps.size());
    for (const KinetoStep& s : t->steps) starts.push_back(s.start_us);
    for (KinetoKernel& k : t->kernels) {
      auto li = k.correlation >= 0 ? launch_ts.find(k.correlation) : launch_ts.end();
      const bool launched = li != launch_ts.end();
      const double at = launched ? li->second : k.start_us;
      const size_t i = std::upper_bound(starts.begin(), starts.end(), at) - starts.begin();
      if (i == 0) continue;
      const KinetoStep& s = t->steps[i - 1];
      const double end = s.start_us + s.dur_us;
      if (launched ? at > end : (i == t->steps.size() && at > end + s.dur_us)) continue;
      k.step = s.step;
      KinetoStep& sm = t->steps[i - 1];
      ++sm.n_kernels;
      if (k.kind == KernelKind::kCompute) sm.compute_us += k.dur_us;
      else if (k.kind == KernelKind::kNccl) sm.nccl_us += k.dur_us;
      sm.gpu_end_us = std::max(sm.gpu_end_us, k.start_us + k.dur_us);
    }
  }
}

// `json` must be followed by SIMDJSON_PADDING readable bytes when `padded`.
Result<KinetoTrace> Parse(simdjson::dom::parser& parser, std::string_view json, bool padded,
                          const std::string& path) {
  element root;
  if (auto err = parser.parse(json.data(), json.size(), !padded).get(root))
    return Status::Corruption(path + ": not JSON (" + simdjson::error_message(err) + ")");
  object top;
  if (root.get_object().get(top)) return Status::Corruption(path + ": not a JSON object");
  simdjson::dom::array events;
  if (top.at_key("traceEvents").get_array().get(events))
    return Status::Corruption(path + ": no traceEvents array (not a Chrome trace)");

  KinetoTrace t;
  t.path = path;
  t.bytes = json.size();
  HostPidFromName(path, &t.hostname, &t.pid);
  const int64_t file_pid = t.pid;
  t.pid = -1;
  IntField(top, "baseTimeNanoseconds", &t.base_time_ns);
  const double base_us = static_cast<double>(t.base_time_ns / 1000) +
                         static_cast<double>(t.base_time_ns % 1000) / 1000.0;
  ParseDistributedInfo(top, &t);

  Interner strings(&t.strings);
  std::unordered_map<int64_t, double> launch_ts;  // correlation -> CPU launch time (wall us)
  std::vector<KinetoStep> gpu_steps;
  int64_t step_pid = -1;
  for (element e : events) {
    ++t.events;
    object o;
    if (e.get_object().get(o)) continue;
    std::string_view ph, cat, name;
    if (!StrField(o, "ph", &ph) || ph != "X") continue;
    StrField(o, "cat", &cat);
    StrField(o, "name", &name);
    double ts = 0, dur = 0;
    if (!NumField(o, "ts", &ts)) continue;
    NumField(o, "dur", &dur);
    const double start = base_us + ts;
    if (name.starts_with("ProfilerStep#")) {
      KinetoStep st;
      const std::string num(name.substr(13));
      char* end = nullptr;
      st.step = std::strtoll(num.c_str(), &end, 10);
      if (end == num.c_str()) continue;
      st.start_us = start;
      st.dur_us = dur;
      if (cat == "gpu_user_annotation") {
        gpu_steps.push_back(st);
      } else {
        t.steps.push_back(st);
        int64_t pid;
        if (step_pid < 0 && IntField(o, "pid", &pid)) step_pid = pid;
      }
      continue;
    }
    object args;
    const bool has_args = o.at_key("args").get_object().get(args) == simdjson::SUCCESS;
    if (cat == "cuda_runtime" || cat == "cuda_driver") {
      int64_t corr;
      if (has_args && IntField(args, "correlation", &corr)) launch_ts[corr] = start;
      continue;
    }
    KernelKind kind;
    if (cat == "kernel" || cat == "Kernel") kind = KernelKind::kCompute;
    else if (cat == "gpu_memcpy" || cat == "Memcpy") kind = KernelKind::kMemcpy;
    else if (cat == "gpu_memset" || cat == "Memset") kind = KernelKind::kMemset;
    else continue;
    KinetoKernel k;
    k.kind = kind;
    k.name = strings.Add(name);
    k.start_us = start;
    k.dur_us = dur;
    int64_t v;
    if (has_args) {
      if (IntField(args, "device", &v)) k.device = static_cast<int32_t>(v);
      if (IntField(args, "stream", &v)) k.stream = static_cast<int32_t>(v);
      if (IntField(args, "correlation", &v)) k.correlation = v;
    }
    if (k.device < 0 && IntField(o, "pid", &v)) k.device = static_cast<int32_t>(v);
    if (k.stream < 0 && IntField(o, "tid", &v)) k.stream = static_cast<int32_t>(v);
    if (kind == KernelKind::kCompute && ContainsNoCase(name, "nccl")) {
      k.kind = KernelKind::kNccl;
      std::string_view s;
      if (has_args) {
        if (StrField(args, "Collective name", &s)) k.coll = strings.Add(s);
        if (StrField(args, "dtype", &s)) k.dtype = strings.Add(s);
        if (StrField(args, "Process Group Name", &s)) k.pg_name = strings.Add(s);
        if (StrField(args, "Process Group Description", &s)) k.pg_desc = strings.Add(s);
        element pr;
        if (Field(args, "Process Group Ranks", &pr)) {
          if (pr.get_string().get(s) == simdjson::SUCCESS) k.pg_ranks = strings.Add(s);
          else k.pg_ranks = strings.Add(simdjson::minify(pr));
        }
        if (IntField(args, "In msg nelems", &v)) k.in_nelems = v;
        if (IntField(args, "Out msg nelems", &v)) k.out_nelems = v;
        if (IntField(args, "Group size", &v)) k.group_size = static_cast<int32_t>(v);
      }
    }
    t.kernels.push_back(k);
  }
  if (t.steps.empty()) t.steps = std::move(gpu_steps);
  t.pid = step_pid >= 0 ? step_pid : file_pid;

  FindDeviceName(top, &t);

  AttributeKernelsToSteps(launch_ts, &t);
  return t;
}

}  // namespace

Result<KinetoTrace> ParseKinetoTrace(std::string_view json, const std::string& path) {
  simdjson::dom::parser parser;
  return Parse(parser, json, false, path);
}

Result<KinetoTrace> ReadKinetoTrace(const std::string& path) {
  // Per thread: the parser's and the buffer's memory are reused from trace to trace (fresh
  // allocations of this size would be page-faulted in again for every file).
  thread_local simdjson::dom::parser parser;
  thread_local std::string data;
  data.clear();
  Status st = ReadWholeFile(path, &data);
  if (!st.ok()) return st;
  const size_t n = data.size();
  data.append(simdjson::SIMDJSON_PADDING, ' ');
  auto r = Parse(parser, std::string_view(data.data(), n), true, path);
  if (data.capacity() > (size_t{1} << 30)) std::string().swap(data);  // do not pin huge buffers
  return r;
}

// ------------------------------------------------------------------------------------------------
// Store

namespace {

constexpr const char* kKinetoTables[] = {"kineto_traces", "steps", "kernels"};

int64_t CountTables(Store& store) {
  std::string q =
      "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND "
      "table_name IN ('kineto_traces', 'steps', 'kernels')";
  auto n = store.QueryInt(q);
  return n.ok() ? *n : 0;
}

}  // namespace

bool HasKinetoTables(Store& store) { return CountTables(store) == 3; }

Status EnsureKinetoTables(Store& store) {
  if (HasKinetoTables(store)) return Status::Ok();
  std::string ddl;
  for (const char* t : kKinetoTables) ddl += TableDdl(t, !store.in_memory());
  return store.Exec(ddl);
}

namespace {

class TraceWriter {
 public:
  Status Open(duckdb_connection conn) {
    COLLSCOPE_RETURN_IF_ERROR(traces_.Open(conn, "kineto_traces"));
    COLLSCOPE_RETURN_IF_ERROR(steps_.Open(conn, "steps"));
    return kernels_.Open(conn, "kernels");
  }

  Status Write(int32_t run_id, int32_t trace_id, const KinetoTrace& t) {
    {
      ChunkAppender& a = traces_;
      size_t c = 0;
      a.Column<int32_t>(c++)[0] = run_id;
      a.Column<int32_t>(c++)[0] = trace_id;
      a.SetString(c++, 0, StorablePath(t.path));
      a.Column<int32_t>(c++)[0] = t.rank;
      a.SetString(c++, 0, t.rank_source);
      if (t.world_size >= 0) a.Column<int32_t>(c)[0] = t.world_size; else a.SetNull(c, 0);
      ++c;
      if (!t.hostname.empty()) a.SetString(c, 0, t.hostname); else a.SetNull(c, 0);
      ++c;
      if (t.pid >= 0) a.Column<int64_t>(c)[0] = t.pid; else a.SetNull(c, 0);
      ++c;
      if (!t.device_name.empty()) a.SetString(c, 0, t.device_name); else a.SetNull(c, 0);
      ++c;
      if (!t.nccl_version.empty()) a.SetString(c, 0, t.nccl_version); else a.SetNull(c, 0);
      ++c;
      if (!t.pg_config_json.empty()) a.SetString(c, 0, t.pg_config_json); else a.SetNull(c, 0);
      ++c;
      a.Column<int64_t>(c++)[0] = t.base_time_ns;
      a.Column<uint64_t>(c++)[0] = t.events;
      a.Column<int32_t>(c++)[0] = static_cast<int32_t>(t.steps.size());
      a.Column<uint64_t>(c++)[0] = t.kernels.size();
      COLLSCOPE_RETURN_IF_ERROR(a.Append(1));
    }
    const std::string kineto = "kineto";
    for (size_t off = 0; off < t.steps.size(); off += steps_.capacity()) {
      const size_t n = std::min(steps_.capacity(), t.steps.size() - off);
      ChunkAppender& a = steps_;
      for (size_t i = 0; i < n; ++i) {
        const KinetoStep& s = t.steps[off + i];
        a.Column<int32_t>(0)[i] = run_id;
        a.Column<int32_t>(1)[i] = trace_id;
        a.Column<int32_t>(2)[i] = t.rank;
        a.Column<int64_t>(3)[i] = s.step;
        a.Column<double>(4)[i] = s.start_us;
        a.Column<double>(5)[i] = s.dur_us;
        a.SetString(6, i, kineto);
        a.Column<int32_t>(7)[i] = s.n_kernels;
        a.Column<double>(8)[i] = s.compute_us;
        a.Column<double>(9)[i] = s.nccl_us;
        if (s.gpu_end_us > 0) a.Column<double>(10)[i] = s.gpu_end_us; else a.SetNull(10, i);
        a.SetNull(11, i);  // file_id: not from a step file
      }
      COLLSCOPE_RETURN_IF_ERROR(a.Append(n));
    }
    const std::string kinds[] = {"compute", "nccl", "memcpy", "memset"};
    for (size_t off = 0; off < t.kernels.size(); off += kernels_.capacity()) {
      const size_t n = std::min(kernels_.capacity(), t.kernels.size() - off);
      ChunkAppender& a = kernels_;
      auto str = [&](size_t col, size_t row, int32_t id) {
        if (id >= 0) a.SetString(col, row, t.strings[id]); else a.SetNull(col, row);
      };
      auto i64 = [&](size_t col, size_t row, int64_t v) {
        if (v >= 0) a.Column<int64_t>(col)[row] = v; else a.SetNull(col, row);
      };
      auto i32 = [&](size_t col, size_t row, int32_t v) {
        if (v >= 0) a.Column<int32_t>(col)[row] = v; else a.SetNull(col, row);
      };
      for (size_t i = 0; i < n; ++i) {
        const KinetoKernel& k = t.kernels[off + i];
        a.Column<int32_t>(0)[i] = run_id;
        a.Column<int32_t>(1)[i] = trace_id;
        a.Column<int32_t>(2)[i] = t.rank;
        if (k.step >= 0) a.Column<int64_t>(3)[i] = k.step; else a.SetNull(3, i);
        str(4, i, k.name);
        a.SetString(5, i, kinds[static_cast<int>(k.kind)]);
        i32(6, i, k.device);
        i32(7, i, k.stream);
        a.Column<double>(8)[i] = k.start_us;
        a.Column<double>(9)[i] = k.dur_us;
        i64(10, i, k.correlation);
        str(11, i, k.coll);
        i64(12, i, k.in_nelems);
        i64(13, i, k.out_nelems);
        i32(14, i, k.group_size);
        str(15, i, k.dtype);
        str(16, i, k.pg_name);
        str(17, i, k.pg_desc);
        str(18, i, k.pg_ranks);
      }
      COLLSCOPE_RETURN_IF_ERROR(a.Append(n));
    }
    return Status::Ok();
  }

  void Close() {
    traces_.Close();
    steps_.Close();
    kernels_.Close();
  }

 private:
  ChunkAppender traces_, steps_, kernels_;
};

}  // namespace

Result<KinetoIngestReport> IngestKineto(Store& store, const std::vector<std::string>& paths,
                                        const std::string& run, int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  KinetoIngestReport rep;
  auto files = FindKinetoTraces(paths);
  if (!files.ok()) return files.status();
  rep.files_seen = files->size();
  if (files->empty()) return rep;
  COLLSCOPE_RETURN_IF_ERROR(EnsureKinetoTables(store));
  auto run_id = store.RunId(run, true);
  if (!run_id.ok()) return run_id.status();
  rep.run_id = *run_id;
  const std::string rid = std::to_string(*run_id);
  // Already stored paths, the next trace id and the highest known rank.
  std::set<std::string> seen;
  {
    auto r = store.Query("SELECT path FROM kineto_traces WHERE run_id = " + rid);
    if (!r.ok()) return r.status();
    for (const auto& row : r->rows)
      if (row[0]) seen.insert(*row[0]);
  }
  auto next_id = store.QueryInt("SELECT CAST(coalesce(max(trace_id) + 1, 0) AS BIGINT) FROM kineto_traces WHERE run_id = " + rid);
  if (!next_id.ok()) return next_id.status();
  auto max_rank = store.QueryInt("SELECT CAST(coalesce(max(rank), -1) AS BIGINT) FROM kineto_traces WHERE run_id = " + rid);
  if (!max_rank.ok()) return max_rank.status();
  std::vector<std::string> todo;
  for (const std::string& f : *files) {
    if (seen.count(StorablePath(f))) ++rep.files_unchanged;
    else todo.push_back(f);
  }
  if (todo.empty()) return rep;

  // Parse in parallel (each trace is independent), write in path order.
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int nt = std::max(1, std::min<int>(threads > 0 ? threads : std::min(hw, 4),
                                           static_cast<int>(todo.size())));
  std::vector<std::optional<Result<KinetoTrace>>> parsed(todo.size());
  {
    std::mutex mu;
    size_t next = 0;
    auto work = [&] {
      for (;;) {
        size_t i;
        {
          std::lock_guard<std::mutex> g(mu);
          if (next >= todo.size()) return;
          i = next++;
        }
        auto r = ReadKinetoTrace(todo[i]);
        std::lock_guard<std::mutex> g(mu);
        parsed[i].emplace(std::move(r));
      }
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < nt; ++i) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
  }
  // A trace that cannot be read is named, and every other one is still stored.
  std::vector<KinetoTrace> traces;
  for (auto& p : parsed) {
    if (p->ok()) traces.push_back(std::move(**p));
    else rep.failed.push_back(p->status().message());
  }
  int next_rank = static_cast<int>(*max_rank);
  for (const KinetoTrace& t : traces) next_rank = std::max(next_rank, t.rank);
  for (KinetoTrace& t : traces) {
    if (t.rank < 0) {
      t.rank = ++next_rank;
      t.rank_source = "file order";
    }
  }

  COLLSCOPE_RETURN_IF_ERROR(store.Exec("BEGIN TRANSACTION"));
  TraceWriter w;
  Status st = w.Open(store.connection());
  int32_t id = static_cast<int32_t>(*next_id);
  for (size_t i = 0; st.ok() && i < traces.size(); ++i) {
    const KinetoTrace& t = traces[i];
    st = w.Write(rep.run_id, id++, t);
    rep.files_read++;
    rep.steps += t.steps.size();
    rep.kernels += t.kernels.size();
    rep.bytes += t.bytes;
    for (const KinetoKernel& k : t.kernels) rep.nccl_kernels += k.kind == KernelKind::kNccl;
  }
  w.Close();
  if (!st.ok()) {
    (void)store.Exec("ROLLBACK").IgnoreError();
    return st;
  }
  COLLSCOPE_RETURN_IF_ERROR(store.Exec("COMMIT"));
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

Result<StepSeries> LoadKinetoSteps(Store& store, const std::string& run) {
  StepSeries s;
  s.source = "kineto";
  if (!HasKinetoTables(store)) return s;
  std::string filter;
  if (run.empty()) {
    filter = "run_id = (SELECT min(run_id) FROM steps WHERE source = 'kineto')";
  } else {
    filter = "run_id = (SELECT run_id FROM runs WHERE name = " + SqlString(run) + ")";
  }
  auto r = store.Query(
      "SELECT rank, step, CAST(round(min(start_us)) AS BIGINT), max(dur_us), sum(compute_us), "
      "sum(nccl_us) FROM steps WHERE source = 'kineto' AND " + filter + " GROUP BY rank, step ORDER BY rank, step");
  if (!r.ok()) return r.status();
  for (const auto& row : r->rows) {
    if (!row[0] || !row[1]) continue;
    StepRow x;
    x.rank = std::stoi(*row[0]);
    x.step = std::stoll(*row[1]);
    x.start_us = row[2] ? std::stoll(*row[2]) : 0;
    x.dur_us = row[3] ? std::stod(*row[3]) : 0;
    if (row[4]) x.phases["compute"] = std::stod(*row[4]);
    if (row[5]) x.phases["nccl"] = std::stod(*row[5]);
    s.rows.push_back(std::move(x));
  }
  return s;
}

}  // namespace collscope::readers
