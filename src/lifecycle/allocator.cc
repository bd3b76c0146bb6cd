#include "lifecycle/allocator.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstddef>
#include <string>

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

std::string_view Name() { return Mallctl() ? "jemalloc" : "glibc"; }

std::optional<int64_t> ThreadNetAllocated() {
  MallctlFn m = Mallctl();
  if (!m) return std::nullopt;
  uint64_t allocated = 0, deallocated = 0;
  size_t len = sizeof(uint64_t);
  if (m("thread.allocated", &allocated, &len, nullptr, 0) != 0) return std::nullopt;
  len = sizeof(uint64_t);
  if (m("thread.deallocated", &deallocated, &len, nullptr, 0) != 0) return std::nullopt;
  return static_cast<int64_t>(allocated) - static_cast<int64_t>(deallocated);
}

int64_t ProcessAllocated() {
  if (MallctlFn m = Mallctl()) {
    uint64_t epoch = 1;
    size_t len = sizeof(epoch);
    m("epoch", &epoch, &len, &epoch, len);  // refreshes the statistics
    size_t allocated = 0;
    len = sizeof(allocated);
    if (m("stats.allocated", &allocated, &len, nullptr, 0) == 0) return static_cast<int64_t>(allocated);
  }
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

void ReleaseFreeMemory() {
  if (MallctlFn m = Mallctl()) {
    m("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
    m(kPurgeAll, nullptr, nullptr, nullptr, 0);
    return;
  }
  malloc_trim(0);
}

}  // namespace inferd::allocator
