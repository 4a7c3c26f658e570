#include "core/statistics.h"

#include <gtest/gtest.h>

#include <vector>

namespace collscope {
namespace {

TEST(Statistics, MedianOfAnOddCountIsItsMiddleValue) {
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({7}), 7);
}

TEST(Statistics, MedianOfAnEvenCountIsTheMeanOfItsTwoMiddleValues) {
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({10, 2}), 6);
  // Ties and negative values.
  EXPECT_EQ(Median({-1, 5, 5, -3}), 2);
}

TEST(Statistics, NoValuesHaveZeroForMedianAndQuantiles) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(SortedQuantile({}, 0.5), 0);
  EXPECT_EQ(Quantile({}, 0.25), 0);
}

TEST(Statistics, QuantilesInterpolateBetweenRanksAsDuckDbsQuantileCont) {
  // quantile_cont([1, 2, 3, 4, 10], p) in DuckDB: 1.0, 2.0, 3.0, 4.0, 10.0 at p = 0, .25, .5, .75,
  // 1; 1.4 at 0.1 and 7.6 at 0.9.
  const std::vector<double> s{1, 2, 3, 4, 10};
  EXPECT_DOUBLE_EQ(SortedQuantile(s, 0), 1);
  EXPECT_DOUBLE_EQ(SortedQuantile(s, 0.25), 2);
  EXPECT_DOUBLE_EQ(SortedQuantile(s, 0.5), 3);
  EXPECT_DOUBLE_EQ(SortedQuantile(s, 1), 10);
  EXPECT_DOUBLE_EQ(SortedQuantile(s, 0.1), 1.4);
  EXPECT_DOUBLE_EQ(SortedQuantile(s, 0.9), 7.6);
  // Out of range: the extremes.
  EXPECT_DOUBLE_EQ(SortedQuantile(s, -1), 1);
  EXPECT_DOUBLE_EQ(SortedQuantile(s, 2), 10);
}

TEST(Statistics, QuantileSortsItsValuesAndAgreesWithTheMedian) {
  const std::vector<double> v{9, 1, 8, 2, 7, 3};
  EXPECT_DOUBLE_EQ(Quantile(v, 0.5), Median(v));
  EXPECT_DOUBLE_EQ(Quantile(v, 0.2), 2);
  EXPECT_DOUBLE_EQ(Quantile(v, 0), 1);
}

}  // namespace
}  // namespace collscope
