#include "capture/nccl/config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace collscope::capture {
namespace {

bool ParseInt(const char* s, int64_t* out) {
  if (s == nullptr || *s == '\0') return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s) return false;
  while (*end == ' ' || *end == '\t') ++end;
  if (*end != '\0') return false;
  *out = v;
  return true;
}

class Reader {
 public:
  Reader(GetEnvFn fn, Config* cfg) : fn_(fn), cfg_(cfg) {}

  const char* Raw(const char* name) const {
    const char* v = fn_(name);
    return (v != nullptr && *v != '\0') ? v : nullptr;
  }

  // Integer in [lo, hi]; anything else keeps the default and warns.
  void Int(const char* name, int64_t lo, int64_t hi, int64_t* out) {
    const char* v = Raw(name);
    if (v == nullptr) return;
    int64_t x;
    if (!ParseInt(v, &x) || x < lo || x > hi) {
      cfg_->warnings.push_back(std::string(name) + "=" + v + " is not valid; using " +
                               std::to_string(*out));
      return;
    }
    *out = x;
  }

  void Bool(const char* name, bool* out) {
    int64_t x = *out ? 1 : 0;
    Int(name, 0, 1, &x);
    *out = x != 0;
  }

 private:
  GetEnvFn fn_;
  Config* cfg_;
};

const char* StdGetenv(const char* name) { return std::getenv(name); }

}  // namespace

uint32_t RoundUpPow2(uint64_t v, uint32_t lo, uint32_t hi) {
  uint64_t p = lo;
  while (p < v && p < hi) p <<= 1;
  return static_cast<uint32_t>(p > hi ? hi : p);
}

Config LoadConfig(GetEnvFn getenv_fn) {
  Config c;
  Reader r(getenv_fn != nullptr ? getenv_fn : &StdGetenv, &c);

  r.Bool("COLLSCOPE_ENABLE", &c.enable);

  // Directory naming follows Inspector: explicit dir, else nccl-inspector-<int(SLURM_JOBID)>.
  if (const char* d = r.Raw("NCCL_INSPECTOR_DUMP_DIR")) {
    c.dump_dir = d;
  } else {
    int64_t job = 0;
    const char* j = r.Raw("SLURM_JOBID");
    if (j == nullptr) j = r.Raw("SLURM_JOB_ID");
    if (j != nullptr && ParseInt(j, &job)) {
      c.dump_dir = "nccl-inspector-" + std::to_string(job);
    } else {
      c.dump_dir = "nccl-inspector-unknown-jobid";
    }
  }

  r.Int("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", -1, INT64_C(3600000000),
        &c.dump_interval_us);
  r.Bool("NCCL_INSPECTOR_DUMP_VERBOSE", &c.verbose);
  r.Bool("NCCL_INSPECTOR_ENABLE_P2P", &c.enable_p2p);

  int64_t v = static_cast<int64_t>(c.min_size_bytes);
  r.Int("NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", 0, INT64_MAX, &v);
  c.min_size_bytes = static_cast<uint64_t>(v);

  // Verbose cells carry 64 channel traces (2.5 KiB each), so verbose mode defaults to
  // Inspector's 1024-entry rings unless the user sized them.
  if (c.verbose) c.coll_ring_size = c.p2p_ring_size = 1024;
  v = c.coll_ring_size;
  r.Int("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE", 1, 1 << 22, &v);
  c.coll_ring_size = RoundUpPow2(static_cast<uint64_t>(v), 2, 1u << 22);
  v = c.p2p_ring_size;
  r.Int("NCCL_INSPECTOR_DUMP_P2P_RING_SIZE", 1, 1 << 22, &v);
  c.p2p_ring_size = RoundUpPow2(static_cast<uint64_t>(v), 2, 1u << 22);

  v = c.inflight_pool_size;
  r.Int("COLLSCOPE_INFLIGHT_POOL_SIZE", 1, 1 << 16, &v);
  c.inflight_pool_size = static_cast<uint32_t>(v);

  r.Int("COLLSCOPE_STATE_INTERVAL_MS", 0, INT64_C(3600000), &c.state_interval_ms);

  v = c.sample_every;
  r.Int("COLLSCOPE_SAMPLE_EVERY", 1, INT32_MAX, &v);
  c.sample_every = static_cast<uint32_t>(v);

  r.Bool("COLLSCOPE_PROXY_EVENTS", &c.proxy_events);
  v = c.proxy_pool_size;
  r.Int("COLLSCOPE_PROXY_POOL_SIZE", 1, 1 << 20, &v);
  c.proxy_pool_size = static_cast<uint32_t>(v);

  if (const char* m = r.Raw("COLLSCOPE_DUMP_STATS")) {
    if (std::strcmp(m, "always") == 0) {
      c.dump_stats = DumpStatsMode::kAlways;
    } else if (std::strcmp(m, "drops") == 0) {
      c.dump_stats = DumpStatsMode::kDrops;
    } else if (std::strcmp(m, "off") == 0) {
      c.dump_stats = DumpStatsMode::kOff;
    } else {
      c.warnings.push_back(std::string("COLLSCOPE_DUMP_STATS=") + m +
                           " is not one of always|drops|off; using always");
    }
  }

  // Prometheus textfile mode. Inspector raises a non-negative dump interval below 30 s to 30 s
  // in this mode, and -1 means no output at all.
  r.Bool("NCCL_INSPECTOR_PROM_DUMP", &c.prom_dump);
  r.Bool("NCCL_INSPECTOR_PROM_DUMP_STATS", &c.prom_dump_stats);
  r.Bool("NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING", &c.require_kernel_timing);
  c.prom_interval_us = c.dump_interval_us < 0 ? -1 : std::max<int64_t>(c.dump_interval_us, kPromMinIntervalUs);
  int64_t prom_ms = -1;
  r.Int("COLLSCOPE_PROM_INTERVAL_MS", 10, INT64_C(3600000), &prom_ms);
  if (prom_ms > 0) c.prom_interval_us = prom_ms * 1000;
  if (!c.prom_dump) c.prom_interval_us = -1;
  c.prom_dir = c.dump_dir;
  if (const char* d = r.Raw("COLLSCOPE_PROM_DIR")) c.prom_dir = d;
  v = c.prom_max_buckets;
  r.Int("COLLSCOPE_PROM_MAX_BUCKETS", 1, 1 << 16, &v);
  c.prom_max_buckets = static_cast<uint32_t>(v);
  return c;
}

}  // namespace collscope::capture
