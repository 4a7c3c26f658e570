// The small evaluation suite: every fault kind must stay at or above its floor
// (analysis/diagnose/eval_floors.txt).
#include <gtest/gtest.h>

#include "analysis/diagnose/eval.h"

namespace collscope::diagnose {
namespace {

TEST(Eval, SmallSuiteMeetsFloors) {
  auto r = RunEval(BuiltinSuite("small"), EvalOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::printf("%s", r->ToText().c_str());
  auto bad = CheckFloors(*r, std::string(COLLSCOPE_SOURCE_DIR) + "/analysis/diagnose/eval_floors.txt");
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  for (const auto& b : *bad) ADD_FAILURE() << b;
}

}  // namespace
}  // namespace collscope::diagnose
