// `collscope simulate`: thin wrapper over collscope_sim (sim/sim.h; --live: sim/live.h, with
// SIGINT/SIGTERM turned into a clean stop).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "cli/output.h"
#include "sim/live.h"
#include "sim/sim.h"

namespace collscope::cli {
namespace simulate_cmd {

struct SimulateOptions {
  sim::SimConfig config;
  std::string mode = "training";
  std::string sharding = "zero";
  std::vector<std::string> faults;
  std::string scenario;
  std::string nt_ops = "allreduce,allgather,reducescatter";
  bool no_p2p = false, no_kineto_gzip = false, no_kineto_traces = false, no_kernel_summaries = false,
       no_steps = false, no_inflight_state = false, quiet = false;
  bool live = false;
  double speed = 1.0;
  CLI::Option* start_time = nullptr;
};

// Set by SIGINT/SIGTERM during a live run, which polls it (a handler may only store an atomic).
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);
extern "C" void OnStopSignal(int) { g_stop.store(true, std::memory_order_relaxed); }

// The live run's signal handlers, restored when it ends.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_;  // filled by the constructor
  struct sigaction old_term_;
};

// The cluster: hosts, GPUs, NICs, their speeds and clocks; and the parallel layout.
void AddClusterOptions(CLI::App* cmd, sim::SimConfig& c) {
  cmd->add_option("--hosts", c.cluster.hosts, "Number of hosts")->capture_default_str();
  cmd->add_option("--gpus-per-host", c.cluster.gpus_per_host, "GPUs per host")->capture_default_str();
  cmd->add_option("--nics-per-host", c.cluster.nics_per_host, "NICs (rails) per host")
      ->capture_default_str();
  cmd->add_option("--nvlink-gbs", c.cluster.nvlink_gbs, "Intra-host bus bandwidth, GB/s")
      ->capture_default_str();
  cmd->add_option("--nvlink-latency-us", c.cluster.nvlink_latency_us, "Intra-host per-hop latency")
      ->capture_default_str();
  cmd->add_option("--nic-gbs", c.cluster.nic_gbs, "Per-NIC bandwidth, GB/s")->capture_default_str();
  cmd->add_option("--net-latency-us", c.cluster.net_latency_us, "Inter-host per-hop latency")
      ->capture_default_str();
  cmd->add_option("--gpu-tflops", c.cluster.gpu_tflops, "GPU dense bf16 peak, TFLOP/s")
      ->capture_default_str();
  cmd->add_option("--mfu", c.cluster.mfu, "Achieved fraction of peak for model compute")
      ->capture_default_str();
  cmd->add_option("--clock-skew-us", c.cluster.clock_skew_us, "Max host clock offset (+-us)")
      ->capture_default_str();
  cmd->add_option("--host-prefix", c.cluster.host_prefix, "Host name prefix (<prefix>-NNN)")
      ->capture_default_str();
  // Layout
  cmd->add_option("--tp", c.parallel.tp, "Tensor parallel size")->capture_default_str();
  cmd->add_option("--pp", c.parallel.pp, "Pipeline parallel size")->capture_default_str();
  cmd->add_option("--cp", c.parallel.cp, "Context parallel size")->capture_default_str();
  cmd->add_option("--ep", c.parallel.ep, "Expert parallel size (divides dp)")->capture_default_str();
  cmd->add_option("--dp", c.parallel.dp, "Data parallel size (0: world/(tp*pp*cp))")
      ->capture_default_str();
}

