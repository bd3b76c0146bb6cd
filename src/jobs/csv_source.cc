#include <algorithm>
#include <cstdio>
#include <fstream>

#include "jobs/row_source.h"

namespace inferd::jobs {
namespace {

enum class Parse { kRecord, kEnd, kNeedMore, kError };

// One record from text[*pos...]. `final`: no more text follows. On kError
// *pos skips to after the line the error is on and *error says why.
Parse ParseRecord(std::string_view text, size_t* pos, std::vector<Cell>* fields, bool final, std::string* error) {
  fields->clear();
  size_t i = *pos;
  if (i >= text.size()) return final ? Parse::kEnd : Parse::kNeedMore;
  std::string field;
  bool quoted = false;     // the current field started with a quote
  bool in_quotes = false;  // inside its quotes
  bool after_quote = false;
  auto skip_line = [&](std::string why) {
    size_t nl = text.find('\n', i);
    if (nl == std::string_view::npos && !final) return Parse::kNeedMore;
    *pos = nl == std::string_view::npos ? text.size() : nl + 1;
    *error = std::move(why);
    return Parse::kError;
  };
  auto finish_field = [&] {
    if (!quoted && field.empty())
      fields->emplace_back(std::monostate{});
    else
      fields->emplace_back(std::move(field));
    field.clear();
    quoted = in_quotes = after_quote = false;
  };
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else if (i + 1 >= text.size() && !final) {
          return Parse::kNeedMore;  // a doubled quote may follow
        } else {
          in_quotes = false;
          after_quote = true;
        }
      } else {
        field += c;
      }
      continue;
    }
    if (c == ',') {
      finish_field();
      continue;
    }
    if (c == '\n' || c == '\r') {
      if (c == '\r') {
        if (i + 1 >= text.size() && !final) return Parse::kNeedMore;
        if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
      }
      finish_field();
      *pos = i + 1;
      return Parse::kRecord;
    }
    if (after_quote)
      return skip_line("a character after a closing quote (field " + std::to_string(fields->size() + 1) + ")");
    if (c == '"') {
      if (!field.empty())
        return skip_line("a quote inside an unquoted field (field " + std::to_string(fields->size() + 1) + ")");
      quoted = in_quotes = true;
      continue;
    }
    field += c;
  }
  if (!final) return Parse::kNeedMore;
  if (in_quotes) {
    *pos = text.size();
    *error = "a quoted field never closes";
    return Parse::kError;
  }
  finish_field();
  *pos = text.size();
  return Parse::kRecord;
}

class CsvSource final : public RowSource {
 public:
  explicit CsvSource(std::string path) : path_(std::move(path)) {}

  Status Open() {
    file_ = std::fopen(path_.c_str(), "rb");
    if (!file_) return Status::InvalidArgument("cannot open CSV source '" + path_ + "'");
    if (std::fseek(file_, 0, SEEK_END) == 0) {
      size_ = std::ftell(file_);
      std::rewind(file_);
    }
    std::vector<Cell> header;
    std::string error;
    INFERD_ASSIGN_OR_RETURN(bool got, Read(&header, &error));
    if (!got) return Status::InvalidArgument("CSV source '" + path_ + "' is empty (a header line is required)");
    if (!error.empty()) return Status::InvalidArgument("CSV source '" + path_ + "': header: " + error);
    for (size_t i = 0; i < header.size(); ++i) {
      std::string name = CellText(header[i]);
      if (i == 0 && name.rfind("\xEF\xBB\xBF", 0) == 0) name.erase(0, 3);
      if (name.empty())
        return Status::InvalidArgument("CSV source '" + path_ + "': column " + std::to_string(i + 1) + " has no name");
      columns_.push_back(std::move(name));
    }
    return Status::OK();
  }
  ~CsvSource() override {
    if (file_) std::fclose(file_);
  }

  const std::vector<std::string>& columns() const override { return columns_; }
  std::optional<double> fraction_read() const override {
    if (size_ <= 0) return std::nullopt;
    const double consumed = static_cast<double>(read_) - static_cast<double>(buf_.size() - start_);
    return std::clamp(consumed / static_cast<double>(size_), 0.0, 1.0);
  }

  Result<bool> Next(Row* row) override {
    bool got = false;
    do {  // blank lines are skipped
      row->error.clear();
      INFERD_ASSIGN_OR_RETURN(got, Read(&row->cells, &row->error));
      if (!got) return false;
    } while (row->error.empty() && row->cells.size() == 1 && std::holds_alternative<std::monostate>(row->cells[0]));
    row->ordinal = next_ordinal_++;
    if (row->error.empty() && row->cells.size() != columns_.size()) {
      row->error = "the CSV record has " + std::to_string(row->cells.size()) + " fields, the header " +
                   std::to_string(columns_.size());
    }
    if (!row->error.empty()) row->cells.resize(columns_.size());
    return true;
  }

 private:
  // The next record; false at the end of the file. A malformed record sets *error.
  Result<bool> Read(std::vector<Cell>* fields, std::string* error) {
    for (;;) {
      std::string_view text(buf_);
      size_t pos = start_;
      Parse p = ParseRecord(text, &pos, fields, eof_, error);
      if (p == Parse::kNeedMore) {
        if (buf_.size() - start_ > kMaxRecordBytes)
          return Status::InvalidArgument("CSV source '" + path_ + "': a record is longer than 64 MiB");
        INFERD_RETURN_IF_ERROR(Fill());
        continue;
      }
      start_ = pos;
      if (p == Parse::kEnd) return false;
      return true;
    }
  }
  Status Fill() {
    if (start_ > 0) {
      buf_.erase(0, start_);
      start_ = 0;
    }
    // Reads at least as much as is buffered, so a long record is re-parsed
    // O(log size) times, not once per chunk.
    const size_t old = buf_.size();
    const size_t want = std::max<size_t>(1 << 16, old);
    buf_.resize(old + want);
    const size_t n = std::fread(buf_.data() + old, 1, want, file_);
    buf_.resize(old + n);
    read_ += static_cast<int64_t>(n);
    if (n == 0) {
      if (std::ferror(file_)) return Status::Unavailable("reading CSV source '" + path_ + "' failed");
      eof_ = true;
    }
    return Status::OK();
  }

  const std::string path_;
  std::FILE* file_ = nullptr;
  std::string buf_;
  size_t start_ = 0;
  bool eof_ = false;
  int64_t size_ = 0;  // the file's size (progress)
  int64_t read_ = 0;  // bytes read from it so far
  std::vector<std::string> columns_;
  int64_t next_ordinal_ = 0;
};

}  // namespace

Result<bool> ParseCsvRecord(std::string_view text, size_t* pos, std::vector<Cell>* fields) {
  std::string error;
  switch (ParseRecord(text, pos, fields, /*final=*/true, &error)) {
    case Parse::kRecord:
      return true;
    case Parse::kEnd:
      return false;
    case Parse::kNeedMore:  // not with final
    case Parse::kError:
      break;
  }
  return Status::InvalidArgument("malformed CSV record: " + error);
}

Result<std::unique_ptr<RowSource>> OpenCsvSource(const std::string& path) {
  auto s = std::make_unique<CsvSource>(path);
  INFERD_RETURN_IF_ERROR(s->Open());
  return std::unique_ptr<RowSource>(std::move(s));
}

}  // namespace inferd::jobs
