// The Grafana dashboard of docs/agent.md (agent/dashboards/collscope-job.json), checked two ways:
// * its structure: a Prometheus datasource variable that every panel, target and annotation
//   uses (an imported dashboard then asks for one Prometheus, and no query points at a uid that
//   exists only on the author's Grafana), the job/host variables, unique panel ids, a gridPos on
//   every panel, and at least one query with a refId on every panel that is not a row;
// * every query against a real Prometheus (tests/servers.h) fed by a real agent's remote-write
//   over a simulated job with a slow NIC: each variable, panel target and annotation query, with
//   the template variables substituted as Grafana would, must parse, return data, and carry the
//   labels its legend, title and transformations name; every metric it reads must be one the agent
//   exposes. A dashboard that only looks right in the JSON, or reads a renamed metric, fails here.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/http.h"
#include "sim/sim.h"
#include "tests/servers.h"
#include "tests/test_util.h"

namespace collscope::agent {
namespace {

using collscope::testing::RealServer;
using collscope::testing::ServerKind;
using collscope::testing::TempDir;
using LabelMap = std::map<std::string, std::string>;

const std::string kDashboard =
    std::string(COLLSCOPE_SOURCE_DIR) + "/agent/dashboards/collscope-job.json";
const std::string kJob = "train-42";
// The host the simulated fault is on: the agent's slow_link finding names it.
const std::string kSlowHost = "node-001";

// ---------------------------------------------------------------------------------------------
// The dashboard, read into plain structs so that each rule below reads as one loop.

struct DataSourceRef {
  bool present = false;
  std::string type, uid;
};

struct Target {
  std::string ref_id, expr, legend, format;
  bool instant = false;
  DataSourceRef datasource;
};

struct Transformation {
  std::string id;
  std::map<std::string, std::string> options;  // the string options (field names)
  std::set<std::string> field_keys;            // keys of organize's excludeByName/indexByName/...
};

struct Panel {
  int64_t id = -1;
  std::string type, title, repeat;
  bool grid_pos = false;
  int64_t x = -1, y = -1, w = -1, h = -1;
  DataSourceRef datasource;
  std::vector<Target> targets;
  std::vector<Transformation> transformations;
};

struct Variable {
  std::string name, type, query;
  bool multi = false, include_all = false;
  std::string all_value;
  DataSourceRef datasource;
};

struct Annotation {
  std::string name, expr, title_format, text_format, tag_keys;
  bool builtin = false;
  DataSourceRef datasource;
};

struct Dashboard {
  int64_t schema_version = 0;
  std::vector<Panel> panels;  // rows and the panels inside collapsed rows included
  std::vector<Variable> variables;
  std::vector<Annotation> annotations;
};

std::string StringOr(simdjson::dom::element e, const char* key, std::string fallback = "") {
  std::string_view v;
  if (e[key].get(v) == simdjson::SUCCESS) return std::string(v);
  return fallback;
}

DataSourceRef DataSourceOf(simdjson::dom::element e) {
  DataSourceRef ref;
  simdjson::dom::element ds;
  if (e["datasource"].get(ds) != simdjson::SUCCESS) return ref;
  ref.present = true;
  std::string_view legacy;  // a bare string: a datasource name from before schema 33
  if (ds.get(legacy) == simdjson::SUCCESS) {
    ref.uid = std::string(legacy);
    return ref;
  }
  ref.type = StringOr(ds, "type");
  ref.uid = StringOr(ds, "uid");
  return ref;
}

void ReadPanels(simdjson::dom::array panels, std::vector<Panel>* out) {
  for (simdjson::dom::element p : panels) {
    Panel panel;
    int64_t id = 0;
    if (p["id"].get(id) == simdjson::SUCCESS) panel.id = id;
    panel.type = StringOr(p, "type");
    panel.title = StringOr(p, "title");
    panel.repeat = StringOr(p, "repeat");
    panel.datasource = DataSourceOf(p);
    simdjson::dom::element grid;
    if (p["gridPos"].get(grid) == simdjson::SUCCESS) {
      panel.grid_pos = grid["x"].get(panel.x) == simdjson::SUCCESS &&
                       grid["y"].get(panel.y) == simdjson::SUCCESS &&
                       grid["w"].get(panel.w) == simdjson::SUCCESS &&
                       grid["h"].get(panel.h) == simdjson::SUCCESS;
    }
    simdjson::dom::array targets;
    if (p["targets"].get(targets) == simdjson::SUCCESS) {
      for (simdjson::dom::element t : targets) {
        Target target;
        target.ref_id = StringOr(t, "refId");
        target.expr = StringOr(t, "expr");
        target.legend = StringOr(t, "legendFormat");
        target.format = StringOr(t, "format", "time_series");
        bool instant = false;
        if (t["instant"].get(instant) == simdjson::SUCCESS) target.instant = instant;
        target.datasource = DataSourceOf(t);
        panel.targets.push_back(std::move(target));
      }
    }
    simdjson::dom::array transformations;
    if (p["transformations"].get(transformations) == simdjson::SUCCESS) {
      for (simdjson::dom::element t : transformations) {
        Transformation tr;
        tr.id = StringOr(t, "id");
        simdjson::dom::object options;
        if (t["options"].get(options) == simdjson::SUCCESS) {
          for (auto field : options) {
            std::string_view v;
            simdjson::dom::object by_name;
            if (field.value.get(v) == simdjson::SUCCESS) {
              tr.options[std::string(field.key)] = std::string(v);
            } else if (field.value.get(by_name) == simdjson::SUCCESS) {
              for (auto named : by_name) tr.field_keys.insert(std::string(named.key));
            }
          }
        }
        panel.transformations.push_back(std::move(tr));
      }
    }
    out->push_back(std::move(panel));
    simdjson::dom::array nested;  // a collapsed row keeps its panels inside it
    if (p["panels"].get(nested) == simdjson::SUCCESS) ReadPanels(nested, out);
  }
}

Dashboard ReadDashboard(simdjson::dom::parser& parser) {
  Dashboard d;
  simdjson::dom::element doc;
  const auto error = parser.load(kDashboard).get(doc);
  EXPECT_EQ(error, simdjson::SUCCESS) << kDashboard << ": " << simdjson::error_message(error);
  if (error != simdjson::SUCCESS) return d;
  EXPECT_EQ(doc["schemaVersion"].get(d.schema_version), simdjson::SUCCESS);
  simdjson::dom::array panels;
  EXPECT_EQ(doc["panels"].get(panels), simdjson::SUCCESS);
  if (panels.size() > 0) ReadPanels(panels, &d.panels);
  simdjson::dom::array vars;
  if (doc["templating"]["list"].get(vars) == simdjson::SUCCESS) {
    for (simdjson::dom::element v : vars) {
      Variable var;
      var.name = StringOr(v, "name");
      var.type = StringOr(v, "type");
      // A query variable's query is an object in current Grafana, a string before it.
      var.query = StringOr(v, "query");
      if (var.query.empty()) var.query = StringOr(v["query"], "query");
      bool flag = false;
      if (v["multi"].get(flag) == simdjson::SUCCESS) var.multi = flag;
      if (v["includeAll"].get(flag) == simdjson::SUCCESS) var.include_all = flag;
      var.all_value = StringOr(v, "allValue");
      var.datasource = DataSourceOf(v);
      d.variables.push_back(std::move(var));
    }
  }
  simdjson::dom::array annotations;
  if (doc["annotations"]["list"].get(annotations) == simdjson::SUCCESS) {
    for (simdjson::dom::element a : annotations) {
      Annotation ann;
      ann.name = StringOr(a, "name");
      ann.expr = StringOr(a, "expr");
      ann.title_format = StringOr(a, "titleFormat");
      ann.text_format = StringOr(a, "textFormat");
      ann.tag_keys = StringOr(a, "tagKeys");
      int64_t builtin = 0;
      ann.builtin = a["builtIn"].get(builtin) == simdjson::SUCCESS && builtin != 0;
      ann.datasource = DataSourceOf(a);
      d.annotations.push_back(std::move(ann));
    }
  }
  return d;
}

const Variable* FindVariable(const Dashboard& d, const std::string& name) {
  for (const Variable& v : d.variables)
    if (v.name == name) return &v;
  return nullptr;
}

// The one datasource every query must use: the dashboard's own Prometheus variable. A fixed uid
// would name a datasource that exists only on the Grafana the dashboard was exported from.
bool IsPrometheusVariable(const DataSourceRef& ref) {
  return ref.present && ref.type == "prometheus" &&
         (ref.uid == "${datasource}" || ref.uid == "$datasource");
}

// ---------------------------------------------------------------------------------------------
// Queries as Grafana sends them.

// The label names a legend, title or text template reads: {{name}}.
std::set<std::string> TemplateLabels(const std::string& format) {
  std::set<std::string> out;
  static const std::regex kRef(R"(\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\})");
  for (std::sregex_iterator it(format.begin(), format.end(), kRef), end; it != end; ++it)
    out.insert((*it)[1]);
  return out;
}

std::set<std::string> MetricNames(const std::string& expr) {
  std::set<std::string> out;
  static const std::regex kName(R"(\bcollscope_[A-Za-z0-9_]*)");
  for (std::sregex_iterator it(expr.begin(), expr.end(), kName), end; it != end; ++it)
    out.insert(it->str());
  return out;
}

// Grafana's variable syntax ($name, ${name}); Grafana's built-in interval and range variables
// get the values a 30-minute dashboard with a 15 s scrape would. Returns nullopt (and says which)
// when a variable is unknown: a typo Grafana would send to Prometheus verbatim.
std::optional<std::string> Substitute(const std::string& expr,
                                      std::map<std::string, std::string> vars,
                                      std::string* unknown) {
  vars.insert({{"__rate_interval", "1m"},
               {"__interval", "15s"},
               {"__interval_ms", "15000"},
               {"__range", "30m"},
               {"__range_s", "1800"},
               {"__range_ms", "1800000"}});
  std::string out;
  for (size_t i = 0; i < expr.size();) {
    if (expr[i] != '$') {
      out += expr[i++];
      continue;
    }
    std::string name;
    size_t next;
    if (i + 1 < expr.size() && expr[i + 1] == '{') {
      const size_t close = expr.find('}', i);
      if (close == std::string::npos) {
        *unknown = expr.substr(i);
        return std::nullopt;
      }
      name = expr.substr(i + 2, close - i - 2);
      next = close + 1;
    } else {
      next = i + 1;
      while (next < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[next])) || expr[next] == '_'))
        ++next;
      name = expr.substr(i + 1, next - i - 1);
    }
    auto it = vars.find(name);
    if (it == vars.end()) {
      *unknown = "$" + name;
      return std::nullopt;
    }
    out += it->second;
    i = next;
  }
  return out;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  static const char* kHex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One answer of Prometheus' HTTP API: whether it succeeded (the query parsed and ran), its
