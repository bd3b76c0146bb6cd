#include "backends/aten/blas_threads.h"

#include <dlfcn.h>

namespace inferd::aten {

bool KeepBlasOnCallingThread() {
  using SetThreads = void (*)(int);
  static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return false;
  set(1);
  return true;
}

}  // namespace inferd::aten
