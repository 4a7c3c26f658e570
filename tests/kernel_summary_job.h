// Kernel-summary files of a made-up training job, written the way collscope's CUPTI library
// writes them (docs/cupti.md, "The summary file"), for the L3 and command tests: per rank a
// handful of compute kernels launched a few hundred times a step with log-normal durations, an
// NCCL all-reduce whose kernels wait for the slowest rank, and a memcpy; step windows. One rank's
// kernels can be made slower from a step on. Deterministic: std::mt19937_64 is the same sequence
// everywhere, and the normal deviates are drawn here (Box-Muller), not by the library.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numbers>
#include <random>
#include <string>
#include <vector>

namespace collscope::testing {

inline constexpr const char* kSummaryJobGemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_cluster1x2";

struct SummaryJob {
  int hosts = 2, gpus_per_host = 4, steps = 20;
  double spread = 0.02;    // standard deviation of the log duration of every kernel shape
  int slow_rank = -1;      // whose main GEMM runs slow_factor x slower from slow_from_step on
  double slow_factor = 1.3;
  int slow_from_step = 8;
  uint64_t seed = 7;
  bool gzip = false;       // <host>-pid<pid>.kernels.jsonl.gz, as the library writes by default
  uint64_t t0_ns = 1764666000000000000ull;
  uint64_t step_ns = 300000000;  // every step window starts on this grid
};

namespace summary_job {

struct Shape {
  int launches;       // per step
  double centre_us;   // median duration
};

struct Kernel {
  const char* name;
  const char* kind;
  int stream;
  const char* launch;         // ",\"grid\":[...],\"block\":[...]" as the library writes it; "" for memcpy
  std::vector<Shape> shapes;  // each a mode of the durations
};

inline const std::vector<Kernel>& Kernels() {
  static const std::vector<Kernel> k = {
      // Two shapes at one launch configuration (the same output tiles, another inner dimension),
      // as a model's projections often are: a 10% minority at 420 us.
      {kSummaryJobGemm, "compute", 7, ",\"grid\":[132,1,1],\"block\":[384,1,1]", {{360, 180}, {40, 420}}},
      // One name at two launch configurations: two kernel ids.
      {"flash_fwd_kernel", "compute", 7, ",\"grid\":[132,1,1],\"block\":[128,1,1]", {{200, 90}}},
      {"flash_fwd_kernel", "compute", 7, ",\"grid\":[264,1,1],\"block\":[128,1,1]", {{100, 170}}},
      {"flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", "compute", 7, ",\"grid\":[132,1,1],\"block\":[256,1,1]",
       {{200, 160}}},
      {"vectorized_elementwise_kernel", "compute", 7, ",\"grid\":[1024,1,1],\"block\":[128,1,1]", {{600, 6}}},
      {"layer_norm_fwd_kernel", "compute", 7, ",\"grid\":[512,1,1],\"block\":[256,1,1]", {{300, 12}}},
      {"cross_entropy_loss_kernel", "compute", 7, ",\"grid\":[64,1,1],\"block\":[512,1,1]", {{4, 250}}},
      {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "nccl", 13, ",\"grid\":[16,1,1],\"block\":[512,1,1]", {{50, 400}}},
      {"memcpy HtoD", "memcpy", 14, "", {{10, 50}}},
  };
  return k;
}

class Normal {
 public:
  explicit Normal(uint64_t seed) : rng_(seed) {}
  double operator()() {
    auto uniform = [&] { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1p-53; };
    const double u = uniform(), v = uniform();
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
  }

