#include "core/readers/prom_textfile.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>

#include "capture/common/json_escape.h"
#include "core/input_files.h"
#include "core/line_reader.h"
#include "core/readers/otlp_metrics.h"
#include "core/readers/rows.h"
#include "core/readers/text.h"

namespace collscope::readers {

namespace {

using std::string_view;


bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

void SkipBlanks(string_view* s) {
  while (!s->empty() && IsBlank(s->front())) s->remove_prefix(1);
}

// A metric name, [a-zA-Z_:][a-zA-Z0-9_:]*, from the front of *s.
string_view EatMetricName(string_view* s) {
  size_t n = 0;
  while (n < s->size() && (IsNameChar((*s)[n]) || (*s)[n] == ':') && (n > 0 || !((*s)[n] >= '0' && (*s)[n] <= '9'))) ++n;
  string_view name = s->substr(0, n);
  s->remove_prefix(n);
  return name;
}

// A non-negative decimal (the whole of `s`) no greater than `max`.
bool ParseCount(string_view s, uint64_t max, uint64_t* v) {
  if (s.empty() || s.size() > 20) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && *v <= max;
}

// A float as Go's ParseFloat (NaN, +Inf, -Inf) or C's %g (nan, inf, -inf) writes it.
bool ParseValue(string_view s, double* v) {
  if (s.empty()) return false;
  bool neg = false;
  if (s.front() == '+' || s.front() == '-') {
    neg = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s.front() == '+' || s.front() == '-') return false;
  if (s.size() > 400) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v, std::chars_format::general);
  if (p != s.data() + s.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // Past a double's range: Go reads +-Inf or 0 (strtod says which; the token is short).
    *v = std::strtod(std::string(s).c_str(), nullptr);
  } else if (ec != std::errc()) {
    return false;
  }
  if (neg) *v = -*v;
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// "2025-10-17T03:31:47Z" (Inspector 2.29 writes UTC with Z), with optional fractional seconds
// and "+00:00" or no zone; microseconds since the epoch.
bool ParseIsoUtc(string_view s, int64_t* us) {
  auto num = [&](size_t at, size_t n, unsigned* v) {
    if (at + n > s.size()) return false;
    uint64_t x = 0;
    if (!ParseCount(s.substr(at, n), 9999, &x)) return false;
    *v = static_cast<unsigned>(x);
    return true;
  };
  unsigned y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      s[13] != ':' || s[16] != ':')
    return false;
  if (!num(0, 4, &y) || !num(5, 2, &mo) || !num(8, 2, &d) || !num(11, 2, &h) || !num(14, 2, &mi) || !num(17, 2, &se))
    return false;
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return false;
  string_view rest = s.substr(19);
  int64_t frac_us = 0;
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    size_t n = 0;
    int64_t scale = 100000;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') {
      frac_us += (rest[n] - '0') * scale;
      scale /= 10;
      ++n;
    }
    if (n == 0 || n > 9) return false;
    rest.remove_prefix(n);
  }
  if (!(rest.empty() || rest == "Z" || rest == "z" || rest == "+00:00" || rest == "+0000")) return false;
  const int64_t days = DaysFromCivil(y, mo, d);
  *us = ((days * 24 + h) * 60 + mi) * 60 * int64_t{1000000} + se * int64_t{1000000} + frac_us;
  return *us >= 0 && *us < kMaxPromTimestampUs;
}

uint64_t UnitBytes(string_view u) {
  if (u == "B") return 1;
  if (u == "KB" || u == "KiB") return uint64_t{1} << 10;
  if (u == "MB" || u == "MiB") return uint64_t{1} << 20;
  if (u == "GB" || u == "GiB") return uint64_t{1} << 30;
  if (u == "TB" || u == "TiB") return uint64_t{1} << 40;
  return 0;
}