// The model and its training loop.
void AddWorkloadOptions(CLI::App* cmd, const std::shared_ptr<SimulateOptions>& opts) {
  sim::SimConfig& c = opts->config;
  cmd->add_option("--hidden", c.workload.hidden, "Model hidden size")->capture_default_str();
  cmd->add_option("--layers", c.workload.layers, "Transformer layers")->capture_default_str();
  cmd->add_option("--seq-len", c.workload.seq_len, "Sequence length")->capture_default_str();
  cmd->add_option("--micro-batch-size", c.workload.micro_batch_size, "Sequences per micro-batch")
      ->capture_default_str();
  cmd->add_option("--micro-batches", c.workload.micro_batches, "Micro-batches per step")
      ->capture_default_str();
  cmd->add_option("--vocab", c.workload.vocab, "Vocabulary size")->capture_default_str();
  cmd->add_option("--moe-topk", c.workload.moe_topk, "Experts per token (ep > 1)")
      ->capture_default_str();
  cmd->add_flag("--sequence-parallel", c.workload.sequence_parallel,
                "TP AllGather/ReduceScatter instead of AllReduce");
  cmd->add_option("--sharding", opts->sharding, "zero (distributed optimizer / FSDP) | ddp")
      ->capture_default_str()
      ->check(CLI::IsMember({"zero", "ddp"}));
  cmd->add_option("--bucket-mparams", c.workload.bucket_mparams, "DP bucket, millions of params")
      ->capture_default_str();
  cmd->add_option("--steps", c.workload.steps, "Training steps")->capture_default_str();
  cmd->add_option("--world-allreduce-bytes", c.workload.world_allreduce_bytes,
                  "Per-step AllReduce on the world communicator")
      ->capture_default_str();
  cmd->add_option("--step-gap-us", c.workload.step_gap_us, "Host time between steps")
      ->capture_default_str();
}

// Noise; defaults printed from the simulator's own constants.
void AddNoiseOptions(CLI::App* cmd, sim::SimConfig& c) {
  using N = sim::NoiseConfig;
  auto Fmt = [](const char* f, double x) {
    char b[32];
    std::snprintf(b, sizeof b, f, x);
    return std::string(b);
  };
  cmd->add_option("--compute-sigma", c.noise.compute_sigma,
                  "Log-normal sigma of compute (default " + Fmt("%g", N::kComputeSigma) + ")");
  cmd->add_option("--comm-sigma", c.noise.comm_sigma,
                  "Log-normal sigma of collectives (default " + Fmt("%g", N::kCommSigma) + "; nccl-tests " +
                      Fmt("%g", N::kCommSigmaNcclTests) + ")");
  cmd->add_option("--contention-prob", c.noise.contention_prob,
                  "Probability a collective overlaps compute (default " + Fmt("%g", N::kContentionProb) +
                      "; nccl-tests 0)");
  cmd->add_option("--contention-min", c.noise.contention_min,
                  "Worst bandwidth factor under overlap contention (default " + Fmt("%g", N::kContentionMin) + ")");
  cmd->add_option("--gpu-speed-sigma", c.noise.gpu_speed_sigma,
                  "Static speed spread between healthy GPUs: each GPU's compute at a log-normal factor of this "
                  "sigma for the whole job")
      ->capture_default_str();
}

// The NCCL Inspector's settings.
void AddInspectorOptions(CLI::App* cmd, const std::shared_ptr<SimulateOptions>& opts) {
  sim::SimConfig& c = opts->config;
  cmd->add_option("--inspector-flavor", c.inspector.flavor,
                  "2.30 (comm_name, p2p_perf, ring buffers) | 2.29 (latest-snapshot sampling)")
      ->capture_default_str()
      ->check(CLI::IsMember({"2.29", "2.30"}));
  cmd->add_option("--dump-interval-us", c.inspector.dump_interval_us,
                  "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS")
      ->capture_default_str();
  cmd->add_flag("--inspector-verbose", c.inspector.verbose,
                "NCCL_INSPECTOR_DUMP_VERBOSE=1: per-channel event_trace_sn/_ts");
  cmd->add_flag("--no-p2p", opts->no_p2p, "NCCL_INSPECTOR_ENABLE_P2P=0");
  cmd->add_flag("--inspector-proxy", c.inspector.proxy,
                "NCCL_INSPECTOR_ENABLE_PROXY=1 (2.30 flavour): v4.4 marker streams with every "
                "network transfer's proxy_trace records (nested, with step timings)");
  cmd->add_option("--min-size-bytes", c.inspector.min_size_bytes,
                  "NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES (2.30)")
      ->capture_default_str();
  cmd->add_option("--ring-size", c.inspector.ring_size, "NCCL_INSPECTOR_DUMP_COLL_RING_SIZE")
      ->capture_default_str();
  cmd->add_option("--git-rev", c.inspector.git_rev, "Inspector git_rev string")
      ->capture_default_str();
}

