// ONNX TensorProto / SequenceProto <-> executor values, and ONNX element
// types <-> ATen scalar types. Sizes are checked against the data present:
// a TensorProto whose dims disagree with its data is an error, not a read
// past the end. Thread-safety: pure functions.
#pragma once

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

#include "backends/onnx/value.h"
#include "core/datatype.h"
#include "core/status.h"

namespace inferd::onnxexec {

// nullopt for types ATen cannot hold (UINT16/32/64, complex, STRING).
std::optional<at::ScalarType> ScalarTypeOf(int32_t onnx_type);
// 0 (UNDEFINED) for ATen types ONNX has no name for.
int32_t OnnxTypeOf(at::ScalarType t);
// "FLOAT", "INT64", ... ("type 42" for unknown numbers).
std::string OnnxTypeName(int32_t onnx_type);
// KServe datatypes: ONNX FLOAT is FP32, STRING is BYTES ...; kInvalid when none.
DataType DataTypeOfOnnx(int32_t onnx_type);
int32_t OnnxTypeOfDataType(DataType t);

// Initializers and Constant values. External data must have been read into
// raw_data already (model_loader.h).
Result<Value> FromTensorProto(const onnx::TensorProto& t);
Result<Value> FromSequenceProto(const onnx::SequenceProto& s);
Result<Value> FromOptionalProto(const onnx::OptionalProto& o);

}  // namespace inferd::onnxexec
