#include "frontends/codec/json_tensor.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "frontends/codec/json_writer.h"

namespace inferd::json {
namespace {

// Collects scalars of a nested array, depth-first.
Status Flatten(const rapidjson::Value& v, std::vector<const rapidjson::Value*>* out, int depth) {
  if (depth > 64) return Status::InvalidArgument("tensor data is nested too deeply");
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) INFERD_RETURN_IF_ERROR(Flatten(e, out, depth + 1));
    return Status::OK();
  }
  out->push_back(&v);
  return Status::OK();
}

template <typename T>
Status ReadInt(const rapidjson::Value& v, T* out) {
  if (v.IsInt64()) {
    const int64_t x = v.GetInt64();
    if constexpr (std::is_signed_v<T>) {
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
        return Status::InvalidArgument("value out of range");
    } else {
      if (x < 0 || static_cast<uint64_t>(x) > std::numeric_limits<T>::max())
        return Status::InvalidArgument("value out of range");
    }
    *out = static_cast<T>(x);
    return Status::OK();
  }
  if (v.IsUint64()) {  // > INT64_MAX
    if constexpr (std::is_same_v<T, uint64_t>) {
      *out = v.GetUint64();
      return Status::OK();
    }
    return Status::InvalidArgument("value out of range");
  }
  if (v.IsDouble()) {
    // Exact bounds: [-2^digits, 2^digits) for signed T, [0, 2^digits) for
    // unsigned (static_cast<double>(max) rounds up to 2^digits for 64 bits).
    const double d = v.GetDouble();
    const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
    const double lo = std::is_signed_v<T> ? -hi : 0.0;
    if (std::isfinite(d) && d == std::floor(d) && d >= lo && d < hi) {
      *out = static_cast<T>(d);
      return Status::OK();
    }
    return Status::InvalidArgument("expected an integer");
  }
  return Status::InvalidArgument("expected an integer");
}

// double -> float without undefined behaviour: out of range becomes +-inf.
float ToFloat(double d) {
  if (d > std::numeric_limits<float>::max()) return std::numeric_limits<float>::infinity();
  if (d < -std::numeric_limits<float>::max()) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(d);
}

Status ReadDouble(const rapidjson::Value& v, double* out) {
  if (!v.IsNumber()) return Status::InvalidArgument("expected a number");
  *out = v.GetDouble();
  return Status::OK();
}

template <typename T>
void Put(std::string* buf, T v) {
  buf->append(reinterpret_cast<const char*>(&v), sizeof v);
}

Status ReadElement(const rapidjson::Value& v, DataType dt, std::string* buf, bool b64) {
  switch (dt) {
    case DataType::kBool:
      if (!v.IsBool()) return Status::InvalidArgument("expected true or false");
      Put<uint8_t>(buf, v.GetBool() ? 1 : 0);
      return Status::OK();
#define INFERD_INT_CASE(DT, T)                 \
  case DT: {                                   \
    T x{};                                     \
    INFERD_RETURN_IF_ERROR(ReadInt<T>(v, &x)); \
    Put<T>(buf, x);                            \
    return Status::OK();                       \
  }
      INFERD_INT_CASE(DataType::kUint8, uint8_t)
      INFERD_INT_CASE(DataType::kUint16, uint16_t)
      INFERD_INT_CASE(DataType::kUint32, uint32_t)
      INFERD_INT_CASE(DataType::kUint64, uint64_t)
      INFERD_INT_CASE(DataType::kInt8, int8_t)
      INFERD_INT_CASE(DataType::kInt16, int16_t)
      INFERD_INT_CASE(DataType::kInt32, int32_t)
      INFERD_INT_CASE(DataType::kInt64, int64_t)
#undef INFERD_INT_CASE
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kFp32:
    case DataType::kFp64: {
      double d = 0;
      INFERD_RETURN_IF_ERROR(ReadDouble(v, &d));
      if (dt == DataType::kFp64)
        Put<double>(buf, d);
      else if (dt == DataType::kFp32)
        Put<float>(buf, ToFloat(d));
      else if (dt == DataType::kFp16)
        Put<uint16_t>(buf, FloatToHalf(ToFloat(d)));
      else
        Put<uint16_t>(buf, FloatToBf16(ToFloat(d)));
      return Status::OK();
    }
    case DataType::kBytes: {
      if (v.IsString()) {
        AppendBytesElement(buf, std::string_view(v.GetString(), v.GetStringLength()));
        return Status::OK();
      }
      if (b64 && v.IsObject() && v.MemberCount() == 1 && v.HasMember("b64") && v["b64"].IsString()) {
        INFERD_ASSIGN_OR_RETURN(std::string raw,
                                Base64Decode(std::string_view(v["b64"].GetString(), v["b64"].GetStringLength())));
        AppendBytesElement(buf, raw);
        return Status::OK();
      }
      return Status::InvalidArgument(b64 ? "expected a string or {\"b64\": ...}" : "expected a string");
    }
    case DataType::kInvalid:
      break;
  }
  return Status::InvalidArgument("unsupported datatype");
}

