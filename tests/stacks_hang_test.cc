// A hang as an on-call engineer meets it: a job's in-flight state files name the rank that never
// joined its collective, and `collscope stacks` sampled the job's eight (real) processes while it
// hung. The hang finding must say what that rank was doing: its frame, from its stack.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/stacks/stack_target_test_util.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

using stacks::stack_target::MarkedLine;
using stacks::stack_target::Target;
using testing::Output;

Output Collscope(const std::string& args) {
  return testing::RunShell(testing::CollscopeBinary() + " " + args + " 2>&1");
}

TEST(StacksHang, TheHangFindingNamesTheStuckRanksFrame) {
  REQUIRE_PYTHON();
  if (Collscope("simulate --help").code != 0) GTEST_SKIP() << "collscope built without sim/";
  if (Collscope("stacks --help").code != 0) GTEST_SKIP() << "collscope built without stacks";
  testing::TempDir dir;
  // Eight ranks (2 hosts x 4 GPUs, TP 4, PP 2); rank 5 never joins its tensor-parallel AllReduce.
  ASSERT_EQ(
      Collscope(
          "simulate -o " + dir / "job" +
          " --hosts 2 --gpus-per-host 4 --tp 4 --pp 2 --layers 2 "
          "--hidden 1024 --seq-len 1024 --steps 12 --kineto-max-ranks 0 --dump-interval-us 200000 "
          "--fault kind=hang,rank=5,comm=tp,start_step=6")
          .code,
      0);
  // The job's processes while it hangs: rank 5 busy in its own work, the others waiting.
  std::vector<std::unique_ptr<Target>> ranks;
  std::string pids;
  for (int r = 0; r < 8; ++r) {
    ranks.push_back(std::make_unique<Target>(r == 5 ? "compile" : "wait", r));
    ASSERT_GT(ranks.back()->pid(), 0);
    pids += " --pid " + std::to_string(ranks.back()->pid());
  }
  const std::string logs = dir / "job" + "/nccl-inspector";
  Output sampled = Collscope("stacks" + pids + " --duration 1.5 --out " + logs + "/stacks");
  EXPECT_EQ(sampled.code, 1) << sampled.text;  // one process stands apart
  const std::string frame =
      "compile_graph (stack_target.py:" + std::to_string(MarkedLine("compile")) + ")";

  auto check = [&](const Output& out) {
    EXPECT_EQ(out.code, 1) << out.text;
    EXPECT_NE(out.text.find("sampled call stacks of 8 processes (collscope stacks)"),
              std::string::npos)
        << out.text;
    size_t hang = out.text.find("\"kind\": \"hang\"");
    ASSERT_NE(hang, std::string::npos) << out.text;
    EXPECT_NE(out.text.find("\"ranks\": [5]", hang), std::string::npos) << out.text;
    EXPECT_NE(out.text.find("\"stack_frame.rank5\": \"" + frame), std::string::npos) << out.text;
    EXPECT_NE(out.text.find("rank 5 (pid " + std::to_string(ranks[5]->pid())), std::string::npos)
        << out.text;
    EXPECT_NE(
        out.text.find("while the other 7 processes have been in `wait_for_peers (stack_target.py:" +
                      std::to_string(MarkedLine("wait")) + ")"),
        std::string::npos)
        << out.text;
  };
  // From the paths, and from a store (everything goes into the store first).
  check(Collscope("diagnose " + logs + " --json"));
  const std::string db = dir / "s.duckdb";
  Output ingest = Collscope("ingest " + logs + " --db " + db + " --run hang");
  ASSERT_EQ(ingest.code, 0) << ingest.text;
  check(Collscope("diagnose --db " + db + " --json"));
}

}  // namespace
}  // namespace collscope
