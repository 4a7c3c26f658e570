#include "cli/output.h"
#include "core/readers/text.h"

#include <algorithm>

namespace collscope::cli {
namespace {
bool IsNumeric(duckdb_type t) {
  switch (t) {
    case DUCKDB_TYPE_TINYINT: case DUCKDB_TYPE_SMALLINT: case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_BIGINT: case DUCKDB_TYPE_UTINYINT: case DUCKDB_TYPE_USMALLINT:
    case DUCKDB_TYPE_UINTEGER: case DUCKDB_TYPE_UBIGINT: case DUCKDB_TYPE_FLOAT:
    case DUCKDB_TYPE_DOUBLE: case DUCKDB_TYPE_HUGEINT: case DUCKDB_TYPE_UHUGEINT:
    case DUCKDB_TYPE_DECIMAL: case DUCKDB_TYPE_BOOLEAN:
      return true;
    default:
      return false;
  }
}
}  // namespace

std::string ToJson(const QueryResult& r) {
  std::string out = "[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    out += i ? ",\n {" : "\n {";
    for (size_t c = 0; c < r.columns.size(); ++c) {
      if (c) out += ", ";
      out += JsonQuoted(r.columns[c]) + ": ";
      const auto& v = r.rows[i][c];
      if (!v) out += "null";
      else if (IsNumeric(r.types[c]) && *v != "nan" && *v != "inf" && *v != "-inf") out += *v;
      else out += JsonQuoted(*v);
    }
    out += "}";
  }
  return out + (r.rows.empty() ? "]" : "\n]");
}

void PrintTable(const QueryResult& r, std::FILE* out, size_t max_rows) {
  size_t shown = std::min(max_rows, r.rows.size());
  std::vector<size_t> width(r.columns.size());
  for (size_t c = 0; c < r.columns.size(); ++c) width[c] = r.columns[c].size();
  for (size_t i = 0; i < shown; ++i)
    for (size_t c = 0; c < r.columns.size(); ++c)
      width[c] = std::max(width[c], r.rows[i][c] ? r.rows[i][c]->size() : 4);
  auto line = [&](auto cell_of) {
    for (size_t c = 0; c < r.columns.size(); ++c) {
      std::string cell = cell_of(c);
      bool right = IsNumeric(r.types[c]);
      std::fprintf(out, c ? "  %*s" : "%*s", right ? static_cast<int>(width[c])
                                                   : -static_cast<int>(width[c]), cell.c_str());
    }
    std::fputc('\n', out);
  };
  line([&](size_t c) { return r.columns[c]; });
  line([&](size_t c) { return std::string(width[c], '-'); });
  for (size_t i = 0; i < shown; ++i)
    // The aligned table is for people: a value's control bytes (data from the logs) print as '?'.
    line([&](size_t c) { return r.rows[i][c] ? readers::Printable(*r.rows[i][c]) : std::string("NULL"); });
  if (shown < r.rows.size())
    std::fprintf(out, "... %zu more rows (use --max-rows)\n", r.rows.size() - shown);
  std::fprintf(out, "(%zu row%s)\n", r.rows.size(), r.rows.size() == 1 ? "" : "s");
}

void PrintCsv(const QueryResult& r, std::FILE* out) {
  auto cell = [](const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (size_t c = 0; c < r.columns.size(); ++c)
    std::fprintf(out, "%s%s", c ? "," : "", cell(r.columns[c]).c_str());
  std::fputc('\n', out);
  for (const auto& row : r.rows) {
    for (size_t c = 0; c < row.size(); ++c)
      std::fprintf(out, "%s%s", c ? "," : "", row[c] ? cell(*row[c]).c_str() : "");
    std::fputc('\n', out);
  }
}

int ExitStatusFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kCorruption:
    case StatusCode::kUnsupported: return 2;
    case StatusCode::kIOError: return 3;
    case StatusCode::kInternal: return 4;
  }
  return 4;
}

int Fail(const char* command, const Status& status) {
  // The kind of failure beside the message: what the exit status says, in words (docs/cli.md).
  std::fprintf(stderr, "collscope %s: %s (%s)\n", command, status.message().c_str(),
               std::string(StatusCodeName(status.code())).c_str());
  return ExitStatusFor(status);
}

bool PickRun(Store& store, const char* command, std::string* run) {
  if (!run->empty()) return true;
  Result<std::string> r = store.DefaultRun();
  if (!r.ok()) {
    std::fprintf(stderr, "collscope %s: %s\n", command, r.status().message().c_str());
    return false;
  }
  *run = *r;
  std::fprintf(stderr, "run: %s (the store's run with the most records; --run picks another)\n", run->c_str());
  return true;
}

}  // namespace collscope::cli
