#include "backends/python/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace inferd {
namespace {

constexpr size_t kPage = 4096;
size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }
std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

Result<SharedRegion> SharedRegion::Create(const std::string& name, size_t initial, size_t limit) {
  SharedRegion r;
  r.fd_ = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (r.fd_ < 0) return Status::Internal(Errno("memfd_create"));
  r.limit_ = limit;
  const size_t size = std::min(RoundUp(std::max<size_t>(initial, kPage), kPage), std::max(limit, kPage));
  if (ftruncate(r.fd_, static_cast<off_t>(size)) != 0) return Status::Internal(Errno("ftruncate"));
  if (fcntl(r.fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) return Status::Internal(Errno("F_ADD_SEALS"));
  INFERD_RETURN_IF_ERROR(r.Map(size));
  return r;
}

SharedRegion::SharedRegion(SharedRegion&& o) noexcept { *this = std::move(o); }

SharedRegion& SharedRegion::operator=(SharedRegion&& o) noexcept {
  if (this != &o) {
    if (base_) munmap(base_, size_);
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
    limit_ = o.limit_;
    used_ = std::exchange(o.used_, 0);
  }
  return *this;
}

SharedRegion::~SharedRegion() {
  if (base_) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

Status SharedRegion::Map(size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) return Status::ResourceExhausted(Errno("mmap"));
  if (base_) munmap(base_, size_);
  base_ = static_cast<std::byte*>(p);
  size_ = size;
  return Status::OK();
}

Status SharedRegion::Grow(size_t size) {
  if (size <= size_) return Status::OK();
  if (size > limit_) {
    return Status::ResourceExhausted(
        "tensors of " + std::to_string(size) +
        " bytes do not fit the Python worker's shared memory (SHM_LIMIT_BYTES: " + std::to_string(limit_) + ")");
  }
  const size_t target = std::min(std::max(RoundUp(size, kPage), 2 * size_), limit_);
  if (ftruncate(fd_, static_cast<off_t>(target)) != 0) return Status::ResourceExhausted(Errno("ftruncate"));
  return Map(target);
}

Status SharedRegion::Follow(size_t size) {
  if (size == size_) return Status::OK();
  if (size > limit_) {
    return Status::Internal("the worker reports shared memory of " + std::to_string(size) + " bytes, over the limit " +
                            std::to_string(limit_));
  }
  struct stat st {};
  if (fstat(fd_, &st) != 0) return Status::Internal(Errno("fstat"));
  if (static_cast<uint64_t>(st.st_size) < size) {
    return Status::Internal("the worker reports shared memory of " + std::to_string(size) + " bytes but it has " +
                            std::to_string(st.st_size));
  }
  if (size < size_) return Status::OK();  // sealed against shrinking: a smaller report is stale
  return Map(size);
}

Result<uint64_t> SharedRegion::Allocate(size_t n) {
  const size_t at = RoundUp(used_, 64);
  if (at + n < at) return Status::ResourceExhausted("tensor too large");
  INFERD_RETURN_IF_ERROR(Grow(at + n));
  used_ = at + n;
  return static_cast<uint64_t>(at);
}

}  // namespace inferd
