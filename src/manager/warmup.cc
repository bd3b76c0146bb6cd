#include "manager/warmup.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace inferd {
namespace {

// Random values that are valid for any model input: [0, 1) for floats, 0..3
// for integers (safe as small indices), 0/1 for BOOL.
void FillRandom(DataType dt, std::byte* out, int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uf(0.f, 1.f);
  std::uniform_int_distribution<int> ui(0, 3);
  for (int64_t i = 0; i < n; ++i) {
    switch (dt) {
      case DataType::kFp32: {
        const float v = uf(rng);
        std::memcpy(out + i * 4, &v, 4);
        break;
      }
      case DataType::kFp64: {
        const double v = uf(rng);
        std::memcpy(out + i * 8, &v, 8);
        break;
      }
      case DataType::kFp16:
      case DataType::kBf16:
        break;  // zero: a valid half value; random bits could be NaN
      case DataType::kBool:
        out[i] = static_cast<std::byte>(ui(rng) & 1);
        break;
      default: {
        const size_t sz = DataTypeByteSize(dt);
        const auto v = static_cast<uint64_t>(ui(rng));
        std::memcpy(out + static_cast<size_t>(i) * sz, &v, sz);  // little-endian low bytes
      }
    }
  }
}

Result<Tensor> BuildInput(const TensorSpec& ts, const WarmupInputSpec& wi, int64_t rows, const Filesystem& fs,
                          const std::string& model_dir, const std::string& sample, std::mt19937& rng) {
  const std::string what = "model_warmup '" + sample + "' input '" + ts.name + "'";
  if (wi.dtype != ts.dtype)
    return Status::InvalidArgument(what + ": data_type " + std::string(DataTypeToWire(wi.dtype)) +
                                   " does not match the input's " + std::string(DataTypeToWire(ts.dtype)));
  const int64_t per_row = ElementCount(wi.dims);
  Shape shape;
  if (rows > 0) shape.push_back(rows);
  // The backend sees the config's reshape when it has one (and it fits).
  const bool reshaped = ts.reshape && ElementCount(*ts.reshape) == per_row;
  const Shape& model_dims = reshaped ? *ts.reshape : wi.dims;
  shape.insert(shape.end(), model_dims.begin(), model_dims.end());
  const int64_t copies = rows > 0 ? rows : 1;

  if (ts.dtype == DataType::kBytes) {
    std::string one;
    if (wi.source == WarmupInputSpec::Source::kFile)
      return Status::InvalidArgument(what + ": input_data_file is not supported for BYTES inputs");
    for (int64_t i = 0; i < per_row; ++i) AppendBytesElement(&one, std::string_view());
    std::string all;
    for (int64_t r = 0; r < copies; ++r) all += one;
    return Tensor::Copy(ts.name, ts.dtype, shape, std::as_bytes(std::span<const char>(all.data(), all.size())));
  }
  const size_t sample_bytes = static_cast<size_t>(per_row) * DataTypeByteSize(ts.dtype);
  std::byte* out = nullptr;
  Tensor t = Tensor::Allocate(ts.name, ts.dtype, shape, sample_bytes * static_cast<size_t>(copies), &out);
  if (wi.source == WarmupInputSpec::Source::kRandom) {
    FillRandom(ts.dtype, out, per_row * copies, rng);
  } else if (wi.source == WarmupInputSpec::Source::kFile) {
    const std::string path = JoinPath(JoinPath(model_dir, "warmup"), wi.file);
    auto read = fs.ReadFile(path);
    if (!read.ok()) return Status::NotFound(what + ": cannot open " + path);
    const std::string& data = *read;
    if (data.size() != sample_bytes)
      return Status::InvalidArgument(what + ": " + path + " has " + std::to_string(data.size()) + " bytes, expected " +
                                     std::to_string(sample_bytes));
    for (int64_t r = 0; r < copies; ++r)
      std::memcpy(out + static_cast<size_t>(r) * sample_bytes, data.data(), sample_bytes);
  }
  return t;
}

}  // namespace

Result<std::vector<WarmupSample>> BuildWarmupSamples(const ModelSpec& spec, const Filesystem& fs,
                                                     const std::string& model_dir) {
  std::vector<WarmupSample> out;
  std::mt19937 rng(1);
  for (const auto& w : spec.warmup) {
    WarmupSample s;
    s.name = w.name;
    s.count = w.count;
    for (const auto& [name, _] : w.inputs) {
      if (!spec.FindInput(name))
        return Status::InvalidArgument("model_warmup '" + w.name + "' names unknown input '" + name + "'");
    }
    const int64_t rows = spec.max_batch_size > 0 ? static_cast<int64_t>(w.batch_size) : 0;
    for (const auto& ts : spec.inputs) {
      auto it = w.inputs.find(ts.name);
      if (it == w.inputs.end()) {
        if (ts.optional) continue;
        return Status::InvalidArgument("model_warmup '" + w.name + "' has no data for input '" + ts.name + "'");
      }
      INFERD_ASSIGN_OR_RETURN(Tensor t, BuildInput(ts, it->second, rows, fs, model_dir, w.name, rng));
      s.inputs.push_back(std::move(t));
    }
    out.push_back(std::move(s));
  }
  return out;
}

Status RunWarmup(ModelInstance& instance, const std::vector<WarmupSample>& samples) {
  for (const auto& s : samples) {
    for (uint32_t i = 0; i < s.count; ++i) {
      auto r = instance.Execute(s.inputs);
      if (!r.ok()) return r.status().WithPrefix("model_warmup '" + s.name + "'");
    }
  }
  return Status::OK();
}

}  // namespace inferd
