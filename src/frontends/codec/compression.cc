#include "frontends/codec/compression.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>

namespace inferd {
namespace {

std::string Lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<Encoding> ParseContentEncoding(std::string_view value) {
  const std::string v = Lower(Trim(value));
  if (v.empty() || v == "identity") return Encoding::kIdentity;
  if (v == "gzip" || v == "x-gzip") return Encoding::kGzip;
  if (v == "deflate") return Encoding::kDeflate;
  return Status::Unimplemented("unsupported Content-Encoding '" + std::string(value) + "' (use gzip or deflate)");
}

Encoding NegotiateEncoding(std::string_view header) {
  const std::string h = Lower(header);
  Encoding best = Encoding::kIdentity;
  double best_q = 0;
  size_t pos = 0;
  while (pos <= h.size()) {
    size_t end = h.find(',', pos);
    if (end == std::string::npos) end = h.size();
    std::string_view item = Trim(std::string_view(h).substr(pos, end - pos));
    pos = end + 1;
    double q = 1.0;
    if (auto semi = item.find(';'); semi != std::string_view::npos) {
      std::string_view params = Trim(item.substr(semi + 1));
      item = Trim(item.substr(0, semi));
      if (params.rfind("q=", 0) == 0) q = std::atof(std::string(params.substr(2)).c_str());
    }
    Encoding e;
    if (item == "gzip" || item == "x-gzip")
      e = Encoding::kGzip;
    else if (item == "deflate")
      e = Encoding::kDeflate;
    else
      continue;
    if (q > best_q) {
      best_q = q;
      best = e;
    }
  }
  return best;
}

std::string_view EncodingName(Encoding e) {
  switch (e) {
    case Encoding::kGzip:
      return "gzip";
    case Encoding::kDeflate:
      return "deflate";
    case Encoding::kIdentity:
      break;
  }
  return "identity";
}

Result<std::string> Decompress(std::string_view in, Encoding e, size_t max_output) {
  if (e == Encoding::kIdentity) return std::string(in);
  z_stream zs{};
  // gzip: 16+MAX_WBITS; deflate: auto-detect zlib or raw via 32+ (zlib/gzip) then raw fallback.
  const int wbits = e == Encoding::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
  if (inflateInit2(&zs, wbits) != Z_OK) return Status::Internal("inflateInit2 failed");
  std::string out;
  out.resize(std::min<size_t>(std::max<size_t>(in.size() * 4, 1024), max_output + 1));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  bool tried_raw = false;
  while (true) {
    if (zs.total_out >= out.size()) {
      if (out.size() > max_output) break;
      out.resize(std::min(out.size() * 2, max_output + 1));
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + zs.total_out);
    zs.avail_out = static_cast<uInt>(out.size() - zs.total_out);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_DATA_ERROR && e == Encoding::kDeflate && !tried_raw && zs.total_out == 0) {
      // Some clients send raw deflate without the zlib wrapper.
      tried_raw = true;
      inflateEnd(&zs);
      zs = z_stream{};
      if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return Status::Internal("inflateInit2 failed");
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
      zs.avail_in = static_cast<uInt>(in.size());
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && zs.avail_out > 0) break;  // truncated input
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
  }
  const size_t produced = zs.total_out;
  inflateEnd(&zs);
  if (produced > max_output) {
    return Status::ResourceExhausted("decompressed request body exceeds the limit of " + std::to_string(max_output) +
                                     " bytes");
  }
  if (rc != Z_STREAM_END) {
    return Status::InvalidArgument(std::string("invalid ") + std::string(EncodingName(e)) + " request body");
  }
  out.resize(produced);
  return out;
}

Result<std::string> Compress(std::string_view in, Encoding e) {
  if (e == Encoding::kIdentity) return std::string(in);
  z_stream zs{};
  const int wbits = e == Encoding::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Status::Internal("deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&zs, static_cast<uLong>(in.size())));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  const size_t n = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return Status::Internal("deflate failed");
  out.resize(n);
  return out;
}

}  // namespace inferd
