#include "manager/quantization_guard.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>

#include "core/byte_size.h"
#include "core/number_text.h"
#include "manager/calibration_data.h"

namespace inferd {
namespace {

// Timing the two models on the data: at most this many rounds, stopping
// after the first once both have run this long in all.
constexpr int kTimingRounds = 5;
constexpr auto kTimingBudget = std::chrono::milliseconds(1500);

// "0.0123", "1.5", "0.99": four significant digits.
std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

Result<double> Fraction(const std::string& key, const std::string& value, double lo, double hi) {
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
  if (!ParseNumber(value, &is_int, &i, &d))
    return Status::InvalidArgument("parameters." + key + ": '" + value + "' is not a number");
  const double v = is_int ? static_cast<double>(i) : d;
  if (!std::isfinite(v) || v < lo || v > hi) {
    return Status::InvalidArgument("parameters." + key + ": must be between " + FormatNumber(lo) + " and " +
                                   FormatNumber(hi) + ", not '" + value + "'");
  }
  return v;
}

// The tensor's values as doubles; false for BYTES.
bool Values(const Tensor& t, std::vector<double>* out) {
  const int64_t n = t.element_count();
  if (n < 0 || t.dtype == DataType::kBytes) return false;
  out->resize(static_cast<size_t>(n));
  const std::byte* p = t.data;
  for (int64_t i = 0; i < n; ++i) {
    double& v = (*out)[static_cast<size_t>(i)];
    auto read = [&](auto x) {
      std::memcpy(&x, p + i * static_cast<int64_t>(sizeof(x)), sizeof(x));
      v = static_cast<double>(x);
    };
    switch (t.dtype) {
      case DataType::kFp32:
        read(float{});
        break;
      case DataType::kFp64:
        read(double{});
        break;
      case DataType::kInt8:
        read(int8_t{});
        break;
      case DataType::kInt16:
        read(int16_t{});
        break;
      case DataType::kInt32:
        read(int32_t{});
        break;
      case DataType::kInt64:
        read(int64_t{});
        break;
      case DataType::kUint8:
        read(uint8_t{});
        break;
      case DataType::kUint16:
        read(uint16_t{});
        break;
      case DataType::kUint32:
        read(uint32_t{});
        break;
      case DataType::kUint64:
        read(uint64_t{});
        break;
      case DataType::kBool:
        read(uint8_t{});
        break;
      case DataType::kFp16: {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        v = HalfToFloat(h);  // core/datatype.h
        break;
      }
      case DataType::kBf16: {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        v = Bf16ToFloat(h);
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

bool IsFloat(DataType d) {
  return d == DataType::kFp32 || d == DataType::kFp64 || d == DataType::kFp16 || d == DataType::kBf16;
}

// One output's agreement over all samples.
struct Tally {
  std::string name;
  enum Kind { kTop1, kRelative, kEqual } kind = kRelative;
  double err2 = 0, norm2 = 0;     // kRelative
  int64_t agreed = 0, total = 0;  // kTop1 (rows), kEqual (values)
  double Value() const {
    if (kind == kRelative) return norm2 > 0 ? std::sqrt(err2 / norm2) : (err2 > 0 ? INFINITY : 0.0);
    return total > 0 ? static_cast<double>(agreed) / static_cast<double>(total) : 1.0;
  }
};

Status Compare(const Tensor& q, const Tensor& f, Tally* t, bool classifier) {
  if (q.dtype != f.dtype || q.shape != f.shape) {
    return Status::FailedPrecondition("output '" + t->name + "' differs in shape or datatype between int8 (" +
                                      ShapeToString(q.shape) + ") and FP32 (" + ShapeToString(f.shape) + ")");
  }
  std::vector<double> a, b;
  if (!Values(q, &a) || !Values(f, &b)) return Status::OK();  // BYTES: nothing to judge
  const int64_t last = f.shape.empty() ? 1 : f.shape.back();
  if (!IsFloat(f.dtype)) {
    t->kind = Tally::kEqual;
    for (size_t i = 0; i < a.size(); ++i) t->agreed += a[i] == b[i];
    t->total += static_cast<int64_t>(a.size());
  } else if (classifier && last >= 2) {
    t->kind = Tally::kTop1;
    for (size_t r = 0; r + static_cast<size_t>(last) <= a.size(); r += static_cast<size_t>(last)) {
      const auto end = static_cast<std::ptrdiff_t>(r + static_cast<size_t>(last));
      const auto qa = std::max_element(a.begin() + static_cast<std::ptrdiff_t>(r), a.begin() + end) - a.begin();
      const auto fb = std::max_element(b.begin() + static_cast<std::ptrdiff_t>(r), b.begin() + end) - b.begin();
      t->agreed += qa == fb;
      ++t->total;
    }
  } else {
    t->kind = Tally::kRelative;
    for (size_t i = 0; i < a.size(); ++i) {
      t->err2 += (a[i] - b[i]) * (a[i] - b[i]);
      t->norm2 += b[i] * b[i];
    }
  }
  return Status::OK();
}

std::string Percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", f * 100.0);
  return buf;
}

}  // namespace

Result<QuantizationOptions> ParseQuantizationOptions(const std::map<std::string, std::string>& parameters) {
  QuantizationOptions o;
  for (const auto& [key, value] : parameters) {
    if (key == "quantization") {
      if (value != "int8" && value != "none" && !value.empty())
        return Status::InvalidArgument("parameters.quantization: \"int8\" or \"none\", not '" + value + "'");
      o.precision = value == "int8" ? "int8" : "";
    } else if (key.rfind("quantization.", 0) != 0) {
      continue;
    } else if (key == "quantization.guard") {
      if (value != "on" && value != "off")
        return Status::InvalidArgument("parameters.quantization.guard: \"on\" or \"off\", not '" + value + "'");
      o.guard = value == "on";
    } else if (key == "quantization.min_top1") {
      INFERD_ASSIGN_OR_RETURN(o.min_top1, Fraction(key, value, 0, 1));
    } else if (key == "quantization.max_relative_error") {
      INFERD_ASSIGN_OR_RETURN(o.max_relative_error, Fraction(key, value, 0, 1e6));
    } else if (key == "quantization.calibration") {
      if (value.empty() || value.find('/') != std::string::npos || value == "." || value == "..")
        return Status::InvalidArgument("parameters.quantization.calibration: a file name in the version folder, not '" +
                                       value + "'");
      o.calibration = value;
      o.calibration_named = true;
    } else {
      return Status::InvalidArgument(
          "parameters." + key +
          ": unknown (quantization.guard, quantization.min_top1, quantization.max_relative_error, "
          "quantization.calibration)");
    }
  }
  return o;
}

Result<GuardResult> CheckQuantized(ModelInstance& int8, ModelInstance& fp32, const std::vector<WarmupSample>& samples,
                                   const ModelSpec& spec, const CompareSpec& compare,
                                   const QuantizationOptions& options) {
  GuardResult r;
  std::vector<Tally> tallies;
  Status status;
  std::chrono::nanoseconds int8_time{0}, fp32_time{0};
  // On a thread of its own, as the instances' worker threads run them (per-thread settings).
  std::thread runner([&] {
    int8.OnWorkerThreadStart();
    fp32.OnWorkerThreadStart();
    for (const WarmupSample& s : samples) {
      auto a = int8.Execute(s.inputs);
      if (!a.ok()) {
        status = a.status().WithPrefix("int8 model on " + s.name);
        return;
      }
      auto b = fp32.Execute(s.inputs);
      if (!b.ok()) {
        status = b.status().WithPrefix("FP32 model on " + s.name);
        return;
      }
      if (a->size() != b->size()) {
        status = Status::FailedPrecondition("the int8 and FP32 models answer different outputs");
        return;
      }
      tallies.resize(a->size());
      for (size_t i = 0; i < a->size(); ++i) {
        Tally& t = tallies[i];
        t.name = i < spec.outputs.size() ? spec.outputs[i].name : (*b)[i].name;
        status = Compare((*a)[i], (*b)[i], &t, compare.classifier_outputs.count(t.name) > 0);
        if (!status.ok()) return;
      }
      r.rows += spec.max_batch_size > 0 && !s.inputs.empty() && !s.inputs[0].shape.empty() ? s.inputs[0].shape[0] : 1;
    }
    // Timing: interleaved rounds (each model's best per sample), after the comparison warmed both.
    std::vector<std::chrono::nanoseconds> best8(samples.size(), std::chrono::nanoseconds::max()),
        best32(samples.size(), std::chrono::nanoseconds::max());
    const auto start = std::chrono::steady_clock::now();
    for (int round = 0; round < kTimingRounds; ++round) {
      for (size_t i = 0; i < samples.size(); ++i) {
        for (int which = 0; which < 2; ++which) {
          const bool first8 = (round + which) % 2 == 0;
          ModelInstance& inst = first8 ? int8 : fp32;
          const auto t0 = std::chrono::steady_clock::now();
          if (!inst.Execute(samples[i].inputs).ok()) return;
          const auto dt = std::chrono::steady_clock::now() - t0;
          auto& best = first8 ? best8[i] : best32[i];
          best = std::min(best, std::chrono::duration_cast<std::chrono::nanoseconds>(dt));
        }
      }
      if (std::chrono::steady_clock::now() - start > kTimingBudget) break;
    }
    for (size_t i = 0; i < samples.size(); ++i) {
      int8_time += best8[i];
      fp32_time += best32[i];
    }
  });
  runner.join();
  INFERD_RETURN_IF_ERROR(status);
  if (int8_time.count() > 0)
    r.speedup = static_cast<double>(fp32_time.count()) / static_cast<double>(int8_time.count());
  r.passed = true;
  std::string failed, passed;
  for (const Tally& t : tallies) {
    const double v = t.Value();
    if (t.kind == Tally::kRelative) {
      r.relative_error = std::max(r.relative_error, v);
      const std::string what = "output '" + t.name + "' relative error " + FormatNumber(v);
      if (!(v <= options.max_relative_error)) {
        failed += (failed.empty() ? "" : "; ") + what + " > " + FormatNumber(options.max_relative_error);
      } else {
        passed += (passed.empty() ? "" : ", ") + what;
      }
    } else {
      r.top1_agreement = r.top1_agreement < 0 ? v : std::min(r.top1_agreement, v);
      const std::string what = "output '" + t.name + "' " + (t.kind == Tally::kTop1 ? "top-1 agreement " : "equal ") +
                               Percent(v) + " of " + std::to_string(t.total);
      if (v < options.min_top1) {
        failed += (failed.empty() ? "" : "; ") + what + " < " + Percent(options.min_top1);
      } else {
        passed += (passed.empty() ? "" : ", ") + what;
      }
    }
  }
  r.passed = failed.empty();
  r.why = r.passed ? passed : failed;
  return r;
}

namespace {

// The guard's data: the calibration file when there is one, else the warm-up samples.
Result<std::vector<WarmupSample>> GuardData(const ModelSpec& spec, const QuantizationOptions& o, const Filesystem& fs,
                                            const std::string& model_dir, const std::string& version_dir,
                                            std::string* what) {
  const std::string path = JoinPath(version_dir, o.calibration);
  if (fs.IsFile(path)) {
    for (const auto& f : fs.ListFilesRecursive(version_dir)) {  // the size first: never read a huge file whole
      if (f.path == path && f.bytes > kMaxCalibrationBytes) {
        return Status::InvalidArgument("parameters.quantization.calibration: " + o.calibration + " has " +
                                       std::to_string(f.bytes) + " bytes, more than the " +
                                       std::to_string(kMaxCalibrationBytes >> 20) + " MiB a calibration file may hold");
      }
    }
    INFERD_ASSIGN_OR_RETURN(std::string text, fs.ReadFile(path));
    auto samples = ParseCalibrationData(text, spec);
    if (!samples.ok()) return samples.status().WithPrefix("parameters.quantization.calibration: " + o.calibration);
    *what = o.calibration;
    return samples;
  }
  if (o.calibration_named) {
    return Status::InvalidArgument("parameters.quantization.calibration: no file " + o.calibration +
                                   " in the version folder");
  }
  *what = "model_warmup";
  return BuildWarmupSamples(spec, fs, model_dir);
}

}  // namespace

Result<std::unique_ptr<LoadedModel>> LoadWithQuantizationGuard(
    Backend& backend, const ModelSpec& spec, const std::string& local_version_dir, const LoadContext& context,
    const Filesystem& fs, const std::string& model_dir, const std::string& version_dir, QuantizationReport* report) {
  *report = QuantizationReport();
  if (!backend.guards_quantization()) return backend.LoadWithContext(spec, local_version_dir, context);
  INFERD_ASSIGN_OR_RETURN(QuantizationOptions o, ParseQuantizationOptions(spec.parameters));
  if (o.precision.empty()) return backend.LoadWithContext(spec, local_version_dir, context);
  report->requested = o.precision;
  report->serving = "fp32";
  ModelSpec fp32_spec = spec;
  fp32_spec.parameters["quantization"] = "none";
  std::vector<WarmupSample> samples;
  if (o.guard) {
    INFERD_ASSIGN_OR_RETURN(samples, GuardData(spec, o, fs, model_dir, version_dir, &report->data));
    if (samples.empty()) {
      report->reason = "no data to check int8 against (add model_warmup or " + o.calibration +
                       ", or set quantization.guard \"off\")";
      return backend.LoadWithContext(fp32_spec, local_version_dir, context);
    }
  }
  INFERD_ASSIGN_OR_RETURN(std::unique_ptr<LoadedModel> int8, backend.LoadWithContext(spec, local_version_dir, context));
  report->info = int8->quantization();
  if (report->info.layers == 0) {
    report->reason = "backend '" + std::string(backend.name()) + "' quantised no layer of this model";
    return int8;
  }
  if (!o.guard) {
    report->serving = "int8";
    report->reason = "not checked (quantization.guard off)";
    return int8;
  }
  INFERD_ASSIGN_OR_RETURN(std::unique_ptr<LoadedModel> fp32,
                          backend.LoadWithContext(fp32_spec, local_version_dir, context));
  INFERD_ASSIGN_OR_RETURN(CompareSpec compare, ParseCompareSpec(spec.parameters, spec));
  GuardResult g;
  {
    INFERD_ASSIGN_OR_RETURN(std::unique_ptr<ModelInstance> a, int8->CreateInstance(0));
    INFERD_ASSIGN_OR_RETURN(std::unique_ptr<ModelInstance> b, fp32->CreateInstance(0));
    if (a->takes_requests() || b->takes_requests()) {
      report->reason = "the guard cannot run this backend's models";
      return fp32;
    }
    INFERD_ASSIGN_OR_RETURN(g, CheckQuantized(*a, *b, samples, spec, compare, o));
  }
  report->rows = g.rows;
  report->top1_agreement = g.top1_agreement;
  report->relative_error = g.relative_error;
  report->speedup = g.speedup;
  const std::string on = " on " + std::to_string(g.rows) + " rows of " + report->data;
  if (!g.passed) {
    report->reason = "int8 rejected by the accuracy guard: " + g.why + on;
    return fp32;
  }
  report->serving = "int8";
  report->reason = g.why + on;
  return int8;
}

std::string Describe(const QuantizationReport& r) {
  if (!r.requested_int8()) return "";
  std::string s = r.serving == "int8" ? "int8" : "FP32 serves (int8 asked for)";
  if (r.info.layers > 0) {
    s += ": " + std::to_string(r.info.layers) + " weights " + FormatBytes(static_cast<uint64_t>(r.info.float_bytes)) +
         " -> " + FormatBytes(static_cast<uint64_t>(r.info.quantized_bytes));
  }
  if (!r.reason.empty()) s += (r.info.layers > 0 ? "; " : ": ") + r.reason;
  if (r.speedup > 0) s += "; int8 " + FormatNumber(std::round(r.speedup * 100) / 100) + "x FP32's speed";
  return s;
}

}  // namespace inferd
