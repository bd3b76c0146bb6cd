// The safetensors format (Hugging Face's weight files): an 8-byte little-endian
// header length N, N bytes of JSON naming each tensor's dtype, shape and byte
// range, then the tensor bytes. inferd's own reader: the header is checked
// before any byte is trusted (ranges inside the file, sizes equal to the shape
// times the element size, no overlapping tensors, a bounded header).
//
// Thread-safety: ParseSafetensorsHeader is a pure function; a SafetensorsFile
// is immutable after Open and may be read from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/datatype.h"
#include "core/status.h"

namespace inferd::llm {

struct SafetensorsEntry {
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte range within the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry, std::less<>> tensors;
  std::map<std::string, std::string, std::less<>> metadata;  // "__metadata__"
  uint64_t data_offset = 0;                                  // 8 + header length
};

// Largest header accepted (the format's own reference limit is 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeader = 100u << 20;

// Parses and checks the header of a file of `file_size` bytes whose first
// bytes are `prefix` (at least the 8-byte length and the whole header).
// INVALID_ARGUMENT naming the tensor and the fault.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view prefix, uint64_t file_size);

// A safetensors file mapped read-only into memory.
class SafetensorsFile {
 public:
  static Result<std::shared_ptr<const SafetensorsFile>> Open(const std::string& path);
  // A file already in memory (tests, fuzzing); `bytes` is copied.
  static Result<std::shared_ptr<const SafetensorsFile>> FromBytes(std::string bytes);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const SafetensorsHeader& header() const { return header_; }
  const SafetensorsEntry* Find(std::string_view name) const;
  // The bytes of a tensor (valid while the file lives).
  std::string_view Data(const SafetensorsEntry& entry) const;
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  SafetensorsHeader header_;
  const char* base_ = nullptr;  // the whole file
  uint64_t size_ = 0;
  bool mapped_ = false;
  std::string owned_;  // FromBytes
};

// "F32" -> kFp32 ... (BF16, F16, F64, I8..I64, U8..U64, BOOL); nullopt for others (F8 kinds).
std::optional<DataType> SafetensorsDtype(std::string_view name);

}  // namespace inferd::llm
