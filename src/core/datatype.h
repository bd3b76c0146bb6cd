// Tensor element types, with the two spellings users meet:
//  * wire names of KServe v2 / Triton ("FP32", "BYTES", ...), and
//  * config enum names of Triton's model_config ("TYPE_FP32", "TYPE_STRING", ...).
// Enum values equal Triton's DataType enum numbers so the config proto maps 1:1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace inferd {

enum class DataType : int {
  kInvalid = 0,
  kBool = 1,
  kUint8 = 2,
  kUint16 = 3,
  kUint32 = 4,
  kUint64 = 5,
  kInt8 = 6,
  kInt16 = 7,
  kInt32 = 8,
  kInt64 = 9,
  kFp16 = 10,
  kFp32 = 11,
  kFp64 = 12,
  kBytes = 13,  // TYPE_STRING in configs, BYTES on the wire
  kBf16 = 14,
};

// Size of one element in bytes; 0 for kBytes (variable) and kInvalid.
size_t DataTypeByteSize(DataType dt);

// "FP32" <-> kFp32. Returns nullopt / "INVALID" for unknown names.
std::optional<DataType> DataTypeFromWire(std::string_view name);
std::string_view DataTypeToWire(DataType dt);

// "TYPE_FP32" <-> kFp32 (config spelling).
std::string_view DataTypeToConfig(DataType dt);

// IEEE half and bfloat16 conversions (round to nearest even).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);

}  // namespace inferd
