// gzip / deflate for HTTP bodies (Content-Encoding, Accept-Encoding).
// Decompression is bounded: a body that inflates past `max_output` bytes is
// rejected (RESOURCE_EXHAUSTED) rather than exhausting memory.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace inferd {

enum class Encoding { kIdentity, kGzip, kDeflate };

// Content-Encoding value -> Encoding; UNIMPLEMENTED for unknown ones.
Result<Encoding> ParseContentEncoding(std::string_view value);
// Picks gzip or deflate from an Accept-Encoding header (identity if neither
// is acceptable or all are q=0).
Encoding NegotiateEncoding(std::string_view accept_encoding);
std::string_view EncodingName(Encoding e);

Result<std::string> Decompress(std::string_view in, Encoding e, size_t max_output);
Result<std::string> Compress(std::string_view in, Encoding e);

}  // namespace inferd
