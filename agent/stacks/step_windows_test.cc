#include "agent/stacks/step_windows.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace collscope::stacks {
namespace {

constexpr int64_t T = 1'800'000'000'000'000;  // a whole second, so time windows start on it

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

std::string StepLine(int64_t step, int64_t start_us, int64_t wall_us) {
  return "{\"type\":\"step\",\"rank\":-1,\"step\":" + std::to_string(step) +
         ",\"start_us\":" + std::to_string(start_us) + ",\"wall_us\":" + std::to_string(wall_us) +
         ",\"phases\":[]}\n";
}

const std::string kProcessLine =
    "{\"collscope_steps_version\":1,\"type\":\"process\",\"hostname\":\"h\",\"pid\":42,\"rank\":3,"
    "\"world_size\":8}\n";

// "window_start-window_end steps first-last: frames x count" per stack, relative to T.
std::vector<std::string> Describe(const std::vector<FoldedStack>& stacks) {
  std::vector<std::string> out;
  for (const FoldedStack& s : stacks)
    out.push_back(std::to_string(s.window_start_us - T) + "-" +
                  std::to_string(s.window_end_us - T) + " steps " + std::to_string(s.step_first) +
                  "-" + std::to_string(s.step_last) + ": " + s.frames + " x" +
                  std::to_string(s.count));
  return out;
}

struct Fixture {
  testing::TempDir dir;
  std::string path = dir / "h-pid42.steps.jsonl";
  StackFolder folder{1'000'000};
  std::vector<FoldedStack> Sample(StepWindows& w, int64_t at, const std::string& leaf) {
    return w.Add(42, "python3", T + at, {"main", leaf});
  }
};

TEST(StepWindows, EndAtStepEndsAndNameTheirSteps) {
  Fixture f;
  Append(f.path, kProcessLine);
  StepWindows w(f.dir.str(), "h", 42, 3, 1, &f.folder);
  EXPECT_TRUE(w.Poll().empty());
  EXPECT_TRUE(w.found());
  // Samples wait for the end of their step, which the step line says once the step is over.
  EXPECT_TRUE(f.Sample(w, 1500, "a").empty());
  EXPECT_TRUE(f.Sample(w, 2500, "b").empty());
  EXPECT_TRUE(f.Sample(w, 3500, "b").empty());
  Append(f.path, StepLine(10, T + 1000, 1000) + StepLine(11, T + 2000, 1000));
  EXPECT_EQ(Describe(w.Poll()), (std::vector<std::string>{"1000-2000 steps 10-10: main;a x1",
                                                          "2000-3000 steps 11-11: main;b x1"}));
  // Lines that are no step of the format, or out of its bounds, are passed by.
  Append(f.path,
         "not json\n{\"type\":\"gpu\",\"rank\":3,\"step\":11,\"phase\":\"f\",\"gpu_us\":5}\n" +
             StepLine(99, T + 3000, int64_t{1} << 41) + StepLine(98, -5, 10));
  EXPECT_TRUE(w.Poll().empty());
  // Half a line is no step yet.
  const std::string twelve = StepLine(12, T + 3000, 1000);
  Append(f.path, twelve.substr(0, 20));
  EXPECT_TRUE(w.Poll().empty());
  Append(f.path, twelve.substr(20));
  const std::vector<FoldedStack> last = w.Poll();
  EXPECT_EQ(Describe(last), (std::vector<std::string>{"3000-4000 steps 12-12: main;b x1"}));
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].rank, 3);
  EXPECT_EQ(last[0].pid, 42);
  EXPECT_EQ(last[0].first_us, T + 3500);
  EXPECT_EQ(w.steps_read(), 3);
}