 private:
  std::mt19937_64 rng_;
};

// "[count,centre_ns,spread]" of one shape's durations (ns), as the library finds its modes.
inline std::string Mode(const std::vector<double>& ns) {
  double sum = 0, sq = 0;
  for (double d : ns) sum += std::log(d);
  const double mean = sum / static_cast<double>(ns.size());
  for (double d : ns) sq += (std::log(d) - mean) * (std::log(d) - mean);
  char buf[96];
  std::snprintf(buf, sizeof buf, "[%zu,%.6g,%.4g]", ns.size(), std::exp(mean),
                std::sqrt(sq / static_cast<double>(ns.size())));
  return buf;
}

}  // namespace summary_job

// Writes DIR/<host>-pid<pid>.kernels.jsonl for every rank of `job`; returns the paths.
inline std::vector<std::string> WriteSummaryJob(const std::string& dir, const SummaryJob& job) {
  using namespace summary_job;
  std::vector<std::string> paths;
  const int world = job.hosts * job.gpus_per_host;
  for (int rank = 0; rank < world; ++rank) {
    const std::string host = "node" + std::to_string(rank / job.gpus_per_host);
    const int pid = 1000 + rank, local = rank % job.gpus_per_host;
    std::string out = "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":1,\"host\":\"" + host +
                      "\",\"pid\":" + std::to_string(pid) + ",\"rank\":" + std::to_string(rank) +
                      ",\"local_rank\":" + std::to_string(local) + ",\"world_size\":" + std::to_string(world) +
                      ",\"window\":\"step\",\"window_ms\":10000,\"clock\":\"realtime\"}\n";
    for (size_t k = 0; k < Kernels().size(); ++k)
      out += "{\"type\":\"kernel\",\"id\":" + std::to_string(k) + ",\"name\":\"" + Kernels()[k].name +
             "\",\"kind\":\"" + Kernels()[k].kind + "\"" + Kernels()[k].launch + "}\n";
    Normal normal(job.seed * 1000 + static_cast<uint64_t>(rank));
    uint64_t kernels = 0;
    for (int step = 1; step <= job.steps; ++step) {
      const bool late = step >= job.slow_from_step;
      // The all-reduce waits for the slowest rank: everyone but the slow rank waits out its
      // extra GEMM time, spread over the step's all-reduces.
      double wait_us = 0;
      if (job.slow_rank >= 0 && late && rank != job.slow_rank)
        for (const Shape& s : Kernels()[0].shapes) wait_us += s.launches * s.centre_us * (job.slow_factor - 1) / 50;
      const uint64_t start = job.t0_ns + static_cast<uint64_t>(step - 1) * job.step_ns;
      for (size_t k = 0; k < Kernels().size(); ++k) {
        const Kernel& kern = Kernels()[k];
        const double factor = k == 0 && rank == job.slow_rank && late ? job.slow_factor : 1.0;
        std::vector<std::string> modes;
        uint64_t count = 0, total = 0, lo = UINT64_MAX, hi = 0;
        for (const Shape& s : kern.shapes) {
          std::vector<double> ns;
          for (int i = 0; i < s.launches; ++i) {
            const double centre = s.centre_us * factor + (kern.kind == std::string("nccl") ? wait_us : 0);
            const uint64_t d = static_cast<uint64_t>(std::llround(centre * 1e3 * std::exp(job.spread * normal())));
            ns.push_back(static_cast<double>(d));
            total += d;
            lo = std::min(lo, d);
            hi = std::max(hi, d);
          }
          count += static_cast<uint64_t>(s.launches);
          modes.push_back(Mode(ns));
        }
        kernels += count;
        std::string m;
        for (const std::string& x : modes) m += (m.empty() ? "" : ",") + x;
        out += "{\"type\":\"summary\",\"step\":" + std::to_string(step) + ",\"start_ns\":" + std::to_string(start) +
               ",\"end_ns\":" + std::to_string(start + job.step_ns * 9 / 10) + ",\"kernel\":" + std::to_string(k) +
               ",\"device\":" + std::to_string(local) + ",\"stream\":" + std::to_string(kern.stream) +
               ",\"count\":" + std::to_string(count) + ",\"total_ns\":" + std::to_string(total) +
               ",\"min_ns\":" + std::to_string(lo) + ",\"max_ns\":" + std::to_string(hi) + ",\"modes\":[" + m + "]}\n";
      }
    }
    out += "{\"type\":\"stats\",\"records\":" + std::to_string(kernels) + ",\"kernels\":" + std::to_string(kernels) +
           ",\"untimed\":0,\"dropped_by_cupti\":0,\"buffers_refused\":0,\"invalid_records\":0,\"late\":0}\n";
    const std::string path =
        dir + "/" + host + "-pid" + std::to_string(pid) + ".kernels.jsonl" + (job.gzip ? ".gz" : "");
    if (job.gzip) {
      gzFile gz = gzopen(path.c_str(), "wb");
      gzwrite(gz, out.data(), static_cast<unsigned>(out.size()));
      gzclose(gz);
    } else {
      std::ofstream(path, std::ios::binary) << out;
    }
    paths.push_back(path);
  }
  return paths;
}

}  // namespace collscope::testing
