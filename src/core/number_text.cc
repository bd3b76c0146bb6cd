#include "core/number_text.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace inferd {
namespace {

template <typename T>
void PutRaw(std::string* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

}  // namespace

bool AppendNumber(std::string* out, DataType dt, bool is_int, int64_t i, double d) {
  if (IsIntegerType(dt) || dt == DataType::kBool) {
    if (!is_int) {
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.2e18) return false;
      i = static_cast<int64_t>(d);
    }
    auto in = [&](int64_t lo, int64_t hi) { return i >= lo && i <= hi; };
    switch (dt) {
      case DataType::kBool:
        if (!in(0, 1)) return false;
        PutRaw<uint8_t>(out, static_cast<uint8_t>(i));
        return true;
      case DataType::kInt8:
        if (!in(INT8_MIN, INT8_MAX)) return false;
        PutRaw<int8_t>(out, static_cast<int8_t>(i));
        return true;
      case DataType::kInt16:
        if (!in(INT16_MIN, INT16_MAX)) return false;
        PutRaw<int16_t>(out, static_cast<int16_t>(i));
        return true;
      case DataType::kInt32:
        if (!in(INT32_MIN, INT32_MAX)) return false;
        PutRaw<int32_t>(out, static_cast<int32_t>(i));
        return true;
      case DataType::kInt64:
        PutRaw<int64_t>(out, i);
        return true;
      case DataType::kUint8:
        if (!in(0, UINT8_MAX)) return false;
        PutRaw<uint8_t>(out, static_cast<uint8_t>(i));
        return true;
      case DataType::kUint16:
        if (!in(0, UINT16_MAX)) return false;
        PutRaw<uint16_t>(out, static_cast<uint16_t>(i));
        return true;
      case DataType::kUint32:
        if (!in(0, UINT32_MAX)) return false;
        PutRaw<uint32_t>(out, static_cast<uint32_t>(i));
        return true;
      case DataType::kUint64:
        if (i < 0) return false;
        PutRaw<uint64_t>(out, static_cast<uint64_t>(i));
        return true;
      default:
        return false;
    }
  }
  const double v = is_int ? static_cast<double>(i) : d;
  switch (dt) {
    case DataType::kFp32:
      PutRaw<float>(out, static_cast<float>(v));
      return true;
    case DataType::kFp64:
      PutRaw<double>(out, v);
      return true;
    case DataType::kFp16:
      PutRaw<uint16_t>(out, FloatToHalf(static_cast<float>(v)));
      return true;
    case DataType::kBf16:
      PutRaw<uint16_t>(out, FloatToBf16(static_cast<float>(v)));
      return true;
    default:
      return false;
  }
}

bool IsIntegerType(DataType dt) {
  switch (dt) {
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
    case DataType::kUint64:
      return true;
    default:
      return false;
  }
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

bool ParseNumber(std::string_view text, bool* is_int, int64_t* i, double* d) {
  text = TrimSpace(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);  // from_chars takes no '+'
  if (text.empty() || text.size() > 64) return false;
  const char* first = text.data();
  const char* last = first + text.size();
  int64_t iv = 0;
  if (auto r = std::from_chars(first, last, iv); r.ec == std::errc() && r.ptr == last) {
    *is_int = true;
    *i = iv;
    return true;
  }
  double dv = 0;
  auto r = std::from_chars(first, last, dv);
  if (r.ec != std::errc() || r.ptr != last) return false;
  *is_int = false;
  *d = dv;
  return true;
}

std::vector<std::string> SplitList(std::string_view s) {
  std::vector<std::string> out;
  for (;;) {
    const size_t comma = s.find(',');
    out.emplace_back(TrimSpace(s.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    s.remove_prefix(comma + 1);
  }
}

}  // namespace inferd