// A message size as Inspector writes it: 2.30's bucket "4-5GB" / "0B" ([lo, hi) bytes, 1024-based
// units), or 2.29's "512B" / "2.00GB" (lo = hi = the size, to its two decimals).
bool ParseMessageSize(string_view s, uint64_t* lo, uint64_t* hi) {
  size_t u = s.size();
  while (u > 0 && ((s[u - 1] >= 'A' && s[u - 1] <= 'Z') || (s[u - 1] >= 'a' && s[u - 1] <= 'z'))) --u;
  const uint64_t unit = UnitBytes(s.substr(u));
  string_view n = s.substr(0, u);
  if (unit == 0 || n.empty()) return false;
  const size_t dash = n.find('-');
  if (dash != string_view::npos) {
    uint64_t a = 0, b = 0;
    if (!ParseCount(n.substr(0, dash), kMaxPromSizeBytes, &a) || !ParseCount(n.substr(dash + 1), kMaxPromSizeBytes, &b) ||
        b < a || b > kMaxPromSizeBytes / unit)
      return false;
    *lo = a * unit;
    *hi = b * unit;
    return true;
  }
  if (n.find_first_not_of("0123456789.") != string_view::npos || n.front() == '.') return false;
  double x = 0;
  const auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), x, std::chars_format::fixed);
  if (ec != std::errc() || p != n.data() + n.size()) return false;
  const double bytes = std::round(x * static_cast<double>(unit));
  if (!(bytes >= 0) || bytes > static_cast<double>(kMaxPromSizeBytes)) return false;
  *lo = *hi = static_cast<uint64_t>(bytes);
  return true;
}

using Labels = PromLabels;

const std::string* Label(const Labels& labels, string_view name) {
  for (const auto& [k, v] : labels)
    if (k == name) return &v;
  return nullptr;
}

}  // namespace

std::string PromFileLayout(const std::vector<PromSample>& samples) {
  std::string layout;
  for (const PromSample& x : samples) {
    if (layout.empty())
      layout = x.layout;
    else if (x.layout != layout)
      return "mixed";
  }
  return layout;
}

std::string FillPromColumns(const PromLabels& labels, PromSample* x) {
  if (const std::string* g = Label(labels, x->layout == "2.29" ? "gpu_device_id" : "gpu"))
    x->gpu = *g;
  else if (const std::string* g2 = Label(labels, "gpu"))
    x->gpu = *g2;
  auto text = [&](const char* key, std::optional<std::string>* out) {
    if (const std::string* v = Label(labels, key)) *out = *v;
  };
  text("comm_name", &x->comm_name);
  text("comm_id", &x->comm_id);
  text("collective", &x->op);
  if (!x->op) text("p2p_operation", &x->op);
  text("message_size", &x->message_size);
  text("algo_proto", &x->algo_proto);
  text("slurm_job_id", &x->slurm_job_id);
  std::string bad;
  auto rank_label = [&](const char* key, std::optional<int32_t>* out) {
    const std::string* v = Label(labels, key);
    if (!v) return;
    uint64_t r = 0;
    if (ParseCount(*v, static_cast<uint64_t>(kMaxPromRanks), &r))
      *out = static_cast<int32_t>(r);
    else
      bad += std::string(bad.empty() ? "" : "; ") + key + " \"" + Clip(*v, 80) +
             "\" is no count up to 2^24";
  };
  rank_label("rank", &x->rank);
  rank_label("n_nodes", &x->n_nodes);
  rank_label("nranks", &x->nranks);
  if (!x->nranks && !Label(labels, "nranks"))
    rank_label("n_ranks", &x->nranks);             // the 2.29 README's name
  for (const char* key : {"coll_sn", "p2p_sn"}) {  // p2p_sn: OTLP's per-operation points
    const std::string* v = Label(labels, key);
    if (!v || x->coll_sn) continue;
    uint64_t sn = 0;
    if (ParseCount(*v, uint64_t{1} << 62, &sn))
      x->coll_sn = sn;
    else
      bad += std::string(bad.empty() ? "" : "; ") + key + " \"" + Clip(*v, 80) +
             "\" is no count below 2^62";
  }
  bool in_bytes = false;  // OTLP's per-operation points give the size in bytes
  for (const char* key : {"coll_msg_size_bytes", "p2p_msg_size_bytes"}) {
    const std::string* v = Label(labels, key);
    if (!v || x->message_size) continue;
    in_bytes = true;
    x->message_size = *v;
    uint64_t n = 0;
    if (ParseCount(*v, kMaxPromSizeBytes, &n))
      x->size_lo_bytes = x->size_hi_bytes = n;
    else
      bad += std::string(bad.empty() ? "" : "; ") + key + " \"" + Clip(*v, 80) +
             "\" is no byte count up to 1 PiB";
  }
  if (x->message_size && !in_bytes) {
    uint64_t lo = 0, hi = 0;
    if (ParseMessageSize(*x->message_size, &lo, &hi))
      x->size_lo_bytes = lo, x->size_hi_bytes = hi;
    else
      bad += std::string(bad.empty() ? "" : "; ") + "message_size \"" + Clip(*x->message_size, 80) +
             "\" is no size (\"2.00GB\", \"4-5GB\") up to 1 PiB";
  }
  if (const std::string* v = Label(labels, "timestamp")) {
    int64_t us = 0;
    if (ParseIsoUtc(*v, &us))
      x->ts_us = us;
    else
      bad += std::string(bad.empty() ? "" : "; ") + "timestamp \"" + Clip(*v, 80) +
             "\" is no ISO-8601 UTC time";
  }
  x->labels = "{";
  for (const auto& [k, v] : labels) {
    if (x->labels.size() > 1) x->labels += ',';
    capture::AppendEscapedJsonString(k, &x->labels);
    x->labels += ':';
    capture::AppendEscapedJsonString(v, &x->labels);
  }
  x->labels += '}';
  return bad;
}

