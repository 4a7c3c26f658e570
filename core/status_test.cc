#include "core/status.h"

#include <gtest/gtest.h>

namespace collscope {
namespace {

TEST(Status, CarriesItsCodeThroughContext) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().code(), StatusCode::kOk);
  const Status io = Status::IOError("cannot open x.log: Permission denied");
  EXPECT_FALSE(io.ok());
  EXPECT_EQ(io.code(), StatusCode::kIOError);
  const Status ctx = io.WithPrefix("run job: ");
  EXPECT_EQ(ctx.code(), StatusCode::kIOError);
  EXPECT_EQ(ctx.message(), "run job: cannot open x.log: Permission denied");
  const Status summary = Status::NotFound("pid 7: no such process").WithMessage("no process could be sampled");
  EXPECT_EQ(summary.code(), StatusCode::kNotFound);
  EXPECT_EQ(summary.message(), "no process could be sampled");
  // Context never turns success into a failure.
  EXPECT_TRUE(Status::Ok().WithPrefix("x: ").ok());
  EXPECT_TRUE(Status::Ok().WithMessage("x").ok());
}

TEST(Status, ResultKeepsTheErrorsCode) {
  Result<int> r = Status::Corruption("x.log:3: not JSON");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  Result<int> v = 4;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 4);
  EXPECT_TRUE(v.status().ok());
}

TEST(Status, EveryCodeHasAName) {
  for (StatusCode c : {StatusCode::kOk, StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kCorruption,
                       StatusCode::kIOError, StatusCode::kUnsupported, StatusCode::kInternal})
    EXPECT_NE(StatusCodeName(c), "unknown");
  EXPECT_EQ(StatusCodeName(StatusCode::kIOError), "I/O error");
}

}  // namespace
}  // namespace collscope
