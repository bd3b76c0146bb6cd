#include "lifecycle/allocator.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstddef>

namespace inferd::allocator {
namespace {

using MallctlFn = int (*)(const char*, void*, size_t*, void*, size_t);

MallctlFn Mallctl() {
  static const MallctlFn fn = reinterpret_cast<MallctlFn>(dlsym(RTLD_DEFAULT, "mallctl"));
  return fn;
}

// jemalloc's MALLCTL_ARENAS_ALL.
constexpr const char* kPurgeAll = "arena.4096.purge";

}  // namespace

void ReleaseFreeMemory() {
  if (MallctlFn m = Mallctl()) {
    m("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
    m(kPurgeAll, nullptr, nullptr, nullptr, 0);
    return;
  }
  malloc_trim(0);
}

}  // namespace inferd::allocator
