// Helpers shared by tests: temporary directories, files, and Inspector lines written literally.
#pragma once

#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace collscope::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "collscope-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void WriteFile(const std::string& path, const std::string& content, bool append = false) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, append ? std::ios::app | std::ios::binary : std::ios::binary);
  f << content;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void WriteGzip(const std::string& path, const std::string& content) {
  gzFile gz = gzopen(path.c_str(), "wb");
  gzwrite(gz, content.data(), static_cast<unsigned>(content.size()));
  gzclose(gz);
}

// One v4.0 coll_perf line as the Inspector plugin writes it (values passed through verbatim).
inline std::string CollLine(const std::string& host, int pid, const std::string& comm, int rank,
                            int n_ranks, int nnodes, const std::string& coll, uint64_t sn,
                            uint64_t size, uint64_t exec_us, const std::string& algbw,
                            const std::string& busbw, uint64_t dump_ts = 1760000000000000) {
  return "{\"header\":{\"id\":\"" + comm + "\",\"rank\":" + std::to_string(rank) +
         ",\"n_ranks\":" + std::to_string(n_ranks) + ",\"nnodes\":" + std::to_string(nnodes) +
         "},\"metadata\":{\"inspector_output_format_version\":\"v4.0\",\"git_rev\":\"abc\","
         "\"rec_mechanism\":\"nccl_profiler_interface\",\"dump_timestamp_us\":" +
         std::to_string(dump_ts) + ",\"hostname\":\"" + host + "\",\"pid\":" +
         std::to_string(pid) + "},\"coll_perf\":{\"coll\":\"" + coll + "\",\"coll_sn\":" +
         std::to_string(sn) + ",\"coll_msg_size_bytes\":" + std::to_string(size) +
         ",\"coll_exec_time_us\":" + std::to_string(exec_us) +
         ",\"coll_timing_source\":\"kernel_gpu\",\"coll_algobw_gbs\":" + algbw +
         ",\"coll_busbw_gbs\":" + busbw + "}}\n";
}

// A shell command's exit status (128 + N when killed by signal N) and its output.
struct Output {
  int code;
  std::string text;
};

inline Output RunShell(const std::string& cmd) {
  Output out{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.text.append(buf, n);
  int status = pclose(p);
  out.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return out;
}

// The collscope binary under test (CTest sets COLLSCOPE_BIN).
inline std::string CollscopeBinary() {
  const char* bin = std::getenv("COLLSCOPE_BIN");
  return bin ? bin : COLLSCOPE_BINARY_DIR "/collscope";
}

inline std::string FixturesDir() {
  const char* env = std::getenv("COLLSCOPE_FIXTURES");
  return env ? env : COLLSCOPE_FIXTURES_DEFAULT;
}

}  // namespace collscope::testing
