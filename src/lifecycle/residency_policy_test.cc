#include "lifecycle/residency_policy.h"

#include <gtest/gtest.h>

#include "core/byte_size.h"

namespace inferd {
namespace {

using std::chrono::seconds;

const TimePoint kResidencyT0(seconds(1000));

ResidentModel M(std::string name, uint64_t bytes, int used_s, int loaded_s = 0) {
  ResidentModel m;
  m.name = std::move(name);
  m.bytes = bytes;
  m.last_used = kResidencyT0 + seconds(used_s);
  m.loaded_at = kResidencyT0 + seconds(loaded_s);
  return m;
}

TEST(ResidencyPolicy, NothingEvictedWhileItFits) {
  auto plan = PlanEvictions({M("a", 10, 1), M("b", 10, 2)}, 100, 20, 80, kResidencyT0 + seconds(60), seconds(1));
  EXPECT_TRUE(plan.victims.empty());
  EXPECT_TRUE(plan.fits);
  // No budget: never evicts.
  plan = PlanEvictions({M("a", 10, 1)}, 0, 1000, 1000, kResidencyT0 + seconds(60), seconds(1));
  EXPECT_TRUE(plan.victims.empty());
}

TEST(ResidencyPolicy, LeastRecentlyUsedFirstUntilItFits) {
  // used 60 of 100; incoming 70 needs 30 freed: c (oldest use, 20) then a (15).
  auto plan =
      PlanEvictions({M("a", 15, 5), M("b", 25, 9), M("c", 20, 1)}, 100, 60, 70, kResidencyT0 + seconds(60), seconds(1));
  EXPECT_EQ(plan.victims, (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(plan.freed, 35u);
  EXPECT_TRUE(plan.fits);
}

TEST(ResidencyPolicy, TiesPreferTheLargerModel) {
  auto plan = PlanEvictions({M("small", 10, 3), M("big", 30, 3)}, 100, 40, 70, kResidencyT0 + seconds(60), seconds(1));
  EXPECT_EQ(plan.victims, (std::vector<std::string>{"big"}));
}

TEST(ResidencyPolicy, PinnedBusyAndYoungModelsStay) {
  auto pinned = M("pinned", 50, 0);
  pinned.pinned = true;
  auto busy = M("busy", 50, 1);
  busy.busy = true;
  auto young = M("young", 50, 2, /*loaded_s=*/59);  // loaded 1 s before now; min residency 5 s
  auto old = M("old", 10, 3);
  const TimePoint now = kResidencyT0 + seconds(60);
  auto plan = PlanEvictions({pinned, busy, young, old}, 100, 160, 10, now, seconds(5));
  EXPECT_EQ(plan.victims, (std::vector<std::string>{"old"}));
  EXPECT_FALSE(plan.fits);  // 160 + 10 - 10 > 100: the caller loads over budget
  // Once the young model is old enough it can go.
  plan = PlanEvictions({pinned, busy, young, old}, 100, 160, 10, now + seconds(10), seconds(5));
  EXPECT_EQ(plan.victims, (std::vector<std::string>{"young", "old"}));
  EXPECT_FALSE(plan.fits);  // 170 - 60 = 110 > 100 still
}

TEST(ResidencyPolicy, IncomingLargerThanBudgetEvictsEverythingEvictable) {
  auto plan = PlanEvictions({M("a", 10, 1), M("b", 10, 2)}, 100, 20, 500, kResidencyT0 + seconds(60), seconds(1));
  EXPECT_EQ(plan.victims.size(), 2u);
  EXPECT_FALSE(plan.fits);
}

TEST(ResidencyPolicy, InconsistentUsedDoesNotUnderflow) {
  // Sizes summing to more than `used` (a racing measurement) must not wrap.
  auto plan = PlanEvictions({M("a", 500, 1)}, 100, 50, 60, kResidencyT0 + seconds(60), seconds(1));
  EXPECT_EQ(plan.victims, (std::vector<std::string>{"a"}));
  EXPECT_TRUE(plan.fits);
}

TEST(ResidencyPolicy, ModelsWithACopyElsewhereGoFirstThenLeastRecentlyUsed) {
  // used 60 of 100; incoming 70 needs 30 freed. b was used last but another node holds it too: it goes first
  // (its requests go there), then the oldest of the rest.
  ResidentModel b = M("b", 25, 9);
  b.copies_elsewhere = true;
  auto plan = PlanEvictions({M("a", 15, 5), b, M("c", 20, 1)}, 100, 60, 70, kResidencyT0 + seconds(60), seconds(1));
  EXPECT_EQ(plan.victims, (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(plan.fits);
  // Pinned, busy and young models stay, copies elsewhere or not.
  b.busy = true;
  plan = PlanEvictions({M("a", 15, 5), b, M("c", 20, 1)}, 100, 60, 70, kResidencyT0 + seconds(60), seconds(1));
  EXPECT_EQ(plan.victims, (std::vector<std::string>{"c", "a"}));
}

TEST(ByteSize, ParsesUnits) {
  EXPECT_EQ(*ParseByteSize("1073741824"), 1073741824u);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512u << 20);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("2gib"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("2G"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("1.5KiB"), 1536u);
  EXPECT_EQ(*ParseByteSize("300MB"), 300000000u);
  EXPECT_EQ(*ParseByteSize("64 KB"), 64000u);
  EXPECT_EQ(*ParseByteSize("7B"), 7u);
  EXPECT_EQ(*ParseByteSize("0"), 0u);
}

TEST(ByteSize, RejectsGarbage) {
  for (const char* bad : {"", "MiB", "-1", "12XB", "1..2", "1e3", "99999999999TiB", "5 MiB x"}) {
    auto r = ParseByteSize(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_NE(r.status().message().find("invalid byte size"), std::string::npos);
  }
}

TEST(ByteSize, Formats) {
  EXPECT_EQ(FormatBytes(900), "900 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(3ull << 30), "3.0 GiB");
}

}  // namespace
}  // namespace inferd
