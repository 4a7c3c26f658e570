// The hostile-input catalogue: inputs an attacker or a broken cluster hands to collscope, each
// run through the real binary. For every input the contract is the same:
//   - the command ends by itself with an exit status below 128 (no signal, no sanitizer report:
//     sanitizers are told to exit with 201);
//   - it says what it refused or skipped (the case's `says` text);
//   - every good line beside the bad one is still stored (the case's `then` check).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
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

using testing::Output;

std::string Binary() { return testing::CollscopeBinary(); }

// Runs `collscope ARGS` with a wall-clock limit, so that a hang fails the case instead of CI;
// sanitizers exit 201, so that a report fails it too.
Output Collscope(const std::string& args, int timeout_s = 60) {
  return testing::RunShell("ASAN_OPTIONS=${ASAN_OPTIONS:-}:exitcode=201 UBSAN_OPTIONS=${UBSAN_OPTIONS:-}:exitcode=201 "
                           "timeout -s KILL " + std::to_string(timeout_s) + " " + Binary() + " " + args + " 2>&1");
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
    {"sql_pragma_set", "PRAGMA enable_external_access", "does not exist"},
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
    {"sql_getenv", "SELECT getenv('HOME')", "does not exist"},
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

// --- ingest and diagnose: inputs found once, nothing lost, nothing hidden -------------------

std::string Ingest(const Env& e, const std::string& extra = "") {
  return "ingest " + Quote(e.in()) + " --db " + Quote(e.db()) + " " + extra;
}
// The good job, beside the hostile input.
void GoodInputs(const Env& e) {
  WriteFile(e.in() + "/node1-pid1.log", GoodLog("node1", 1, 0));
  WriteFile(e.in() + "/node2-pid2.log", GoodLog("node2", 2, 1));
}
// After ingest: the good job's 8 records are stored, whatever else happened.
void GoodStored(const Env& e, const Output& o) {
  EXPECT_EQ(e.Records(), 8) << o.text;
  EXPECT_TRUE(o.code == 0 || o.code == 1) << "stored, so 0 or 1:\n" << o.text;
}
void GoodStoredWithWarning(const Env& e, const Output& o) {
  GoodStored(e, o);
  EXPECT_EQ(o.code, 1) << "something was skipped or rejected, so 1:\n" << o.text;
}

void RegisterIngestCases() {
  auto& c = Catalogue();
  c.push_back({"ingest_symlink_loop_to_parent",
               [](const Env& e) { GoodInputs(e); fs::create_directory_symlink(e.in(), e.in() + "/loop"); },
               [](const Env& e) { return Ingest(e); }, "", GoodStored});
  c.push_back({"ingest_symlink_self_loop",
               [](const Env& e) { GoodInputs(e); fs::create_symlink(e.in() + "/self.log", e.in() + "/self.log"); },
               [](const Env& e) { return Ingest(e); }, "looping symlink", GoodStoredWithWarning});
  c.push_back({"ingest_broken_symlink",
               [](const Env& e) { GoodInputs(e); fs::create_symlink(e.in() + "/gone.log", e.in() + "/broken.log"); },
               [](const Env& e) { return Ingest(e); }, "broken or looping symlink", GoodStoredWithWarning});
  c.push_back({"ingest_symlinked_log_read_once",
               [](const Env& e) { GoodInputs(e); fs::create_symlink(e.in() + "/node1-pid1.log", e.in() + "/alias.log"); },
               [](const Env& e) { return Ingest(e); }, "", GoodStored});
  c.push_back({"ingest_symlinked_folder_read_once",
               [](const Env& e) {
                 GoodInputs(e);
                 fs::create_directories(e.dir / "other");
                 fs::create_directory_symlink(e.in(), e.dir / "other/link");
               },
               [](const Env& e) { return "ingest " + Quote(e.in()) + " " + Quote(e.dir / "other") + " --db " + Quote(e.db()); },
               "", GoodStored});
  c.push_back({"ingest_fifo_named_like_a_log",
               [](const Env& e) { GoodInputs(e); ASSERT_EQ(::mkfifo((e.in() + "/node3-pid3.log").c_str(), 0600), 0); },
               [](const Env& e) { return Ingest(e); }, "a FIFO, not read", GoodStoredWithWarning});
  c.push_back({"ingest_fifo_named_explicitly",
               [](const Env& e) { GoodInputs(e); ASSERT_EQ(::mkfifo((e.dir / "pipe.log").c_str(), 0600), 0); },
               [](const Env& e) { return "ingest " + Quote(e.in()) + " " + Quote(e.dir / "pipe.log") + " --db " + Quote(e.db()); },
               "a FIFO, not read", GoodStoredWithWarning});
  c.push_back({"ingest_dev_null_named",
               [](const Env& e) { GoodInputs(e); },
               [](const Env& e) { return "ingest " + Quote(e.in()) + " /dev/null --db " + Quote(e.db()); },
               "a character device", GoodStoredWithWarning});
  c.push_back({"ingest_non_utf8_names_stay_distinct",
               [](const Env& e) {
                 WriteFile(e.in() + "/\xe4.log", GoodLog("node1", 1, 0));
                 WriteFile(e.in() + "/\xf6.log", GoodLog("node2", 2, 1));
               },
               [](const Env& e) { return Ingest(e) + " && " + Binary() + " " + Ingest(e) + " -q"; }, "",
               [](const Env& e, const Output& o) {
                 EXPECT_EQ(e.Records(), 8) << "a re-ingest deleted or duplicated a file's rows\n" << o.text;
                 Output files = Collscope("sql --csv --db " + Quote(e.db()) + " \"SELECT count(DISTINCT path) FROM files\"");
                 EXPECT_NE(files.text.find("\n2\n"), std::string::npos) << files.text;
               }});
  c.push_back({"ingest_name_with_backslash_and_newline",
               [](const Env& e) { WriteFile(e.in() + "/a\\b\nc.log", GoodLog("node1", 1, 0)); WriteFile(e.in() + "/n2.log", GoodLog("node2", 2, 1)); },
               [](const Env& e) { return Ingest(e); }, "", GoodStored});
  // Root reads any file or folder; anyone else must be told what was not read.
  auto said_unless_root = [](const std::string& what) {
    return [what](const Env& e, const Output& o) {
      if (::geteuid() != 0) {
        EXPECT_NE(o.text.find(what), std::string::npos) << o.text;
      }
      EXPECT_GE(e.Records(), 8) << o.text;
      EXPECT_LT(o.code, 2) << o.text;
    };
  };
  c.push_back({"ingest_unreadable_file",
               [](const Env& e) {
                 GoodInputs(e);
                 WriteFile(e.in() + "/secret.log", GoodLog("node9", 9, 0));
                 fs::permissions(e.in() + "/secret.log", fs::perms::none);
               },
               [](const Env& e) { return Ingest(e); }, "", said_unless_root("secret.log")});
  c.push_back({"ingest_unreadable_folder",
               [](const Env& e) {
                 GoodInputs(e);
                 WriteFile(e.in() + "/locked/node9-pid9.log", GoodLog("node9", 9, 0));
                 fs::permissions(e.in() + "/locked", fs::perms::none);
               },
               [](const Env& e) { return Ingest(e); }, "", said_unless_root("cannot read folder")});
  c.push_back({"ingest_path_longer_than_path_max",
               [](const Env& e) {
                 GoodInputs(e);
                 // Built one level at a time (mkdirat): no single call sees the whole path, which
                 // is over PATH_MAX, so the walk meets a name the system cannot open.
                 int fd = ::open(e.in().c_str(), O_RDONLY | O_DIRECTORY);
                 for (int i = 0; i < 20 && fd >= 0; ++i) {
                   const std::string name(250, static_cast<char>('a' + i));
                   ASSERT_EQ(::mkdirat(fd, name.c_str(), 0700), 0);
                   int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY);
                   ::close(fd);
                   fd = next;
                 }
                 ASSERT_GE(fd, 0);
                 ::close(fd);
               },
               [](const Env& e) { return Ingest(e); }, "File name too long", [](const Env& e, const Output& o) {
                 EXPECT_EQ(e.Records(), 8) << o.text;
                 EXPECT_EQ(o.code, 1) << o.text;
               }});
  c.push_back({"ingest_empty_db_path",
               [](const Env& e) { GoodInputs(e); },
               [](const Env& e) { return "ingest " + Quote(e.in()) + " --db ''"; },
               "an empty --db path", [](const Env&, const Output& o) { EXPECT_EQ(o.code, 2) << o.text; }});
  c.push_back({"ingest_missing_path",
               nullptr, [](const Env& e) { return "ingest " + Quote(e.dir / "nope") + " --db " + Quote(e.db()); },
               "no such file or directory", [](const Env&, const Output& o) { EXPECT_EQ(o.code, 2); }});
  c.push_back({"ingest_empty_folder",
               nullptr, [](const Env& e) { return Ingest(e); },
               "no input files", [](const Env&, const Output& o) { EXPECT_EQ(o.code, 2); }});
  c.push_back({"ingest_two_objects_on_one_line",
               [](const Env& e) {
                 GoodInputs(e);
                 std::string l = CollLine("node3", 3, "0xdef", 0, 2, 2, "AllReduce", 1, 8, 1, "0.008", "0.008");
                 l.pop_back();
                 WriteFile(e.in() + "/node3-pid3.log", l + l + "\n");
               },
               [](const Env& e) { return Ingest(e); }, "more than one JSON value", GoodStoredWithWarning});
  c.push_back({"ingest_batch_line_without_marker",
               [](const Env& e) {
                 GoodInputs(e);
                 WriteFile(e.in() + "/node3-pid3.log",
                           R"({"coll_perf":{"coll":"AllReduce","coll_sn":1,"coll_msg_size_bytes":8,"coll_exec_time_us":1,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":0.008,"coll_busbw_gbs":0.008}})" "\n");
               },
               [](const Env& e) { return Ingest(e); }, "no marker line before it", GoodStoredWithWarning});
  c.push_back({"ingest_git_rev_only_on_first_line",
               [](const Env& e) {
                 std::string a = GoodLog("node1", 1, 0), b = GoodLog("node2", 2, 1);
                 // Later lines leave git_rev out: it must not come from the first line.
                 for (std::string* s : {&a, &b})
                   for (size_t at = s->find("\"git_rev\":\"abc\",", s->find('\n')); at != std::string::npos;
                        at = s->find("\"git_rev\":\"abc\",", at))
                     s->erase(at, std::strlen("\"git_rev\":\"abc\","));
                 WriteFile(e.in() + "/node1-pid1.log", a);
                 WriteFile(e.in() + "/node2-pid2.log", b);
               },
               [](const Env& e) { return Ingest(e); }, "", GoodStored});
  c.push_back({"ingest_one_enormous_line",
               [](const Env& e) {
                 GoodInputs(e);
                 WriteFile(e.in() + "/node3-pid3.log", std::string(20 << 20, '{') + "\n");
               },
               [](const Env& e) { return Ingest(e); }, "MiB limit; skipped", GoodStoredWithWarning});
  c.push_back({"ingest_enormous_unfinished_last_line",
               [](const Env& e) { GoodInputs(e); WriteFile(e.in() + "/node3-pid3.log", std::string(20 << 20, 'x')); },
               [](const Env& e) { return Ingest(e); }, "unfinished last lines", GoodStored});
  // Values the analyses cannot hold are refused at ingest, never a later failure (C5, D7).
  struct Poison {
    const char* name;
    const char* from;
    const char* to;
    const char* says;
  };
  for (Poison p : {Poison{"exec_time_near_2_64", "\"coll_exec_time_us\":100", "\"coll_exec_time_us\":18446744073709551000", "exec_time_us"},
                   Poison{"msg_size_near_2_64", "\"coll_msg_size_bytes\":1048576", "\"coll_msg_size_bytes\":18446744073709551615", "msg_size_bytes"},
                   Poison{"dump_timestamp_near_2_64", "\"dump_timestamp_us\":1760000000000000", "\"dump_timestamp_us\":18446744073709551000", "dump_timestamp_us"},
                   Poison{"pid_near_2_64", "\"pid\":3", "\"pid\":18446744073709551000", "metadata.pid"},
                   Poison{"sn_near_2_64", "\"coll_sn\":1,", "\"coll_sn\":18446744073709551000,", "sequence number"},
                   Poison{"exec_time_negative", "\"coll_exec_time_us\":100", "\"coll_exec_time_us\":-5", "coll_exec_time_us"},
                   Poison{"exec_time_huge_double", "\"coll_exec_time_us\":100", "\"coll_exec_time_us\":1e300", "coll_exec_time_us"},
                   Poison{"rank_past_int32", "\"rank\":0", "\"rank\":4294967296", "header.rank"},
                   Poison{"n_ranks_huge", "\"n_ranks\":2", "\"n_ranks\":2147483647", "header"},
                   Poison{"bandwidth_inf_text", "\"coll_busbw_gbs\":19.660800", "\"coll_busbw_gbs\":\"inf\"", "busbw"}}) {
    c.push_back({std::string("ingest_poison_") + p.name,
                 [p](const Env& e) {
                   GoodInputs(e);
                   std::string l = CollLine("node3", 3, "0xdef", 0, 2, 2, "AllReduce", 1, 1048576, 100, "10.485760", "19.660800");
                   size_t at = l.find(p.from);
                   ASSERT_NE(at, std::string::npos) << p.from;
                   l.replace(at, std::strlen(p.from), p.to);
                   WriteFile(e.in() + "/node3-pid3.log", l);
                 },
                 [](const Env& e) {
                   return Ingest(e) + "; " + Binary() + " summary --db " + Quote(e.db()) + " >/dev/null && " + Binary() +
                          " report --db " + Quote(e.db()) + " -o " + Quote(e.dir / "r.html") + " && " + Binary() +
                          " diagnose --db " + Quote(e.db()) + "; echo \"later commands: $?\"";
                 },
                 p.says, [](const Env& e, const Output& o) {
                   EXPECT_EQ(e.Records(), 8) << o.text;
                   EXPECT_TRUE(o.text.find("later commands: 0") != std::string::npos ||
                               o.text.find("later commands: 1") != std::string::npos)
                       << "summary, report or diagnose failed on the store:\n" << o.text;
                 }});
  }

  // One bad line beside the good job: each is rejected with its reason (file and line), and
  // the good lines are stored.
  struct BadLine {
    const char* name;
    std::function<std::string(std::string)> make;  // from one good line of node3's
    const char* says;
  };
  auto sub = [](const char* from, const char* to) {
    return [from, to](std::string l) {
      const size_t at = l.find(from);
      EXPECT_NE(at, std::string::npos) << from;
      if (at != std::string::npos) l.replace(at, std::strlen(from), to);
      return l;
    };
  };
  const std::string p2p_perf =
      R"("p2p_perf":{"p2p":"Send","p2p_sn":1,"p2p_peer":99,"p2p_msg_size_bytes":1048576,"p2p_exec_time_us":100,)"
      R"("p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":10.4,"p2p_busbw_gbs":10.4})";
  for (const BadLine& b : std::vector<BadLine>{
           {"exec_time_nan", sub("\"coll_exec_time_us\":100", "\"coll_exec_time_us\":NaN"), "coll_exec_time_us: bad JSON value"},
           {"exec_time_null", sub("\"coll_exec_time_us\":100", "\"coll_exec_time_us\":null"), "coll_exec_time_us: expected an unsigned integer"},
           {"msg_size_negative", sub("\"coll_msg_size_bytes\":1048576", "\"coll_msg_size_bytes\":-1"), "coll_msg_size_bytes: impossible negative value"},
           {"dump_timestamp_negative", sub("\"dump_timestamp_us\":1760000000000000", "\"dump_timestamp_us\":-1"), "dump_timestamp_us: impossible negative value"},
           {"op_unknown", sub("\"coll\":\"AllReduce\"", "\"coll\":\"AllGatherExotic\""), "coll: unknown operation \"AllGatherExotic\""},
           {"op_a_number", sub("\"coll\":\"AllReduce\"", "\"coll\":7"), "coll: expected a string"},
           {"comm_id_not_hex", sub("\"id\":\"0xdef\"", "\"id\":\"zzz\""), "header.id: not a hex communicator id"},
           {"comm_id_a_number", sub("\"id\":\"0xdef\"", "\"id\":57005"), "header.id: expected a string"},
           {"rank_negative", sub("\"rank\":0", "\"rank\":-3"), "header.rank: rank -3 outside 0..1"},
           {"rank_past_n_ranks", sub("\"rank\":0", "\"rank\":5"), "header.rank: rank 5 outside 0..1"},
           {"n_ranks_zero", sub("\"n_ranks\":2", "\"n_ranks\":0"), "header.n_ranks: impossible value 0"},
           {"nnodes_negative", sub("\"nnodes\":2", "\"nnodes\":-1"), "header.nnodes: impossible value -1"},
           {"format_version_unknown", sub("\"v4.0\"", "\"v9.9\""), "metadata.inspector_output_format_version: unknown format version \"v9.9\""},
           {"header_missing", sub("\"header\":{\"id\":\"0xdef\",\"rank\":0,\"n_ranks\":2,\"nnodes\":2},", ""), "header.id: missing field"},
           {"coll_perf_an_array", [](std::string l) { l.insert(l.find("\"coll_perf\":{") + 12, "["); l.insert(l.size() - 2, "]"); return l; },
            "coll_perf: expected an object"},
           {"top_level_array", [](std::string l) { l.pop_back(); return "[" + l + "]\n"; }, "line: not a JSON object"},
           {"top_level_string", [](std::string) { return std::string("\"hello\"\n"); }, "line: not a JSON object"},
           {"nesting_100000_deep", [](std::string) { return std::string(100000, '[') + std::string(100000, ']') + "\n"; }, "line: not a JSON object"},
           {"object_nesting_100000_deep",
            [](std::string) {
              std::string d;
              for (int i = 0; i < 100000; ++i) d += "{\"a\":";
              return d + "1" + std::string(100000, '}') + "\n";
            },
            "line: no header or metadata"},
           {"truncated_line", [](std::string l) { return l.substr(0, l.size() / 2) + "\n"; }, "line: not JSON"},
           {"byte_order_mark", [](std::string l) { return "\xEF\xBB\xBF" + l; }, "line: not a JSON object"},
           {"nul_bytes_in_line", [](std::string l) { return l.substr(0, 30) + std::string(2, '\0') + l.substr(30); }, "line: malformed JSON"},
           {"binary_garbage", [](std::string) { std::string g; for (int i = 0; i < 5000; ++i) g += static_cast<char>(i % 256); return g + "\n"; },
            "line: not a JSON object"},
           {"invalid_utf8_hostname", sub("\"hostname\":\"node3\"", "\"hostname\":\"no\xFF" "de\""), "line: not JSON"},
           {"p2p_peer_past_n_ranks",
            [p2p_perf](std::string l) { return l.substr(0, l.find("\"coll_perf\"")) + p2p_perf + "}\n"; }, "p2p_perf.p2p_peer: peer 99 outside 0..1"},
           {"sequence_number_1e400", sub("\"coll_sn\":1,", "\"coll_sn\":1e400,"), "coll_sn: bad number"},
       }) {
    c.push_back({std::string("ingest_bad_line_") + b.name,
                 [b](const Env& e) {
                   GoodInputs(e);
                   WriteFile(e.in() + "/node3-pid3.log",
                             b.make(CollLine("node3", 3, "0xdef", 0, 2, 2, "AllReduce", 1, 1048576, 100, "10.485760", "19.660800")));
                 },
                 [](const Env& e) { return Ingest(e); }, std::string("node3-pid3.log:1: ") + b.says, GoodStoredWithWarning});
  }
  // Blank lines are rejected lines too (counted, named), and the line after them is stored.
  for (const char* blank : {"   \t  \n", "\n\n\n"}) {
    c.push_back({std::string("ingest_blank_lines_") + (blank[0] == ' ' ? "whitespace" : "empty"),
                 [blank](const Env& e) {
                   GoodInputs(e);
                   WriteFile(e.in() + "/node3-pid3.log",
                             blank + CollLine("node3", 3, "0xdef", 0, 2, 2, "AllReduce", 1, 1048576, 100, "10.485760", "19.660800"));
                 },
                 [](const Env& e) { return Ingest(e); }, "node3-pid3.log:1: line: empty line",
                 [](const Env& e, const Output& o) {
                   EXPECT_EQ(e.Records(), 9) << o.text;
                   EXPECT_EQ(o.code, 1) << o.text;
                 }});
  }
  // Odd but readable: stored, and every later command still works on the store.
  for (const BadLine& b : std::vector<BadLine>{
           {"crlf_line_ends", [](std::string l) { l.insert(l.size() - 1, "\r"); return l; }, ""},
           {"duplicate_key", sub("\"coll_sn\":1,", "\"coll_sn\":1,\"coll_sn\":2,"), ""},
           {"exec_time_as_text", sub("\"coll_exec_time_us\":100", "\"coll_exec_time_us\":\"100\""), ""},
           {"hostname_of_1_mib", sub("\"hostname\":\"node3\"", "\"hostname\":\"HOST\""), ""},  // HOST: 1 MiB, below
           {"hostname_with_escaped_nul", sub("\"hostname\":\"node3\"", "\"hostname\":\"no\\u0000de\""), ""},
           {"timing_source_unknown", sub("\"kernel_gpu\"", "\"quantum\""), ""},
       }) {
    c.push_back({std::string("ingest_odd_line_") + b.name,
                 [b](const Env& e) {
                   GoodInputs(e);
                   std::string l = b.make(CollLine("node3", 3, "0xdef", 0, 2, 2, "AllReduce", 1, 1048576, 100, "10.485760", "19.660800"));
                   if (const size_t at = l.find("\"HOST\""); at != std::string::npos) l.replace(at + 1, 4, std::string(1 << 20, 'h'));
                   WriteFile(e.in() + "/node3-pid3.log", l);
                 },
                 [](const Env& e) {
                   return Ingest(e) + "; " + Binary() + " summary --db " + Quote(e.db()) + " >/dev/null && " + Binary() +
                          " report --db " + Quote(e.db()) + " -o " + Quote(e.dir / "r.html") + " && " + Binary() +
                          " diagnose --db " + Quote(e.db()) + " >/dev/null; echo \"later commands: $?\"";
                 },
                 "", [](const Env& e, const Output& o) {
                   EXPECT_EQ(e.Records(), 9) << o.text;
                   EXPECT_TRUE(o.text.find("later commands: 0") != std::string::npos ||
                               o.text.find("later commands: 1") != std::string::npos)
                       << "summary, report or diagnose failed on the store:\n" << o.text;
                 }});
  }

  // diagnose walks its paths with the same rules (H1, C2).
  auto diagnose = [](const Env& e) { return "diagnose " + Quote(e.in()); };
  auto terminates = [](const Env&, const Output& o) { EXPECT_LE(o.code, 2) << o.text; };
  c.push_back({"diagnose_fifo_named_like_a_dump",
               [](const Env& e) { GoodInputs(e); ASSERT_EQ(::mkfifo((e.in() + "/nccl_trace_rank_0").c_str(), 0600), 0); },
               diagnose, "a FIFO, not read", terminates});
  c.push_back({"diagnose_fifo_named_like_a_state_file",
               [](const Env& e) { GoodInputs(e); ASSERT_EQ(::mkfifo((e.in() + "/node1-pid1.inflight.json").c_str(), 0600), 0); },
               diagnose, "a FIFO, not read", terminates});
  c.push_back({"diagnose_symlink_self_loop",
               [](const Env& e) { GoodInputs(e); fs::create_symlink(e.in() + "/x", e.in() + "/x"); },
               diagnose, "looping symlink", terminates});
  // State files and dumps: one bad file is named and the rest are diagnosed (C10, D4, D5).
  auto state = [](int rank, const std::string& n_ranks) {
    return R"({"collscope_inflight_version":1,"hostname":"node1","pid":1,"global_rank":)" + std::to_string(rank) +
           R"(,"heartbeat_ts_us":1795938158281547,"status":"running","comms":[{"id":"0x5eed","comm_name":"dp","rank":)" +
           std::to_string(rank) + R"(,"n_ranks":)" + n_ranks +
           R"(,"nnodes":1,"ops_started":6,"ops_completed":5,"inflight":[{"kind":"coll","op":"AllReduce","sn":5,"peer":-1,"msg_size_bytes":131072,"n_channels":4,"start_ts_us":1795938158270000,"n_channels_started":4,"n_channels_stopped":2}]}]})";
  };
  c.push_back({"diagnose_state_file_with_2_31_ranks",
               [state](const Env& e) {
                 GoodInputs(e);
                 WriteFile(e.in() + "/node1-pid1.inflight.json", state(0, "2147483647"));
                 WriteFile(e.in() + "/node2-pid2.inflight.json", state(1, "2"));
               },
               diagnose, "is impossible (1 to 16777216 ranks)", terminates});
  c.push_back({"diagnose_truncated_state_file_beside_good_ones",
               [state](const Env& e) {
                 GoodInputs(e);
                 std::string cut = state(0, "2");
                 WriteFile(e.in() + "/node1-pid1.inflight.json", cut.substr(0, cut.size() / 2));
                 WriteFile(e.in() + "/node2-pid2.inflight.json", state(1, "2"));
               },
               diagnose, "could not use: ", [](const Env&, const Output& o) {
                 EXPECT_LE(o.code, 1) << "the records and the good state file are still diagnosed:\n" << o.text;
                 EXPECT_NE(o.text.find("node1-pid1.inflight.json: "), std::string::npos) << o.text;
               }});
  // Step/phase series (the annotation API's format): found by content, each bad line or file named.
  const std::string step_head =
      R"({"collscope_steps_version":1,"type":"process","hostname":"node1","pid":1,"rank":0,"world_size":2})" "\n";
  c.push_back({"ingest_step_file_of_a_future_version",
               [](const Env& e) {
                 GoodInputs(e);
                 WriteFile(e.in() + "/node1-pid1.steps.jsonl",
                           R"({"collscope_steps_version":9,"type":"process","hostname":"node1","pid":1,"rank":0,"world_size":2})" "\n");
               },
               [](const Env& e) { return "ingest " + Quote(e.in()) + " --db " + Quote(e.db()); },
               "format version 9; this collscope reads version 1", [](const Env& e, const Output& o) {
                 EXPECT_EQ(o.code, 1) << o.text;
                 GoodStored(e, o);
               }});
  c.push_back({"ingest_step_file_with_bad_lines",
               [step_head](const Env& e) {
                 GoodInputs(e);
                 WriteFile(e.in() + "/any-name",
                           step_head + R"({"type":"step","rank":0,"step":1,"start_us":5,"wall_us":1e99,"phases":[]})" "\n" +
                               R"({"type":"step","rank":0,"step":2,"start_us":5,"wall_us":7,"phases":[]})" "\n");
               },
               [](const Env& e) { return "ingest " + Quote(e.in()) + " --db " + Quote(e.db()); },
               "any-name:2: \"wall_us\" out of range", [](const Env& e, const Output& o) {
                 EXPECT_EQ(o.code, 1) << o.text;
                 GoodStored(e, o);
                 EXPECT_NE(o.text.find("1 steps"), std::string::npos) << o.text;
               }});
  c.push_back({"diagnose_step_file_cut_mid_line",
               [step_head](const Env& e) {
                 GoodInputs(e);
                 WriteFile(e.in() + "/node1-pid1.steps.jsonl", step_head + R"({"type":"step","rank":0,"st)");
               },
               diagnose, "node1-pid1.steps.jsonl:2: incomplete last line", terminates});
  c.push_back({"diagnose_truncated_flight_recorder_dump",
               [](const Env& e) {
                 GoodInputs(e);
                 WriteFile(e.in() + "/nccl_trace_rank_0", std::string("\x80\x02}q\0(X\x07\0\0\0version", 19));
               },
               diagnose, "nccl_trace_rank_0", terminates});
  c.push_back({"diagnose_symlink_loop_to_parent",
               [](const Env& e) { GoodInputs(e); fs::create_directory_symlink(e.in(), e.in() + "/loop"); },
               diagnose, "read:", terminates});
  // Kernel summaries of the CUPTI library (gzip by default): a corrupt stream is named with its
  // reason, and the good data beside it is stored.
  c.push_back({"ingest_kernel_summary_with_a_corrupt_gzip_block",
               [](const Env& e) {
                 GoodInputs(e);
                 std::string text =
                     R"({"type":"process","format":"collscope-kernels","format_version":1,"host":"node1","pid":1,"rank":0,"window":"time"})" "\n"
                     R"({"type":"kernel","id":0,"name":"k","kind":"compute","grid":[1,1,1],"block":[1,1,1]})" "\n";
                 for (int w = 0; w < 4000; ++w)
                   text += R"({"type":"summary","step":null,"start_ns":)" + std::to_string(w * 10000000000LL) +
                           R"(,"end_ns":)" + std::to_string((w + 1) * 10000000000LL) +
                           R"(,"kernel":0,"device":0,"stream":7,"count":1,"total_ns":)" + std::to_string(1000 + w * 7) +
                           R"(,"min_ns":)" + std::to_string(1000 + w * 7) + R"(,"max_ns":)" + std::to_string(1000 + w * 7) +
                           R"(,"modes":[[1,)" + std::to_string(1000 + w * 7) + ",0]]}\n";
                 const std::string path = e.in() + "/node1-pid1.kernels.jsonl.gz";
                 testing::WriteGzip(path, text);
                 std::string gz = testing::ReadFile(path);
                 for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
                 WriteFile(path, gz);
               },
               [](const Env& e) { return Ingest(e); }, "node1-pid1.kernels.jsonl.gz: gzip error", GoodStoredWithWarning});
}

