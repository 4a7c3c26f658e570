// collscope simulator: a synthetic large training job with labelled faults, written in the formats
// users already have (NCCL Inspector JSON lines, PyTorch-profiler Chrome traces, a per-step summary)
// plus ground_truth.json. See docs/simulator.md and docs/ground_truth.md.
//
// This library does not depend on collscope_core: it only writes files.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace collscope::sim {

enum class Mode { kTraining, kNcclTests };
enum class Sharding { kDdp, kZero };  // kZero: distributed optimizer / ZeRO-1..3 / FSDP

// Collective operations as NCCL names them in the Inspector (`coll` / `p2p`).
enum class Op : uint8_t { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kSend, kRecv,
                          kAlltoAll, kCount };
std::string_view OpName(Op op);
bool ParseOp(std::string_view text, Op* op);  // accepts NCCL names and nccl-tests names

// Communicator kinds of the Megatron-style layout.
enum class CommKind : uint8_t { kWorld, kDp, kCp, kTp, kPp, kEp, kCount };
std::string_view CommKindName(CommKind kind);  // "world", "dp", "cp", "tp", "pp", "ep"
bool ParseCommKind(std::string_view text, CommKind* kind);

struct ClusterConfig {
  int hosts = 2;
  int gpus_per_host = 8;
  int nics_per_host = 8;            // rails; GPU g uses rail g * nics / gpus
  double nvlink_gbs = 360.0;        // achievable bus bandwidth inside a host (GB/s, per GPU)
  double nvlink_latency_us = 0.6;   // per ring hop inside a host
  double nic_gbs = 48.0;            // per NIC (rail), GB/s
  double net_latency_us = 4.0;      // per ring hop across hosts
  double gpu_tflops = 989.0;        // dense bf16 peak
  double mfu = 0.45;                // achieved fraction of peak for model compute
  double clock_skew_us = 500.0;     // host clocks are offset by up to +-this (NTP error)
  std::string host_prefix = "node";
};

struct ParallelConfig {
  int tp = 4, pp = 2, cp = 1, ep = 1;
  int dp = 0;  // derived: world / (tp * pp * cp)
};

struct WorkloadConfig {
  int64_t hidden = 4096;
  int64_t layers = 8;
  int64_t seq_len = 4096;
  int64_t micro_batch_size = 1;
  int64_t micro_batches = 4;          // per step, per pipeline
  int64_t vocab = 32000;
  int64_t moe_topk = 2;               // used when ep > 1 (every layer is MoE)
  bool sequence_parallel = false;     // TP AllGather/ReduceScatter instead of AllReduce
  Sharding sharding = Sharding::kZero;
  double bucket_mparams = 40.0;       // DP gradient bucket, millions of parameters
  int steps = 20;
  int64_t world_allreduce_bytes = 16384;  // per-step world AllReduce (loss / timers logging)
  double step_gap_us = 3000.0;        // host work between steps (data loader, logging)
};

struct NoiseConfig {
  // Negative values mean "use the default of the mode" (production or nccl-tests), below.
  double compute_sigma = -1;    // log-normal sigma of compute kernel durations
  double comm_sigma = -1;       // log-normal sigma of collective durations
  double contention_prob = -1;  // probability a collective overlaps compute and loses bandwidth
  double contention_min = -1;   // bandwidth factor drawn uniformly in [contention_min, 1]
  // Static speed spread between healthy GPUs (clocks, thermals): each GPU's compute runs at a
  // log-normal factor of this sigma, fixed for the job. Real GPUs of one model differ by a few
  // tenths of a percent; 0 (the default) makes them identical.
  double gpu_speed_sigma = 0;

  static constexpr double kComputeSigma = 0.01;
  static constexpr double kCommSigma = 0.025, kCommSigmaNcclTests = 0.015;
  static constexpr double kContentionProb = 0.2, kContentionMin = 0.85;
};

struct InspectorConfig {
  std::string flavor = "2.30";        // "2.30": comm_name, p2p_perf, ring buffers; "2.29": snapshot
  int64_t dump_interval_us = 1000000;
  bool verbose = false;               // NCCL_INSPECTOR_DUMP_VERBOSE=1
  bool p2p = true;                    // NCCL_INSPECTOR_ENABLE_P2P (2.30 only)
  int64_t min_size_bytes = 8192;      // NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES (2.30 only)
  int ring_size = 1024;               // NCCL_INSPECTOR_DUMP_COLL_RING_SIZE / _P2P_RING_SIZE
  std::string git_rev = "";
  // NCCL_INSPECTOR_ENABLE_PROXY=1 (dev-line v4.4, 2.30 flavour only): the files become v4.4 marker
  // streams, and every network transfer's ProxyOp is written as nested proxy_trace records (a
  // proxy_op_start and a final proxy_op with its steps' time decomposition).
  bool proxy = false;
};

