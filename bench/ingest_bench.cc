// Ingest benchmark: generates a deterministic NCCL Inspector dataset (default 1 GiB, one file per
// process as the plugin writes them), then measures in one run
//   (a) the `collscope ingest` command the user runs (a child process: parsing, the store, the
//       analysis views and aggregates, the Kineto scan), and
//   (b) DuckDB's own read_json loading the same files into a table,
// printing MB/s, records/s and bytes on disk per record for each, and the ratios.
//
// Usage: ingest_bench [--bytes N] [--dir DIR] [--threads N] [--collscope PATH]
// (PATH defaults to the collscope binary beside this build's bench/ folder.)
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/ingest.h"
#include "core/store.h"

namespace fs = std::filesystem;
using namespace collscope;

namespace {

struct Rng {  // splitmix64: deterministic across platforms
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
};

// 8 GPUs per host; per process: its TP (8 ranks, one host), DP (one rank per host) and world comms.
uint64_t Generate(const std::string& dir, uint64_t target_bytes, uint64_t* records_out) {
  fs::create_directories(dir);
  const int hosts = 32, gpus = 8, procs = hosts * gpus;
  const uint64_t per_proc = target_bytes / procs;
  const char* ops[] = {"AllReduce", "AllGather", "ReduceScatter"};
  uint64_t total = 0, records = 0;
  std::vector<char> buf;
  for (int p = 0; p < procs; ++p) {
    int host = p / gpus, local = p % gpus;
    char hostname[64];
    std::snprintf(hostname, sizeof hostname, "node-%03d.cluster.example", host);
    int pid = 40000 + local;
    Rng rng{static_cast<uint64_t>(p) * 7919 + 17};
    std::string path = dir + "/" + hostname + "-pid" + std::to_string(pid) + ".log";
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return 0;
    uint64_t written = 0, ts = 1760000000000000ull;
    uint64_t sn[3][3] = {};
    while (written < per_proc) {
      int c = static_cast<int>(rng.Next() % 3);  // 0 tp, 1 dp, 2 world
      int n_ranks = c == 0 ? gpus : c == 1 ? hosts : procs;
      int nnodes = c == 0 ? 1 : hosts;
      int rank = c == 0 ? local : c == 1 ? host : p;
      uint64_t id = c == 0 ? 0x1000000000ull + host * 977 : c == 1 ? 0x2000000000ull + local * 131
                                                                    : 0x3fffabcdef12ull;
      int op = static_cast<int>(rng.Next() % 3);
      uint64_t size = 1ull << (12 + rng.Next() % 17);
      double bw = (c == 0 ? 150.0 : 40.0) * (0.7 + 0.3 * rng.Uniform());
      double factor = op == 0 ? 2.0 * (n_ranks - 1) / n_ranks : double(n_ranks - 1) / n_ranks;
      double traffic = op == 0 ? size : double(size) * n_ranks;
      uint64_t t_us = std::max<uint64_t>(1, static_cast<uint64_t>(traffic / (bw / factor) / 1e3));
      double algbw = traffic / 1e9 / (t_us / 1e6);
      ts += 50 + rng.Next() % 500;
      char line[1024];
      int n = std::snprintf(
          line, sizeof line,
          "{\"header\":{\"id\":\"0x%" PRIx64 "\",\"rank\":%d,\"n_ranks\":%d,\"nnodes\":%d},"
          "\"metadata\":{\"inspector_output_format_version\":\"v4.0\",\"git_rev\":\"9019a1912\","
          "\"rec_mechanism\":\"nccl_profiler_interface\",\"dump_timestamp_us\":%" PRIu64 ","
          "\"hostname\":\"%s\",\"pid\":%d},\"coll_perf\":{\"coll\":\"%s\",\"coll_sn\":%" PRIu64
          ",\"coll_msg_size_bytes\":%" PRIu64 ",\"coll_exec_time_us\":%" PRIu64
          ",\"coll_timing_source\":\"kernel_gpu\",\"coll_algobw_gbs\":%lf,\"coll_busbw_gbs\":%lf}}\n",
          id, rank, n_ranks, nnodes, ts, hostname, pid, ops[op], ++sn[c][op], size, t_us, algbw,
          algbw * factor);
      std::fwrite(line, 1, n, f);
      written += n;
      ++records;
    }
    std::fclose(f);
    total += written;
  }
  *records_out = records;
  return total;
}

uint64_t FileSize(const std::string& p) {
  struct stat st;
  uint64_t s = ::stat(p.c_str(), &st) == 0 ? st.st_size : 0;
  if (::stat((p + ".wal").c_str(), &st) == 0) s += st.st_size;
  return s;
}

// CPU seconds of this process (all threads), or of its finished children: independent of what
// else the machine runs.
double CpuSeconds(int who = RUSAGE_SELF) {
  struct rusage ru;
  getrusage(who, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t bytes = 1ull << 30;
  std::string dir = "/tmp/collscope-ingest-bench";
  int threads = 0;
  std::string collscope = (fs::path(argv[0]).parent_path() / "../collscope").lexically_normal().string();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--collscope")) collscope = argv[i + 1];
    if (!std::strcmp(argv[i], "--bytes")) bytes = std::stoull(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
  }
  unsigned cores = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  std::string data = dir + "/data";
  fs::remove_all(dir);
  uint64_t records = 0;
  double t = Now();
  uint64_t raw = Generate(data, bytes, &records);
  std::printf("generated %.1f MB, %" PRIu64 " records in %.1f s (%s)\n", raw / 1e6, records,
              Now() - t, data.c_str());

  // (a) collscope ingest
  std::string cs_db = dir + "/collscope.duckdb";
  double cs_s, cs_cpu;
  uint64_t cs_records;
  {
    std::string cmd = collscope + " ingest " + data + " --db " + cs_db + " --run bench -q";
    if (threads > 0) cmd += " --threads " + std::to_string(threads);
    t = Now();
    double c = CpuSeconds(RUSAGE_CHILDREN);
    int rc = std::system(cmd.c_str());
    cs_s = Now() - t;
    cs_cpu = CpuSeconds(RUSAGE_CHILDREN) - c;
    if (rc != 0) return std::fprintf(stderr, "%s: exit status %d\n", cmd.c_str(), rc), 1;
    auto store = Store::Open(cs_db, Store::Options::ReadOnly());
    if (!store.ok()) return std::fprintf(stderr, "%s\n", store.status().message().c_str()), 1;
    auto n = (*store)->QueryInt("SELECT count(*) FROM records");
    if (!n.ok()) return std::fprintf(stderr, "%s\n", n.status().message().c_str()), 1;
    cs_records = static_cast<uint64_t>(*n);
  }
  uint64_t cs_size = FileSize(cs_db);

  // (b) DuckDB read_json into a table, same files, same machine, all cores
  std::string rj_db = dir + "/read_json.duckdb";
  double rj_s, rj_cpu;
  int64_t rj_records = 0;
  {
    // The peer is plain DuckDB, opened with the C API: collscope's sandbox (Store::Open) refuses
    // read_json of files outside the store, as it should for user SQL.
    duckdb_database db = nullptr;
    duckdb_connection conn = nullptr;
    if (duckdb_open(rj_db.c_str(), &db) != DuckDBSuccess || duckdb_connect(db, &conn) != DuckDBSuccess)
      return std::fprintf(stderr, "%s: cannot open\n", rj_db.c_str()), 1;
    auto run = [&](const std::string& sql, int64_t* first = nullptr) {
      duckdb_result r;
      bool ok = duckdb_query(conn, sql.c_str(), &r) == DuckDBSuccess;
      if (!ok) std::fprintf(stderr, "%s\n", duckdb_result_error(&r));
      else if (first) *first = duckdb_value_int64(&r, 0, 0);
      duckdb_destroy_result(&r);
      return ok;
    };
    if (threads > 0) run("SET threads = " + std::to_string(threads));
    t = Now();
    double c = CpuSeconds();
    bool ok = run("CREATE TABLE raw AS SELECT * FROM read_json(" + SqlString(data + "/*.log") +
                  ", format = 'newline_delimited'); CHECKPOINT");
    rj_s = Now() - t;
    rj_cpu = CpuSeconds() - c;
    if (!ok || !run("SELECT count(*) FROM raw", &rj_records)) return 1;
    duckdb_disconnect(&conn);
    duckdb_close(&db);
  }
  uint64_t rj_size = FileSize(rj_db);

  double cs_mbs = raw / 1e6 / cs_s, rj_mbs = raw / 1e6 / rj_s;
  std::printf("\n%-18s %8s %8s %10s %12s %12s %9s %10s\n", "", "seconds", "MB/s",
              "records/s", "CPU seconds", "MB/CPU-s", "B/record", "raw/store");
  std::printf("%-18s %8.2f %8.1f %10.0f %12.2f %12.1f %9.1f %9.1fx\n", "collscope ingest", cs_s,
              cs_mbs, cs_records / cs_s, cs_cpu, raw / 1e6 / cs_cpu, double(cs_size) / cs_records,
              double(raw) / cs_size);
  std::printf("%-18s %8.2f %8.1f %10.0f %12.2f %12.1f %9.1f %9.1fx\n", "duckdb read_json", rj_s,
              rj_mbs, rj_records / rj_s, rj_cpu, raw / 1e6 / rj_cpu, double(rj_size) / rj_records,
              double(raw) / rj_size);
  std::printf("\ncores used: %u; collscope MB/s per core: %.1f (target >= 150)\n", cores,
              cs_mbs / cores);
  std::printf("ratio collscope / read_json throughput: %.2fx wall, %.2fx per CPU-second "
              "(target >= 2)\n", cs_mbs / rj_mbs, rj_cpu / cs_cpu);
  std::printf("store size / raw JSON: 1/%.1f (target <= 1/30)\n", double(raw) / cs_size);
  std::printf("records: collscope %" PRIu64 ", read_json %" PRId64 ", generated %" PRIu64 "\n",
              cs_records, rj_records, records);
  if (!std::getenv("COLLSCOPE_BENCH_KEEP")) fs::remove_all(dir);
  return cs_records == records ? 0 : 1;
}
