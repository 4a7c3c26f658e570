// The hostile-input catalogue: inputs an attacker or a broken cluster hands to collscope, each
// run through the real binary. For every input the contract is the same:
//   - the command ends by itself with an exit status below 128 (no signal, no sanitizer report:
//     sanitizers are told to exit with 201);
//   - it says what it refused or skipped (the case's `says` text);
//   - every good line beside the bad one is still stored (the case's `then` check).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace collscope {
namespace {

namespace fs = std::filesystem;
using testing::CollLine;
using testing::TempDir;
using testing::WriteFile;

struct Output {
  int code;
  std::string text;
};

std::string Binary() {
  const char* bin = std::getenv("COLLSCOPE_BIN");
  return bin ? bin : COLLSCOPE_BINARY_DIR "/collscope";
}

// Runs `collscope ARGS` with a wall-clock limit, so that a hang fails the case instead of CI.
Output Collscope(const std::string& args, int timeout_s = 60) {
  std::string cmd = "ASAN_OPTIONS=${ASAN_OPTIONS:-}:exitcode=201 UBSAN_OPTIONS=${UBSAN_OPTIONS:-}:exitcode=201 "
                    "timeout -s KILL " + std::to_string(timeout_s) + " " + Binary() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Output out{-1, ""};
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.text.append(buf, n);
  int status = pclose(p);
  out.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return out;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Two ranks of one communicator, four AllReduce instances each: the good data beside every
// hostile input.
std::string GoodLog(const std::string& host, int pid, int rank) {
  std::string s;
  for (int sn = 1; sn <= 4; ++sn)
    s += CollLine(host, pid, "0xabc", rank, 2, 2, "AllReduce", sn, 1048576, 100, "10.485760", "19.660800");
  return s;
}

struct Env {
  const TempDir& dir;
  std::string in() const { return dir / "in"; }
  std::string db() const { return dir / "store.duckdb"; }
  // The number of records in the store, or -1.
  long Records() const {
    Output o = Collscope("sql --csv --db " + Quote(db()) + " \"SELECT count(*) FROM records\"");
    if (o.code != 0) return -1;
    size_t nl = o.text.find('\n');
    return nl == std::string::npos ? -1 : std::atol(o.text.c_str() + nl + 1);
  }
};

struct Case {
  std::string name;
  std::function<void(const Env&)> write;  // the inputs, under env.in()
  std::function<std::string(const Env&)> args;
  std::string says;  // what the output must contain: the refusal or warning
  std::function<void(const Env&, const Output&)> then = nullptr;
  bool needs_store = false;  // a store holding the good job, before the command runs
};

std::vector<Case>& Catalogue() {
  static std::vector<Case> cases;
  return cases;
}

// --- sql: DuckDB's own sandbox, not a statement filter (S1, S2, S4, C3, C4) -----------------

std::function<std::string(const Env&)> Sql(const std::string& q, const std::string& flags = "") {
  return [q, flags](const Env& e) { return "sql " + flags + " --db " + Quote(e.db()) + " " + Quote(q); };
}

void StoreIntact(const Env& e, const Output&) { EXPECT_EQ(e.Records(), 8) << "the store changed"; }

struct SqlCase {
  const char* name;
  const char* query;
  const char* says;
};

const SqlCase kSqlCases[] = {
    {"sql_explain_analyze_copy_over_store", "EXPLAIN ANALYZE COPY (SELECT 'x') TO 'STORE' (FORMAT csv)", "disabled by configuration"},
    {"sql_explain_analyze_copy_elsewhere", "EXPLAIN ANALYZE COPY (SELECT 1) TO '/tmp/collscope-hostile.csv'", "disabled by configuration"},
    {"sql_explain_analyze_install", "EXPLAIN ANALYZE INSTALL httpfs", "disabled by configuration"},
    {"sql_explain_analyze_load", "EXPLAIN ANALYZE LOAD httpfs", "disabled through configuration"},
    {"sql_install", "INSTALL httpfs", "refused"},
    {"sql_load", "LOAD httpfs", "refused"},
    {"sql_export_database", "EXPORT DATABASE 'DIR/exported'", "disabled by configuration"},
    {"sql_read_text_shadow", "SELECT * FROM read_text('/etc/shadow')", "disabled by configuration"},
    {"sql_read_text_passwd", "SELECT content FROM read_text('/etc/passwd')", "disabled by configuration"},
    {"sql_glob_root", "SELECT * FROM glob('/root/**')", "disabled by configuration"},
    {"sql_read_csv", "SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"},
    {"sql_read_blob", "SELECT * FROM read_blob('/etc/hostname')", "disabled by configuration"},
    {"sql_attach", "ATTACH '/tmp/collscope-hostile.duckdb'", "refused"},
    {"sql_set_external_access", "SET enable_external_access = true", "refused"},
    {"sql_pragma_set", "PRAGMA enable_external_access", ""},
    {"sql_reset_lock", "SELECT 1; RESET lock_configuration", "refused"},
    {"sql_delete", "DELETE FROM records", "refused"},
    {"sql_drop_after_select", "SELECT 1; DROP TABLE records", "refused"},
    {"sql_create_table", "CREATE TABLE x AS SELECT 1", "refused"},
    {"sql_copy_to", "COPY records TO '/tmp/collscope-hostile.csv'", "disabled by configuration"},
    {"sql_checkpoint", "CHECKPOINT", "refused"},
    {"sql_empty", "", "no statement"},
    {"sql_only_comment", "-- nothing", "no statement"},
    {"sql_only_semicolons", ";;;", "no statement"},
    {"sql_syntax_error", "SELEC 1", "syntax error"},
    {"sql_unterminated_string", "SELECT 'abc", "unterminated"},
    {"sql_uuid", "SELECT uuid() AS u, 1 AS x", "(1 row)"},
    {"sql_huge_result_capped", "SELECT range AS r FROM range(100000)", "more rows"},
    {"sql_getenv", "SELECT getenv('HOME')", ""},
};

void RegisterSqlCases() {
  for (const SqlCase& c : kSqlCases) {
    Catalogue().push_back(Case{
        c.name, nullptr,
        [q = std::string(c.query)](const Env& e) {
          std::string s = q;
          for (auto [from, to] : {std::pair<std::string, std::string>{"STORE", e.db()}, {"DIR", e.dir.str()}})
            for (size_t at; (at = s.find(from)) != std::string::npos;) s.replace(at, from.size(), to);
          return Sql(s)(e);
        },
        c.says,
        [](const Env& e, const Output& o) {
          StoreIntact(e, o);
          EXPECT_FALSE(fs::exists("/tmp/collscope-hostile.csv"));
          EXPECT_FALSE(fs::exists("/tmp/collscope-hostile.duckdb"));
          EXPECT_FALSE(fs::exists(e.dir / "exported")) << "a refused EXPORT DATABASE left its directory";
        },
        true});
  }
}

// --- the runner --------------------------------------------------------------------------------

class Hostile : public ::testing::TestWithParam<size_t> {};

TEST_P(Hostile, RefusedSafely) {
  const Case& c = Catalogue()[GetParam()];
  TempDir dir;
  Env env{dir};
  fs::create_directories(env.in());
  if (c.needs_store) {
    WriteFile(dir / "good/node1-pid1.log", GoodLog("node1", 1, 0));
    WriteFile(dir / "good/node2-pid2.log", GoodLog("node2", 2, 1));
    Output ing = Collscope("ingest " + Quote(dir / "good") + " --db " + Quote(env.db()) + " -q");
    ASSERT_EQ(ing.code, 0) << ing.text;
  }
  if (c.write) c.write(env);
  Output out = Collscope(c.args(env));
  EXPECT_LT(out.code, 128) << "signal, hang or sanitizer report:\n" << out.text;
  if (!c.says.empty()) {
    EXPECT_NE(out.text.find(c.says), std::string::npos) << "expected \"" << c.says << "\" in:\n" << out.text;
  }
  if (c.then) c.then(env, out);
}

std::vector<size_t> AllCases() {
  if (Catalogue().empty()) RegisterSqlCases();
  std::vector<size_t> ids(Catalogue().size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, Hostile, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<size_t>& p) { return Catalogue()[p.param].name; });

}  // namespace
}  // namespace collscope
