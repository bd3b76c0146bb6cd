// OpenBLAS's kernels for this CPU.
//
// Debian's OpenBLAS (the DYNAMIC_ARCH build libtorch calls for its GEMMs)
// picks its kernels from the CPU's model number at load. 0.3.21 does not
// know newer Xeons and falls back to its "Prescott" kernels (SSE3, no AVX):
// on the 2-core VM (an AVX-512 Xeon) a TorchScript transformer encoder ran at
// 65 sequences/s instead of 210 (docs/benchmarks.md). OPENBLAS_CORETYPE
// names the kernels, but OpenBLAS reads it only when it starts, before main.
// So main() asks OpenBLAS to start again with the kernels the CPU's features
// call for, before any thread runs, unless the user set OPENBLAS_CORETYPE.
//
// Found by symbol (dlsym): a no-op in a process without OpenBLAS.
// Thread-safety: UseBestBlasKernels only while the process has one thread
// (it swaps OpenBLAS's kernel table under whatever runs); BlasCoreName any time.
#pragma once

#include <string>
#include <string_view>

namespace inferd {

// The kernels to ask for instead of `detected` (openblas_get_corename()):
// "SkylakeX" (AVX-512) or "Haswell" (AVX2 + FMA) when the CPU has them and
// `detected` names a core without AVX2; "" to keep `detected`.
std::string BetterBlasCore(std::string_view detected, bool avx2_fma, bool avx512);

// Restarts OpenBLAS on the kernels BetterBlasCore names (setting
// OPENBLAS_CORETYPE, which child processes inherit). Does nothing without
// OpenBLAS, with OPENBLAS_CORETYPE already set, or when its choice fits the CPU.
// BlasCoreName() says what runs.
void UseBestBlasKernels();

// openblas_get_corename(), or "" without OpenBLAS.
std::string BlasCoreName();

}  // namespace inferd
