#include "frontends/http/client_connection_cap.h"

#include <gtest/gtest.h>

namespace inferd::http {
namespace {

TEST(ClientConnectionCap, EachClientHoldsAtMostItsCapAndAClosedOneFreesAPlace) {
  ClientConnectionCap cap(2);
  EXPECT_TRUE(cap.TryOpen("a"));
  EXPECT_TRUE(cap.TryOpen("a"));
  EXPECT_FALSE(cap.TryOpen("a"));  // at its cap
  EXPECT_TRUE(cap.TryOpen("b"));   // another client is not affected
  EXPECT_EQ(cap.clients(), 2u);
  cap.Close("a");
  EXPECT_TRUE(cap.TryOpen("a"));
  EXPECT_FALSE(cap.TryOpen("a"));
  cap.Close("a");
  cap.Close("a");
  cap.Close("b");
  EXPECT_EQ(cap.clients(), 0u);  // nothing kept for clients that left
  cap.Close("never");            // not counted: ignored
  EXPECT_EQ(cap.clients(), 0u);
}

TEST(ClientConnectionCap, ARefusedClientLeavesNoEntry) {
  ClientConnectionCap cap(0);
  EXPECT_FALSE(cap.TryOpen("a"));
  EXPECT_EQ(cap.clients(), 0u);
}

}  // namespace
}  // namespace inferd::http