struct OutputConfig {
  std::string dir;
  int kineto_max_ranks = 64;          // write Kineto traces only when world <= this
  int kineto_first_step = 0;
  int kineto_last_step = -1;          // -1: through the last step
  bool kineto_gzip = true;
  bool kineto_traces = true;          // kineto/*.pt.trace.json(.gz)
  // kernels/<host>-pid<pid>.kernels.jsonl.gz beside the Kineto traces: the CUPTI library's summaries.
  bool kernel_summaries = true;
  // false: kernels/<host>-pid<pid>.kernels.jsonl, plain (live mode paces them out line by line).
  bool kernel_summaries_gzip = true;
  bool steps = true;                  // steps/<host>-pid<pid>.steps.jsonl (step/phase series)
  int64_t buffer_mb = 256;            // Inspector bytes buffered before appending to files
  // collscope plugin in-flight state files (<host>-pid<pid>.inflight.json in nccl-inspector/),
  // as the plugin leaves them at the end of the job; training mode only.
  bool inflight_state = true;
};

struct NcclTestsConfig {
  std::vector<Op> ops = {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter};
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t{256} << 20;
  int64_t factor = 2;
  int iters = 20;
  int warmup = 5;
};

// One fault as given on the command line (`kind=...,key=value,...`) or in a scenario file.
struct FaultSpec {
  std::string kind;
  std::map<std::string, std::string> params;
};

struct SimConfig {
  Mode mode = Mode::kTraining;
  uint64_t seed = 1;
  int64_t start_time_us = 1767225600000000;  // 2026-01-01T00:00:00Z
  double hang_timeout_s = 600.0;              // watchdog kills a hung job after this
  ClusterConfig cluster;
  ParallelConfig parallel;
  WorkloadConfig workload;
  NoiseConfig noise;
  InspectorConfig inspector;
  OutputConfig output;
  NcclTestsConfig nccl_tests;
  std::vector<FaultSpec> faults;
  // When set and true, the engine stops between steps and Simulate returns 3 ("stopped") without
  // writing the ground truth: lets a live run (sim/live.h) honour SIGINT/SIGTERM while it stages.
  const std::atomic<bool>* cancel = nullptr;
};

struct SimStats {
  uint64_t coll_records = 0;    // coll_perf lines written
  uint64_t p2p_records = 0;     // p2p_perf lines written
  uint64_t dropped_records = 0; // lost to ring overflow / snapshot sampling / min size
  uint64_t inspector_bytes = 0;
  uint64_t inspector_files = 0;
  int world = 0;
  int steps_completed = 0;
  double job_duration_s = 0;    // simulated wall-clock duration
  bool stopped = false;         // config.cancel was set: nothing after the engine was written
};

// Parses "kind=nic_degrade,host=3,factor=0.25,start_step=10,end_step=20" (invalid argument).
Status ParseFaultSpec(std::string_view text, FaultSpec* out);
// Reads a JSON scenario file: {"faults":[{"kind":...,...}, ...]} (or a bare array of faults).
// Values may be numbers or strings. Appends to config->faults. I/O error when the file cannot be
// read, corruption when it is no scenario.
Status LoadScenarioFile(const std::string& path, SimConfig* config);
// Checks the configuration and the faults without running anything (invalid argument).
Status ValidateConfig(const SimConfig& config);

// Runs the simulation and writes every output file into config.output.dir: invalid argument for a
// configuration it cannot run, I/O error for an output it cannot write. A run stopped through
// config.cancel is no error: stats->stopped says so.
Status Simulate(const SimConfig& config, SimStats* stats);

// ---- Cost model, exposed for tests and docs -------------------------------------------------
enum class Algo : uint8_t { kRing, kTree };
enum class Proto : uint8_t { kLL, kLL128, kSimple };
std::string_view AlgoName(Algo a);
std::string_view ProtoName(Proto p);

struct CollCost {
  double time_us = 0;
  Algo algo = Algo::kRing;
  Proto proto = Proto::kSimple;
  int channels = 1;
};
// Per-protocol constants of the alpha-beta model: base latency (us), per-hop latency multiplier,
// bandwidth efficiency.
struct ProtoParams {
  double base_us, hop_mult, bw_eff;
};
ProtoParams GetProtoParams(Proto p);
// `inspector_bytes` is the Inspector coll_msg_size_bytes (per-rank size for AllGather and
// ReduceScatter, per-peer size for AlltoAll). bw_gbs is the slowest link's bandwidth (GB/s)
// and hop_latency_us the per-hop latency. Chooses the fastest algorithm/protocol as NCCL's tuner
// does. Tree is only considered for AllReduce across hosts.
CollCost CollectiveCost(Op op, int n_ranks, int64_t inspector_bytes, double bw_gbs,
                        double hop_latency_us, bool multi_host);
// The Inspector's bandwidth formulas (reference §1.3): exec time in integer microseconds.
void InspectorBandwidth(Op op, int n_ranks, int64_t msg_bytes, uint64_t exec_time_us,
                        double* algbw_gbs, double* busbw_gbs);

}  // namespace collscope::sim
