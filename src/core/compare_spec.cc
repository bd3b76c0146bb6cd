#include "core/compare_spec.h"

#include <cmath>

#include "core/model_spec.h"
#include "core/number_text.h"

namespace inferd {

Result<CompareSpec> ParseCompareSpec(const std::map<std::string, std::string>& parameters, const ModelSpec& spec) {
  CompareSpec c;
  for (const auto& o : spec.outputs)
    if (!o.label_filename.empty()) c.classifier_outputs.insert(o.name);
  for (const auto& [key, value] : parameters) {
    if (key.rfind(kComparePrefix, 0) != 0) continue;
    const std::string field = "parameters." + key;
    if (key == "compare.classifier_outputs") {
      size_t begin = 0;
      while (begin <= value.size()) {
        size_t end = value.find(',', begin);
        if (end == std::string::npos) end = value.size();
        std::string name = value.substr(begin, end - begin);
        while (!name.empty() && name.front() == ' ') name.erase(name.begin());
        while (!name.empty() && name.back() == ' ') name.pop_back();
        if (!name.empty()) {
          if (spec.FindOutput(name) == nullptr)
            return Status::InvalidArgument(field + ": '" + name + "' is not an output the config declares");
          c.classifier_outputs.insert(std::move(name));
        }
        begin = end + 1;
      }
    } else if (key == "compare.tolerance") {
      bool is_int = false;
      int64_t i = 0;
      double d = 0;
      if (!ParseNumber(value, &is_int, &i, &d))
        return Status::InvalidArgument(field + ": '" + value + "' is not a number");
      const double t = is_int ? static_cast<double>(i) : d;
      if (!std::isfinite(t) || t < 0)
        return Status::InvalidArgument(field + ": must be a finite number >= 0, not '" + value + "'");
      c.tolerance = t;
    } else {
      return Status::InvalidArgument(field + ": unknown (compare.classifier_outputs, compare.tolerance)");
    }
  }
  return c;
}

}  // namespace inferd