// --- the runner --------------------------------------------------------------------------------

class Hostile : public ::testing::TestWithParam<size_t> {};

// The good job's store, ingested once per build of the binary and copied for each case that needs
// it: under the sanitizers an ingest costs seconds, and the SQL cases all start from this store.
// Written to a temporary name and renamed, so that cases running at once never see half a store.
std::string GoodStore() {
  const fs::path bin = Binary();
  std::error_code ec;
  const auto stamp = static_cast<uint64_t>(fs::last_write_time(bin, ec).time_since_epoch().count());
  const std::string prefix = "hostile-good-store-";
  const fs::path store = bin.parent_path() / (prefix + std::to_string(stamp) + ".duckdb");
  if (fs::exists(store)) return store;
  const std::string mine = prefix + std::to_string(stamp);  // this build's, maybe being written
  for (const auto& e : fs::directory_iterator(bin.parent_path(), ec)) {  // an earlier build's
    const std::string name = e.path().filename().string();
    if (name.starts_with(prefix) && !name.starts_with(mine)) fs::remove(e.path(), ec);
  }
  TempDir dir;
  WriteFile(dir / "good/node1-pid1.log", GoodLog("node1", 1, 0));
  WriteFile(dir / "good/node2-pid2.log", GoodLog("node2", 2, 1));
  const std::string partial = store.string() + "." + std::to_string(::getpid());
  Output ing = Collscope("ingest " + Quote(dir / "good") + " --db " + Quote(partial) + " -q");
  EXPECT_EQ(ing.code, 0) << ing.text;
  fs::rename(partial, store, ec);
  return store;
}

TEST_P(Hostile, RefusedSafely) {
  const Case& c = Catalogue()[GetParam()];
  TempDir dir;
  Env env{dir};
  fs::create_directories(env.in());
  if (c.needs_store) {
    const std::string store = GoodStore();
    ASSERT_TRUE(fs::exists(store)) << store;
    fs::copy_file(store, env.db());
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
  if (Catalogue().empty()) {
    RegisterSqlCases();
    RegisterIngestCases();
  }
  std::vector<size_t> ids(Catalogue().size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, Hostile, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<size_t>& p) { return Catalogue()[p.param].name; });

}  // namespace
}  // namespace collscope
