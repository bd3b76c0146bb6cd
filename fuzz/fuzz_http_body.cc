// Request-body decoding as the HTTP layer does it: Content-Encoding and
// Accept-Encoding header parsing, bounded gzip/deflate inflation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/codec/compression.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)inferd::NegotiateEncoding(in.substr(0, std::min<size_t>(in.size(), 64)));
  (void)inferd::ParseContentEncoding(in.substr(0, std::min<size_t>(in.size(), 16)));
  (void)inferd::Decompress(in, inferd::Encoding::kGzip, 1 << 16);
  (void)inferd::Decompress(in, inferd::Encoding::kDeflate, 1 << 16);
  return 0;
}
