// Making the process's allocator give memory back. inferd links jemalloc into
// the server (CMake INFERD_JEMALLOC) and runs it with time-based purging off
// (docs/memory.md); this finds it at run time (dlsym of mallctl), so code and
// tests built without it fall back to glibc.
//
// Thread-safety: thread-safe.
#pragma once

namespace inferd::allocator {

// Returns freed memory to the operating system: jemalloc purges every arena,
// glibc runs malloc_trim(0). Called after model versions are released.
void ReleaseFreeMemory();

}  // namespace inferd::allocator
