#include "tracing/access_log.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/json_text.h"
#include "llm/unicode_tables.h"

namespace inferd::tracing {
namespace {

// Strings from clients (paths, model names, ids) may hold any bytes: invalid UTF-8 is replaced, so that each line
// is valid JSON.
void LogEscaped(std::string* out, std::string_view s) { json::AppendEscaped(out, llm::SanitizeUtf8(s)); }

void LogField(std::string* out, const char* name, std::string_view value) {
  out->append(",\"").append(name).append("\":");
  LogEscaped(out, value);
}

std::string IsoTime(int64_t unix_ns) {
  const time_t secs = static_cast<time_t>(unix_ns / 1'000'000'000);
  const int64_t micros = (unix_ns % 1'000'000'000) / 1000;
  tm t{};
  gmtime_r(&secs, &t);
  char buf[64];
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
           t.tm_hour, t.tm_min, t.tm_sec, static_cast<long long>(micros));
  return buf;
}

}  // namespace

std::string FormatAccessRecord(const AccessRecord& r) {
  std::string out = "{\"time\":";
  out.reserve(256);
  LogEscaped(&out, IsoTime(r.unix_ns));
  LogField(&out, "client", r.client);
  LogField(&out, "protocol", r.protocol);
  LogField(&out, "method", r.method);
  LogField(&out, "target", r.target);
  if (!r.model.empty()) LogField(&out, "model", r.model);
  if (!r.version.empty()) LogField(&out, "version", r.version);
  out.append(",\"status\":").append(std::to_string(r.status));
  // Clamped to what a request can take (a day), so the number always prints whole.
  char latency[48];
  const double ms = std::isfinite(r.latency_ms) ? std::clamp(r.latency_ms, 0.0, 86'400'000.0) : 0.0;
  snprintf(latency, sizeof latency, "%.3f", ms);
  out.append(",\"latency_ms\":").append(latency);
  out.append(",\"bytes_in\":").append(std::to_string(r.bytes_in));
  out.append(",\"bytes_out\":").append(std::to_string(r.bytes_out));
  if (!r.trace_id.empty()) LogField(&out, "trace_id", r.trace_id);
  if (!r.request_id.empty()) LogField(&out, "request_id", r.request_id);
  out.push_back('}');
  return out;
}

Result<std::unique_ptr<AccessLog>> AccessLog::Open(const AccessLogOptions& options) {
  if (!(options.sample_rate >= 0.0 && options.sample_rate <= 1.0)) {
    return Status::InvalidArgument("--access-log-sample-rate is a share from 0 to 1");
  }
  if (options.path == "-") return std::unique_ptr<AccessLog>(new AccessLog(options, stdout, false));
  FILE* f = std::fopen(options.path.c_str(), "ae");
  if (f == nullptr) {
    return Status::InvalidArgument("--access-log: cannot open " + options.path + ": " + std::strerror(errno));
  }
  return std::unique_ptr<AccessLog>(new AccessLog(options, f, true));
}

AccessLog::AccessLog(AccessLogOptions options, FILE* file, bool owned)
    : options_(std::move(options)), file_(file), owned_(owned) {
  thread_ = std::thread([this] { Loop(); });
}

AccessLog::~AccessLog() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
  if (owned_) std::fclose(file_);
}

bool AccessLog::Wanted(bool failed) {
  if (failed || options_.sample_rate >= 1.0) return true;
  if (options_.sample_rate <= 0.0) return false;
  // Every k-th request, k = 1/rate: deterministic and cheap.
  const uint64_t every = static_cast<uint64_t>(std::llround(1.0 / options_.sample_rate));
  return seen_.fetch_add(1, std::memory_order_relaxed) % std::max<uint64_t>(every, 1) == 0;
}

void AccessLog::Write(const AccessRecord& r) {
  std::string line = FormatAccessRecord(r);
  line.push_back('\n');
  {
    MutexLock l(&mu_);
    if (queue_.size() >= options_.max_queue_lines) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.push_back(std::move(line));
  }
  cv_.NotifyOne();
}

bool AccessLog::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock l(&mu_);
  while (!queue_.empty() || writing_) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    idle_cv_.WaitForReal(&mu_, left);
  }
  return true;
}

void AccessLog::Loop() {
  MutexLock l(&mu_);
  for (;;) {
    while (queue_.empty() && !stopping_) cv_.Wait(&mu_);
    if (queue_.empty() && stopping_) return;
    std::deque<std::string> lines;
    lines.swap(queue_);
    writing_ = true;
    l.Unlock();
    for (const auto& line : lines) std::fwrite(line.data(), 1, line.size(), file_);
    std::fflush(file_);
    written_.fetch_add(lines.size(), std::memory_order_relaxed);
    l.Lock();
    writing_ = false;
    idle_cv_.NotifyAll();
  }
}

}  // namespace inferd::tracing
