#include "backends/aten/alloc_limit.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <mutex>

#include "core/byte_size.h"

namespace inferd::aten {
namespace {

thread_local int64_t t_limit = 0;

// Forwards to the allocator it replaced; checks the calling thread's cap.
class LimitingAllocator final : public c10::Allocator {
 public:
  explicit LimitingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) const override {
    const int64_t limit = t_limit;
    if (limit > 0 && n > static_cast<uint64_t>(limit)) {
      TORCH_CHECK(false, "a tensor of ", FormatBytes(n), " exceeds the model's limit of ", FormatBytes(limit),
                  " per tensor (parameter MAX_TENSOR_BYTES)");
    }
    return base_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }

 private:
  c10::Allocator* base_;
};

}  // namespace

void InstallAllocationLimit() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked on purpose: tensors hold the allocator until the process ends.
    static auto* limiting = new LimitingAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(limiting, /*priority=*/1);
  });
}

AllocationLimitScope::AllocationLimitScope(int64_t max_bytes) : previous_(t_limit) {
  t_limit = max_bytes > 0 ? max_bytes : 0;
}

AllocationLimitScope::~AllocationLimitScope() { t_limit = previous_; }

int64_t CurrentAllocationLimit() { return t_limit; }

}  // namespace inferd::aten
