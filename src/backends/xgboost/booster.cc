#include "backends/xgboost/booster.h"

#include <dlfcn.h>
#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "backends/xgboost/format_check.h"
#include "backends/xgboost/model_check.h"

namespace inferd::xgboost {
namespace {

Status LastError(std::string_view what, StatusCode code = StatusCode::kInvalidArgument) {
  const char* e = XGBGetLastError();
  std::string msg = e ? e : "unknown error";
  // The library's messages are "[10:03:01] ./src/learner.cc:123: what\n
  // Stack trace: ..."; keep `what`.
  if (auto st = msg.find("\nStack trace:"); st != std::string::npos) msg.resize(st);
  if (!msg.empty() && msg[0] == '[') {
    if (auto pos = msg.find(": "); pos != std::string::npos) msg = msg.substr(pos + 2);
  }
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (msg.size() > 400) msg = msg.substr(0, 400) + "...";
  return Status(code, std::string(what) + ": " + msg);
}

std::string FloatJson(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

// Bounds the OpenMP threads of this thread's parallel regions while alive.
// libxgboost parses a model's trees in an OpenMP loop sized by the calling
// thread's OpenMP limit (a booster's `nthread` is applied only later), so a
// load would otherwise use every core. libgomp is loaded with libxgboost;
// its functions are looked up rather than linked (clang builds have no omp.h).
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int n) {
    set_ = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    if (!set_ || !get) return;
    old_ = get();
    set_(std::max(1, n));
  }
  ~ScopedOmpThreads() {
    if (set_ && old_ > 0) set_(old_);
  }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  void (*set_)(int) = nullptr;
  int old_ = 0;
};

thread_local std::string* log_target = nullptr;

void OnLibraryLog(const char* msg) {
  if (log_target) {
    if (!log_target->empty()) log_target->append("; ");
    log_target->append(msg);
    while (!log_target->empty() && log_target->back() == '\n') log_target->pop_back();
  } else {
    std::fprintf(stderr, "xgboost: %s\n", msg);
  }
}

}  // namespace

LogCapture::LogCapture() {
  static std::once_flag registered;
  std::call_once(registered, [] { XGBRegisterLogCallback(&OnLibraryLog); });
  log_target = &text_;
}

LogCapture::~LogCapture() { log_target = nullptr; }

std::string CompactJson(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      out.push_back(c);
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '"') in_string = true;
    out.push_back(c);
  }
  return out;
}

Result<std::unique_ptr<Booster>> Booster::FromBytes(std::string_view bytes, int threads) {
  if (bytes.empty()) return Status::InvalidArgument("the model file is empty");
  // The library is handed only bytes whose stated sizes fit (format_check.h).
  // JSON text is compacted: the library tells JSON ('{' + '"') from UBJSON
  // ('{' + a type marker) by the second byte.
  std::string compact;
  switch (DetectFormat(bytes)) {
    case ModelFormat::kJson:
      INFERD_RETURN_IF_ERROR(CheckJsonText(bytes));
      INFERD_RETURN_IF_ERROR(CheckModelJson(bytes).status());
      compact = CompactJson(bytes);
      bytes = compact;
      break;
    case ModelFormat::kUbjson: {
      INFERD_ASSIGN_OR_RETURN(std::string json, UbjsonToJson(bytes));
      INFERD_RETURN_IF_ERROR(CheckModelJson(json).status());
      break;
    }
    case ModelFormat::kLegacyBinary:
      INFERD_RETURN_IF_ERROR(CheckLegacyBinary(bytes));
      break;
  }
  BoosterHandle h = nullptr;
  if (XGBoosterCreate(nullptr, 0, &h) != 0) return LastError("cannot create an XGBoost booster");
  std::unique_ptr<Booster> b(new Booster(h));
  // In-place prediction goes through a proxy matrix; made per call, its
  // set-up reads the cgroup CPU quota from /sys (half the time of a small
  // prediction), so each booster keeps one.
  if (XGProxyDMatrixCreate(&b->proxy_) != 0) return LastError("cannot create an XGBoost proxy matrix");
  INFERD_RETURN_IF_ERROR(b->SetThreads(threads));
  ScopedOmpThreads omp(threads);
  if (XGBoosterLoadModelFromBuffer(h, bytes.data(), bytes.size()) != 0) {
    return LastError("not an XGBoost model (JSON, UBJSON or binary)");
  }
  return b;
}

Booster::~Booster() {
  if (proxy_) XGDMatrixFree(proxy_);
  XGBoosterFree(handle_);
}

Status Booster::SetThreads(int n) {
  const std::string v = std::to_string(n);
  if (XGBoosterSetParam(handle_, "nthread", v.c_str()) != 0) return LastError("cannot set nthread");
  return Status::OK();
}

Result<int64_t> Booster::NumFeatures() const {
  bst_ulong n = 0;
  if (XGBoosterGetNumFeature(handle_, &n) != 0) return LastError("cannot read the number of features");
  return static_cast<int64_t>(n);
}

Result<int> Booster::BoostedRounds() const {
  int n = 0;
  if (XGBoosterBoostedRounds(handle_, &n) != 0) return LastError("cannot read the number of boosted rounds");
  return n;
}

Result<std::string> Booster::SaveJson() const {
  bst_ulong len = 0;
  const char* data = nullptr;
  if (XGBoosterSaveModelToBuffer(handle_, R"({"format": "json"})", &len, &data) != 0) {
    return LastError("cannot serialise the model");
  }
  return std::string(data, len);
}

Status Booster::Predict(const float* data, int64_t rows, int64_t cols, const PredictOptions& options,
                        std::span<const float>* out, std::vector<int64_t>* shape) {
  char array[256];
  std::snprintf(array, sizeof array, R"({"data": [%llu, true], "shape": [%lld, %lld], "typestr": "<f4", "version": 3})",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(data)), static_cast<long long>(rows),
                static_cast<long long>(cols));
  const std::string config =
      R"({"type": )" + std::to_string(static_cast<int>(options.kind)) + R"(, "training": false, "iteration_begin": )" +
      std::to_string(options.iteration_begin) + R"(, "iteration_end": )" + std::to_string(options.iteration_end) +
      R"(, "strict_shape": false, "cache_id": 0, "missing": )" + FloatJson(options.missing) + "}";
  const bst_ulong* out_shape = nullptr;
  bst_ulong out_dim = 0;
  const float* result = nullptr;
  if (options.via_dmatrix) {
    DMatrixHandle m = nullptr;
    if (XGDMatrixCreateFromMat(data, static_cast<bst_ulong>(rows), static_cast<bst_ulong>(cols), options.missing, &m) !=
        0) {
      return LastError("cannot prepare the rows", StatusCode::kInternal);
    }
    const int rc = XGBoosterPredictFromDMatrix(handle_, m, config.c_str(), &out_shape, &out_dim, &result);
    XGDMatrixFree(m);
    if (rc != 0) return LastError("prediction failed", StatusCode::kInternal);
  } else if (XGBoosterPredictFromDense(handle_, array, config.c_str(), proxy_, &out_shape, &out_dim, &result) != 0) {
    return LastError("prediction failed", StatusCode::kInternal);
  }
  size_t n = 1;
  shape->clear();
  for (bst_ulong i = 0; i < out_dim; ++i) {
    shape->push_back(static_cast<int64_t>(out_shape[i]));
    n *= static_cast<size_t>(out_shape[i]);
  }
  *out = std::span<const float>(result, n);
  return Status::OK();
}

}  // namespace inferd::xgboost
