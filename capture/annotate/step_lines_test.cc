#include "capture/annotate/step_lines.h"

#include <gtest/gtest.h>

#include <cstring>

namespace collscope::annotate {
namespace {

Event Ev(EventType t, int64_t t_ns, int64_t value = 0, const char* name = "") {
  Event e;
  e.type = t;
  e.t_ns = t_ns;
  e.value = value;
  std::strncpy(e.name, name, kNameBytes - 1);
  return e;
}

ProcessInfo Proc() {
  ProcessInfo p;
  p.hostname = "node-007";
  p.pid = 4242;
  p.rank = 3;
  p.world_size = 8;
  return p;
}

TEST(StepLines, AStepWithNestedAndRepeatedPhasesIsOneLine) {
  StepLines l(Proc());
  std::string out;
  l.Add(Ev(EventType::kStepBegin, 1'000'000'000, 12), &out);
  l.Add(Ev(EventType::kMicroBatch, 1'000'000'000, 0), &out);
  l.Add(Ev(EventType::kPhaseBegin, 1'000'100'000, 0, "forward"), &out);
  l.Add(Ev(EventType::kPhaseBegin, 1'000'200'000, 0, "attention"), &out);
  l.Add(Ev(EventType::kPhaseEnd, 1'000'300'500, 0, "attention"), &out);
  l.Add(Ev(EventType::kPhaseEnd, 1'000'600'000, 0, "forward"), &out);
  l.Add(Ev(EventType::kMicroBatch, 1'000'600'000, 1), &out);
  l.Add(Ev(EventType::kPhaseBegin, 1'000'700'000, 0, "forward"), &out);
  l.Add(Ev(EventType::kPhaseEnd, 1'001'000'000, 0, ""), &out);  // "": the innermost
  EXPECT_EQ(out, "");
  l.Add(Ev(EventType::kStepEnd, 1'002'000'000), &out);
  EXPECT_EQ(out,
            "{\"type\":\"step\",\"rank\":3,\"step\":12,\"start_us\":1000000,\"wall_us\":2000,"
            "\"micro_batches\":2,\"phases\":[{\"name\":\"forward\",\"start_us\":1000100,\"wall_us\":800,"
            "\"count\":2},{\"name\":\"attention\",\"start_us\":1000200,\"wall_us\":100.500,\"count\":1}]}\n");
}

TEST(StepLines, PhasesOpenAtTheStepsEndCloseThereAndStrayEndsAreCounted) {
  StepLines l(Proc());
  std::string out;
  l.Add(Ev(EventType::kStepBegin, 0, 1), &out);
  l.Add(Ev(EventType::kPhaseEnd, 10'000, 0, "backward"), &out);
  l.Add(Ev(EventType::kPhaseBegin, 20'000, 0, "optimizer"), &out);
  l.Add(Ev(EventType::kStepBegin, 50'000, 2), &out);  // no end: the next begin ends step 1
  EXPECT_EQ(out,
            "{\"type\":\"step\",\"rank\":3,\"step\":1,\"start_us\":0,\"wall_us\":50,\"unmatched_phase_ends\":1,"
            "\"phases\":[{\"name\":\"optimizer\",\"start_us\":20,\"wall_us\":30,\"count\":1}]}\n");
}

TEST(StepLines, ParallelCoordinatesRewriteTheProcessLineAndGpuTimeIsItsOwnLine) {
  StepLines l(Proc());
  std::string head;
  l.ProcessLine(&head);
  EXPECT_EQ(head, "{\"collscope_steps_version\":1,\"type\":\"process\",\"hostname\":\"node-007\",\"pid\":4242,"
                  "\"rank\":3,\"world_size\":8}\n");
  Event p = Ev(EventType::kParallel, 0);
  const int32_t v[12] = {5, 16, 1, 2, 1, 4, 0, 2, -1, -1, -1, -1};
  std::copy(std::begin(v), std::end(v), p.parallel);
  std::string out;
  l.Add(p, &out);
  l.Add(p, &out);  // unchanged: no second line
  Event g = Ev(EventType::kGpuTime, 0, 7, "backward");
  g.gpu_us = 1234.5;
  l.Add(g, &out);
  EXPECT_EQ(out,
            "{\"collscope_steps_version\":1,\"type\":\"process\",\"hostname\":\"node-007\",\"pid\":4242,\"rank\":5,"
            "\"world_size\":16,\"parallel\":{\"dp\":[1,2],\"tp\":[1,4],\"pp\":[0,2]}}\n"
            "{\"type\":\"gpu\",\"rank\":5,\"step\":7,\"phase\":\"backward\",\"gpu_us\":1234.500}\n");
}

TEST(StepLines, NamesStayValidJsonWhateverTheirBytes) {
  StepLines l(Proc());
  std::string out;
  l.Add(Ev(EventType::kStepBegin, 0, 1), &out);
  l.Add(Ev(EventType::kPhaseBegin, 0, 0, "a\"b\\c\n\xff\xc3\xa4"), &out);
  l.Add(Ev(EventType::kStepEnd, 1000), &out);
  EXPECT_NE(out.find("\"name\":\"a\\\"b\\\\c\\n\\\\xff\xc3\xa4\""), std::string::npos) << out;
}

TEST(StepLines, APhaseWithoutANameIsStillAPhase) {
  StepLines l(Proc());
  std::string out;
  l.Add(Ev(EventType::kStepBegin, 0, 1), &out);
  l.Add(Ev(EventType::kPhaseBegin, 0, 0, ""), &out);
  l.Add(Ev(EventType::kStepEnd, 1000), &out);
  EXPECT_NE(out.find("{\"name\":\"(unnamed)\",\"start_us\":0,\"wall_us\":1,\"count\":1}"), std::string::npos) << out;
}

TEST(StepLines, DroppedEventsAreStatedOnceEachTimeTheyGrow) {
  StepLines l(Proc());
  std::string out;
  l.Dropped(0, &out);
  l.Dropped(3, &out);
  l.Dropped(3, &out);
  EXPECT_EQ(out, "{\"type\":\"dropped\",\"events\":3}\n");
}

}  // namespace
}  // namespace collscope::annotate