namespace {

class Parser {
 public:
  Parser(const std::string& path, PromFile* f) : path_(path), f_(f) {}

  void Line(string_view s, uint64_t n) {
    ++f_->lines;
    line_ = n;
    if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    SkipBlanks(&s);
    if (s.empty() || s.front() == '#') return;
    Labels labels;
    std::string why;
    PromSample x;
    x.line = n;
    string_view name = EatMetricName(&s);
    if (name.empty()) return Bad("not a Prometheus sample line: \"" + Clip(s, 80) + "\"");
    if (!name.starts_with("nccl_"))
      return Bad("not an NCCL Inspector metric: " + Clip(name, 80) + " (only nccl_* metrics are read)");
    x.metric = std::string(name);
    SkipBlanks(&s);
    if (!s.empty() && s.front() == '{') {
      s.remove_prefix(1);
      if (!LabelSet(&s, &labels, &why)) return Bad(x.metric + ": " + why);
    }
    if (!s.empty() && !IsBlank(s.front())) return Bad(x.metric + ": no blank before the value: \"" + Clip(s, 80) + "\"");
    SkipBlanks(&s);
    const size_t vend = std::min(s.find_first_of(" \t"), s.size());
    const string_view value = s.substr(0, vend);
    s.remove_prefix(vend);
    if (value.empty()) return Bad(x.metric + ": no value");
    if (!ParseValue(value, &x.value)) return Bad(x.metric + ": value \"" + Clip(value, 80) + "\" is no number");
    SkipBlanks(&s);
    std::optional<int64_t> exposition_ts;
    if (!s.empty()) {
      const size_t tend = std::min(s.find_first_of(" \t"), s.size());
      const string_view ts = s.substr(0, tend);
      s.remove_prefix(tend);
      SkipBlanks(&s);
      if (!s.empty()) return Bad(x.metric + ": more after the timestamp: \"" + Clip(s, 80) + "\"");
      uint64_t ms = 0;
      if (!ParseCount(ts, static_cast<uint64_t>(kMaxPromTimestampUs / 1000), &ms))
        return Bad(x.metric + ": timestamp \"" + Clip(ts, 80) + "\" is no milliseconds count below 2^53 us");
      exposition_ts = static_cast<int64_t>(ms) * 1000;
    }
    // The layout, by its labels.
    const std::string* version = Label(labels, "version");
    const std::string* node = Label(labels, "node");
    const std::string* host = Label(labels, "hostname");
    if (version) {
      if (!node) return Bad(x.metric + ": a 2.30 sample (version label) with no node label");
      x.layout = "2.30";
      x.node = *node;
    } else if (host) {
      x.layout = "2.29";
      x.node = *host;
    } else {
      return Bad(x.metric + ": neither a 2.30 sample (version, node labels) nor a 2.29 one (hostname label)");
    }
    std::string bad = FillPromColumns(labels, &x);
    if (!x.ts_us) x.ts_us = exposition_ts;
    if (!bad.empty()) Bad(x.metric + ": " + bad + " (stored as NULL)");
    f_->samples.push_back(std::move(x));
  }

  void Overlong(uint64_t bytes, uint64_t n) {
    ++f_->lines;
    line_ = n;
    Bad("a line of " + std::to_string(bytes) + " bytes, over the " + std::to_string(kMaxLineBytes >> 20) +
        " MiB a line may have");
  }

  void Finish() { f_->layout = PromFileLayout(f_->samples); }

 private:
  void Bad(const std::string& why) {
    ++f_->unused;
    if (f_->unused_named.size() < kMaxPromUnusedNamed)
      f_->unused_named.push_back(path_ + ":" + std::to_string(line_) + ": " + why);
  }

