#include "core/precomputed_spec.h"

#include <charconv>

#include "core/model_spec.h"
#include "core/number_text.h"

namespace inferd {
namespace {

Status Bad(const std::string& name, const std::string& why) {
  return Status::InvalidArgument("field 'parameters." + std::string(kPrecomputedPrefix) + name + "': " + why);
}

}  // namespace

Result<std::optional<PrecomputedSpec>> ParsePrecomputedSpec(const std::map<std::string, std::string>& parameters,
                                                            const ModelSpec& model) {
  const std::string prefix = kPrecomputedPrefix;
  auto it = parameters.lower_bound(prefix);
  if (it == parameters.end() || it->first.compare(0, prefix.size(), prefix) != 0)
    return std::optional<PrecomputedSpec>();
  PrecomputedSpec p;
  bool have_connection = false, have_table = false, have_outputs = false;
  for (; it != parameters.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    const std::string name = it->first.substr(prefix.size());
    const std::string v(TrimSpace(it->second));
    if (name == "connection") {
      if (v.empty()) return Bad(name, "must name a connection of the jobs config");
      p.connection = v;
      have_connection = true;
    } else if (name == "table") {
      if (v.empty()) return Bad(name, "must name the prediction table");
      p.table = v;
      have_table = true;
    } else if (name == "key_parameter") {
      if (v.empty()) return Bad(name, "must name a request parameter");
      p.key_parameter = v;
    } else if (name == "key_input") {
      const TensorSpec* in = model.FindInput(v);
      if (in == nullptr) return Bad(name, "model '" + model.name + "' has no input '" + v + "'");
      if (in->dtype != DataType::kBytes && !IsIntegerType(in->dtype))
        return Bad(name, "input '" + v + "' must be BYTES or an integer type to be a key");
      int64_t elements = 1;
      for (int64_t d : in->dims) elements *= d;
      if (in->any_rank || elements != 1) return Bad(name, "input '" + v + "' must hold one element per row");
      p.key_input = v;
    } else if (name == "key_column") {
      if (v.empty()) return Bad(name, "must name the table's key column");
      p.key_column = v;
    } else if (name == "outputs") {
      for (std::string& o : SplitList(v)) {
        if (o.empty()) return Bad(name, "an empty output name");
        if (model.FindOutput(o) == nullptr && model.FindRule(o) == nullptr)
          return Bad(name, "model '" + model.name + "' has no output '" + o + "'");
        for (const auto& seen : p.outputs)
          if (seen == o) return Bad(name, "output '" + o + "' is listed twice");
        p.outputs.push_back(std::move(o));
      }
      have_outputs = true;
    } else if (name == "max_age_seconds") {
      int64_t n = -1;
      auto r = std::from_chars(v.data(), v.data() + v.size(), n);
      if (r.ec != std::errc() || r.ptr != v.data() + v.size() || n < 0)
        return Bad(name, "must be a whole number of seconds >= 0 (0: no limit), not '" + v + "'");
      p.max_age_seconds = n;
    } else if (name == "version") {
      if (v != "serving" && v != "any") return Bad(name, "must be 'serving' or 'any', not '" + v + "'");
      p.any_version = v == "any";
    } else if (name == "write_back") {
      if (v != "true" && v != "false") return Bad(name, "must be 'true' or 'false', not '" + v + "'");
      p.write_back = v == "true";
    } else if (name == "on_store_error") {
      if (v != "online" && v != "fail") return Bad(name, "must be 'online' or 'fail', not '" + v + "'");
      p.fail_on_store_error = v == "fail";
    } else {
      return Bad(
          name,
          "unknown setting (known: connection, table, key_parameter, key_input, key_column, outputs, max_age_seconds, "
          "version, write_back, on_store_error)");
    }
  }
  if (!have_connection) return Bad("connection", "must be set when any precomputed.* parameter is");
  if (!have_table) return Bad("table", "must be set when any precomputed.* parameter is");
  if (model.outputs.empty())
    return Bad("table", "model '" + model.name + "' declares no outputs; hybrid serving needs their types");
  if (p.key_column.empty()) p.key_column = p.key_input.empty() ? p.key_parameter : p.key_input;
  if (!have_outputs) {
    for (const auto& o : model.outputs) p.outputs.push_back(o.name);
    for (const auto& r : model.rules) p.outputs.push_back(r.name);
  }
  return std::optional<PrecomputedSpec>(std::move(p));
}

}  // namespace inferd
