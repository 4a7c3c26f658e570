// Small simulated jobs for tests that need real Inspector logs of a known fault.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "analysis/views.h"
#include "core/ingest.h"
#include "sim/sim.h"

namespace collscope::testing {

// 4 hosts x 8 GPUs, TP 8 inside a host, PP 2 (the example job's shape): the communicators of one
// host span different host pairs, so a host's fault can be told from its neighbours'. Inspector
// logs only (no step series, no profiler traces), dumped every 0.2 s. `fault` is a
// `simulate --fault` spec, or empty for a healthy job.
inline sim::SimConfig FourHostJob(const std::string& out, const std::string& fault, int steps = 8,
                                  uint64_t seed = 3) {
  sim::SimConfig c;
  c.seed = seed;
  c.cluster.hosts = 4;
  c.cluster.gpus_per_host = 8;
  c.parallel.tp = 8;
  c.parallel.pp = 2;
  c.workload.layers = 2;
  c.workload.micro_batches = 2;
  c.workload.hidden = 2048;
  c.workload.seq_len = 2048;
  c.workload.steps = steps;
  c.inspector.dump_interval_us = 200000;
  c.output.dir = out;
  c.output.kineto_max_ranks = 0;
  c.output.steps = false;
  if (!fault.empty()) {
    sim::FaultSpec f;
    std::string err;
    EXPECT_EQ(sim::ParseFaultSpec(fault, &f).message(), "");
    c.faults.push_back(f);
  }
  return c;
}

// Runs the simulator; a failure fails the test that asked.
inline sim::SimStats RunSimulation(const sim::SimConfig& c) {
  sim::SimStats stats;
  std::string err;
  EXPECT_EQ(sim::Simulate(c, &stats).message(), "");
  return stats;
}

// A simulated job's Inspector logs (`job_dir`/nccl-inspector) ingested as `run` into a new store
// at `db`, with the analysis views; a failure fails the test that asked. `records_stored`, when
// given, receives the ingest's count.
inline std::unique_ptr<Store> IngestSimulatedJob(const std::string& job_dir, const std::string& db,
                                                 const std::string& run, uint64_t* records_stored = nullptr) {
  auto store = Store::Open(db);
  EXPECT_TRUE(store.ok()) << store.status().message();
  if (!store.ok()) return nullptr;
  IngestOptions io;
  io.run = run;
  io.threads = 2;
  auto rep = Ingest(**store, {job_dir + "/nccl-inspector"}, io);
  EXPECT_TRUE(rep.ok()) << rep.status().message();
  if (rep.ok() && records_stored) *records_stored = rep->records_stored;
  EXPECT_TRUE(InstallAnalysisViews(**store, false).ok());
  return std::move(*store);
}

}  // namespace collscope::testing
