// What users send the jobs API and what a job reads: job specs (JSON), the
// operator's jobs config, and CSV records. A parsed spec must write back
// and re-parse to the same JSON; the CSV parser must always advance. Also
// what the server reads back from stores: a prediction table's cell decoded
// into output tensors (hybrid serving), Redis values assembled into a
// feature input (online features).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "features/feature_vector.h"
#include "jobs/job_spec.h"
#include "jobs/jobs_config.h"
#include "jobs/row_source.h"
#include "jobs/stored_outputs.h"

namespace {

// A batched model with an FP32 [3] output and a BYTES [2] output.
const inferd::jobs::StoredOutputs& Stored() {
  static const inferd::jobs::StoredOutputs* stored = [] {
    inferd::ModelSpec m;
    m.name = "m";
    m.max_batch_size = 4;
    m.outputs.push_back(inferd::TensorSpec{"y", inferd::DataType::kFp32, {3}});
    m.outputs.push_back(inferd::TensorSpec{"labels", inferd::DataType::kBytes, {2}});
    auto s = inferd::jobs::StoredOutputs::Make(m, {"y", "labels"});
    if (!s.ok()) std::abort();
    return new inferd::jobs::StoredOutputs(std::move(*s));
  }();
  return *stored;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto s = inferd::jobs::ParseJobSpec(text); s.ok()) {
    const std::string json = inferd::jobs::ToJson(*s);
    auto again = inferd::jobs::ParseJobSpec(json);
    if (!again.ok() || inferd::jobs::ToJson(*again) != json) std::abort();
  }
  (void)inferd::jobs::ParseJobsConfig(text);
  size_t pos = 0;
  std::vector<inferd::jobs::Cell> fields;
  for (int records = 0; pos < text.size(); ++records) {
    const size_t before = pos;
    auto r = inferd::jobs::ParseCsvRecord(text, &pos, &fields);
    if (r.ok() && !*r) break;
    if (r.ok() && pos <= before) std::abort();  // a record always consumes input
    if (!r.ok() && pos <= before) break;        // an error at the end stops
    if (records > 1 << 20) std::abort();
  }
  // The text as both stored cells (JSON or plain text), and as Redis values split at '\n'.
  const size_t cut = text.find('\n');
  const std::string first(text.substr(0, cut)), rest(cut == text.npos ? "" : text.substr(cut + 1));
  auto tensors = Stored().ToTensors({first, inferd::jobs::JsonText{rest}});
  if (tensors.ok() && ((*tensors)[0].byte_size != 12 || (*tensors)[0].shape != inferd::Shape{1, 3})) std::abort();
  inferd::FeatureSpec fs;
  fs.input = "x";
  fs.names = {"a", "b", "c"};
  fs.defaults = {std::nullopt, 0.0, std::nullopt};
  inferd::redis::FieldValues values;
  for (size_t start = 0; values.size() < 3;) {
    const size_t nl = text.find('\n', start);
    if (start >= text.size()) {
      values.emplace_back(std::nullopt);
      continue;
    }
    values.emplace_back(std::string(text.substr(start, nl == text.npos ? text.npos : nl - start)));
    start = nl == text.npos ? text.size() : nl + 1;
  }
  for (auto dt : {inferd::DataType::kFp32, inferd::DataType::kInt8, inferd::DataType::kUint64}) {
    auto a = inferd::features::AssembleFeatures(fs, inferd::TensorSpec{"x", dt, {3}}, true, "e", values);
    if (a.ok() && a->tensor.byte_size != 3 * inferd::DataTypeByteSize(dt)) std::abort();
  }
  return 0;
}
