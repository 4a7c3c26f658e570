#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/readers/flight_recorder.h"
#include "core/readers/pickle.h"
#include "core/readers/steps.h"

namespace collscope::readers {
namespace {

std::string Fixtures() {
  const char* e = std::getenv("COLLSCOPE_FIXTURES");
  return e ? e : COLLSCOPE_FIXTURES_DEFAULT;
}

TEST(Pickle, PlainData) {
  // pickle.dumps({'a': [1, -2, 300, 70000], 'b': ('x', None, True), 'c': 1.5}, protocol=2)
  const std::string p = std::string(
      "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71"
      "\x02\x28\x4b\x01\x4a\xfe\xff\xff\xff\x4d\x2c\x01\x4a\x70\x11\x01"
      "\x00\x65\x58\x01\x00\x00\x00\x62\x71\x03\x58\x01\x00\x00\x00\x78"
      "\x71\x04\x4e\x88\x87\x71\x05\x58\x01\x00\x00\x00\x63\x71\x06\x47"
      "\x3f\xf8\x00\x00\x00\x00\x00\x00\x75\x2e", 74);
  auto v = ParsePickle(p);
  ASSERT_TRUE(v.ok()) << v.status().message();
  const PyValue* a = (*v)->Get("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 4u);
  EXPECT_EQ(a->items[1]->i, -2);
  EXPECT_EQ(a->items[3]->i, 70000);
  const PyValue* b = (*v)->Get("b");
  ASSERT_EQ(b->items.size(), 3u);
  EXPECT_EQ(b->items[0]->s, "x");
  EXPECT_TRUE(b->items[1]->is_none());
  EXPECT_TRUE(b->items[2]->b);
  EXPECT_DOUBLE_EQ((*v)->Get("c")->f, 1.5);
}

TEST(Pickle, RefusesCode) {
  // GLOBAL os.system + REDUCE: must be refused, never executed.
  const std::string p = std::string(
      "\x80\x02\x63\x6f\x73\x0a\x73\x79\x73\x74\x65\x6d\x0a\x71\x00\x58"
      "\x02\x00\x00\x00\x6c\x73\x71\x01\x85\x71\x02\x52\x71\x03\x2e", 31);
  auto v = ParsePickle(p);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("refused"), std::string::npos);
  EXPECT_FALSE(ParsePickle(std::string("\x80\x02\x7d", 3)).ok());  // truncated
}

TEST(FlightRecorder, ReadsRealDump) {
  const std::string path = Fixtures() + "/flight-recorder/gpu_error_1st/_dump_13";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "fixture absent: " << path;
  EXPECT_TRUE(IsFlightRecorderDump(path));
  auto d = ReadFlightRecorderDump(path);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->rank, 13);
  EXPECT_EQ(d->version, "2.9");
  EXPECT_EQ(d->pgs.at("74").ranks, std::vector<int>({12, 13, 14, 15}));
  EXPECT_FALSE(d->entries.empty());
  bool found = false;
  for (const auto& e : d->entries)
    if (e.pg_name == "74" && e.collective_seq_id == 20537) {
      found = true;
      EXPECT_EQ(e.input_sizes, "4027x5120");
      EXPECT_EQ(e.input_dtypes, "BFloat16");
      EXPECT_EQ(e.profiling_name, "nccl:all_to_all");
    }
  EXPECT_TRUE(found);
}

TEST(Megatron, IterationTimes) {
  const std::string path = Fixtures() + "/megatron/megatron_deepspeed.log";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "fixture absent: " << path;
  auto s = ReadMegatronLog(path);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->rows.size(), 5u);
  EXPECT_EQ(s->rows[0].step, 1);
  EXPECT_NEAR(s->rows[0].dur_us, 76015300, 1);
  EXPECT_EQ(s->host, "vm-07-14");
}

}  // namespace
}  // namespace collscope::readers
