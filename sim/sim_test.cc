#include <gtest/gtest.h>
int Dummy() { return 0; }
TEST(SimPlaceholder, Builds) { EXPECT_EQ(Dummy(), 0); }