template <typename T, typename F>
void AppendRange(std::string* out, const Tensor& t, int64_t first, int64_t count, F&& conv) {
  const T* p = reinterpret_cast<const T*>(t.data) + first;
  for (int64_t i = 0; i < count; ++i) {
    if (i) out->push_back(',');
    T v;
    std::memcpy(&v, p + i, sizeof v);
    conv(out, v);
  }
}

// Appends `count` elements starting at element `first` (comma separated).
void AppendElements(std::string* out, const Tensor& t, int64_t first, int64_t count, bool b64,
                    const std::vector<std::string_view>* bytes) {
  auto num = [](std::string* o, auto v) { AppendNumber(o, v); };
  switch (t.dtype) {
    case DataType::kBool:
      return AppendRange<uint8_t>(out, t, first, count,
                                  [](std::string* o, uint8_t v) { o->append(v ? "true" : "false"); });
    case DataType::kUint8:
      return AppendRange<uint8_t>(out, t, first, count,
                                  [](std::string* o, uint8_t v) { AppendNumber(o, static_cast<unsigned>(v)); });
    case DataType::kUint16:
      return AppendRange<uint16_t>(out, t, first, count, num);
    case DataType::kUint32:
      return AppendRange<uint32_t>(out, t, first, count, num);
    case DataType::kUint64:
      return AppendRange<uint64_t>(out, t, first, count, num);
    case DataType::kInt8:
      return AppendRange<int8_t>(out, t, first, count,
                                 [](std::string* o, int8_t v) { AppendNumber(o, static_cast<int>(v)); });
    case DataType::kInt16:
      return AppendRange<int16_t>(out, t, first, count, num);
    case DataType::kInt32:
      return AppendRange<int32_t>(out, t, first, count, num);
    case DataType::kInt64:
      return AppendRange<int64_t>(out, t, first, count, num);
    case DataType::kFp16:
      return AppendRange<uint16_t>(out, t, first, count,
                                   [](std::string* o, uint16_t v) { AppendNumber(o, HalfToFloat(v)); });
    case DataType::kBf16:
      return AppendRange<uint16_t>(out, t, first, count,
                                   [](std::string* o, uint16_t v) { AppendNumber(o, Bf16ToFloat(v)); });
    case DataType::kFp32:
      return AppendRange<float>(out, t, first, count, num);
    case DataType::kFp64:
      return AppendRange<double>(out, t, first, count, num);
    case DataType::kBytes:
      for (int64_t i = 0; i < count; ++i) {
        if (i) out->push_back(',');
        const auto idx = static_cast<size_t>(first + i);
        std::string_view e = (bytes && idx < bytes->size()) ? (*bytes)[idx] : std::string_view();
        if (b64) {
          out->append("{\"b64\":");
          AppendEscaped(out, Base64Encode(e));
          out->push_back('}');
        } else {
          AppendEscaped(out, e);
        }
      }
      return;
    case DataType::kInvalid:
      return;
  }
}

void AppendNestedImpl(std::string* out, const Tensor& t, const Shape& dims, size_t d, int64_t first, bool b64,
                      const std::vector<std::string_view>* bytes) {
  if (d == dims.size()) return AppendElements(out, t, first, 1, b64, bytes);
  int64_t inner = 1;
  for (size_t k = d + 1; k < dims.size(); ++k) inner *= dims[k];
  out->push_back('[');
  if (d + 1 == dims.size()) {
    AppendElements(out, t, first, dims[d], b64, bytes);
  } else {
    for (int64_t i = 0; i < dims[d]; ++i) {
      if (i) out->push_back(',');
      AppendNestedImpl(out, t, dims, d + 1, first + i * inner, b64, bytes);
    }
  }
  out->push_back(']');
}

}  // namespace

