#include "core/bandwidth.h"

#include <gtest/gtest.h>

#include <string>

#include "core/store.h"
#include "core/inspector_record.h"
#include "core/taxonomy.h"

namespace collscope {
namespace {

uint8_t Op(const char* name) { return static_cast<uint8_t>(EnumCode("coll_op", name)); }

TEST(Bandwidth, InspectorFormulas) {
  // AllReduce of 1 MiB in 100 us over 16 ranks: algbw = S/t, busbw = algbw * 2(n-1)/n.
  Bandwidth ar = InspectorBandwidth(Op("AllReduce"), 16, 1048576, 100);
  EXPECT_DOUBLE_EQ(ar.algbw_gbs, 10.48576);
  EXPECT_DOUBLE_EQ(ar.busbw_gbs, Round6(10.48576 * 30.0 / 16.0));
  // AllGather: the per-rank size times n is the traffic; factor (n-1)/n.
  Bandwidth ag = InspectorBandwidth(Op("AllGather"), 8, 1000000, 1000);
  EXPECT_DOUBLE_EQ(ag.algbw_gbs, 8.0);
  EXPECT_DOUBLE_EQ(ag.busbw_gbs, 7.0);
  Bandwidth bc = InspectorBandwidth(Op("Broadcast"), 8, 1000000, 1000);
  EXPECT_DOUBLE_EQ(bc.busbw_gbs, bc.algbw_gbs);
  EXPECT_DOUBLE_EQ(InspectorBandwidth(Op("AllReduce"), 8, 1, 0).algbw_gbs, 0.0);
  EXPECT_DOUBLE_EQ(InspectorBandwidth(Op("AlltoAll"), 8, 1000, 10).busbw_gbs, 0.0);
  EXPECT_DOUBLE_EQ(Round6(1.23456749), 1.234567);
}

// The views recompute bandwidths in SQL; they must agree bit for bit with the C++ formula that
// decided at ingest that a value need not be stored.
TEST(Bandwidth, SqlMacrosAgreeWithCpp) {
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status().message();
  const char* ops[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
                       "Send", "Recv", "AlltoAll"};
  std::string values;
  int cases = 0;
  for (const char* op : ops)
    for (int n : {1, 2, 3, 8, 16, 24, 1024})
      for (uint64_t size : {1ull, 4096ull, 1000003ull, 268435456ull})
        for (uint64_t t : {0ull, 1ull, 7ull, 99ull, 5663ull, 123457ull}) {
          values += std::string(values.empty() ? "" : ", ") + "('" + op + "', " +
                    std::to_string(n) + ", " + std::to_string(size) + ", " + std::to_string(t) +
                    ")";
          ++cases;
        }
  auto r = (*store)->Query(
      "SELECT op, n, size, t, inspector_algbw(op::coll_op, n, size, t)::VARCHAR, "
      "inspector_busbw(op::coll_op, n, size, t)::VARCHAR FROM (VALUES " + values +
      ") v(op, n, size, t)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(static_cast<int>(r->rows.size()), cases);
  for (const auto& row : r->rows) {
    Bandwidth bw = InspectorBandwidth(Op(row[0]->c_str()), std::stoi(*row[1]),
                                      std::stoull(*row[2]), std::stoull(*row[3]));
    EXPECT_EQ(std::stod(*row[4]), bw.algbw_gbs) << *row[0] << " n=" << *row[1] << " t=" << *row[3];
    EXPECT_EQ(std::stod(*row[5]), bw.busbw_gbs) << *row[0] << " n=" << *row[1] << " t=" << *row[3];
  }
}

}  // namespace
}  // namespace collscope
