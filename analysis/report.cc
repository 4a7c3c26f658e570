#include "analysis/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include "analysis/primitives.h"
#include "analysis/report_assets.h"

namespace collscope {
namespace {

std::string JsonEscape(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;  // never close the <script> the data sits in
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

bool Numeric(duckdb_type t) {
  switch (t) {
    case DUCKDB_TYPE_TINYINT: case DUCKDB_TYPE_SMALLINT: case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_BIGINT: case DUCKDB_TYPE_UTINYINT: case DUCKDB_TYPE_USMALLINT:
    case DUCKDB_TYPE_UINTEGER: case DUCKDB_TYPE_UBIGINT: case DUCKDB_TYPE_FLOAT:
    case DUCKDB_TYPE_DOUBLE: case DUCKDB_TYPE_HUGEINT: case DUCKDB_TYPE_UHUGEINT:
    case DUCKDB_TYPE_DECIMAL:
      return true;
    default:
      return false;
  }
}

// {"columns":[...],"rows":[[...],...]}: compact, numbers unquoted, NULL/NaN/inf as null.
std::string TableJson(const QueryResult& r) {
  std::string out = "{\"columns\":[";
  for (size_t i = 0; i < r.columns.size(); ++i) {
    if (i) out += ',';
    out += JsonEscape(r.columns[i]);
  }
  out += "],\"rows\":[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    out += i ? ",[" : "[";
    for (size_t c = 0; c < r.columns.size(); ++c) {
      if (c) out += ",";
      const auto& v = r.rows[i][c];
      if (!v) {
        out += "null";
      } else if (Numeric(r.types[c])) {
        double d = std::strtod(v->c_str(), nullptr);
        if (!std::isfinite(d)) out += "null";
        else if (v->find_first_not_of("-0123456789") == std::string::npos) out += *v;
        else {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.6g", d);
          out += buf;
        }
      } else {
        out += JsonEscape(*v);
      }
    }
    out += "]";
  }
  return out + "]}";
}

Result<std::string> Table(Store& store, const std::string& sql) {
  Result<QueryResult> r = store.Query(sql);
  if (!r.ok()) return r.status();
  return TableJson(*r);
}

Result<std::string> Primitive(Store& store, const std::string& name, const AnalysisOptions& o,
                              const std::string& where = "", const std::string& order = "") {
  Result<std::string> sql = PrimitiveSql(name, o);
  if (!sql.ok()) return sql.status();
  std::string q = "SELECT * FROM (" + *sql + ") p";
  if (!where.empty()) q += " WHERE " + where;
  if (!order.empty()) q += " ORDER BY " + order;
  Result<QueryResult> r = store.Query(q);
  if (!r.ok()) return Status::Error(name + ": " + r.status().message());
  return TableJson(*r);
}

std::string ReadFile(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// A JSON value inside <script type="application/json">: "</" must not appear.
std::string ScriptSafe(std::string s) {
  size_t at = 0;
  while ((at = s.find("</", at)) != std::string::npos) s.replace(at, 2, "<\\/");
  return s;
}

}  // namespace

bool ReportHasCharts() { return ReportEchartsJs().size() > 1000; }

Result<std::string> RenderReport(Store& store, const ReportOptions& ro) {
  // Which run.
  std::string run = ro.run;
  if (run.empty()) {
    Result<std::string> r = store.DefaultRun();
    if (!r.ok()) return r.status();
    run = *r;
  }
  Result<int32_t> run_id = store.RunId(run, false);
  if (!run_id.ok()) return run_id.status();
  std::string rid = std::to_string(*run_id);
  std::string baseline = ro.baseline;
  if (baseline.empty()) {
    Result<QueryResult> b = store.Query(
        "SELECT ru.name FROM runs ru WHERE ru.run_id IN (SELECT run_id FROM nccl_tests_results) "
        "AND ru.run_id <> " + rid + " ORDER BY ru.run_id LIMIT 1");
    if (!b.ok()) return b.status();
    if (!b->rows.empty()) baseline = *b->rows[0][0];
  } else {
    Result<int32_t> b = store.RunId(baseline, false);
    if (!b.ok()) return b.status();
  }

  AnalysisOptions o;
  o.run = run;
  o.min_bytes = ro.min_bytes;
  // Widen the time bins so no plot has more than max_bins of them.
  Result<QueryResult> span = store.Query(
      "SELECT (last_ts_us - first_ts_us) / 1e6 FROM run_span WHERE run_id = " + rid);
  if (!span.ok()) return span.status();
  double span_s = span->rows.empty() || !span->rows[0][0] ? 0 : std::stod(*span->rows[0][0]);
  o.bin_s = ro.bin_s;
  if (span_s / o.bin_s > ro.max_bins) {
    const double nice[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200};
    for (double n : nice)
      if (n >= span_s / ro.max_bins) { o.bin_s = std::max(o.bin_s, n); break; }
  }
  // Fine bins for short jobs (the example job lasts seconds).
  if (span_s > 0 && span_s / o.bin_s < 12) o.bin_s = std::max(0.05, span_s / 40);

  std::string data = "{";
  auto add = [&](const std::string& key, const Result<std::string>& value) -> Status {
    if (!value.ok()) return value.status();
    data += (data.size() > 1 ? ",\n" : "") + JsonEscape(key) + ":" + *value;
    return Status::Ok();
  };
  char meta[512];
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  std::snprintf(meta, sizeof meta,
                "{\"run\":%s,\"baseline\":%s,\"store\":%s,\"generated\":%s,\"bin_s\":%.6g,"
                "\"min_bytes\":%llu,\"top\":%d,\"charts\":%s}",
                JsonEscape(run).c_str(), baseline.empty() ? "null" : JsonEscape(baseline).c_str(),
                JsonEscape(store.path()).c_str(), JsonEscape(when).c_str(), o.bin_s,
                static_cast<unsigned long long>(o.min_bytes), ro.top_kernels,
                ReportHasCharts() ? "true" : "false");
  data += "\"meta\":" + std::string(meta);
  // The hot kernels once: the table shows the first 25, and their order picks the kernels that
  // the ECDF, temporal and range-bar plots show (as literal lists, not recomputed subqueries).
  Result<QueryResult> hot = store.Query(
      "SELECT h.rank, h.kernel_key, h.coll_type, h.n_ranks, h.nnodes, h.op, h.msg_size_bytes, "
      "h.records, h.bytes, h.time_us, h.time_share, h.cumulative_time_share, h.bytes_share, "
      "v.median_busbw_gbs, v.p5_busbw_gbs, v.p95_busbw_gbs, v.cv_busbw, v.mean_exec_time_us "
      "FROM hot_kernels h LEFT JOIN kernel_variation v USING (run_id, kernel_key) "
      "WHERE h.run_id = " + rid + " ORDER BY h.rank");
  if (!hot.ok()) return hot.status();
  std::string top, top_big, first_big;  // SQL lists of kernel keys: any size, and >= min_bytes
  int n_top = 0, n_big = 0;
  const int key_col = ColumnOf(*hot, "kernel_key"), size_col = ColumnOf(*hot, "msg_size_bytes");
  for (const auto& row : hot->rows) {
    if (!row[key_col]) continue;
    const std::string key = SqlString(*row[key_col]);
    if (n_top < ro.top_kernels) top += (n_top++ ? ", " : "") + key;
    if (n_big < ro.top_kernels && row[size_col] && std::stoull(*row[size_col]) >= o.min_bytes) {
      if (n_big == 0) first_big = key;
      top_big += (n_big++ ? ", " : "") + key;
    }
  }
  if (top.empty()) top = "NULL";
  if (top_big.empty()) top_big = first_big = "NULL";
  QueryResult hot25 = *hot;
  if (hot25.rows.size() > 25) hot25.rows.resize(25);

  COLLSCOPE_RETURN_IF_ERROR(add("overview", Table(store,
      "SELECT o.*, k.kernels, k.bytes, k.time_us, "
      "(SELECT max(n_ranks) FROM op_dims d WHERE d.run_id = o.run_id) AS max_n_ranks, "
      "(SELECT count(*) FROM runs) AS runs_in_store, first_dump::VARCHAR AS first_dump_text, "
      "last_dump::VARCHAR AS last_dump_text FROM run_overview o, (SELECT count(DISTINCT "
      "kernel_key) AS kernels, sum(bytes) AS bytes, sum(time_us) AS time_us FROM kernel_stats "
      "WHERE run_id = " + rid + ") k WHERE o.run_id = " + rid)));
  COLLSCOPE_RETURN_IF_ERROR(add("counts_by_op", Primitive(store, "counts_by_op", o)));
  COLLSCOPE_RETURN_IF_ERROR(add("counts_by_coll_type", Primitive(store, "counts_by_coll_type", o)));
  COLLSCOPE_RETURN_IF_ERROR(add("hot_kernels", TableJson(hot25)));
  COLLSCOPE_RETURN_IF_ERROR(add("ecdf", Primitive(store, "busbw_ecdf", o,
                                                  "kernel_key IN (" + top + ")",
                                                  "kernel_key, busbw_gbs")));
  COLLSCOPE_RETURN_IF_ERROR(add("temporal", Primitive(store, "temporal", o,
                                                      "kernel_key IN (" + top_big + ")",
                                                      "kernel_key, bin")));
  COLLSCOPE_RETURN_IF_ERROR(add("rank_cells", Primitive(store, "rank_cells", o)));
  COLLSCOPE_RETURN_IF_ERROR(add("host_table", Primitive(store, "host_table", o)));
  COLLSCOPE_RETURN_IF_ERROR(add("host_heatmap", Primitive(store, "host_time_heatmap", o)));
  COLLSCOPE_RETURN_IF_ERROR(add("range_bars", Primitive(store, "range_bars", o,
      "kernel_key IN (" + first_big + ")")));
  COLLSCOPE_RETURN_IF_ERROR(add("resource", Primitive(store, "resource_usage", o)));
  if (!baseline.empty()) {
    AnalysisOptions c = o;
    c.run.clear();
    c.prod_run = run;
    c.base_run = baseline;
    COLLSCOPE_RETURN_IF_ERROR(add("baseline", Primitive(store, "compare_runs", c)));
  }
  data += "}";

  std::string findings = "null";
  if (!ro.findings_path.empty()) {
    bool ok = false;
    findings = ReadFile(ro.findings_path, &ok);
    if (!ok) return Status::Error(ro.findings_path + ": cannot read the findings document");
    if (findings.find("collscope.findings.v1") == std::string::npos)
      return Status::Error(ro.findings_path +
                           ": not a findings document (schema collscope.findings.v1)");
  }

  // Fill the template's {{NAME}} markers in one pass, so inserted text is never scanned again.
  std::string tpl(ReportTemplateHtml());
  std::string html;
  html.reserve(tpl.size() + ReportEchartsJs().size() + data.size() + findings.size() + 4096);
  size_t pos = 0;
  while (true) {
    size_t at = tpl.find("{{", pos);
    if (at == std::string::npos) break;
    size_t end = tpl.find("}}", at);
    if (end == std::string::npos) break;
    html.append(tpl, pos, at - pos);
    std::string key = tpl.substr(at + 2, end - at - 2);
    if (key == "CSS") html += ReportCss();
    else if (key == "TITLE") html += HtmlEscape("collscope report: " + run);
    else if (key == "ECHARTS") html += ReportEchartsJs();
    else if (key == "DATA") html += ScriptSafe(data);
    else if (key == "FINDINGS") html += ScriptSafe(findings);
    else if (key == "JS") html += ReportJs();
    else html.append(tpl, at, end + 2 - at);
    pos = end + 2;
  }
  html.append(tpl, pos, std::string::npos);
  return html;
}

Status WriteReport(Store& store, const ReportOptions& options) {
  Result<std::string> html = RenderReport(store, options);
  if (!html.ok()) return html.status();
  std::ofstream out(options.output, std::ios::binary);
  if (!out) return Status::Error(options.output + ": cannot write");
  out << *html;
  out.close();
  if (!out) return Status::Error(options.output + ": write failed");
  return Status::Ok();
}

}  // namespace collscope
