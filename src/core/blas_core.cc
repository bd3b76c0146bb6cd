#include "core/blas_core.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace inferd {
namespace {

using CoreName = const char* (*)();
using Restart = void (*)();

template <typename F>
F Symbol(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

std::string BetterBlasCore(std::string_view detected, bool avx2_fma, bool avx512) {
  if (!avx2_fma) return {};
  std::string core(detected);
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char c) { return std::tolower(c); });
  // OpenBLAS's x86-64 cores with AVX2 kernels; any other name on an AVX2 CPU is a fallback.
  for (std::string_view good : {"haswell", "skylakex", "cooperlake", "sapphirerapids", "zen"})
    if (core == good) return {};
  return avx512 ? "SkylakeX" : "Haswell";
}

void UseBestBlasKernels() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice
  const auto name = Symbol<CoreName>("openblas_get_corename");
  const auto quit = Symbol<Restart>("gotoblas_dynamic_quit");
  const auto init = Symbol<Restart>("gotoblas_dynamic_init");
  if (!name || !quit || !init || !name()) return;
  __builtin_cpu_init();
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  const std::string better = BetterBlasCore(name(), avx2_fma, avx512);
  if (better.empty()) return;
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  quit();
  init();  // reads OPENBLAS_CORETYPE
}

std::string BlasCoreName() {
  const auto name = Symbol<CoreName>("openblas_get_corename");
  const char* n = name ? name() : nullptr;
  return n ? n : "";
}

}  // namespace inferd