// error, and the label sets of the series it returned.
struct PromAnswer {
  bool success = false;
  std::string error;
  std::vector<LabelMap> series;
  std::vector<double> last_values;  // per series: the instant value, or a range's last one
};

PromAnswer PromGet(const std::string& base_url, const std::string& path_and_query) {
  PromAnswer answer;
  Result<HttpResponse> r = HttpRequest("GET", base_url + path_and_query, {}, "", 15'000);
  if (!r.ok()) {
    answer.error = r.status().message();
    return answer;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(simdjson::padded_string(r->body)).get(doc) != simdjson::SUCCESS) {
    answer.error = "unparsable answer: " + r->body;
    return answer;
  }
  answer.success = StringOr(doc, "status") == "success";
  answer.error = StringOr(doc, "error");
  simdjson::dom::array data;
  if (doc["data"].get(data) == simdjson::SUCCESS) {  // /api/v1/series: label sets
    for (simdjson::dom::element item : data) {
      LabelMap labels;
      simdjson::dom::object o;
      if (item.get(o) != simdjson::SUCCESS) continue;
      for (auto field : o) {
        std::string_view v;
        if (field.value.get(v) == simdjson::SUCCESS)
          labels[std::string(field.key)] = std::string(v);
      }
      answer.series.push_back(std::move(labels));
    }
    return answer;
  }
  simdjson::dom::array results;
  if (doc["data"]["result"].get(results) != simdjson::SUCCESS) return answer;
  for (simdjson::dom::element item : results) {
    LabelMap labels;
    simdjson::dom::object metric;
    if (item["metric"].get(metric) == simdjson::SUCCESS)
      for (auto field : metric) {
        std::string_view v;
        if (field.value.get(v) == simdjson::SUCCESS)
          labels[std::string(field.key)] = std::string(v);
      }
    std::string_view value;
    simdjson::dom::array values;
    if (item["value"].at(1).get(value) != simdjson::SUCCESS &&
        item["values"].get(values) == simdjson::SUCCESS && values.size() > 0 &&
        values.at(values.size() - 1).at(1).get(value) != simdjson::SUCCESS)
      value = {};
    answer.last_values.push_back(value.empty() ? 0 : std::stod(std::string(value)));
    answer.series.push_back(std::move(labels));
  }
  return answer;
}

// Grafana runs an instant target as /api/v1/query and every other one (and every annotation) as
// /api/v1/query_range over the dashboard's time range.
PromAnswer PromQuery(const std::string& base_url, const std::string& expr, bool instant) {
  const double now = NowSeconds();
  if (instant) return PromGet(base_url, "/api/v1/query?query=" + UrlEncode(expr));
  char range[96];
  std::snprintf(range, sizeof range, "&start=%.3f&end=%.3f&step=15", now - 1800, now + 1);
  return PromGet(base_url, "/api/v1/query_range?query=" + UrlEncode(expr) + range);
}

// label_values(SELECTOR, LABEL): the values of LABEL on the series SELECTOR matches, as
// Grafana's Prometheus variable query computes them (/api/v1/series).
std::set<std::string> LabelValues(const std::string& base_url, const std::string& query,
                                  std::string* error) {
  static const std::regex kLabelValues(
      R"(^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$)");
  std::smatch m;
  std::set<std::string> out;
  if (!std::regex_match(query, m, kLabelValues)) {
    *error = "not a label_values(selector, label) query: " + query;
    return out;
  }
  const double now = NowSeconds();
  char range[96];
  std::snprintf(range, sizeof range, "&start=%.3f&end=%.3f", now - 1800, now + 1);
  PromAnswer a =
      PromGet(base_url, "/api/v1/series?match[]=" + UrlEncode(m[1].str()) + std::string(range));
  if (!a.success) *error = a.error;
  for (const LabelMap& s : a.series)
    if (auto it = s.find(m[2].str()); it != s.end()) out.insert(it->second);
  return out;
}

std::string Describe(const LabelMap& labels) {
  std::ostringstream s;
  for (const auto& [k, v] : labels) s << k << "=" << v << " ";
  return s.str();
}

// ---------------------------------------------------------------------------------------------
// The job: the simulator's default model on 4 hosts (TP 4, PP 2, DP 4, 32 ranks) with a quarter-
// speed NIC on node-001, for which the agent raises slow_link on node-001 and knows the layout,
// so the per-rank series carry their grid coordinates.

sim::SimConfig SlowNicJob(const std::string& out) {
  sim::SimConfig c;
  c.seed = 3;
  c.cluster.hosts = 4;
  c.workload.steps = 30;
  c.output.dir = out;
  c.output.kineto_max_ranks = 0;
  c.output.steps = false;
  sim::FaultSpec f;
  std::string err;
  EXPECT_EQ(sim::ParseFaultSpec("kind=nic_degrade,host=1,factor=0.25", &f).message(), "");
  c.faults.push_back(f);
  return c;
}

// The simulator writes Inspector v4.0 records, which carry no drop counts; a v4.1 writer (and
// collscope's plugin) adds a dump_stats line per communicator and dump. Appends one to a log of
// `host`, for that log's first record's communicator, rank, process and dump time, as the writer
// would after a pass in which it dropped records: the job then has drops to show.
void AppendDumpStats(const std::string& job_dir, const std::string& host, int coll_dropped) {
  namespace fs = std::filesystem;
  std::vector<fs::path> logs;
  for (const auto& e : fs::directory_iterator(fs::path(job_dir) / "nccl-inspector"))
    if (e.path().extension() == ".log" && e.path().filename().string().starts_with(host + "-"))
      logs.push_back(e.path());
  ASSERT_FALSE(logs.empty()) << "no Inspector log of " << host << " in " << job_dir;
  std::sort(logs.begin(), logs.end());
  const std::string text = collscope::testing::ReadFile(logs[0].string());
  // The first record's pass: inside the agent's window (its last records may lie past the
  // job's frontier, which the window ends at).
  const std::string last = text.substr(0, text.find('\n'));
  simdjson::dom::parser parser;
  simdjson::dom::element line;
  ASSERT_EQ(parser.parse(simdjson::padded_string(last)).get(line), simdjson::SUCCESS) << last;
  std::string_view id, hostname, git_rev;
  int64_t rank = 0, n_ranks = 0, nnodes = 0, pid = 0, dump_ts = 0;
  ASSERT_EQ(line["header"]["id"].get(id), simdjson::SUCCESS);
  ASSERT_EQ(line["header"]["rank"].get(rank), simdjson::SUCCESS);
  ASSERT_EQ(line["header"]["n_ranks"].get(n_ranks), simdjson::SUCCESS);
  ASSERT_EQ(line["header"]["nnodes"].get(nnodes), simdjson::SUCCESS);
  ASSERT_EQ(line["metadata"]["git_rev"].get(git_rev), simdjson::SUCCESS);
  ASSERT_EQ(line["metadata"]["dump_timestamp_us"].get(dump_ts), simdjson::SUCCESS);
  ASSERT_EQ(line["metadata"]["hostname"].get(hostname), simdjson::SUCCESS);
  ASSERT_EQ(line["metadata"]["pid"].get(pid), simdjson::SUCCESS);
  ASSERT_EQ(hostname, host);
  const std::string n = std::to_string(coll_dropped);
  collscope::testing::WriteFile(
      logs[0].string(),
      "{\"header\":{\"id\":\"" + std::string(id) + "\",\"rank\":" + std::to_string(rank) +
          ",\"n_ranks\":" + std::to_string(n_ranks) + ",\"nnodes\":" + std::to_string(nnodes) +
          "},\"metadata\":{\"inspector_output_format_version\":\"v4.1\",\"git_rev\":\"" +
          std::string(git_rev) +
          "\",\"rec_mechanism\":\"nccl_profiler_interface\",\"dump_timestamp_us\":" +
          std::to_string(dump_ts) + ",\"hostname\":\"" + host + "\",\"pid\":" +
          std::to_string(pid) + "},\"dump_stats\":{\"coll_records\":0,\"coll_dropped_total\":" + n +
          ",\"coll_dropped_since_last_dump\":" + n +
          ",\"p2p_records\":0,\"p2p_dropped_total\":0,\"p2p_dropped_since_last_dump\":0}}\n",
      /*append=*/true);
}

// The metric families a real agent exposes over that job (its /metrics text), by name.
std::set<std::string> FamiliesIn(const std::string& metrics_text) {
  std::set<std::string> out;
  std::istringstream in(metrics_text);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("# TYPE ")) out.insert(line.substr(7, line.find(' ', 7) - 7));
  return out;
}