  // `label="value",...}` after the `{`.
  static bool LabelSet(string_view* s, Labels* labels, std::string* why) {
    for (;;) {
      SkipBlanks(s);
      if (s->empty()) return *why = "the label set has no closing }", false;
      if (s->front() == '}') {
        s->remove_prefix(1);
        return true;
      }
      size_t n = 0;
      while (n < s->size() && IsNameChar((*s)[n]) && (n > 0 || IsNameStart((*s)[n]))) ++n;
      if (n == 0) return *why = "a label name expected at \"" + Clip(*s, 40) + "\"", false;
      if (n > kMaxPromLabelBytes) return *why = "a label name of " + std::to_string(n) + " bytes", false;
      std::string name(s->substr(0, n));
      s->remove_prefix(n);
      SkipBlanks(s);
      if (s->empty() || s->front() != '=') return *why = "label " + Clip(name, 80) + " has no =", false;
      s->remove_prefix(1);
      SkipBlanks(s);
      if (s->empty() || s->front() != '"') return *why = "label " + Clip(name, 80) + "'s value is not quoted", false;
      s->remove_prefix(1);
      std::string value;
      bool closed = false;
      while (!s->empty()) {
        const char c = s->front();
        s->remove_prefix(1);
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (s->empty()) break;
          const char e = s->front();
          s->remove_prefix(1);
          if (e == '\\') value += '\\';
          else if (e == '"') value += '"';
          else if (e == 'n') value += '\n';
          else return *why = "label " + Clip(name, 80) + " has an unknown escape \\" + Clip(string_view(&e, 1)), false;
        } else {
          value += c;
        }
        if (value.size() > kMaxPromLabelBytes)
          return *why = "label " + Clip(name, 80) + "'s value is over " + std::to_string(kMaxPromLabelBytes) + " bytes", false;
      }
      if (!closed) return *why = "label " + Clip(name, 80) + "'s value has no closing quote", false;
      if (!simdjson::validate_utf8(value.data(), value.size()))
        return *why = "label " + Clip(name, 80) + "'s value is not UTF-8", false;
      if (Label(*labels, name)) return *why = "label " + Clip(name, 80) + " twice", false;
      if (labels->size() >= kMaxPromLabels)
        return *why = "more than " + std::to_string(kMaxPromLabels) + " labels", false;
      labels->emplace_back(std::move(name), std::move(value));
      SkipBlanks(s);
      if (!s->empty() && s->front() == ',') s->remove_prefix(1);
      else if (s->empty() || s->front() != '}') return *why = "a , or } expected after label " + Clip(labels->back().first), false;
    }
  }

  std::string path_;
  PromFile* f_;
  uint64_t line_ = 0;
};

std::string TooBig(const std::string& path, uint64_t size) {
  return path + ": not read: " + std::to_string(size) + " bytes, over the " + std::to_string(kMaxPromBytes >> 20) +
         " MiB a Prometheus file may have";
}

}  // namespace

Result<PromFile> ParsePromTextfile(string_view content, const std::string& path) {
  PromFile f;
  f.path = path;
  if (content.size() > kMaxPromBytes) return Status::Corruption(TooBig(path, content.size()));
  Parser p(path, &f);
  uint64_t n = 0;
  size_t b = 0;
  while (b < content.size()) {
    const size_t e = content.find('\n', b);
    if (e == string_view::npos) {
      f.incomplete_tail_bytes = content.size() - b;
      break;
    }
    if (e - b + 1 > kMaxLineBytes) p.Overlong(e - b + 1, ++n);
    else p.Line(content.substr(b, e - b), ++n);
    b = e + 1;
  }
  p.Finish();
  return f;
}

Result<PromFile> ReadPromTextfile(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status::IOError(path + ": cannot read: " + ec.message());
  if (size > kMaxPromBytes) return Status::Corruption(TooBig(path, size));
  PromFile f;
  f.path = path;
  Parser p(path, &f);
  LineReader reader(size_t{1} << 20);
  COLLSCOPE_RETURN_IF_ERROR(reader.Open(path, 0));
  uint64_t n = 0;
  LineBlock block;
  for (;;) {
    auto more = reader.Next(&block);
    if (!more.ok()) return more.status().WithPrefix(path + ": ");
    if (!*more) break;
    if (block.overlong) {
      p.Overlong(block.overlong, ++n);
      continue;
    }
    const string_view data(block.data, block.size);
    size_t b = 0;
    while (b < data.size()) {
      const size_t e = data.find('\n', b);  // every line of a block ends in '\n'
      p.Line(data.substr(b, e - b), ++n);
      b = e + 1;
    }
  }
  f.incomplete_tail_bytes = reader.pending();
  p.Finish();
  return f;
}