// Which other files are written, and how.
void AddOutputOptions(CLI::App* cmd, const std::shared_ptr<SimulateOptions>& opts) {
  sim::SimConfig& c = opts->config;
  cmd->add_option("--kineto-max-ranks", c.output.kineto_max_ranks,
                  "Write Kineto traces only when world <= this")
      ->capture_default_str();
  cmd->add_option("--kineto-first-step", c.output.kineto_first_step, "First profiled step")
      ->capture_default_str();
  cmd->add_option("--kineto-last-step", c.output.kineto_last_step,
                  "Last profiled step (-1: last)")
      ->capture_default_str();
  cmd->add_flag("--no-kineto-gzip", opts->no_kineto_gzip, "Write .json instead of .json.gz");
  cmd->add_flag("--no-kineto-traces", opts->no_kineto_traces,
                "Write the CUPTI library's kernel summaries (kernels/) without the Kineto traces beside them");
  cmd->add_flag("--no-kernel-summaries", opts->no_kernel_summaries,
                "Do not write the CUPTI library's kernel summaries beside the Kineto traces (kernels/)");
  cmd->add_flag("--no-steps", opts->no_steps, "Do not write the step/phase series (steps/)");
  cmd->add_flag("--no-inflight-state", opts->no_inflight_state,
                "Do not write the plugin's in-flight state files (*.inflight.json)");
  cmd->add_option("--buffer-mb", c.output.buffer_mb, "Inspector output buffered before flush")
      ->capture_default_str();
}

// The nccl-tests sweep (--mode nccl-tests).
void AddNcclTestsOptions(CLI::App* cmd, const std::shared_ptr<SimulateOptions>& opts) {
  sim::SimConfig& c = opts->config;
  cmd->add_option("--nt-ops", opts->nt_ops, "nccl-tests ops, comma separated")
      ->capture_default_str();
  cmd->add_option("--nt-min-bytes", c.nccl_tests.min_bytes, "nccl-tests -b")->capture_default_str();
  cmd->add_option("--nt-max-bytes", c.nccl_tests.max_bytes, "nccl-tests -e")->capture_default_str();
  cmd->add_option("--nt-factor", c.nccl_tests.factor, "nccl-tests -f")->capture_default_str();
  cmd->add_option("--nt-iters", c.nccl_tests.iters, "nccl-tests -n")->capture_default_str();
  cmd->add_option("--nt-warmup", c.nccl_tests.warmup, "nccl-tests -w")->capture_default_str();
}

