// A cap on the size of one CPU tensor allocation, per thread.
//
// A graph's shapes can come from a request (ConstantOfShape, Expand, Tile,
// Range, Resize, Pad and pooling pads read them from inputs or attributes),
// so a few bytes of input can ask ATen for terabytes: malloc then fails with
// an exception at best, and with overcommit the process is killed while the
// buffer is filled. The ONNX backend runs loads and calls inside an
// AllocationLimitScope; an allocation over the cap throws c10::Error (the
// plan turns it into INVALID_ARGUMENT naming the node) before any memory is
// taken.
//
// InstallAllocationLimit() wraps libtorch's CPU allocator, process-wide and
// once (later calls do nothing). Outside a scope the wrapper only forwards:
// TorchScript and every other caller are unaffected. Memory allocated by
// ATen's intra-op worker threads, and by oneDNN's own allocator, is not
// counted.
// Thread-safety: Install may be called from any thread; a scope affects only
// the thread that made it.
#pragma once

#include <cstdint>

namespace inferd::aten {

void InstallAllocationLimit();

class AllocationLimitScope {
 public:
  // `max_bytes` <= 0: no cap within the scope. Scopes nest; the innermost wins.
  explicit AllocationLimitScope(int64_t max_bytes);
  ~AllocationLimitScope();
  AllocationLimitScope(const AllocationLimitScope&) = delete;
  AllocationLimitScope& operator=(const AllocationLimitScope&) = delete;

 private:
  int64_t previous_;
};

// The calling thread's cap (0: none).
int64_t CurrentAllocationLimit();

}  // namespace inferd::aten
