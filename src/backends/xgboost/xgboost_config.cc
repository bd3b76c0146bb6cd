#include "backends/xgboost/xgboost_config.h"

#include <charconv>
#include <cstdlib>

namespace inferd::xgboost {
namespace {

const std::string* Param(const ModelSpec& spec, const std::string& key) {
  auto it = spec.parameters.find(key);
  return it == spec.parameters.end() ? nullptr : &it->second;
}

Result<bool> BoolParam(const ModelSpec& spec, const std::string& key, bool fallback) {
  const std::string* v = Param(spec, key);
  if (!v) return fallback;
  if (*v == "true" || *v == "1" || *v == "True") return true;
  if (*v == "false" || *v == "0" || *v == "False" || v->empty()) return false;
  return Status::InvalidArgument("parameter '" + key + "' must be \"true\" or \"false\", not '" + *v + "'");
}

Result<int> IntParam(const ModelSpec& spec, const std::string& key, int fallback, int min) {
  const std::string* v = Param(spec, key);
  if (!v) return fallback;
  int n = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || p != v->data() + v->size() || n < min) {
    return Status::InvalidArgument("parameter '" + key + "' must be an integer >= " + std::to_string(min) + ", not '" +
                                   *v + "'");
  }
  return n;
}

Result<float> FloatParam(const ModelSpec& spec, const std::string& key, float fallback) {
  const std::string* v = Param(spec, key);
  if (!v) return fallback;
  if (*v == "nan" || *v == "NaN") return std::numeric_limits<float>::quiet_NaN();
  char* end = nullptr;
  const float f = std::strtof(v->c_str(), &end);
  if (v->empty() || end != v->c_str() + v->size()) {
    return Status::InvalidArgument("parameter '" + key + "' must be a number, not '" + *v + "'");
  }
  return f;
}

Status FilSettings(const ModelSpec& spec, XgbConfig* c) {
  const std::string* type = Param(spec, "model_type");
  const std::string model_type = type ? *type : "xgboost";
  if (model_type == "xgboost") {
    c->files = {"xgboost.model"};
  } else if (model_type == "xgboost_json") {
    c->files = {"xgboost.json"};
  } else if (model_type == "xgboost_ubj") {
    c->files = {"xgboost.ubj"};
  } else if (model_type == "lightgbm" || model_type == "treelite_checkpoint") {
    return Status::InvalidArgument("parameter 'model_type' '" + model_type +
                                   "' is not supported (inferd's fil backend serves XGBoost models: xgboost, "
                                   "xgboost_json, xgboost_ubj)");
  } else {
    return Status::InvalidArgument("parameter 'model_type' must be xgboost, xgboost_json or xgboost_ubj, not '" +
                                   model_type + "'");
  }
  INFERD_ASSIGN_OR_RETURN(bool output_class, BoolParam(spec, "output_class", false));
  INFERD_ASSIGN_OR_RETURN(bool predict_proba, BoolParam(spec, "predict_proba", false));
  c->output = !output_class ? OutputKind::kValue : predict_proba ? OutputKind::kProba : OutputKind::kClass;
  return Status::OK();
}

Status XgboostSettings(const ModelSpec& spec, XgbConfig* c) {
  c->files = {"model.json", "model.ubj", "model.bst", "model.bin"};
  const std::string* type = Param(spec, "predict_type");
  if (!type || *type == "value") {
    c->output = OutputKind::kValue;
  } else if (*type == "margin") {
    c->output = OutputKind::kMargin;
  } else if (*type == "proba") {
    c->output = OutputKind::kProba;
  } else if (*type == "class") {
    c->output = OutputKind::kClass;
  } else {
    return Status::InvalidArgument("parameter 'predict_type' must be value, margin, proba or class, not '" + *type +
                                   "'");
  }
  return Status::OK();
}

}  // namespace

Result<XgbConfig> ParseXgbConfig(const ModelSpec& spec, Dialect dialect) {
  XgbConfig c;
  INFERD_RETURN_IF_ERROR(dialect == Dialect::kFil ? FilSettings(spec, &c) : XgboostSettings(spec, &c));
  if (!spec.default_model_filename.empty()) c.files = {spec.default_model_filename};
  INFERD_ASSIGN_OR_RETURN(c.threshold, FloatParam(spec, "threshold", 0.5f));
  INFERD_ASSIGN_OR_RETURN(c.missing, FloatParam(spec, "missing", c.missing));
  INFERD_ASSIGN_OR_RETURN(c.iteration_begin, IntParam(spec, "iteration_begin", 0, 0));
  INFERD_ASSIGN_OR_RETURN(c.iteration_end, IntParam(spec, "iteration_end", 0, 0));
  if (c.iteration_end != 0 && c.iteration_end <= c.iteration_begin) {
    return Status::InvalidArgument(
        "parameter 'iteration_end' must be 0 (all rounds) or greater than "
        "'iteration_begin'");
  }
  INFERD_ASSIGN_OR_RETURN(int intra, IntParam(spec, "INTRA_OP_THREAD_COUNT", 1, 1));
  INFERD_ASSIGN_OR_RETURN(c.threads, IntParam(spec, "nthread", intra, 1));
  return c;
}

}  // namespace inferd::xgboost
