// Making the process's allocator give memory back. inferd links jemalloc into
// the server (CMake INFERD_JEMALLOC) and runs it with time-based purging off
// (docs/memory.md); this finds it at run time (dlsym of mallctl), so code and
// tests built without it fall back to glibc.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <optional>

namespace inferd::allocator {

// Bytes the calling thread has allocated and freed so far (jemalloc's
// thread.allocated / thread.deallocated); nullopt without jemalloc. The
// difference of two readings around a model load is the memory that load
// kept: how inferd measures a model's resident size (docs/memory.md).
struct ThreadCounters {
  uint64_t allocated = 0, deallocated = 0;
};
std::optional<ThreadCounters> ReadThreadCounters();

// Resident bytes of the calling thread's stack mapping (its stack plus the
// static TLS of every loaded library, which glibc places there), counted
// page by page with mincore(2). 0 if it cannot tell.
uint64_t ThreadStackResidentBytes();

// Net bytes kept between two readings (0 if more was freed than allocated).
inline uint64_t NetAllocated(const ThreadCounters& before, const ThreadCounters& after) {
  const uint64_t a = after.allocated - before.allocated, d = after.deallocated - before.deallocated;
  return a > d ? a - d : 0;
}

// Returns freed memory to the operating system: jemalloc purges every arena,
// glibc runs malloc_trim(0). Called after model versions are released.
void ReleaseFreeMemory();

}  // namespace inferd::allocator
