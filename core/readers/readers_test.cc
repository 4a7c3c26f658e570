#include <gtest/gtest.h>
#include <cmath>

#include <cstdlib>
#include <filesystem>

#include "core/readers/flight_recorder.h"
#include "core/readers/pickle.h"

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

// Hostile pickles (C7, C8, C9): each is refused with its reason, fast and in bounded memory.
TEST(Pickle, RefusesLengthsPastTheData) {
  std::string p("\x80\x04\x8d", 3);  // BINUNICODE8 declaring 2^64 - 16 bytes
  p += std::string("\xf0\xff\xff\xff\xff\xff\xff\xff", 8) + "abc.";
  auto v = ParsePickle(p);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("truncated"), std::string::npos) << v.status().message();
}

TEST(Pickle, RefusesNestingDeeperThanTheLimit) {
  // None in 200,000 nested 1-tuples.
  std::string p = "\x80\x02N" + std::string(200000, '\x85') + ".";
  auto v = ParsePickle(p);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("nested deeper than 1000"), std::string::npos) << v.status().message();
  std::string ok = "\x80\x02N" + std::string(900, '\x85') + ".";
  EXPECT_TRUE(ParsePickle(ok).ok());
}

TEST(Pickle, RefusesExpansionThroughTheMemo) {
  // One 1 MiB string, memoised, then a list holding it 100,000 times: 100 GiB to a consumer.
  std::string big(1 << 20, 'x');
  std::string p = "\x80\x04X";
  for (int k = 0; k < 4; ++k) p += static_cast<char>((big.size() >> (8 * k)) & 0xff);
  p += big + std::string("q\0" "0](", 5);  // memoise, pop, then the list
  for (int i = 0; i < 100000; ++i) p += std::string("h\0", 2);
  p += "e.";
  auto v = ParsePickle(p);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("through shared (memoised) values"), std::string::npos) << v.status().message();
}

TEST(Pickle, RefusesAValueThatContainsItself) {
  // A list, memoised, appended to itself; refused and freed (ASan checks for the leaked cycle).
  auto v = ParsePickle(std::string("\x80\x02]q\0h\0a.", 9));
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("contains itself"), std::string::npos) << v.status().message();
}

TEST(Pickle, ACycleDroppedOnAnErrorPathIsFreed) {
  // Found by tests/fuzz/pickle_fuzz: two empty sets, DUP, APPEND (the second set into itself),
  // APPEND (it into the first), APPEND with nothing left to append to. The popped first set held
  // the cycle, reachable from nothing once dropped (LeakSanitizer reported it).
  auto v = ParsePickle("\x8f\x8f" "2aaa");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("empty stack"), std::string::npos) << v.status().message();
}

TEST(Pickle, ACycleDroppedOnTheWayToASuccessIsFreed) {
  // Found by tests/fuzz/pickle_fuzz in CI: MARK, a dict, a list, DUP, a second list, DUP, APPEND
  // (the second list into itself), POP (dropping it), FROZENSET of the rest, STOP. The parse
  // succeeds; the dropped list held a cycle that nothing reached (LeakSanitizer reported it).
  auto v = ParsePickle(std::string("(}]2]2a0\x91.", 11));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ((*v)->type, PyValue::Type::kSet);
  EXPECT_EQ((*v)->items.size(), 3u);
}

TEST(Pickle, AFloatThatIsNoIntegerReadsAsTheDefault) {
  // Found by tests/fuzz/pickle_fuzz: a NaN (or a float past int64) read as an integer field of a
  // Flight Recorder entry was converted anyway (undefined behaviour).
  PyValue v;
  v.type = PyValue::Type::kFloat;
  v.f = std::nan("");
  EXPECT_EQ(v.AsInt(-1), -1);
  v.f = 1e300;
  EXPECT_EQ(v.AsInt(-1), -1);
  v.f = 42.9;
  EXPECT_EQ(v.AsInt(-1), 42);
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

}  // namespace
}  // namespace collscope::readers
