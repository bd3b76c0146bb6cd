#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "jobs/row_source.h"

namespace inferd::jobs {
namespace {

// Appends the numbers of a (nested) array; false when it holds anything else
// or an integer a double does not hold exactly.
bool Flatten(const rapidjson::Value& v, std::vector<double>* out, int depth = 0) {
  if (depth > 32) return false;
  for (const auto& e : v.GetArray()) {
    if (e.IsArray()) {
      if (!Flatten(e, out, depth + 1)) return false;
    } else if (e.IsInt64()) {
      const int64_t i = e.GetInt64();
      if (i > (int64_t{1} << 53) || i < -(int64_t{1} << 53)) return false;
      out->push_back(static_cast<double>(i));
    } else if (e.IsNumber()) {
      out->push_back(e.GetDouble());
    } else {
      return false;
    }
  }
  return true;
}

Cell ToCell(const rapidjson::Value& v) {
  if (v.IsNull()) return std::monostate{};
  if (v.IsBool()) return static_cast<int64_t>(v.GetBool() ? 1 : 0);
  if (v.IsInt64()) return v.GetInt64();
  if (v.IsNumber()) return v.GetDouble();
  if (v.IsString()) return std::string(v.GetString(), v.GetStringLength());
  if (v.IsArray()) {
    NumberArray numbers;
    if (Flatten(v, &numbers.values)) return numbers;
  }
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return JsonText{std::string(buf.GetString(), buf.GetSize())};
}

class JsonlSource final : public RowSource {
 public:
  explicit JsonlSource(std::string path) : path_(std::move(path)) {}
  ~JsonlSource() override {
    if (file_) std::fclose(file_);
  }

  Status Open() {
    file_ = std::fopen(path_.c_str(), "rb");
    if (!file_) return Status::InvalidArgument("cannot open JSON Lines source '" + path_ + "'");
    // The columns come from the first object; it is read again as row 0.
    std::string line;
    for (;;) {
      INFERD_ASSIGN_OR_RETURN(bool got, ReadLine(&line));
      if (!got) return Status::InvalidArgument("JSON Lines source '" + path_ + "' has no rows");
      if (line.find_first_not_of(" \t\r") != std::string::npos) break;
    }
    rapidjson::Document doc;
    doc.Parse(line.data(), line.size());
    if (doc.HasParseError() || !doc.IsObject())
      return Status::InvalidArgument("JSON Lines source '" + path_ +
                                     "': the first line must be a JSON object (it names the columns)");
    for (auto m = doc.MemberBegin(); m != doc.MemberEnd(); ++m) {
      std::string name(m->name.GetString(), m->name.GetStringLength());
      if (index_.emplace(name, columns_.size()).second) columns_.push_back(std::move(name));
    }
    if (columns_.empty())
      return Status::InvalidArgument("JSON Lines source '" + path_ + "': the first object has no members");
    pending_ = std::move(line);
    return Status::OK();
  }

  const std::vector<std::string>& columns() const override { return columns_; }

  Result<bool> Next(Row* row) override {
    std::string line;
    if (pending_) {
      line = std::move(*pending_);
      pending_.reset();
    } else {
      for (;;) {
        INFERD_ASSIGN_OR_RETURN(bool got, ReadLine(&line));
        if (!got) return false;
        if (line.find_first_not_of(" \t\r") != std::string::npos) break;
      }
    }
    row->ordinal = next_ordinal_++;
    row->error.clear();
    row->cells.assign(columns_.size(), std::monostate{});
    rapidjson::Document doc;
    doc.Parse(line.data(), line.size());
    if (doc.HasParseError()) {
      row->error = std::string("malformed JSON line at offset ") + std::to_string(doc.GetErrorOffset()) + ": " +
                   rapidjson::GetParseError_En(doc.GetParseError());
      return true;
    }
    if (!doc.IsObject()) {
      row->error = "the JSON line is not an object";
      return true;
    }
    for (auto m = doc.MemberBegin(); m != doc.MemberEnd(); ++m) {
      auto it = index_.find(std::string_view(m->name.GetString(), m->name.GetStringLength()));
      if (it != index_.end()) row->cells[it->second] = ToCell(m->value);
    }
    return true;
  }

 private:
  Result<bool> ReadLine(std::string* line) {
    line->clear();
    for (;;) {
      // fgets in chunks (a character at a time cost 4% of a CNN job's CPU).
      const size_t at = line->size();
      line->resize(at + kChunk);
      if (!std::fgets(line->data() + at, static_cast<int>(kChunk) + 1, file_)) {
        line->resize(at);
        if (std::ferror(file_)) return Status::Unavailable("reading JSON Lines source '" + path_ + "' failed");
        return !line->empty();
      }
      const size_t got = std::strlen(line->data() + at);
      line->resize(at + got);
      if (got > 0 && line->back() == '\n') {
        line->pop_back();
        return true;
      }
      if (line->size() > kMaxRecordBytes)
        return Status::InvalidArgument("JSON Lines source '" + path_ + "': a line is longer than 64 MiB");
    }
  }
  static constexpr size_t kChunk = 1 << 16;

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  const std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<std::string> columns_;
  std::unordered_map<std::string, size_t, Hash, std::equal_to<>> index_;
  std::optional<std::string> pending_;
  int64_t next_ordinal_ = 0;
};

}  // namespace

Result<std::unique_ptr<RowSource>> OpenJsonlSource(const std::string& path) {
  auto s = std::make_unique<JsonlSource>(path);
  INFERD_RETURN_IF_ERROR(s->Open());
  return std::unique_ptr<RowSource>(std::move(s));
}

}  // namespace inferd::jobs
