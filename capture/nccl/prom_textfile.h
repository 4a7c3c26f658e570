// Prometheus textfile output of collscope's NCCL profiler plugin: NCCL 2.30 Inspector's
// aggregated metrics (format "v5.1", ../shared/reference/inspector-formats-2.md §6 and
// nccl-inspector.md §1.8) plus collscope's own series, rendered as one text-format 0.0.4 file.
//
// Contract:
//   * Used only by the writer thread (or finalize), under the runtime's mutex: nothing here is
//     thread-safe and nothing runs on NCCL's hot path. Add() is called once per drained record.
//   * A window is the set of records added since the previous Render(). Inspector's series
//     aggregate one window per (comm_name, nranks, n_nodes, function, size bucket, algo_proto):
//     exec time = arithmetic mean, bus bandwidth = geometric mean. Records whose timing source is
//     not kernel_gpu are left out while require_kernel_timing is set (Inspector's default).
//   * A window without records keeps the previous window's bucket series unchanged (Inspector
//     does not rewrite such a file); collscope's process-level series are always current.
//   * Cardinality: at most max_buckets buckets per window and max_buckets communicator names in
//     the in-flight series; records that would open another bucket are counted, not aggregated.
//   * Inspector's series carry exactly Inspector's names, label order, "%.6g" values and no
//     HELP/TYPE lines; collscope's series (prefix collscope_) carry HELP and TYPE and base units.
//   * Never throws for any input (allocation failure aside).
#ifndef COLLSCOPE_CAPTURE_NCCL_PROM_TEXTFILE_H_
#define COLLSCOPE_CAPTURE_NCCL_PROM_TEXTFILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "capture/nccl/record_format.h"

namespace collscope::capture {

// Inspector's `message_size` label: "0B" for 0; otherwise "<f>-<f+1><unit>" where unit is the
// largest of B, KB, MB, GB, TB (1024-based) not above the size and f = floor(size / unit),
// e.g. 16.5 MiB -> "16-17MB", 700 B -> "700-701B".
std::string PromSizeBucket(uint64_t bytes);

// Text-format helpers: a label value with \\, \" and \n escaped; a value as printf("%.<digits>g")
// (Inspector uses 6) with NaN and infinities spelled as Prometheus parses them.
void AppendPromLabelValue(std::string_view v, std::string* out);
void AppendPromValue(double v, std::string* out, int digits = 6);

// Labels fixed for the process.
struct PromProcessLabels {
  std::string slurm_job_id = "unknown";  // SLURM_JOB_ID
  std::string node;                      // hostname
  std::string gpu = "unknown";           // "GPU<cuda device>"
};

// One communicator's in-flight operations at render time.
struct PromInflight {
  std::string comm_name;
  uint64_t ops = 0;
  uint64_t oldest_start_ns = 0;  // 0 when ops == 0
};

class PromTextfile {
 public:
  PromTextfile(PromProcessLabels labels, uint32_t max_buckets, bool require_kernel_timing,
               bool dump_stats);

  // Interns a communicator's (comm_name, nranks, n_nodes); the id goes to Add().
  uint32_t CommGroup(const CommIdentity& comm);

  // One record drained from a communicator's ring.
  void Add(uint32_t group, const CompletedRecord& r);
  // Ring drops newly seen for one communicator (process totals never decrease).
  void AddDrops(uint64_t coll, uint64_t p2p);

  // The whole file for the window that ends now (wall-clock now_ns), then starts a new window.
  std::string Render(const std::vector<PromInflight>& inflight, uint64_t now_ns);

 private:
  struct Group {
    std::string comm_name;
    int nranks = 0, nnodes = 0;
  };
  struct Key {
    uint32_t group = 0;
    Func func = Func::kInvalid;
    bool is_p2p = false;
    uint8_t unit = 0;     // 0 B, 1 KB, ... ; 0 with floor 0 and zero bytes -> "0B"
    bool zero = false;
    uint16_t floor = 0;
    PackedName algo, proto;  // zero for P2P (its series have no algo_proto)
    bool operator==(const Key& o) const;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept;
  };
  struct Agg {
    uint64_t n = 0;
    double exec_sum_us = 0;
    uint64_t exec_max_us = 0;
    uint64_t n_bw = 0;  // records with busbw > 0 (the geometric mean's terms)
    double log_bw_sum = 0;
  };

  void RenderBuckets(uint64_t now_ns);
  void AppendBaseLabels(bool with_version, std::string* out) const;
  void AppendBucketLabels(const Key& k, std::string* out) const;

  const PromProcessLabels labels_;
  const uint32_t max_buckets_;
  const bool require_kernel_timing_;
  const bool dump_stats_;
  std::vector<Group> groups_;
  std::unordered_map<Key, Agg, KeyHash> window_;
  std::string bucket_section_;  // the last window with records, rendered
  // Process totals since the runtime started (monotonic: they survive communicator teardown).
  uint64_t coll_total_ = 0, p2p_total_ = 0, coll_dropped_ = 0, p2p_dropped_ = 0;
  uint64_t excluded_timing_ = 0, excluded_limit_ = 0;
};

}  // namespace collscope::capture

#endif  // COLLSCOPE_CAPTURE_NCCL_PROM_TEXTFILE_H_