Status ParseParameters(const rapidjson::Value& v, Parameters* out, std::string_view where, bool json_values) {
  if (!v.IsObject()) return Status::InvalidArgument(std::string(where) + " 'parameters' must be an object");
  for (const auto& m : v.GetObject()) {
    std::string key(m.name.GetString(), m.name.GetStringLength());
    const auto& val = m.value;
    if (val.IsBool())
      (*out)[key] = val.GetBool();
    else if (val.IsInt64())
      (*out)[key] = val.GetInt64();
    else if (val.IsNumber())
      (*out)[key] = val.GetDouble();
    else if (val.IsString())
      (*out)[key] = std::string(val.GetString(), val.GetStringLength());
    else if (json_values && (val.IsObject() || val.IsArray())) {
      rapidjson::StringBuffer b;
      rapidjson::Writer<rapidjson::StringBuffer> w(b);
      val.Accept(w);
      (*out)[key] = std::string(b.GetString(), b.GetSize());
    } else
      return Status::InvalidArgument(std::string(where) + " parameter '" + key + "' must be a bool, number or string");
  }
  return Status::OK();
}

Result<Tensor> DecodeTensorData(const rapidjson::Value& data, DataType dtype, Shape shape, std::string name, bool b64) {
  const int64_t want = ElementCount(shape);
  if (want < 0) return Status::InvalidArgument("input '" + name + "' has an invalid shape " + ShapeToString(shape));
  if (dtype == DataType::kInvalid) return Status::InvalidArgument("input '" + name + "' has an invalid datatype");
  std::vector<const rapidjson::Value*> flat;
  INFERD_RETURN_IF_ERROR(Flatten(data, &flat, 0).WithPrefix("input '" + name + "'"));
  if (static_cast<int64_t>(flat.size()) != want) {
    return Status::InvalidArgument("unexpected number of elements for input '" + name + "': shape " +
                                   ShapeToString(shape) + " needs " + std::to_string(want) + ", data has " +
                                   std::to_string(flat.size()));
  }
  auto buf = std::make_shared<std::string>();
  if (dtype != DataType::kBytes) buf->reserve(flat.size() * DataTypeByteSize(dtype));
  for (size_t i = 0; i < flat.size(); ++i) {
    Status st = ReadElement(*flat[i], dtype, buf.get(), b64);
    if (!st.ok()) {
      return Status::InvalidArgument("input '" + name + "' element " + std::to_string(i) + " is not valid " +
                                     std::string(DataTypeToWire(dtype)) + ": " + st.message());
    }
  }
  return Tensor::Own(std::move(name), dtype, std::move(shape), std::move(buf));
}

Result<Shape> InferShape(const rapidjson::Value& v) {
  Shape s;
  const rapidjson::Value* cur = &v;
  while (cur->IsArray()) {
    s.push_back(cur->Size());
    if (cur->Size() == 0) break;
    cur = &(*cur)[0];
    if (s.size() > 64) return Status::InvalidArgument("tensor data is nested too deeply");
  }
  return s;
}

void AppendFlatData(std::string* out, const Tensor& t) {
  std::vector<std::string_view> bytes;
  if (t.dtype == DataType::kBytes) {
    auto r = SplitBytesElements(t.bytes());
    if (r.ok()) bytes = std::move(*r);
  }
  out->push_back('[');
  AppendElements(out, t, 0, t.dtype == DataType::kBytes ? static_cast<int64_t>(bytes.size()) : t.element_count(), false,
                 &bytes);
  out->push_back(']');
}

void AppendNestedData(std::string* out, const Tensor& t, const Shape& dims, int64_t first, bool b64) {
  std::vector<std::string_view> bytes;
  if (t.dtype == DataType::kBytes) {
    auto r = SplitBytesElements(t.bytes());
    if (r.ok()) bytes = std::move(*r);
  }
  AppendNestedImpl(out, t, dims, 0, first, b64, &bytes);
}

std::string Base64Encode(std::string_view in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t n =
        (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (i < in.size()) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = val(c);
    if (v < 0) return Status::InvalidArgument("invalid base64 character");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits >= 6) return Status::InvalidArgument("invalid base64 length");
  return out;
}

}  // namespace inferd::json
