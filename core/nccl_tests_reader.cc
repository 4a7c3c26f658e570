#include "core/nccl_tests_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/taxonomy.h"

namespace collscope {
namespace {

std::vector<std::string_view> Split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

bool ParseI64(std::string_view s, int64_t* out) {
  bool neg = !s.empty() && s[0] == '-';
  uint64_t v = 0;
  if (!ParseU64(neg ? s.substr(1) : s, &v)) return false;
  *out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// %.2f, %.1f, %.0f or exponent notation, as nccl-tests prints to fit the column.
bool ParseDouble(std::string_view s, double* out) {
  if (s.empty() || s.size() > 40) return false;
  std::string tmp(s);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(tmp.c_str(), &end);
  if (end != tmp.c_str() + tmp.size() || errno == ERANGE || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const std::set<std::string_view>& DataTypes() {
  static const std::set<std::string_view> types = {
      "int8",  "uint8",  "int32", "uint32",   "int64",  "uint64", "half",    "float",
      "double", "bfloat16", "f8e4m3", "f8e5m2", "int",   "char",   "fp16",    "bf16"};
  return types;
}

bool PerRankSize(const std::string& op) {
  return op == "AllGather" || op == "ReduceScatter" || op == "AlltoAll" || op == "Gather" ||
         op == "Scatter";
}

std::string FileName(std::string_view path) {
  size_t slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace

std::string NcclTestsOpFromName(std::string_view name) {
  std::string n = Lower(FileName(name));
  std::string squeezed;
  for (char c : n)
    if (c != '_' && c != '-') squeezed += c;
  // Longest names first: "allreduce" contains "reduce", "reducescatter" contains "scatter".
  static const std::pair<const char*, const char*> kNames[] = {
      {"reducescatter", "ReduceScatter"}, {"allreduce", "AllReduce"}, {"allgather", "AllGather"},
      {"alltoall", "AlltoAll"},           {"sendrecv", "SendRecv"},   {"broadcast", "Broadcast"},
      {"hypercube", "SendRecv"},          {"reduce", "Reduce"},       {"gather", "Gather"},
      {"scatter", "Scatter"}};
  for (const auto& [key, op] : kNames)
    if (squeezed.find(key) != std::string::npos) return op;
  return "";
}

// The preamble's "nThread 1 nGpus 8 minBytes ... iters: 20 ... warmup iters: 5" line.
void ParsePreamble(const std::vector<std::string_view>& t, NcclTestsLog* log) {
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    uint64_t v = 0;
    if (t[i] == "nThread" && ParseU64(t[i + 1], &v)) log->n_threads = static_cast<int>(v);
    if (t[i] == "nGpus" && ParseU64(t[i + 1], &v)) log->n_gpus = static_cast<int>(v);
    if (t[i] == "minBytes" && ParseU64(t[i + 1], &v)) log->min_bytes = v;
    if (t[i] == "maxBytes" && ParseU64(t[i + 1], &v)) log->max_bytes = v;
    if (t[i] == "iters:" && i > 0 && t[i - 1] == "warmup" && ParseU64(t[i + 1], &v))
      log->warmup_iters = static_cast<int>(v);
    if (t[i] == "iters:" && i > 0 && t[i - 1] != "warmup" && t[i - 1] != "agg" &&
        ParseU64(t[i + 1], &v))
      log->iters = static_cast<int>(v);
  }
}

// "Rank  0 [Group  0] Pid 112424 on localhost device  0 [0x00] A100-SXM4-40GB"
NcclTestsDevice ParseDeviceLine(const std::vector<std::string_view>& t, const std::string& joined) {
  NcclTestsDevice d;
  int64_t v = 0;
  if (ParseI64(t[1], &v)) d.rank = static_cast<int>(v);
  for (size_t i = 2; i + 1 < t.size(); ++i) {
    if (t[i] == "Pid" && ParseI64(t[i + 1], &v)) d.pid = v;
    if (t[i] == "on") d.host = std::string(t[i + 1]);
    if (t[i] == "device" && ParseI64(t[i + 1], &v)) d.device = static_cast<int>(v);
  }
  size_t bracket = joined.find(']', joined.find("device"));
  if (bracket != std::string::npos) {
    std::vector<std::string_view> rest = Split(std::string_view(joined).substr(bracket + 1));
    for (size_t i = 0; i < rest.size(); ++i) d.gpu += (i ? " " : "") + std::string(rest[i]);
  }
  return d;
}

// The footer's "Out of bounds values" and "Avg bus bandwidth" lines (others are ignored).
void ParseFooterLine(const std::vector<std::string_view>& t, const std::string& joined, NcclTestsLog* log) {
  if (joined.find("Avg bus bandwidth") != std::string::npos) {
    double v = 0;
    if (ParseDouble(t.size() >= 5 ? t[4] : std::string_view(), &v)) log->avg_busbw_gbs = v;
    size_t colon = joined.find(':');
    if (colon != std::string::npos) {
      std::vector<std::string_view> r = Split(std::string_view(joined).substr(colon + 1));
      if (!r.empty() && ParseDouble(r[0], &v)) log->avg_busbw_gbs = v;
    }
  } else if (joined.find("Out of bounds values") != std::string::npos) {
    size_t colon = joined.find(':');
    int64_t v = 0;
    if (colon != std::string::npos) {
      std::vector<std::string_view> r = Split(std::string_view(joined).substr(colon + 1));
      if (!r.empty() && ParseI64(r[0], &v)) log->out_of_bounds = v;
    }
  }
}

// Without device lines: n_ranks from busbw / algbw of the largest row, on one node.
void RanksFromBandwidth(NcclTestsLog* log) {
  const NcclTestsResult* big = &log->results.front();
  for (const auto& r : log->results)
    if (r.algbw_gbs > big->algbw_gbs) big = &r;
  if (big->algbw_gbs > 0) {
    double f = big->busbw_gbs / big->algbw_gbs;
    int n = 0;
    if (big->op == "AllReduce" && f < 2) n = static_cast<int>(std::lround(2 / (2 - f)));
    else if (big->op != "Broadcast" && big->op != "Reduce" && big->op != "SendRecv" && f < 1)
      n = static_cast<int>(std::lround(1 / (1 - f)));
    if (n > 0) log->n_ranks = n;
  }
  for (auto& r : log->results) {
    r.n_ranks = log->n_ranks;
    r.nnodes = 1;
    r.msg_size_bytes = PerRankSize(r.op) && log->n_ranks > 0
                           ? r.size_bytes / static_cast<uint64_t>(log->n_ranks)
                           : r.size_bytes;
  }
}

Result<NcclTestsLog> ParseNcclTestsOutput(std::string_view text, std::string_view name_hint,
                                          std::string_view op_override) {
  NcclTestsLog log;
  std::string where = name_hint.empty() ? std::string("nccl-tests output") : std::string(name_hint);
  std::string op = std::string(op_override);
  if (op.empty()) op = NcclTestsOpFromName(name_hint);
  log.test = FileName(name_hint);
  // Layout of the current table, from its column-name header line.
  bool header_has_redop = false, header_has_root = false;
  int block_fields = 4;  // time algbw busbw #wrong, plus 4 with -I
  std::set<std::string> hosts;
  int line_no = 0;
  size_t pos = 0;
  size_t section_start = 0;  // first result of the current test in log.results
  auto finish_section = [&]() {
    int n = static_cast<int>(log.devices.size());
    for (size_t i = section_start; i < log.results.size(); ++i) {
      NcclTestsResult& r = log.results[i];
      r.n_ranks = n;
      r.nnodes = static_cast<int>(hosts.size());
      r.msg_size_bytes = PerRankSize(r.op) && n > 0 ? r.size_bytes / static_cast<uint64_t>(n)
                                                    : r.size_bytes;
    }
    section_start = log.results.size();
  };
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::vector<std::string_view> f = Split(line);
    if (f.empty()) continue;
    if (f[0][0] == '#') {
      // Preamble, header or footer. Drop the leading '#' token (or prefix).
      std::string_view body = line.substr(line.find('#') + 1);
      std::vector<std::string_view> t = Split(body);
      if (t.empty()) continue;
      std::string joined(body);
      if (joined.find("Collective test starting:") != std::string::npos) {
        finish_section();
        std::string prog(t.back());
        log.test = prog;
        std::string o = std::string(op_override);
        if (o.empty()) o = NcclTestsOpFromName(prog);
        if (!o.empty()) op = o;
        if (log.op.empty()) log.op = op;
        continue;
      }
      if (t[0] == "nThread") {
        // Each test of a file starts its preamble here.
        finish_section();
        log.devices.clear();
        hosts.clear();
        ParsePreamble(t, &log);
        continue;
      }
      if (t[0] == "Rank" && t.size() >= 2) {
        NcclTestsDevice d = ParseDeviceLine(t, joined);
        hosts.insert(d.host);
        log.devices.push_back(std::move(d));
        continue;
      }
      if (t[0] == "size") {
        header_has_redop = std::find(t.begin(), t.end(), "redop") != t.end();
        header_has_root = std::find(t.begin(), t.end(), "root") != t.end();
        block_fields = std::find(t.begin(), t.end(), "i_min") != t.end() ? 8 : 4;
        continue;
      }
      ParseFooterLine(t, joined, &log);
      continue;
    }
    // A data row starts with two integers (size, count) and a data type. Anything else (NCCL INFO
    // lines, warnings printed by the launcher) is skipped and counted.
    uint64_t size = 0, count = 0;
    if (f.size() < 3 + 2 * 4 || !ParseU64(f[0], &size) || !ParseU64(f[1], &count) ||
        !DataTypes().count(f[2])) {
      ++log.skipped_lines;
      continue;
    }
    if (op.empty())
      return Status::Corruption(where + ":" + std::to_string(line_no) +
                           ": cannot tell which collective this is (no \"Collective test "
                           "starting\" line and the file name names none); pass the op");
    if (log.op.empty()) log.op = op;
    // Strip a -S timestamp ("2024-05-01 12:00:00") from the end.
    size_t n = f.size();
    if (n >= 2 && f[n - 1].find(':') != std::string_view::npos &&
        f[n - 2].find('-') != std::string_view::npos && f[n - 2].size() == 10)
      n -= 2;
    if (n < 3 + 2 * static_cast<size_t>(block_fields))
      return Status::Corruption(where + ":" + std::to_string(line_no) + ": data row has " +
                           std::to_string(n) + " fields, expected at least " +
                           std::to_string(3 + 2 * block_fields));
    size_t prefix = n - 3 - 2 * static_cast<size_t>(block_fields);  // redop and/or root
    if (prefix > 2)
      return Status::Corruption(where + ":" + std::to_string(line_no) + ": data row has " +
                           std::to_string(n) + " fields, more than any nccl-tests layout");
    NcclTestsResult base;
    base.line = line_no;
    base.op = op;
    base.size_bytes = size;
    base.count = count;
    base.dtype = std::string(f[2]);
    size_t at = 3;
    for (size_t i = 0; i < prefix; ++i, ++at) {
      int64_t v = 0;
      // "root" is an integer (-1 when not rooted); redop is a name. The alltoall header lists a
      // redop its rows do not print, so the row, not the header, decides.
      if (ParseI64(f[at], &v) && (header_has_root || prefix == 2 || !header_has_redop))
        base.root = static_cast<int>(v);
      else
        base.redop = std::string(f[at]);
    }
    for (int block = 0; block < 2; ++block) {
      NcclTestsResult r = base;
      r.in_place = block == 1;
      size_t b = at + static_cast<size_t>(block * block_fields);
      if (!ParseDouble(f[b], &r.time_us) || !ParseDouble(f[b + 1], &r.algbw_gbs) ||
          !ParseDouble(f[b + 2], &r.busbw_gbs))
        return Status::Corruption(where + ":" + std::to_string(line_no) + ": unreadable number in \"" +
                             std::string(f[b]) + " " + std::string(f[b + 1]) + " " +
                             std::string(f[b + 2]) + "\"");
      int64_t wrong = 0;
      if (ParseI64(f[b + 3], &wrong)) r.n_wrong = wrong;
      log.results.push_back(std::move(r));
    }
  }
  finish_section();
  log.n_ranks = static_cast<int>(log.devices.size());
  log.nnodes = static_cast<int>(hosts.size());
  if (log.n_ranks == 0 && log.n_threads > 0 && log.n_gpus > 0)
    log.n_ranks = log.n_threads * log.n_gpus;
  if (log.devices.empty() && !log.results.empty()) RanksFromBandwidth(&log);
  if (log.nnodes == 0 && log.n_ranks > 0) log.nnodes = 1;
  if (log.op.empty()) log.op = op;
  return log;
}

Result<NcclTestsLog> ReadNcclTestsFile(const std::string& path, std::string_view op_override) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseNcclTestsOutput(ss.str(), path, op_override);
}

namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

Status EnsureNcclTestsTables(Store& store) {
  // Stores made before the nccl-tests tables existed get them on first use.
  return store.Exec(TableDdl("nccl_tests_files", !store.in_memory()) +
                    TableDdl("nccl_tests_results", !store.in_memory()));
}

Result<int64_t> StoreNcclTestsLog(Store& store, const std::string& run_name,
                                  const std::string& path, const NcclTestsLog& log) {
  COLLSCOPE_RETURN_IF_ERROR(EnsureNcclTestsTables(store));
  std::string abs = path;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (!ec) abs = p.lexically_normal().string();
  COLLSCOPE_RETURN_IF_ERROR(store.Exec("BEGIN TRANSACTION"));
  auto fail = [&](const Status& st) -> Result<int64_t> {
    store.Exec("ROLLBACK").IgnoreError();
    return st;
  };
  Result<int32_t> run = store.RunId(run_name, true);
  if (!run.ok()) return fail(run.status());
  std::string rid = std::to_string(*run);
  Result<QueryResult> old = store.Query("SELECT file_id FROM nccl_tests_files WHERE run_id = " +
                                        rid + " AND path = " + SqlString(abs));
  if (!old.ok()) return fail(old.status());
  std::string fid;
  if (!old->rows.empty()) {
    fid = *old->rows[0][0];
    Status st = store.Exec("DELETE FROM nccl_tests_results WHERE run_id = " + rid +
                           " AND file_id = " + fid + "; DELETE FROM nccl_tests_files WHERE "
                           "run_id = " + rid + " AND file_id = " + fid);
    if (!st.ok()) return fail(st);
  } else {
    Result<int64_t> next = store.QueryInt(
        "SELECT coalesce(max(file_id), 0) + 1 FROM nccl_tests_files WHERE run_id = " + rid);
    if (!next.ok()) return fail(next.status());
    fid = std::to_string(*next);
  }
  std::string gpu = log.devices.empty() ? "" : log.devices.front().gpu;
  auto opt_num = [](const auto& o) { return o ? Num(static_cast<double>(*o)) : "NULL"; };
  Status st = store.Exec(
      "INSERT INTO nccl_tests_files VALUES (" + rid + ", " + fid + ", " + SqlString(abs) + ", " +
      SqlString(log.test) + ", " + (log.op.empty() ? "NULL" : SqlString(log.op)) + ", " +
      std::to_string(log.n_ranks) + ", " + std::to_string(log.nnodes) + ", " +
      std::to_string(log.n_threads) + ", " + std::to_string(log.n_gpus) + ", " +
      std::to_string(log.min_bytes) + ", " + std::to_string(log.max_bytes) + ", " +
      std::to_string(log.warmup_iters) + ", " + std::to_string(log.iters) + ", " +
      (gpu.empty() ? "NULL" : SqlString(gpu)) + ", " + opt_num(log.avg_busbw_gbs) + ", " +
      (log.out_of_bounds ? std::to_string(*log.out_of_bounds) : "NULL") + ", " +
      std::to_string(log.skipped_lines) + ")");
  if (!st.ok()) return fail(st);
  // Rows go in as one VALUES list per 500 rows (a log has tens to hundreds).
  for (size_t i = 0; i < log.results.size(); i += 500) {
    std::string sql = "INSERT INTO nccl_tests_results VALUES ";
    for (size_t j = i; j < std::min(log.results.size(), i + 500); ++j) {
      const NcclTestsResult& r = log.results[j];
      sql += (j > i ? ", (" : "(") + rid + ", " + fid + ", " + std::to_string(r.line) + ", " +
             SqlString(r.op) + ", " + std::to_string(r.size_bytes) + ", " +
             std::to_string(r.count) + ", " + SqlString(r.dtype) + ", " +
             (r.redop.empty() ? "NULL" : SqlString(r.redop)) + ", " +
             (r.root ? std::to_string(*r.root) : "NULL") + ", " +
             (r.in_place ? "true" : "false") + ", " + Num(r.time_us) + ", " + Num(r.algbw_gbs) +
             ", " + Num(r.busbw_gbs) + ", " + (r.n_wrong ? std::to_string(*r.n_wrong) : "NULL") +
             ", " + std::to_string(r.n_ranks) + ", " + std::to_string(std::max(r.nnodes, 1)) + ", " +
             std::to_string(r.msg_size_bytes) + ")";
    }
    st = store.Exec(sql);
    if (!st.ok()) return fail(st);
  }
  st = store.Exec("COMMIT");
  if (!st.ok()) return fail(st);
  return static_cast<int64_t>(log.results.size());
}

}  // namespace collscope