// Every query the dashboard sends, with where it comes from (for the failure messages).
struct NamedQuery {
  std::string where, expr;
};

std::vector<NamedQuery> AllQueries(const Dashboard& d) {
  std::vector<NamedQuery> out;
  for (const Variable& v : d.variables)
    if (v.type == "query") out.push_back({"variable " + v.name, v.query});
  for (const Annotation& a : d.annotations)
    if (!a.builtin) out.push_back({"annotation " + a.name, a.expr});
  for (const Panel& p : d.panels)
    for (const Target& t : p.targets)
      out.push_back({"panel " + std::to_string(p.id) + " \"" + p.title + "\" " + t.ref_id, t.expr});
  return out;
}

TEST(Dashboard, IsAWellFormedGrafanaDashboardOnATemplatedPrometheus) {
  simdjson::dom::parser parser;
  const Dashboard d = ReadDashboard(parser);
  // 36 is the first schema whose panels name datasources by {type, uid}, which the rules assume.
  EXPECT_GE(d.schema_version, 36);

  const Variable* ds = FindVariable(d, "datasource");
  ASSERT_NE(ds, nullptr) << "a `datasource` variable lets the importer pick their Prometheus";
  EXPECT_EQ(ds->type, "datasource");
  EXPECT_EQ(ds->query, "prometheus");
  const Variable* job = FindVariable(d, "job");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->type, "query");
  EXPECT_EQ(job->query, "label_values(collscope_agent_ticks_total, job)");
  const Variable* host = FindVariable(d, "host");
  ASSERT_NE(host, nullptr);
  EXPECT_TRUE(host->multi && host->include_all) << "host must offer several hosts and All";
  // Without a custom All value Grafana sends every host as one long alternation.
  EXPECT_EQ(host->all_value, ".*");
  for (const Variable& v : d.variables)
    if (v.type == "query") {
      EXPECT_TRUE(IsPrometheusVariable(v.datasource)) << "variable " << v.name;
    }

  ASSERT_FALSE(d.annotations.empty()) << "findings are shown as annotations";
  for (const Annotation& a : d.annotations) {
    EXPECT_FALSE(a.builtin) << a.name << ": Grafana's own annotations do not come from the agent";
    EXPECT_TRUE(IsPrometheusVariable(a.datasource)) << "annotation " << a.name;
    EXPECT_FALSE(a.expr.empty()) << "annotation " << a.name;
    EXPECT_FALSE(a.title_format.empty()) << "annotation " << a.name << ": title from labels";
  }

  ASSERT_FALSE(d.panels.empty());
  std::set<int64_t> ids;
  for (const Panel& p : d.panels) {
    const std::string name = std::to_string(p.id) + " \"" + p.title + "\"";
    EXPECT_GT(p.id, 0) << "panel " << name << " has no id";
    EXPECT_TRUE(ids.insert(p.id).second) << "panel id " << p.id << " is used twice";
    EXPECT_TRUE(p.grid_pos) << "panel " << name << " has no complete gridPos";
    EXPECT_TRUE(p.w > 0 && p.h > 0 && p.x >= 0 && p.y >= 0 && p.x + p.w <= 24)
        << "panel " << name << " lies outside Grafana's 24-column grid";
    if (p.type == "row") {
      EXPECT_TRUE(p.targets.empty()) << "row " << name << " is a heading, not a query";
      continue;
    }
    EXPECT_TRUE(IsPrometheusVariable(p.datasource)) << "panel " << name << ": datasource";
    ASSERT_FALSE(p.targets.empty()) << "panel " << name << " has no query";
    std::set<std::string> ref_ids;
    for (const Target& t : p.targets) {
      EXPECT_FALSE(t.ref_id.empty()) << "panel " << name << ": a target without refId";
      EXPECT_TRUE(ref_ids.insert(t.ref_id).second) << "panel " << name << ": refId " << t.ref_id;
      EXPECT_FALSE(t.expr.empty()) << "panel " << name << " " << t.ref_id;
      if (t.datasource.present) {
        EXPECT_TRUE(IsPrometheusVariable(t.datasource)) << "panel " << name << " " << t.ref_id;
      }
      EXPECT_NE(t.expr.find("job=\"$job\""), std::string::npos)
          << "panel " << name << " " << t.ref_id
          << " must stay inside the selected job: " << t.expr;
    }
    for (const Transformation& tr : p.transformations) {
      if (tr.id != "groupingToMatrix") continue;
      // A single query's table value is "Value"; with several it becomes "Value #A"...
      EXPECT_EQ(p.targets.size(), 1u) << "panel " << name;
      for (const char* key : {"rowField", "columnField", "valueField"})
        EXPECT_TRUE(tr.options.count(key)) << "panel " << name << ": groupingToMatrix " << key;
      for (const Target& t : p.targets) {
        EXPECT_TRUE(t.instant) << "panel " << name << ": a matrix of one value per cell";
        EXPECT_EQ(t.format, "table") << "panel " << name << ": labels become columns";
      }
    }
    if (!p.repeat.empty()) {
      EXPECT_NE(FindVariable(d, p.repeat), nullptr) << "panel " << name << " repeats " << p.repeat;
    }
  }
}

