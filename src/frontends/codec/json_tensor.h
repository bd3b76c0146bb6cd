// Conversions between JSON values (rapidjson) and tensor bytes, shared by the
// KServe v2 and TF Serving v1 codecs. Internal to the codec library.
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <string_view>

#include "core/infer_request.h"
#include "core/status.h"
#include "core/tensor.h"

namespace inferd::json {

// Parse flags used for every JSON body from the network: NaN/Inf literals
// accepted, and the iterative parser: the default recursive one overflows
// the thread's stack on deeply nested input ('[' x 2 million fits an 8 MiB
// body; found by fuzz_v1_predict) and crashed the server.
// Not kParseFullPrecisionFlag: rapidjson 1.1's full-precision path
// (StrtodDiyFp) reads out of bounds on inputs such as
// 888888876.8000017368765888888888820e-339 (found by fuzz_v1_predict). The
// default path is within a few ULP of a double: exact for FP32 and below.
inline constexpr unsigned kParseFlags = rapidjson::kParseNanAndInfFlag | rapidjson::kParseIterativeFlag;

// Flattens `data` (nested or flat arrays, or a scalar) into a tensor of
// `dtype` and `shape`, checking element types, ranges and the element count.
// `b64_strings`: BYTES elements may be {"b64": "..."} objects (TF Serving).
Result<Tensor> DecodeTensorData(const rapidjson::Value& data, DataType dtype, Shape shape, std::string name,
                                bool b64_strings = false);

// The shape of a nested JSON array (rectangularity is checked by
// DecodeTensorData's element count). A scalar has shape [].
// b64 objects count as scalars.
Result<Shape> InferShape(const rapidjson::Value& v);

// Appends the tensor's elements as one flat JSON array.
void AppendFlatData(std::string* out, const Tensor& t);

// Appends elements [first, first+count) nested according to `dims`
// (row-major); `b64_bytes` writes BYTES as {"b64": "..."}.
void AppendNestedData(std::string* out, const Tensor& t, const Shape& dims, int64_t first, bool b64_bytes);

// KServe v2 "parameters" (an object of bool, number or string values) into
// `out`; `where` names the object in errors ("request", "input 'x'").
// With `json_values`, object and array values are kept as their JSON text (the
// generate extension's structured-output parameters: guided_json, response_format...).
Status ParseParameters(const rapidjson::Value& v, Parameters* out, std::string_view where, bool json_values = false);

std::string Base64Encode(std::string_view in);
Result<std::string> Base64Decode(std::string_view in);

}  // namespace inferd::json