TEST(StepWindows, AWindowTakesWholeStepsUntilItSpansTheLeast) {
  Fixture f;
  Append(f.path, kProcessLine + StepLine(9, T - 5000, 1000));  // before sampling: not a window
  StepWindows w(f.dir.str(), "h", 42, 3, 2500, &f.folder);
  w.Poll();
  f.Sample(w, 1500, "a");
  f.Sample(w, 2500, "b");
  f.Sample(w, 3500, "b");
  f.Sample(w, 4500, "c");
  Append(f.path, StepLine(10, T + 1000, 1000) + StepLine(11, T + 2000, 1000) +
                     StepLine(12, T + 3000, 1000));
  EXPECT_EQ(Describe(w.Poll()), (std::vector<std::string>{"1000-4000 steps 10-12: main;a x1",
                                                          "1000-4000 steps 10-12: main;b x2"}));
  // At the end: the steps ended since, then what no step ended, as a window without steps.
  Append(f.path, StepLine(13, T + 4000, 1000));
  f.Sample(w, 6000, "d");
  EXPECT_EQ(Describe(w.Finish()), (std::vector<std::string>{"4000-5000 steps 13-13: main;c x1",
                                                            "5000-6001 steps -1--1: main;d x1"}));
}

TEST(StepWindows, AProcessThatEndsNoStepDoesNotHoldItsSamples) {
  Fixture f;
  Append(f.path, kProcessLine);
  StepWindows w(f.dir.str(), "h", 42, 3, 1, &f.folder);
  w.Poll();
  f.Sample(w, 1500, "a");
  Append(f.path, StepLine(10, T + 1000, 1000));
  EXPECT_EQ(Describe(w.Poll()), (std::vector<std::string>{"1000-2000 steps 10-10: main;a x1"}));
  // Hung in step 11: its stacks still come, once they are older than kStalledUs.
  EXPECT_TRUE(f.Sample(w, 3000, "stuck").empty());
  EXPECT_TRUE(f.Sample(w, 3000 + StepWindows::kStalledUs, "stuck").empty());
  EXPECT_EQ(Describe(f.Sample(w, 3001 + StepWindows::kStalledUs, "stuck")),
            (std::vector<std::string>{"2000-10003002 steps -1--1: main;stuck x3"}));
}

// A step of 30 s is no stall: its samples wait for its end, held up to twice the longest step.
TEST(StepWindows, ALongStepIsNoStall) {
  Fixture f;
  Append(f.path, kProcessLine);
  StepWindows w(f.dir.str(), "h", 42, 3, 1, &f.folder);
  w.Poll();
  const int64_t step = 30'000'000;
  f.Sample(w, 1000, "a");
  Append(f.path, StepLine(1, T, step));
  EXPECT_EQ(Describe(w.Poll()), (std::vector<std::string>{"0-30000000 steps 1-1: main;a x1"}));
  for (int64_t at = step + 1000; at < 2 * step; at += 5'000'000)
    EXPECT_TRUE(f.Sample(w, at, "b").empty());
  Append(f.path, StepLine(2, T + step, step));
  EXPECT_EQ(Describe(w.Poll()),
            (std::vector<std::string>{"30000000-60000000 steps 2-2: main;b x6"}));
  // Hung after it: released after twice the longest step and the flush interval.
  EXPECT_TRUE(f.Sample(w, 2 * step + 1000, "stuck").empty());
  EXPECT_TRUE(f.Sample(w, 2 * step + 1000 + 2 * step + StepWindows::kFlushUs, "stuck").empty());
  EXPECT_EQ(
      Describe(f.Sample(w, 2 * step + 1001 + 2 * step + StepWindows::kFlushUs, "stuck")).size(),
      1u);
}

TEST(StepWindows, WithoutItsStepFileAProcessIsFoldedByTime) {
  Fixture f;
  StepWindows w(f.dir.str(), "h", 42, 3, 1, &f.folder);
  EXPECT_TRUE(w.Poll().empty());
  EXPECT_FALSE(w.found());
  EXPECT_TRUE(f.Sample(w, 100, "a").empty());
  EXPECT_EQ(Describe(f.Sample(w, 1'000'100, "b")),
            (std::vector<std::string>{"0-1000000 steps -1--1: main;a x1"}));
  // Found later: the time window open until then is closed, and steps take over.
  Append(f.path, kProcessLine);
  EXPECT_EQ(Describe(w.Poll()),
            (std::vector<std::string>{"1000000-2000000 steps -1--1: main;b x1"}));
  EXPECT_TRUE(w.found());
  f.Sample(w, 1'500'000, "c");
  Append(f.path, StepLine(7, T + 1'400'000, 200'000));
  EXPECT_EQ(Describe(w.Poll()), (std::vector<std::string>{"1400000-1600000 steps 7-7: main;c x1"}));
}

}  // namespace
}  // namespace collscope::stacks