TEST(Dashboard, EveryQueryReturnsTheAgentsDataFromARealPrometheus) {
  RealServer prometheus(ServerKind::kPrometheus);
  COLLSCOPE_START_SERVER_OR_SKIP(prometheus);
  simdjson::dom::parser parser;
  const Dashboard d = ReadDashboard(parser);
  ASSERT_FALSE(d.panels.empty());

  TempDir dir;
  sim::SimStats stats;
  std::string err;
  ASSERT_EQ(sim::Simulate(SlowNicJob(dir / "job"), &stats).message(), "");
  constexpr int kDropped = 7;
  AppendDumpStats(dir / "job", kSlowHost, kDropped);
  ASSERT_FALSE(HasFatalFailure());
  AgentOptions o;
  o.watch = {dir / "job"};
  o.db = dir / "agent.duckdb";
  o.listen = "";
  o.remote_write = {prometheus.url() + "/api/v1/write"};
  o.job = kJob;
  o.window_s = 3600;
  o.resolve_after = 1;
  auto agent = Agent::Create(o);
  ASSERT_TRUE(agent.ok()) << agent.status().message();
  // Several ticks, so that every counter has the two samples a rate() needs.
  constexpr int kTicks = 4;
  for (int i = 0; i < kTicks; ++i) {
    const TickReport r = (*agent)->Tick();
    ASSERT_TRUE(r.error.empty()) << r.error;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }

  // Every metric the dashboard reads is one the agent exposes.
  const std::set<std::string> families = FamiliesIn((*agent)->MetricsText());
  ASSERT_TRUE(families.count("collscope_finding_active")) << (*agent)->MetricsText();
  for (const NamedQuery& q : AllQueries(d))
    for (const std::string& name : MetricNames(q.expr))
      EXPECT_TRUE(families.count(name))
          << q.where << " reads " << name << ", which the agent does not expose";

  // Remote-write is asynchronous: wait until the last tick's samples are queryable.
  const std::string ticks_query = "collscope_agent_ticks_total{job=\"" + kJob + "\"}";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  PromAnswer ticks;
  for (;;) {
    ticks = PromQuery(prometheus.url(), ticks_query, true);
    if (!ticks.last_values.empty() && ticks.last_values[0] >= kTicks) break;
    ASSERT_LT(std::chrono::steady_clock::now(), until)
        << "Prometheus never had the agent's last tick: " << ticks.error << "\n"
        << prometheus.log();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }

  // The variables, as Grafana fills them.
  std::map<std::string, std::set<std::string>> values;
  for (const Variable& v : d.variables) {
    if (v.type != "query") continue;
    std::string unknown;
    auto q = Substitute(v.query, {{"job", kJob}}, &unknown);
    ASSERT_TRUE(q.has_value()) << "variable " << v.name << ": unknown variable " << unknown;
    std::string error;
    values[v.name] = LabelValues(prometheus.url(), *q, &error);
    EXPECT_TRUE(error.empty()) << "variable " << v.name << ": " << error;
    EXPECT_FALSE(values[v.name].empty()) << "variable " << v.name << " offers nothing: " << *q;
  }
  EXPECT_TRUE(values["job"].count(kJob));
  EXPECT_EQ(values["host"],
            (std::set<std::string>{"node-000", "node-001", "node-002", "node-003"}));
  EXPECT_EQ(values["pp_stage"], (std::set<std::string>{"0", "1"})) << "PP 2: two grids";

  // Each query runs with host = All (Grafana sends allValue) and with the slow host alone; a
  // repeated panel runs once per value of its variable, as Grafana repeats it.
  const std::vector<std::string> host_choices = {".*", kSlowHost};
  auto run = [&](const std::string& where, const std::string& expr, bool instant,
                 const std::map<std::string, std::string>& vars) -> PromAnswer {
    std::string unknown;
    auto q = Substitute(expr, vars, &unknown);
    EXPECT_TRUE(q.has_value()) << where << ": unknown variable " << unknown << " in " << expr;
    if (!q) return {};
    PromAnswer a = PromQuery(prometheus.url(), *q, instant);
    EXPECT_TRUE(a.success) << where << ": " << *q << ": " << a.error;
    EXPECT_FALSE(a.series.empty()) << where << " returns no data: " << *q;
    return a;
  };
  auto expect_labels = [](const std::string& where, const PromAnswer& a,
                          const std::set<std::string>& labels) {
    for (const LabelMap& s : a.series)
      for (const std::string& l : labels)
        EXPECT_TRUE(s.count(l)) << where << " names label " << l << ", absent from " << Describe(s);
  };

  for (const Annotation& a : d.annotations) {
    for (const std::string& host : host_choices) {
      const std::string where = "annotation " + a.name + " (host " + host + ")";
      PromAnswer answer = run(where, a.expr, false, {{"job", kJob}, {"host", host}});
      std::set<std::string> labels = TemplateLabels(a.title_format);
      labels.merge(TemplateLabels(a.text_format));
      std::stringstream tags(a.tag_keys);
      for (std::string tag; std::getline(tags, tag, ',');)
        if (!tag.empty()) labels.insert(tag);
      expect_labels(where, answer, labels);
    }
  }

  bool saw_slow_link = false;
  for (const Panel& p : d.panels) {
    if (p.type == "row") continue;
    std::vector<std::string> repeats = {""};
    if (!p.repeat.empty()) repeats.assign(values[p.repeat].begin(), values[p.repeat].end());
    for (const Target& t : p.targets)
      for (const std::string& host : host_choices)
        for (const std::string& repeat : repeats) {
          std::map<std::string, std::string> vars{{"job", kJob}, {"host", host}};
          if (!p.repeat.empty()) vars[p.repeat] = repeat;
          std::string where = "panel " + std::to_string(p.id) + " \"" + p.title + "\" " + t.ref_id +
                              " (host " + host +
                              (p.repeat.empty() ? "" : ", " + p.repeat + " " + repeat) + ")";
          const PromAnswer answer = run(where, t.expr, t.instant, vars);
          expect_labels(where, answer, TemplateLabels(t.legend));
          for (const Transformation& tr : p.transformations) {
            if (tr.id == "groupingToMatrix") {
              // One value per cell: two series on one (row, column) would overwrite each other.
              const std::string row = tr.options.at("rowField"), col = tr.options.at("columnField");
              expect_labels(where, answer, {row, col});
              std::set<std::pair<std::string, std::string>> cells;
              for (const LabelMap& s : answer.series)
                if (s.count(row) && s.count(col)) {
                  EXPECT_TRUE(cells.insert({s.at(row), s.at(col)}).second)
                      << where << ": two series in cell " << s.at(row) << "/" << s.at(col);
                }
              EXPECT_EQ(tr.options.at("valueField"), "Value") << where;
            } else if (tr.id == "organize") {
              // Fields it hides, orders or renames must exist: the table's fields are Time,
              // Value and the labels.
              std::set<std::string> labels;
              for (const std::string& f : tr.field_keys)
                if (f != "Time" && f != "Value") labels.insert(f);
              expect_labels(where, answer, labels);
            }
          }
          if (t.expr.starts_with("collscope_host_window_records_dropped") && host == kSlowHost) {
            ASSERT_EQ(answer.last_values.size(), 1u) << where;
            EXPECT_EQ(answer.last_values[0], kDropped) << where << ": the writer's drops";
          }
          if (t.expr.starts_with("collscope_finding_active"))
            for (const LabelMap& s : answer.series)
              saw_slow_link |= s.count("kind") && s.at("kind") == "slow_link" && s.count("host") &&
                               s.at("host") == kSlowHost;
        }
  }
  EXPECT_TRUE(saw_slow_link) << "the findings table shows the slow NIC's host";
}

}  // namespace
}  // namespace collscope::agent
