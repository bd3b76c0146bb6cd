// Messages a Python worker sends the server (backends/python/protocol.h): a
// worker runs users' code, so its messages are untrusted. Every parsed
// tensor descriptor is copied out of a fixed region (bounds, sizes and BYTES
// layout checked); nothing may read outside it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "backends/python/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  static const std::vector<std::byte> region = [] {
    std::vector<std::byte> r(4096);
    for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<std::byte>(i * 7);
    return r;
  }();
  auto m = inferd::python::ParseWorkerMessage(text, 64);
  if (!m.ok()) return 0;
  if (m->answers.size() > 64) std::abort();
  for (const auto& a : m->answers) {
    if (!a.ok()) continue;
    for (const auto& d : *a) {
      auto t = inferd::python::CopyTensor(d, region);
      if (t.ok() && !t->Validate().ok()) std::abort();
    }
  }
  for (const auto& d : m->bls.inputs) (void)inferd::python::CopyTensor(d, region);
  return 0;
}
