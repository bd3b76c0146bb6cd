// What the process's allocator can tell about memory, and how to make it give
// memory back. inferd links jemalloc into the server (CMake INFERD_JEMALLOC);
// these calls find it at run time (dlsym of mallctl), so code and tests built
// without it still work, with the documented fallbacks.
//
// Thread-safety: all functions are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace inferd::allocator {

// "jemalloc" or "glibc".
std::string_view Name();

// Bytes the calling thread has allocated minus the bytes it has freed, since
// it started (jemalloc's thread.allocated / thread.deallocated counters).
// Only differences between two calls on the same thread are meaningful.
// nullopt without jemalloc.
std::optional<int64_t> ThreadNetAllocated();

// Bytes currently allocated by the whole process (jemalloc stats.allocated,
// else glibc mallinfo2). Approximate under concurrency.
int64_t ProcessAllocated();

// Returns freed memory to the operating system: jemalloc purges every arena
// (inferd runs jemalloc with time-based purging off), glibc malloc_trim(0).
void ReleaseFreeMemory();

}  // namespace inferd::allocator
