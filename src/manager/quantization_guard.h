// The accuracy guard of models quantised at load time (docs/quantization.md):
// a version whose config asks for `quantization: "int8"` is loaded twice --
// as asked and with `quantization: "none"` -- both run the same inputs (the
// version's calibration file, else the config's model_warmup samples), and
// the int8 one serves only when its answers stay within the tolerance:
//
//   classifier outputs (a label_filename, or named in
//   compare.classifier_outputs): the top-1 class of every row agrees on at
//   least quantization.min_top1 of the rows (default 0.99);
//   other floating-point outputs: the relative error ||q - f|| / ||f|| over
//   all samples is at most quantization.max_relative_error (default 0.05);
//   integer and boolean outputs: at least min_top1 of the values are equal.
//
// Otherwise the FP32 one serves and the report says why. Either way the
// report holds the sizes, the measured errors and the speed-up (int8 and FP32
// timed on the same inputs, interleaved) for the log, the index and
// /v2/models/{m}/stats.
//
// Parameters: quantization ("int8" | "none"), quantization.guard ("on" |
// "off": off serves int8 unchecked), quantization.min_top1,
// quantization.max_relative_error, quantization.calibration (a file name in
// the version folder; default calibration.json, used when present).
//
// Thread-safety: pure functions; CheckQuantized runs the instances on a
// thread of its own (each instance's OnWorkerThreadStart first).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/compare_spec.h"
#include "core/model_spec.h"
#include "core/status.h"
#include "manager/warmup.h"
#include "repository/filesystem.h"

namespace inferd {

struct QuantizationOptions {
  std::string precision;  // "int8"; "" = none
  bool guard = true;
  double min_top1 = 0.99;
  double max_relative_error = 0.05;
  std::string calibration = "calibration.json";
  bool calibration_named = false;  // the parameter was set: the file must exist
};

// INVALID_ARGUMENT naming the parameter for an unknown `quantization.*` key
// or a value out of range.
Result<QuantizationOptions> ParseQuantizationOptions(const std::map<std::string, std::string>& parameters);

// What a version's quantisation came to (all zero when none was asked for).
struct QuantizationReport {
  std::string requested;       // "int8"; "" when not asked for
  std::string serving;         // "int8" or "fp32"
  std::string reason;          // one line: why this precision serves, with the numbers
  QuantizationInfo info;       // what the backend replaced
  std::string data;            // what the guard ran: "calibration.json (64 rows)", "model_warmup (2 samples)"
  int64_t rows = 0;            // rows (batch rows, or samples) compared
  double top1_agreement = -1;  // worst classifier output; -1: none judged
  double relative_error = -1;  // worst floating-point output; -1: none judged
  double speedup = 0;          // FP32 time / int8 time on the data; 0: not measured
  bool requested_int8() const { return !requested.empty(); }
};

// Runs `samples` on both and judges. `int8` and `fp32` are instances of the
// two loads of one spec (neither used by anyone else meanwhile).
struct GuardResult {
  bool passed = false;
  std::string why;  // the failed criterion, with its numbers; or what passed
  int64_t rows = 0;
  double top1_agreement = -1, relative_error = -1, speedup = 0;
};
Result<GuardResult> CheckQuantized(ModelInstance& int8, ModelInstance& fp32, const std::vector<WarmupSample>& samples,
                                   const ModelSpec& spec, const CompareSpec& compare,
                                   const QuantizationOptions& options);

// Loads `spec` through `backend` (Backend::LoadWithContext on
// `local_version_dir`) and, when the spec asks for int8 and the backend
// guards_quantization() (backend.h, contract 14), runs the guard: the
// model returned is the one that serves, *report says which and why. The
// calibration file is read from `version_dir` in `fs`, warm-up files from
// `model_dir`. Errors are the load's own (a bad calibration file, or a
// model that fails on the data, fails the load: the config is wrong).
Result<std::unique_ptr<LoadedModel>> LoadWithQuantizationGuard(
    Backend& backend, const ModelSpec& spec, const std::string& local_version_dir, const LoadContext& context,
    const Filesystem& fs, const std::string& model_dir, const std::string& version_dir, QuantizationReport* report);

// "int8: 12 weights 4.0 MiB -> 1.0 MiB, top-1 agreement 100.0% on 64 rows,
// 2.1x faster" / "FP32 serves: int8's relative error 0.081 > 0.05 on ...".
std::string Describe(const QuantizationReport& r);

}  // namespace inferd
