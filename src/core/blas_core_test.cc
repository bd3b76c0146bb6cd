#include "core/blas_core.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

TEST(BlasCoreTest, AFallbackCoreOnAnAvx2CpuIsReplacedByTheKernelsTheCpuHas) {
  // What OpenBLAS 0.3.21 said on the 2-core VM (an AVX-512 Xeon it does not know).
  EXPECT_EQ(BetterBlasCore("Prescott", /*avx2_fma=*/true, /*avx512=*/true), "SkylakeX");
  EXPECT_EQ(BetterBlasCore("Prescott", true, false), "Haswell");
  EXPECT_EQ(BetterBlasCore("Sandybridge", true, false), "Haswell");  // AVX without AVX2
  EXPECT_EQ(BetterBlasCore("Nehalem", true, true), "SkylakeX");
}

TEST(BlasCoreTest, AChoiceThatFitsTheCpuOrACpuWithoutAvx2IsKept) {
  for (const char* good : {"Haswell", "SkylakeX", "Cooperlake", "SapphireRapids", "Zen"})
    EXPECT_EQ(BetterBlasCore(good, true, true), "") << good;
  EXPECT_EQ(BetterBlasCore("Prescott", /*avx2_fma=*/false, false), "");  // an old CPU: OpenBLAS is right
}

}  // namespace
}  // namespace inferd
