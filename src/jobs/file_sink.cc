#include <fcntl.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jobs/prediction_sink.h"

namespace inferd::jobs {
namespace {

// The shortest text that reads back as `v`.
std::string Number(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string CsvValue(const Cell& c) {
  if (const auto* d = std::get_if<double>(&c)) return Number(*d);
  return CsvField(CellText(c));
}

// Appends to a file with explicit lengths (so a resume can cut it back).
class AppendFile {
 public:
  ~AppendFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Open(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return Status::InvalidArgument("cannot open sink file '" + path + "' for writing");
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Status::Internal("cannot stat '" + path + "'");
    size_ = st.st_size;
    return Status::OK();
  }
  Status Truncate(int64_t size) {
    if (::ftruncate(fd_, size) != 0) return Status::Internal("cannot truncate '" + path_ + "'");
    size_ = size;
    return Status::OK();
  }
  Status Append(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done, size_ + static_cast<int64_t>(done));
      if (n < 0) return Status::Internal("writing '" + path_ + "' failed");
      done += static_cast<size_t>(n);
    }
    size_ += static_cast<int64_t>(data.size());
    return Status::OK();
  }
  Status Sync() {
    if (::fdatasync(fd_) != 0) return Status::Internal("syncing '" + path_ + "' failed");
    return Status::OK();
  }
  int64_t size() const { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

class FileSink final : public PredictionSink {
 public:
  FileSink(std::string path, bool csv) : path_(std::move(path)), csv_(csv) {}

  Status Open() {
    INFERD_RETURN_IF_ERROR(data_.Open(path_));
    return errors_.Open(path_ + ".errors.jsonl");
  }

  Status Prepare(const SinkSchema& schema) override {
    schema_ = schema;
    return Status::OK();
  }

  Result<std::optional<Checkpoint>> ReadCheckpoint(const std::string& job_id) override {
    std::FILE* f = std::fopen((path_ + ".checkpoint").c_str(), "rb");
    if (!f) return std::optional<Checkpoint>();
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (1 << 16)) text.append(buf, n);
    std::fclose(f);
    rapidjson::Document doc;
    doc.Parse(text.data(), text.size());
    auto i64 = [&](const char* k) -> int64_t {
      auto it = doc.FindMember(k);
      return it != doc.MemberEnd() && it->value.IsInt64() ? it->value.GetInt64() : -1;
    };
    if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("job_id") || !doc["job_id"].IsString())
      return Status::FailedPrecondition("the checkpoint beside '" + path_ + "' is unreadable; remove it to start over");
    if (job_id != doc["job_id"].GetString()) return std::optional<Checkpoint>();
    Checkpoint c;
    c.rows_done = i64("rows_done");
    c.rows_written = i64("rows_written");
    c.row_errors = i64("row_errors");
    c.finished = i64("finished") == 1;
    const int64_t bytes = i64("bytes"), error_bytes = i64("error_bytes");
    if (c.rows_done < 0 || c.rows_written < 0 || c.row_errors < 0 || bytes < 0 || error_bytes < 0 ||
        bytes > data_.size() || error_bytes > errors_.size())
      return Status::FailedPrecondition("the checkpoint beside '" + path_ +
                                        "' does not match the file; remove it to start over");
    if (!c.finished) {  // resuming: what was written after the checkpoint goes
      INFERD_RETURN_IF_ERROR(data_.Truncate(bytes));
      INFERD_RETURN_IF_ERROR(errors_.Truncate(error_bytes));
    }
    return std::optional<Checkpoint>(c);
  }

  Status Reset(const std::string& job_id) override {
    (void)job_id;
    INFERD_RETURN_IF_ERROR(data_.Truncate(0));
    INFERD_RETURN_IF_ERROR(errors_.Truncate(0));
    std::remove((path_ + ".checkpoint").c_str());
    return Status::OK();
  }