// The options, into `opts`.
void AddOptions(CLI::App* cmd, const std::shared_ptr<SimulateOptions>& opts) {
  sim::SimConfig& c = opts->config;
  cmd->footer(
      "Fault specs (--fault, repeatable; or --scenario FILE with {\"faults\":[{...}]}):\n"
      "  kind=gpu_straggler,rank=R|host=H,gpu=G[,factor=2.0]       slower compute on one GPU\n"
      "  kind=host_slowdown,host=H[,factor=1.5]                    all GPUs of a host slower\n"
      "  kind=nic_degrade,host=H[,rail=N][,factor=0.25]            NIC bandwidth multiplier\n"
      "  kind=link_flap,host=H[,rail=N][,period_us=2e6,down_us=5e4,retry_us=2e4]\n"
      "  kind=host_stall,rank=R[,stall_us=5e6]                     JIT-like gap, sparse launches\n"
      "  kind=pipeline_bubble,stage=S[,delay_us=2e4]               late activation sends\n"
      "  kind=masked_straggler,rank=R[,factor=2.0]                 slower backward only\n"
      "  kind=hang,rank=R,comm=dp|tp|pp|cp|ep|world,(op=OP,coll_sn=N | start_step=K)\n"
      "  kind=link_down,host=H[,rail=N],(start_step=K[,delay_us=D] | start_us=T)\n"
      "  kind=mismatch,rank=R,comm=KIND,(op=OP,coll_sn=N | start_step=K),\n"
      "       (issue_op=OP | size_factor=F)[,effect=complete|hang]\n"
      "Every fault also takes a window: start_step/end_step ([start, end) in steps) or\n"
      "start_us/end_us (microseconds from job start). See docs/simulator.md.");
  cmd->add_option("-o,--out", c.output.dir, "Output directory (created)")->required();
  cmd->add_option("--mode", opts->mode, "training | nccl-tests (isolated benchmark sweep)")
      ->capture_default_str()
      ->check(CLI::IsMember({"training", "nccl-tests"}));
  cmd->add_option("--seed", c.seed, "Random seed; the same seed gives byte-identical output")
      ->capture_default_str();
  opts->start_time = cmd->add_option("--start-time-us", c.start_time_us,
                                     "Job start, wall clock us since epoch (--live: now)")
                         ->capture_default_str();
  cmd->add_option("--hang-timeout-s", c.hang_timeout_s, "Watchdog timeout that ends a hung job")
      ->capture_default_str();
  AddClusterOptions(cmd, c);
  AddWorkloadOptions(cmd, opts);
  AddNoiseOptions(cmd, c);
  AddInspectorOptions(cmd, opts);
  AddOutputOptions(cmd, opts);
  AddNcclTestsOptions(cmd, opts);
  // Faults
  cmd->add_option("--fault", opts->faults, "Fault spec kind=...,key=value (repeatable)");
  cmd->add_option("--scenario", opts->scenario, "JSON scenario file with a \"faults\" array");
  cmd->add_flag("-q,--quiet", opts->quiet, "Print nothing on success");
  // Live mode
  CLI::Option* live = cmd->add_flag(
      "--live", opts->live,
      "Write the files at the job clock's pace (lines appear when due; documents at the "
      "job end; timeline in OUT/live_events.ndjson); SIGINT/SIGTERM stop it cleanly");
  cmd->add_option("--speed", opts->speed, "--live: job seconds per wall second (>= 1)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9))
      ->needs(live);
}

// The configuration the options describe; false, with the reason printed and the exit code set,
// when a fault spec, scenario or nccl-tests op is not understood.
bool ConfigFrom(const SimulateOptions& o, sim::SimConfig* cfg) {
  const SimulateOptions* opts = &o;
  *cfg = o.config;
  cfg->mode = opts->mode == "nccl-tests" ? sim::Mode::kNcclTests : sim::Mode::kTraining;
  cfg->workload.sharding = opts->sharding == "ddp" ? sim::Sharding::kDdp : sim::Sharding::kZero;
  cfg->inspector.p2p = !opts->no_p2p;
  cfg->output.kineto_gzip = !opts->no_kineto_gzip;
  cfg->output.kernel_summaries = !opts->no_kernel_summaries;
  cfg->output.kineto_traces = !opts->no_kineto_traces;
  cfg->output.steps = !opts->no_steps;
  cfg->output.inflight_state = !opts->no_inflight_state;
  cfg->nccl_tests.ops.clear();
  {
    std::string s = opts->nt_ops;
    size_t pos = 0;
    while (pos <= s.size()) {
      size_t e = s.find(',', pos);
      if (e == std::string::npos) e = s.size();
      std::string item = s.substr(pos, e - pos);
      pos = e + 1;
      if (item.empty()) continue;
      sim::Op op;
      if (!sim::ParseOp(item, &op)) {
        std::fprintf(stderr, "collscope simulate: unknown --nt-ops entry '%s'\n", item.c_str());
        SetExitCode(2);
        return false;
      }
      cfg->nccl_tests.ops.push_back(op);
    }
  }
  for (const std::string& f : opts->faults) {
    sim::FaultSpec spec;
    if (Status st = sim::ParseFaultSpec(f, &spec); !st.ok()) {
      SetExitCode(Fail("simulate", st));
      return false;
    }
    cfg->faults.push_back(spec);
  }
  if (Status st = opts->scenario.empty() ? Status::Ok() : sim::LoadScenarioFile(opts->scenario, cfg); !st.ok()) {
    SetExitCode(Fail("simulate", st));
    return false;
  }
  return true;
}

// --live: the files written at the job clock's pace.
void RunLive(sim::SimConfig cfg, const SimulateOptions& o) {
  const SimulateOptions* opts = &o;
  if (opts->start_time->count() == 0)
    cfg.start_time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  sim::LiveOptions lo;
  lo.speed = opts->speed;
  g_stop.store(false);
  lo.stop = &g_stop;
  Result<sim::LiveStats> r = [&] {
    StopSignals signals;
    return sim::SimulateLive(cfg, lo);
  }();
  if (!r.ok()) {
    SetExitCode(Fail("simulate", r.status()));
    return;
  }
  if (!opts->quiet) {
    std::printf(
        "%s: staged %d ranks in %.2f s; paced %llu lines (%.1f MB) into %llu files and %llu "
        "documents over %.2f s wall at speed %g (%.0f lines/s, latest line %.3f s late) -> "
        "%s\n",
        r->stopped ? "stopped" : "live run finished", r->sim.world, r->staging_s,
        static_cast<unsigned long long>(r->lines), r->bytes / 1e6,
        static_cast<unsigned long long>(r->line_files),
        static_cast<unsigned long long>(r->documents), r->pacing_s, lo.speed,
        r->pacing_s > 0 ? r->lines / r->pacing_s : 0.0, r->max_late_us / 1e6,
        cfg.output.dir.c_str());
  }
  SetExitCode(0);
}

void RunAtOnce(const sim::SimConfig& cfg, const SimulateOptions& o) {
  const SimulateOptions* opts = &o;
  sim::SimStats stats;
  const auto t0 = std::chrono::steady_clock::now();
  const Status simulated = sim::Simulate(cfg, &stats);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!simulated.ok()) {
    SetExitCode(Fail("simulate", simulated));
    return;
  }
  if (!opts->quiet) {
    const uint64_t recs = stats.coll_records + stats.p2p_records;
    std::printf(
        "simulated %d ranks, %d steps completed, %.1f s of job time\n"
        "wrote %llu Inspector records (%llu coll, %llu p2p; %llu dropped) in %llu files, "
        "%.1f MB\n"
        "%.2f s wall, %.0f records/s -> %s\n",
        stats.world, stats.steps_completed, stats.job_duration_s,
        static_cast<unsigned long long>(recs), static_cast<unsigned long long>(stats.coll_records),
        static_cast<unsigned long long>(stats.p2p_records),
        static_cast<unsigned long long>(stats.dropped_records),
        static_cast<unsigned long long>(stats.inspector_files), stats.inspector_bytes / 1e6,
        secs, secs > 0 ? recs / secs : 0.0, cfg.output.dir.c_str());
  }
  SetExitCode(0);
}

void Register(CLI::App& app) {
  auto opts = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand(
      "simulate",
      "Simulate a training job (or an nccl-tests sweep) with labelled faults and write NCCL "
      "Inspector logs, Kineto traces, step/phase series (the annotation API's format) and ground_truth.json");
  AddOptions(cmd, opts);
  cmd->callback([opts] {
    sim::SimConfig cfg;
    if (!ConfigFrom(*opts, &cfg)) return;
    if (opts->live) RunLive(cfg, *opts);
    else RunAtOnce(cfg, *opts);
  });
}

RegisterCommand reg(&Register);

}  // namespace simulate_cmd
}  // namespace collscope::cli
