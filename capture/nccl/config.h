// Environment configuration of collscope's NCCL profiler plugin (documented in docs/capture.md).
//
// Contract: LoadConfig never throws for bad values; a value it cannot parse keeps the default and
// adds a human-readable note to Config::warnings (logged once through NCCL's logger at init).
#ifndef COLLSCOPE_CAPTURE_NCCL_CONFIG_H_
#define COLLSCOPE_CAPTURE_NCCL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

namespace collscope::capture {

// Inspector's Prometheus mode never dumps more often than this.
inline constexpr int64_t kPromMinIntervalUs = 30000000;

enum class DumpStatsMode { kAlways, kDrops, kOff };

struct Config {
  bool enable = true;                  // COLLSCOPE_ENABLE
  std::string dump_dir;                // NCCL_INSPECTOR_DUMP_DIR or nccl-inspector-<jobid>
  int64_t dump_interval_us = 1000000;  // NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS
  bool verbose = false;                // NCCL_INSPECTOR_DUMP_VERBOSE
  bool enable_p2p = true;              // NCCL_INSPECTOR_ENABLE_P2P
  uint64_t min_size_bytes = 0;         // NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES
  uint32_t coll_ring_size = 4096;      // NCCL_INSPECTOR_DUMP_COLL_RING_SIZE (power of two)
  uint32_t p2p_ring_size = 4096;       // NCCL_INSPECTOR_DUMP_P2P_RING_SIZE (power of two)
  uint32_t inflight_pool_size = 512;   // COLLSCOPE_INFLIGHT_POOL_SIZE
  int64_t state_interval_ms = 1000;    // COLLSCOPE_STATE_INTERVAL_MS (0 = no state file)
  uint32_t sample_every = 1;           // COLLSCOPE_SAMPLE_EVERY
  bool proxy_events = false;           // COLLSCOPE_PROXY_EVENTS
  uint32_t proxy_pool_size = 1024;     // COLLSCOPE_PROXY_POOL_SIZE
  DumpStatsMode dump_stats = DumpStatsMode::kAlways;  // COLLSCOPE_DUMP_STATS
  // Prometheus textfile output (prom_textfile.h; docs/capture.md "Prometheus textfile").
  bool prom_dump = false;            // NCCL_INSPECTOR_PROM_DUMP
  bool prom_dump_stats = false;      // NCCL_INSPECTOR_PROM_DUMP_STATS
  bool require_kernel_timing = true; // NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING (textfile only)
  // Period of the .prom file: Inspector's rule on the dump interval (-1: no file; otherwise at
  // least 30 s), unless COLLSCOPE_PROM_INTERVAL_MS overrides it. -1 = no textfile.
  int64_t prom_interval_us = -1;
  std::string prom_dir;              // COLLSCOPE_PROM_DIR, default dump_dir
  uint32_t prom_max_buckets = 512;   // COLLSCOPE_PROM_MAX_BUCKETS
  std::vector<std::string> warnings;
};

using GetEnvFn = const char* (*)(const char*);

// Reads every variable through getenv_fn (std::getenv by default).
Config LoadConfig(GetEnvFn getenv_fn = nullptr);

// Rounds v up to a power of two within [lo, hi].
uint32_t RoundUpPow2(uint64_t v, uint32_t lo, uint32_t hi);

}  // namespace collscope::capture

#endif  // COLLSCOPE_CAPTURE_NCCL_CONFIG_H_