  Status Commit(const std::string& job_id, const std::string& model, const std::vector<ResultRow>& rows,
                const std::vector<RowError>& errors, const Checkpoint& cp) override {
    std::string out;
    const std::string now = Number(UnixNow());
    if (csv_ && data_.size() == 0) {
      out += CsvField(schema_.key_column);
      out += ",model_name,model_version,predicted_at";
      for (const auto& v : schema_.value_columns) {
        out += ',';
        out += CsvField(v);
      }
      out += '\n';
    }
    for (const auto& r : rows) {
      if (csv_) {
        for (const std::string& f : {CsvField(r.key), CsvField(model), CsvField(r.model_version)}) {
          out += f;
          out += ',';
        }
        out += now;
        for (size_t i = 0; i < schema_.value_columns.size(); ++i) {
          out += ',';
          if (i < r.values.size()) out += CsvValue(r.values[i]);
        }
      } else {
        out += '{';
        out += JsonString(schema_.key_column);
        out += ':';
        out += JsonString(r.key);
        out += ",\"model_name\":";
        out += JsonString(model);
        out += ",\"model_version\":";
        out += JsonString(r.model_version);
        out += ",\"predicted_at\":";
        out += now;
        for (size_t i = 0; i < schema_.value_columns.size(); ++i) {
          out += ',';
          out += JsonString(schema_.value_columns[i]);
          out += ':';
          out += i < r.values.size() ? CellJson(r.values[i]) : std::string("null");
        }
        out += '}';
      }
      out += "\n";
    }
    std::string err;
    for (const auto& e : errors) {
      err += "{\"job_id\":" + JsonString(job_id) + ",\"row_ordinal\":" + std::to_string(e.ordinal) +
             ",\"key\":" + JsonString(e.key) + ",\"message\":" + JsonString(e.message) + "}\n";
    }
    INFERD_RETURN_IF_ERROR(data_.Append(out));
    INFERD_RETURN_IF_ERROR(errors_.Append(err));
    INFERD_RETURN_IF_ERROR(data_.Sync());
    INFERD_RETURN_IF_ERROR(errors_.Sync());
    // The checkpoint names the lengths; written to a temporary file and
    // renamed over the old one, so it is always one or the other.
    const std::string doc =
        "{\"job_id\":" + JsonString(job_id) + ",\"rows_done\":" + std::to_string(cp.rows_done) +
        ",\"rows_written\":" + std::to_string(cp.rows_written) + ",\"row_errors\":" + std::to_string(cp.row_errors) +
        ",\"finished\":" + (cp.finished ? "1" : "0") + ",\"bytes\":" + std::to_string(data_.size()) +
        ",\"error_bytes\":" + std::to_string(errors_.size()) + "}\n";
    const std::string tmp = path_ + ".checkpoint.tmp";
    AppendFile f;
    std::remove(tmp.c_str());
    INFERD_RETURN_IF_ERROR(f.Open(tmp));
    INFERD_RETURN_IF_ERROR(f.Append(doc));
    INFERD_RETURN_IF_ERROR(f.Sync());
    if (std::rename(tmp.c_str(), (path_ + ".checkpoint").c_str()) != 0)
      return Status::Internal("cannot write the checkpoint beside '" + path_ + "'");
    return Status::OK();
  }

 private:
  const std::string path_;
  const bool csv_;
  SinkSchema schema_;
  AppendFile data_, errors_;
};

}  // namespace

double UnixNow() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

Result<std::unique_ptr<PredictionSink>> OpenJsonlSink(const std::string& path) {
  auto s = std::make_unique<FileSink>(path, /*csv=*/false);
  INFERD_RETURN_IF_ERROR(s->Open());
  return std::unique_ptr<PredictionSink>(std::move(s));
}

Result<std::unique_ptr<PredictionSink>> OpenCsvSink(const std::string& path) {
  auto s = std::make_unique<FileSink>(path, /*csv=*/true);
  INFERD_RETURN_IF_ERROR(s->Open());
  return std::unique_ptr<PredictionSink>(std::move(s));
}

}  // namespace inferd::jobs
