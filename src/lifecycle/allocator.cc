#include "lifecycle/allocator.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

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

std::optional<ThreadCounters> ReadThreadCounters() {
  MallctlFn m = Mallctl();
  if (!m) return std::nullopt;
  ThreadCounters c;
  size_t len = sizeof(uint64_t);
  if (m("thread.allocated", &c.allocated, &len, nullptr, 0) != 0) return std::nullopt;
  len = sizeof(uint64_t);
  if (m("thread.deallocated", &c.deallocated, &len, nullptr, 0) != 0) return std::nullopt;
  return c;
}

uint64_t ThreadStackResidentBytes() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void* addr = nullptr;
  size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0 || size == 0) return 0;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(addr) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(addr) + size;
  std::vector<unsigned char> vec((end - begin + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, vec.data()) != 0) return 0;
  uint64_t pages = 0;
  for (unsigned char v : vec) pages += v & 1;
  return pages * page;
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
