// capture -> files -> ingest -> store: drives the built NCCL profiler plugin through its v5 ABI
// exactly as NCCL does (dlopen, init, Coll and KernelCh events with GPU timers, finalize), then
// ingests what it wrote and checks that Inspector's fields and collscope's extras land in the
// store's columns.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "capture/nccl/profiler_abi.h"
#include "core/ingest.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

void QuietLogger(collscope_ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

TEST(PluginToStore, RecordsAndExtrasLandInColumns) {
  testing::TempDir dir;
  setenv("NCCL_INSPECTOR_DUMP_DIR", (dir / "logs").c_str(), 1);
  setenv("RANK", "5", 1);
  setenv("LOCAL_RANK", "1", 1);
  void* lib = dlopen(COLLSCOPE_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto* plugin = static_cast<collscope_ncclProfiler_v5_t*>(dlsym(lib, "ncclProfiler_v5"));
  ASSERT_NE(plugin, nullptr);

  void* ctx = nullptr;
  int mask = 0;
  // The name ends in a byte that is no UTF-8 (issue 10, D6): every record must still be stored.
  ASSERT_EQ(plugin->init(&ctx, 0xabcdef12ull, &mask, "tp_group\xff", 1, 2, 0, QuietLogger),
            collscope_ncclSuccess);
  ASSERT_NE(mask & collscope_ncclProfileKernelCh, 0);
  for (uint64_t sn = 0; sn < 3; ++sn) {
    collscope_ncclProfilerEventDescr_v5_t coll{};
    coll.type = collscope_ncclProfileColl;
    coll.rank = 0;
    coll.coll.seqNumber = sn;
    coll.coll.func = "AllReduce";
    coll.coll.count = 262144;  // 1 MiB of float32
    coll.coll.datatype = "ncclFloat32";
    coll.coll.nChannels = 2;
    coll.coll.algo = "RING";
    coll.coll.proto = "SIMPLE";
    void* coll_handle = nullptr;
    ASSERT_EQ(plugin->startEvent(ctx, &coll_handle, &coll), collscope_ncclSuccess);
    plugin->stopEvent(coll_handle);  // enqueued; completion comes from the channels
    for (uint8_t ch = 0; ch < 2; ++ch) {
      collscope_ncclProfilerEventDescr_v5_t kch{};
      kch.type = collscope_ncclProfileKernelCh;
      kch.parentObj = coll_handle;
      kch.kernelCh.channelId = ch;
      kch.kernelCh.pTimer = 1'000'000'000ull + sn * 1'000'000 + ch * 1'000;
      void* kh = nullptr;
      ASSERT_EQ(plugin->startEvent(ctx, &kh, &kch), collscope_ncclSuccess);
      collscope_ncclProfilerEventStateArgs_t args{};
      args.kernelCh.pTimer = kch.kernelCh.pTimer + (ch == 0 ? 100'000 : 80'000);  // 100 us max
      plugin->recordEventState(kh, collscope_ncclProfilerKernelChStop, &args);
      plugin->stopEvent(kh);
    }
  }
  ASSERT_EQ(plugin->finalize(ctx), collscope_ncclSuccess);

  auto store = Store::Open(dir / "s.duckdb");
  ASSERT_TRUE(store.ok());
  IngestOptions o;
  o.run = "plugin";
  Result<IngestReport> r = Ingest(**store, {dir / "logs"}, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->lines_rejected, 0u) << (r->first_rejections.empty() ? "" : r->first_rejections[0]);
  EXPECT_EQ(r->records_stored, 3u);
  Result<QueryResult> q = (*store)->Query(
      "SELECT count(*), min(comm_name), min(global_rank), min(local_rank), min(algo)::VARCHAR, "
      "min(proto)::VARCHAR, min(n_channels), min(exec_time_us), max(exec_time_us), "
      "min(timing_source)::VARCHAR, min(busbw_gbs), min(ch_start_spread_us), "
      "count(*) FILTER (WHERE enqueue_ts_us IS NOT NULL), min(msg_size_bytes) FROM records_v");
  ASSERT_TRUE(q.ok()) << q.status().message();
  const auto& row = q->rows[0];
  EXPECT_EQ(*row[0], "3");
  EXPECT_EQ(*row[1], "tp_group\\xff");  // the invalid byte as the text \xff
  EXPECT_EQ(*row[2], "5");
  EXPECT_EQ(*row[3], "1");
  EXPECT_EQ(*row[4], "RING");
  EXPECT_EQ(*row[5], "SIMPLE");
  EXPECT_EQ(*row[6], "2");
  EXPECT_EQ(*row[7], "100");
  EXPECT_EQ(*row[8], "100");
  EXPECT_EQ(*row[9], "kernel_gpu");
  // 1 MiB AllReduce over 2 ranks in 100 us: algbw 10.48576 GB/s, busbw x 2(n-1)/n = 1.
  EXPECT_EQ(*row[10], "10.48576");
  EXPECT_EQ(*row[11], "1.0");  // channel 1 started 1 us after channel 0
  EXPECT_EQ(*row[12], "3");
  EXPECT_EQ(*row[13], "1048576");
}

}  // namespace
}  // namespace collscope
