#include "manager/model_state.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

namespace inferd {
namespace {

using S = ModelState;
using E = LifecycleEvent;
using Table = std::map<std::pair<S, E>, S>;

// The legal moves, written out once more by hand: every (state, event) pair
// not listed here must be refused.
const Table kModel = {
    {{S::kUnavailable, E::kLoadStarted}, S::kLoading},
    {{S::kUnavailable, E::kLoadFailed}, S::kFailed},
    {{S::kUnavailable, E::kUnloadStarted}, S::kUnavailable},
    {{S::kUnavailable, E::kIndexed}, S::kUnavailable},
    {{S::kLoading, E::kLoadSucceeded}, S::kReady},
    {{S::kLoading, E::kLoadFailed}, S::kFailed},
    {{S::kReady, E::kLoadStarted}, S::kReady},
    {{S::kReady, E::kLoadSucceeded}, S::kReady},
    {{S::kReady, E::kLoadFailed}, S::kReady},
    {{S::kReady, E::kUnloadStarted}, S::kUnloading},
    {{S::kReady, E::kEvictStarted}, S::kEvicted},
    {{S::kUnloading, E::kDrained}, S::kUnavailable},
    {{S::kFailed, E::kLoadStarted}, S::kLoading},
    {{S::kFailed, E::kLoadFailed}, S::kFailed},
    {{S::kFailed, E::kUnloadStarted}, S::kUnavailable},
    {{S::kFailed, E::kIndexed}, S::kFailed},
    {{S::kEvicted, E::kLoadStarted}, S::kLoading},
    {{S::kEvicted, E::kLoadFailed}, S::kFailed},
    {{S::kEvicted, E::kUnloadStarted}, S::kUnavailable},
    {{S::kEvicted, E::kIndexed}, S::kEvicted},
};

const Table kVersion = {
    {{S::kUnavailable, E::kLoadStarted}, S::kLoading}, {{S::kLoading, E::kLoadSucceeded}, S::kReady},
    {{S::kLoading, E::kLoadFailed}, S::kFailed},       {{S::kLoading, E::kDrained}, S::kLoading},
    {{S::kReady, E::kLoadStarted}, S::kReady},         {{S::kReady, E::kLoadSucceeded}, S::kReady},
    {{S::kReady, E::kLoadFailed}, S::kReady},          {{S::kReady, E::kUnloadStarted}, S::kUnloading},
    {{S::kReady, E::kEvictStarted}, S::kUnloading},    {{S::kReady, E::kDrained}, S::kReady},
    {{S::kUnloading, E::kLoadStarted}, S::kLoading},   {{S::kUnloading, E::kDrained}, S::kUnavailable},
    {{S::kFailed, E::kLoadStarted}, S::kLoading},      {{S::kFailed, E::kUnloadStarted}, S::kUnavailable},
    {{S::kFailed, E::kDrained}, S::kFailed},
};

void CheckEveryPair(const Table& want, Result<S> (*transition)(S, E), const char* scope) {
  int legal = 0;
  for (S from : kAllModelStates) {
    for (E event : kAllLifecycleEvents) {
      SCOPED_TRACE(std::string(scope) + " " + StateName(from) + " + " + EventName(event));
      auto got = transition(from, event);
      auto it = want.find({from, event});
      if (it == want.end()) {
        ASSERT_FALSE(got.ok()) << "moved to " << StateName(*got);
        EXPECT_EQ(got.status().code(), StatusCode::kInternal);
        EXPECT_NE(got.status().message().find(StateName(from)), std::string::npos) << got.status().message();
        EXPECT_NE(got.status().message().find(EventName(event)), std::string::npos) << got.status().message();
      } else {
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        EXPECT_EQ(*got, it->second) << StateName(*got);
        ++legal;
      }
    }
  }
  EXPECT_EQ(legal, static_cast<int>(want.size()));
}

TEST(ModelState, EveryModelStateAndEventIsEitherTheTablesMoveOrRefused) {
  CheckEveryPair(kModel, &ModelTransition, "model");
}

TEST(ModelState, EveryVersionStateAndEventIsEitherTheTablesMoveOrRefused) {
  CheckEveryPair(kVersion, &VersionTransition, "version");
}

TEST(ModelState, TritonSeesFailedAndEvictedAsUnavailable) {
  EXPECT_STREQ(WireName(S::kFailed), "UNAVAILABLE");
  EXPECT_STREQ(WireName(S::kEvicted), "UNAVAILABLE");
  EXPECT_STREQ(WireName(S::kUnloading), "UNLOADING");
  EXPECT_STREQ(StateName(S::kEvicted), "EVICTED");
}

}  // namespace
}  // namespace inferd
