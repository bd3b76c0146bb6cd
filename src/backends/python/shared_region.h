// SharedRegion: a memfd mapped into the server and one worker process, for
// tensor bytes that must not cross the control socket.
//
// One side writes a region and grows it (ftruncate, doubling, up to a
// limit); the other side maps the size the writer reports (Follow). Regions
// are sealed against shrinking, so the worker can never make the server's
// mapping reach past the end of the file (SIGBUS).
//
// Thread-safety: not thread-safe; the owner serialises access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace inferd {

class SharedRegion {
 public:
  // `initial` bytes (rounded up to a page), never more than `limit`.
  static Result<SharedRegion> Create(const std::string& name, size_t initial, size_t limit);
  SharedRegion() = default;
  SharedRegion(SharedRegion&& other) noexcept;
  SharedRegion& operator=(SharedRegion&& other) noexcept;
  ~SharedRegion();

  int fd() const { return fd_; }
  size_t size() const { return size_; }
  size_t limit() const { return limit_; }
  std::byte* data() { return base_; }
  std::span<const std::byte> bytes() const { return {base_, size_}; }

  // Writer: makes the region at least `size` bytes (RESOURCE_EXHAUSTED over the limit).
  Status Grow(size_t size);
  // Reader: maps `size` bytes, the size the writer reported; fails if the
  // file is smaller or the size is over the limit.
  Status Follow(size_t size);

  // Bump allocation for one message exchange: Reset, then Allocate.
  void Reset() { used_ = 0; }
  // The offset of `n` fresh bytes (64-byte aligned), growing as needed.
  Result<uint64_t> Allocate(size_t n);

 private:
  Status Map(size_t size);

  int fd_ = -1;
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  size_t limit_ = 0;
  size_t used_ = 0;
};

}  // namespace inferd
