#include "core/batching_spec.h"

#include <algorithm>

#include "core/model_spec.h"
#include "core/number_text.h"

namespace inferd {
namespace {

Status BadBatching(const std::string& name, const std::string& why) {
  return Status::InvalidArgument("field 'parameters." + std::string(kBatchingPrefix) + name + "': " + why);
}

Result<int64_t> Integer(const std::string& name, const std::string& text, int64_t min, int64_t max) {
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
  if (!ParseNumber(TrimSpace(text), &is_int, &i, &d) || !is_int)
    return BadBatching(name, "'" + text + "' is not an integer");
  if (i < min || i > max) {
    return BadBatching(
        name, std::to_string(i) + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return i;
}

// The input's one variable dimension (counting the batch dimension).
Result<PaddedInput> Padded(const std::string& field, const ModelSpec& model, const std::string& name) {
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    const TensorSpec& t = model.inputs[i];
    if (t.name != name) continue;
    if (t.dtype == DataType::kBytes)
      return BadBatching(field, "input '" + name + "' holds BYTES, which cannot be padded");
    if (t.any_rank || t.reshape)
      return BadBatching(field, "input '" + name + "' needs fixed dims and no reshape to be padded");
    if (t.ragged)
      return BadBatching(field, "input '" + name + "' is ragged (allow_ragged_batch): it is concatenated, not padded");
    const auto n = std::count(t.dims.begin(), t.dims.end(), int64_t{-1});
    if (n != 1) {
      return BadBatching(field, "input '" + name + "' has dims " + ShapeToString(t.dims) +
                                    ": a padded input needs exactly one variable (-1) dimension");
    }
    PaddedInput p;
    p.name = name;
    p.input = i;
    p.axis = 1 + static_cast<size_t>(std::find(t.dims.begin(), t.dims.end(), int64_t{-1}) - t.dims.begin());
    if (!AppendNumber(&p.pad_bytes, t.dtype, true, 0, 0) || !AppendNumber(&p.one_bytes, t.dtype, true, 1, 1))
      return BadBatching(field, "input '" + name + "' is not numeric");
    return p;
  }
  return BadBatching(field, "'" + name + "' is not an input of the model");
}

}  // namespace

Result<BatchingParameters> ParseBatchingParameters(const std::map<std::string, std::string>& parameters,
                                                   const ModelSpec& model) {
  BatchingParameters out;
  const std::string prefix = kBatchingPrefix;
  std::optional<std::string> mode, max_delay, target, cpu_aware, pad_inputs, mask, buckets, unpad;
  for (auto it = parameters.lower_bound(prefix);
       it != parameters.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    const std::string name = it->first.substr(prefix.size());
    const std::string v(TrimSpace(it->second));
    if (name == "mode") {
      mode = v;
    } else if (name == "max_delay_us") {
      max_delay = v;
    } else if (name == "latency_target_us") {
      target = v;
    } else if (name == "cpu_aware") {
      cpu_aware = v;
    } else if (name == "pad_inputs") {
      pad_inputs = v;
    } else if (name == "mask_input") {
      mask = v;
    } else if (name == "buckets") {
      buckets = v;
    } else if (name == "unpad_outputs") {
      unpad = v;
    } else {
      return BadBatching(
          name,
          "unknown setting (known: mode, max_delay_us, latency_target_us, cpu_aware, pad_inputs, mask_input, "
          "buckets, unpad_outputs)");
    }
  }
  const bool batching = model.batching.dynamic && model.max_batch_size > 0;
  if (mode && *mode != "fixed" && *mode != "adaptive")
    return BadBatching("mode", "'" + *mode + "' is not fixed or adaptive");
  out.adaptive.enabled = mode && *mode == "adaptive";
  if (!out.adaptive.enabled && (max_delay || target || cpu_aware)) {
    return BadBatching(max_delay ? "max_delay_us"
                       : target  ? "latency_target_us"
                                 : "cpu_aware",
                       "applies to batching.mode adaptive only");
  }
  if (out.adaptive.enabled) {
    if (!batching)
      return BadBatching("mode", "adaptive batching needs max_batch_size > 0 and a dynamic_batching block");
    out.adaptive.max_delay_us = model.batching.max_queue_delay_us > 0 ? model.batching.max_queue_delay_us : 10000;
    if (max_delay) {
      INFERD_ASSIGN_OR_RETURN(int64_t d, Integer("max_delay_us", *max_delay, 1, 10'000'000));
      out.adaptive.max_delay_us = static_cast<uint64_t>(d);
    }
    if (target) {
      INFERD_ASSIGN_OR_RETURN(int64_t t, Integer("latency_target_us", *target, 1, 60'000'000));
      out.adaptive.latency_target_us = static_cast<uint64_t>(t);
    }
    if (cpu_aware) {
      if (*cpu_aware != "true" && *cpu_aware != "false")
        return BadBatching("cpu_aware", "'" + *cpu_aware + "' is not true or false");
      out.adaptive.cpu_aware = *cpu_aware == "true";
    }
  }

  if (!pad_inputs) {
    if (mask || buckets || unpad)
      return BadBatching(mask ? "mask_input" : buckets ? "buckets" : "unpad_outputs", "needs batching.pad_inputs");
    return out;
  }
  if (!batching) return BadBatching("pad_inputs", "padding needs max_batch_size > 0 and a dynamic_batching block");
  PaddingSpec p;
  for (const std::string& item : SplitList(*pad_inputs)) {
    const size_t colon = item.find(':');
    const std::string name(TrimSpace(item.substr(0, colon)));
    INFERD_ASSIGN_OR_RETURN(PaddedInput in, Padded("pad_inputs", model, name));
    if (colon != std::string::npos) {
      bool is_int = false;
      int64_t i = 0;
      double d = 0;
      const std::string value(TrimSpace(item.substr(colon + 1)));
      if (!ParseNumber(value, &is_int, &i, &d))
        return BadBatching("pad_inputs", "pad value '" + value + "' is not a number");
      in.pad_value = is_int ? static_cast<double>(i) : d;
      in.pad_bytes.clear();
      if (!AppendNumber(&in.pad_bytes, model.inputs[in.input].dtype, is_int, i, d)) {
        return BadBatching("pad_inputs", "pad value " + value + " does not fit input '" + name + "' (" +
                                             std::string(DataTypeToWire(model.inputs[in.input].dtype)) + ")");
      }
    }
    for (const auto& seen : p.inputs)
      if (seen.name == name) return BadBatching("pad_inputs", "input '" + name + "' is listed twice");
    p.inputs.push_back(std::move(in));
  }
  if (p.inputs.empty()) return BadBatching("pad_inputs", "names no input");
  if (mask) {
    INFERD_ASSIGN_OR_RETURN(PaddedInput m, Padded("mask_input", model, *mask));
    if (p.Find(m.input)) return BadBatching("mask_input", "'" + *mask + "' is also in batching.pad_inputs");
    if (model.inputs[m.input].dims.size() != 1)
      return BadBatching("mask_input", "the mask input's dims must be [ -1 ] (one value per position)");
    m.mask = true;
    p.inputs.push_back(std::move(m));
  }
  if (buckets) {
    for (const std::string& b : SplitList(*buckets)) {
      INFERD_ASSIGN_OR_RETURN(int64_t v, Integer("buckets", b, 1, int64_t{1} << 30));
      if (!p.buckets.empty() && v <= p.buckets.back())
        return BadBatching("buckets", "lengths must be strictly ascending");
      p.buckets.push_back(v);
    }
    if (p.buckets.empty()) return BadBatching("buckets", "names no length");
  }
  if (unpad) {
    for (const std::string& o : SplitList(*unpad)) {
      const TensorSpec* t = model.FindOutput(o);
      if (!model.outputs.empty() && t == nullptr)
        return BadBatching("unpad_outputs", "'" + o + "' is not an output of the model");
      if (t && !t->any_rank && t->dims.empty())
        return BadBatching("unpad_outputs", "output '" + o + "' has no dimension besides the batch dimension");
      p.unpad_outputs.push_back(o);
    }
  } else {
    for (const auto& o : model.outputs)
      if (!o.any_rank && !o.dims.empty() && o.dims[0] == -1) p.unpad_outputs.push_back(o.name);
  }
  out.padding = std::move(p);
  return out;
}

}  // namespace inferd
