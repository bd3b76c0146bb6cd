#include "llm/safetensors.h"

#include <fcntl.h>
#include <rapidjson/document.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace inferd::llm {
namespace {

constexpr unsigned kHeaderJsonFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;
constexpr size_t kMaxRank = 8;

Status Bad(std::string_view name, std::string_view what) {
  std::string m = "safetensors: tensor '";
  m.append(name.substr(0, 200));
  m.append("' ");
  m.append(what);
  return Status::InvalidArgument(std::move(m));
}

}  // namespace

std::optional<DataType> SafetensorsDtype(std::string_view name) {
  static const std::pair<std::string_view, DataType> kTable[] = {
      {"F32", DataType::kFp32}, {"F16", DataType::kFp16},   {"BF16", DataType::kBf16},  {"F64", DataType::kFp64},
      {"I8", DataType::kInt8},  {"I16", DataType::kInt16},  {"I32", DataType::kInt32},  {"I64", DataType::kInt64},
      {"U8", DataType::kUint8}, {"U16", DataType::kUint16}, {"U32", DataType::kUint32}, {"U64", DataType::kUint64},
      {"BOOL", DataType::kBool}};
  for (const auto& [n, dt] : kTable)
    if (n == name) return dt;
  return std::nullopt;
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view prefix, uint64_t file_size) {
  if (prefix.size() < 8 || file_size < 8) return Status::InvalidArgument("safetensors: file shorter than 8 bytes");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[static_cast<size_t>(i)]);
  if (n > kMaxSafetensorsHeader) {
    return Status::InvalidArgument("safetensors: header of " + std::to_string(n) + " bytes (at most " +
                                   std::to_string(kMaxSafetensorsHeader) + ")");
  }
  if (n > file_size - 8 || n > prefix.size() - 8) {
    return Status::InvalidArgument("safetensors: header of " + std::to_string(n) + " bytes runs past the end");
  }
  SafetensorsHeader h;
  h.data_offset = 8 + n;
  const uint64_t data_size = file_size - h.data_offset;
  rapidjson::Document doc;
  doc.Parse<kHeaderJsonFlags>(prefix.data() + 8, n);
  if (doc.HasParseError()) {
    return Status::InvalidArgument("safetensors: header is not valid JSON (at byte " +
                                   std::to_string(doc.GetErrorOffset()) + ")");
  }
  if (!doc.IsObject()) return Status::InvalidArgument("safetensors: header is not a JSON object");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    std::string_view name(it->name.GetString(), it->name.GetStringLength());
    const auto& v = it->value;
    if (name == "__metadata__") {
      if (!v.IsObject()) return Status::InvalidArgument("safetensors: __metadata__ is not an object");
      for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
        if (!m->value.IsString()) return Status::InvalidArgument("safetensors: __metadata__ values must be strings");
        h.metadata.emplace(std::string(m->name.GetString(), m->name.GetStringLength()),
                           std::string(m->value.GetString(), m->value.GetStringLength()));
      }
      continue;
    }
    if (!v.IsObject()) return Bad(name, "is not an object");
    auto dt = v.FindMember("dtype");
    auto shape = v.FindMember("shape");
    auto offsets = v.FindMember("data_offsets");
    if (dt == v.MemberEnd() || !dt->value.IsString()) return Bad(name, "has no dtype string");
    if (shape == v.MemberEnd() || !shape->value.IsArray()) return Bad(name, "has no shape array");
    if (offsets == v.MemberEnd() || !offsets->value.IsArray() || offsets->value.Size() != 2) {
      return Bad(name, "has no data_offsets [begin, end]");
    }
    SafetensorsEntry e;
    std::string_view dts(dt->value.GetString(), dt->value.GetStringLength());
    auto parsed = SafetensorsDtype(dts);
    if (!parsed) return Bad(name, "has dtype '" + std::string(dts.substr(0, 20)) + "', which inferd does not read");
    e.dtype = *parsed;
    if (shape->value.Size() > kMaxRank) return Bad(name, "has more than 8 dimensions");
    uint64_t numel = 1;
    for (const auto& d : shape->value.GetArray()) {
      if (!d.IsUint64() || d.GetUint64() > (uint64_t{1} << 40)) return Bad(name, "has a dimension that is not a size");
      e.shape.push_back(static_cast<int64_t>(d.GetUint64()));
      if (d.GetUint64() != 0 && numel > (uint64_t{1} << 50) / d.GetUint64()) return Bad(name, "is too large");
      numel *= d.GetUint64();
    }
    const auto& o = offsets->value;
    if (!o[0].IsUint64() || !o[1].IsUint64()) return Bad(name, "has data_offsets that are not sizes");
    e.begin = o[0].GetUint64();
    e.end = o[1].GetUint64();
    if (e.begin > e.end || e.end > data_size) return Bad(name, "has a byte range outside the file");
    if (e.end - e.begin != numel * DataTypeByteSize(e.dtype)) {
      return Bad(name, "has " + std::to_string(e.end - e.begin) + " bytes for " + std::to_string(numel) +
                           " elements of " + std::string(dts));
    }
    if (e.end > e.begin) ranges.emplace_back(e.begin, e.end);
    h.tensors.emplace(std::string(name), std::move(e));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return Status::InvalidArgument("safetensors: tensors overlap");
  }
  return h;
}

Result<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + " is not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Status::InvalidArgument("safetensors: " + path + " is shorter than 8 bytes");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return Status::Internal("cannot map " + path + ": " + std::strerror(errno));
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->base_ = static_cast<const char*>(p);
  f->size_ = size;
  f->mapped_ = true;
  auto h = ParseSafetensorsHeader(std::string_view(f->base_, size), size);
  if (!h.ok()) return Status(h.status().code(), h.status().message() + " (" + path + ")");
  f->header_ = std::move(h).value();
  return std::shared_ptr<const SafetensorsFile>(std::move(f));
}

Result<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::FromBytes(std::string bytes) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->owned_ = std::move(bytes);
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  auto h = ParseSafetensorsHeader(f->owned_, f->size_);
  if (!h.ok()) return h.status();
  f->header_ = std::move(h).value();
  return std::shared_ptr<const SafetensorsFile>(std::move(f));
}

SafetensorsFile::~SafetensorsFile() {
  if (mapped_) ::munmap(const_cast<char*>(base_), size_);
}

const SafetensorsEntry* SafetensorsFile::Find(std::string_view name) const {
  auto it = header_.tensors.find(name);
  return it == header_.tensors.end() ? nullptr : &it->second;
}

std::string_view SafetensorsFile::Data(const SafetensorsEntry& e) const {
  return std::string_view(base_ + header_.data_offset + e.begin, e.end - e.begin);
}

}  // namespace inferd::llm