// ---- store ----

namespace {

Status StoreProm(Store& store, int32_t run_id, const std::vector<PromFile>& files) {
  auto known_rows = store.Query("SELECT path, file_id FROM prom_files WHERE run_id = " + std::to_string(run_id));
  if (!known_rows.ok()) return known_rows.status();
  std::map<std::string, int32_t> known;
  int32_t next = 0;
  for (const auto& row : known_rows->rows) {
    const int32_t id = std::stoi(*row[1]);
    known[*row[0]] = id;
    next = std::max(next, id + 1);
  }
  std::string sql;
  std::vector<int32_t> ids;
  for (const PromFile& f : files) {
    auto it = known.find(StorablePath(f.path));
    if (it == known.end()) {
      ids.push_back(next++);
      continue;
    }
    ids.push_back(it->second);
    for (const char* t : {"prom_files", "prom_samples"})
      sql += std::string("DELETE FROM ") + t + " WHERE run_id = " + std::to_string(run_id) +
             " AND file_id = " + std::to_string(it->second) + ";\n";
  }
  if (!sql.empty()) COLLSCOPE_RETURN_IF_ERROR(store.Exec(sql));
  Rows rf, rs;
  COLLSCOPE_RETURN_IF_ERROR(rf.Open(store, "prom_files"));
  COLLSCOPE_RETURN_IF_ERROR(rs.Open(store, "prom_samples"));
  for (size_t k = 0; k < files.size(); ++k) {
    const PromFile& f = files[k];
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(f.path, ec);
    rf.I32(run_id).I32(ids[k]).Str(StorablePath(f.path)).U64(ec ? 0 : bytes).Str(f.layout).U64(f.lines)
        .U64(f.samples.size()).U64(f.unused).U64(f.incomplete_tail_bytes);
    COLLSCOPE_RETURN_IF_ERROR(rf.EndRow());
    for (const PromSample& x : f.samples) {
      rs.I32(run_id).I32(ids[k]).U64(x.line).Str(x.metric).Str(x.layout).Str(x.node).Str(x.gpu).Opt(x.comm_name)
          .Opt(x.comm_id).Opt(x.rank).Opt(x.n_nodes).Opt(x.nranks).Opt(x.op).Opt(x.coll_sn).Opt(x.message_size)
          .Opt(x.size_lo_bytes).Opt(x.size_hi_bytes).Opt(x.algo_proto).Opt(x.slurm_job_id).Opt(x.ts_us).F64(x.value)
          .Str(x.labels);
      COLLSCOPE_RETURN_IF_ERROR(rs.EndRow());
    }
  }
  COLLSCOPE_RETURN_IF_ERROR(rf.Close());
  return rs.Close();
}

}  // namespace

Result<PromIngestReport> IngestPromFiles(Store& store, const std::vector<std::string>& paths,
                                         const std::string& run) {
  PromIngestReport rep;
  auto found = FindInputFiles(paths, [](const std::string& p, bool) {
    return MetricsFileFormatOf(p) != MetricsFileFormat::kNone;
  });
  if (!found.ok()) return found.status();
  rep.skipped = found->skipped;
  std::vector<PromFile> files;
  for (const std::string& path : found->files) {
    ++rep.files_seen;
    auto f = MetricsFileFormatOf(path) == MetricsFileFormat::kOtlp ? ReadOtlpMetrics(path)
                                                                   : ReadPromTextfile(path);
    if (!f.ok()) {
      rep.failed.push_back(f.status().message());
      continue;
    }
    rep.lines_unused += f->unused;
    rep.samples += f->samples.size();
    rep.incomplete_tails += f->incomplete_tail_bytes > 0;
    for (const std::string& u : f->unused_named)
      if (rep.unused.size() < kMaxPromUnusedNamed) rep.unused.push_back(u);
    files.push_back(std::move(*f));
  }
  if (files.empty()) return rep;
  auto run_id = store.RunId(run, true);
  if (!run_id.ok()) return run_id.status();
  COLLSCOPE_RETURN_IF_ERROR(store.Exec("BEGIN TRANSACTION"));
  Status st = StoreProm(store, *run_id, files);
  if (st.ok()) st = store.Exec("COMMIT");
  if (!st.ok()) {
    store.Exec("ROLLBACK").IgnoreError();
    return st;
  }
  rep.files_read = files.size();
  return rep;
}

}  // namespace collscope::readers
