// Test-only checker for Prometheus text exposition format 0.0.4 as node_exporter's textfile
// collector reads it (../shared/reference/prometheus-ecosystem.md §1 and §6).
//
// Contract: ParsePromText returns "" when every line parses and the file obeys the format's
// rules, else a message naming the first offending line. Rules checked: the text ends with '\n';
// `# HELP`/`# TYPE` at most once per name, TYPE one of counter|gauge|histogram|summary|untyped and
// before the name's first sample; metric and label names match their grammars (no reserved `__`
// labels, no duplicate label in one sample); label values use only the \\ \" \n escapes; values
// parse as Go's ParseFloat would (NaN, +Inf, -Inf included); no client-side timestamp (the
// textfile collector rejects the whole file for one); all samples of a name form one group; no
// name+label set repeats. Samples keep their labels in file order.
#ifndef COLLSCOPE_CAPTURE_NCCL_TEST_PROM_H_
#define COLLSCOPE_CAPTURE_NCCL_TEST_PROM_H_

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace collscope::capture::testing {

struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in file order
  double value = 0;
  std::string value_text;
  std::string line;

  std::string Label(const std::string& k) const {
    for (const auto& [n, v] : labels)
      if (n == k) return v;
    return "\x01missing";
  }
  std::vector<std::string> LabelNames() const {
    std::vector<std::string> v;
    for (const auto& l : labels) v.push_back(l.first);
    return v;
  }
};

struct PromFile {
  std::vector<PromSample> samples;
  std::map<std::string, std::string> types, helps;

  std::vector<const PromSample*> Named(const std::string& name) const {
    std::vector<const PromSample*> v;
    for (const PromSample& s : samples)
      if (s.name == name) v.push_back(&s);
    return v;
  }
};

namespace prom_detail {

inline bool NameStart(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
inline bool NameChar(char c, bool colon) { return NameStart(c, colon) || (c >= '0' && c <= '9'); }

inline bool ValidName(const std::string& s, bool colon) {
  if (s.empty() || !NameStart(s[0], colon)) return false;
  for (char c : s)
    if (!NameChar(c, colon)) return false;
  return true;
}

inline bool ParseValue(const std::string& s, double* out) {
  if (s == "NaN") {
    *out = std::nan("");
    return true;
  }
  if (s == "+Inf" || s == "Inf") {
    *out = HUGE_VAL;
    return true;
  }
  if (s == "-Inf") {
    *out = -HUGE_VAL;
    return true;
  }
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return false;
  }
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace prom_detail

inline std::string ParsePromText(const std::string& text, PromFile* out) {
  using namespace prom_detail;
  if (text.empty()) return "empty file";
  if (text.back() != '\n') return "the last line does not end with \\n";
  std::set<std::string> closed, typed, helped, seen_samples;
  std::set<std::string> series;
  std::string current;
  size_t pos = 0;
  int lineno = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    const std::string where = "line " + std::to_string(lineno) + " '" + line + "': ";
    if (line.empty()) continue;
    if (line.find('\r') != std::string::npos) return where + "carriage return";
    if (line[0] == '#') {
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        const bool help = line[2] == 'H';
        const std::string rest = line.substr(7);
        const size_t sp = rest.find(' ');
        const std::string name = rest.substr(0, sp);
        const std::string arg = sp == std::string::npos ? "" : rest.substr(sp + 1);
        if (!ValidName(name, true)) return where + "bad metric name";
        if (help) {
          if (!helped.insert(name).second) return where + "second HELP";
          for (size_t i = 0; i < arg.size(); ++i) {
            if (arg[i] == '\\' && (i + 1 >= arg.size() || (arg[i + 1] != '\\' && arg[i + 1] != 'n')))
              return where + "bad escape in HELP";
            if (arg[i] == '\\') ++i;
          }
          out->helps[name] = arg;
        } else {
          static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                       "untyped"};
          if (!kTypes.count(arg)) return where + "unknown type";
          if (!typed.insert(name).second) return where + "second TYPE";
          if (seen_samples.count(name)) return where + "TYPE after the first sample";
          out->types[name] = arg;
        }
      }
      continue;  // any other comment
    }
    PromSample s;
    s.line = line;
    size_t i = 0;
    while (i < line.size() && NameChar(line[i], true)) ++i;
    s.name = line.substr(0, i);
    if (!ValidName(s.name, true)) return where + "bad metric name";
    std::set<std::string> label_names;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t j = i;
        while (j < line.size() && NameChar(line[j], false)) ++j;
        const std::string ln = line.substr(i, j - i);
        if (!ValidName(ln, false) || ln.rfind("__", 0) == 0) return where + "bad label name";
        if (!label_names.insert(ln).second) return where + "duplicate label " + ln;
        if (j + 1 >= line.size() || line[j] != '=' || line[j + 1] != '"')
          return where + "expected =\" after label name";
        j += 2;
        std::string val;
        for (;;) {
          if (j >= line.size()) return where + "unterminated label value";
          const char c = line[j++];
          if (c == '"') break;
          if (c == '\\') {
            if (j >= line.size()) return where + "dangling escape";
            const char e = line[j++];
            if (e == '\\') {
              val.push_back('\\');
            } else if (e == '"') {
              val.push_back('"');
            } else if (e == 'n') {
              val.push_back('\n');
            } else {
              return where + "bad escape in label value";
            }
          } else {
            val.push_back(c);
          }
        }
        s.labels.emplace_back(ln, val);
        if (j < line.size() && line[j] == ',') {
          ++j;
        } else if (j >= line.size() || line[j] != '}') {
          return where + "expected , or } after label value";
        }
        i = j;
      }
      if (i >= line.size()) return where + "unterminated label set";
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') return where + "expected a space before the value";
    const std::string rest = line.substr(i + 1);
    if (rest.find(' ') != std::string::npos) return where + "a timestamp (or trailing text)";
    s.value_text = rest;
    if (!ParseValue(rest, &s.value)) return where + "bad value";
    if (s.name != current) {
      if (closed.count(s.name)) return where + "samples of " + s.name + " are not one group";
      if (!current.empty()) closed.insert(current);
      current = s.name;
    }
    seen_samples.insert(s.name);
    std::vector<std::pair<std::string, std::string>> sorted = s.labels;
    std::sort(sorted.begin(), sorted.end());
    std::string key = s.name;
    for (const auto& [n, v] : sorted) key += "\x01" + n + "\x02" + v;
    if (!series.insert(key).second) return where + "repeated series";
    out->samples.push_back(std::move(s));
  }
  return "";
}

}  // namespace collscope::capture::testing

#endif  // COLLSCOPE_CAPTURE_NCCL_TEST_PROM_H_
