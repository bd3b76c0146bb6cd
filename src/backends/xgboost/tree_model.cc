#include "backends/xgboost/tree_model.h"

#include <algorithm>
#include <cmath>

namespace inferd::xgboost {
namespace {

bool IsClassifier(const std::string& objective) {
  return objective.rfind("binary:", 0) == 0 || objective.rfind("multi:", 0) == 0 || objective == "reg:logistic";
}

}  // namespace

Result<std::unique_ptr<TreeModel>> TreeModel::Load(std::string_view bytes, const XgbConfig& config) {
  INFERD_ASSIGN_OR_RETURN(auto booster, Booster::FromBytes(bytes, config.threads));
  INFERD_ASSIGN_OR_RETURN(std::string json, booster->SaveJson());
  INFERD_ASSIGN_OR_RETURN(ModelFacts facts, CheckModelJson(json));
  INFERD_ASSIGN_OR_RETURN(int64_t features, booster->NumFeatures());
  if (features != facts.num_feature) {
    return Status::InvalidArgument("malformed XGBoost model: it reports " + std::to_string(features) +
                                   " features, its parameters " + std::to_string(facts.num_feature));
  }
  INFERD_ASSIGN_OR_RETURN(int rounds, booster->BoostedRounds());
  if (config.iteration_begin >= std::max(rounds, 1) || config.iteration_end > rounds) {
    return Status::InvalidArgument("iteration range [" + std::to_string(config.iteration_begin) + ", " +
                                   std::to_string(config.iteration_end) + ") is outside the model's " +
                                   std::to_string(rounds) + " boosted rounds");
  }
  if ((config.output == OutputKind::kProba || config.output == OutputKind::kClass) && !IsClassifier(facts.objective)) {
    return Status::InvalidArgument(
        "class or probability output needs a classification objective (binary:*, "
        "multi:*), but the model's objective is '" +
        facts.objective + "'");
  }
  INFERD_RETURN_IF_ERROR(booster->SetThreads(config.threads));
  std::unique_ptr<TreeModel> m(new TreeModel(std::move(booster), config, std::move(facts)));
  m->Plan();
  // A missing-only row is valid input: its prediction shows the width.
  std::vector<float> probe(static_cast<size_t>(m->num_features()), std::numeric_limits<float>::quiet_NaN());
  std::span<const float> out;
  INFERD_RETURN_IF_ERROR(m->Run(probe.data(), 1, &out).WithPrefix("probe prediction"));
  const int64_t width = static_cast<int64_t>(out.size());
  if (m->post_ == Post::kCopy && m->config_.output != OutputKind::kClass) {
    m->predicted_width_ = m->row_width_ = width;
  } else if (width != m->predicted_width_) {
    return Status::InvalidArgument("the model predicts " + std::to_string(width) + " values per row, expected " +
                                   std::to_string(m->predicted_width_) + " for objective '" + m->facts_.objective +
                                   "' with " + std::to_string(m->facts_.num_groups) + " output groups");
  }
  if (m->row_width_ < 1) return Status::InvalidArgument("the model predicts nothing for a row");
  return m;
}

void TreeModel::Plan() {
  const std::string& obj = facts_.objective;
  const int64_t groups = facts_.num_groups;
  // Whether the value prediction is already the probability (else margins
  // are transformed: sigmoid, softmax).
  const bool value_is_probability = obj == "binary:logistic" || obj == "reg:logistic" || obj == "multi:softprob";
  auto use = [&](PredictKind kind, int64_t predicted, Post post, int64_t answered) {
    kind_ = kind;
    predicted_width_ = predicted;
    post_ = post;
    row_width_ = answered;
  };
  switch (config_.output) {
    case OutputKind::kValue:
      use(PredictKind::kValue, 1, Post::kCopy, 1);  // widths from the probe
      break;
    case OutputKind::kMargin:
      use(PredictKind::kMargin, 1, Post::kCopy, 1);
      break;
    case OutputKind::kProba:
      if (groups == 1) {
        value_is_probability ? use(PredictKind::kValue, 1, Post::kBinaryProba, 2)
                             : use(PredictKind::kMargin, 1, Post::kSigmoidBinaryProba, 2);
      } else {
        value_is_probability ? use(PredictKind::kValue, groups, Post::kCopy, groups)
                             : use(PredictKind::kMargin, groups, Post::kSoftmax, groups);
      }
      break;
    case OutputKind::kClass:
      if (groups == 1) {
        value_is_probability ? use(PredictKind::kValue, 1, Post::kThreshold, 1)
                             : use(PredictKind::kMargin, 1, Post::kSigmoidThreshold, 1);
      } else if (obj == "multi:softmax") {
        use(PredictKind::kValue, 1, Post::kCopy, 1);  // the class already
      } else {
        use(value_is_probability ? PredictKind::kValue : PredictKind::kMargin, groups, Post::kArgmax, 1);
      }
      break;
  }
}

Status TreeModel::Run(const float* data, int64_t rows, std::span<const float>* out) {
  PredictOptions o;
  o.kind = kind_;
  o.iteration_begin = config_.iteration_begin;
  o.iteration_end = config_.iteration_end;
  o.missing = config_.missing;
  o.via_dmatrix = facts_.booster == "gblinear";
  return booster_->Predict(data, rows, facts_.num_feature, o, out, &shape_);
}

Status TreeModel::Predict(const float* data, int64_t rows, float* out) {
  if (rows == 0) return Status::OK();
  std::span<const float> got;
  INFERD_RETURN_IF_ERROR(Run(data, rows, &got));
  const int64_t w = predicted_width_;
  if (static_cast<int64_t>(got.size()) != rows * w) {
    return Status::Internal("XGBoost returned " + std::to_string(got.size()) + " values for " + std::to_string(rows) +
                            " rows of " + std::to_string(w));
  }
  auto sigmoid = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  switch (post_) {
    case Post::kCopy:
      std::copy(got.begin(), got.end(), out);
      break;
    case Post::kBinaryProba:
    case Post::kSigmoidBinaryProba:
      for (int64_t r = 0; r < rows; ++r) {
        const float p = post_ == Post::kBinaryProba ? got[r] : sigmoid(got[r]);
        out[2 * r] = 1.0f - p;
        out[2 * r + 1] = p;
      }
      break;
    case Post::kThreshold:
    case Post::kSigmoidThreshold:
      for (int64_t r = 0; r < rows; ++r) {
        const float p = post_ == Post::kThreshold ? got[r] : sigmoid(got[r]);
        out[r] = p > config_.threshold ? 1.0f : 0.0f;
      }
      break;
    case Post::kArgmax:
      for (int64_t r = 0; r < rows; ++r) {
        const float* g = got.data() + r * w;
        out[r] = static_cast<float>(std::max_element(g, g + w) - g);
      }
      break;
    case Post::kSoftmax:
      for (int64_t r = 0; r < rows; ++r) {
        const float* g = got.data() + r * w;
        float* o = out + r * w;
        const float top = *std::max_element(g, g + w);
        float sum = 0;
        for (int64_t k = 0; k < w; ++k) sum += (o[k] = std::exp(g[k] - top));
        for (int64_t k = 0; k < w; ++k) o[k] /= sum;
      }
      break;
  }
  return Status::OK();
}

}  // namespace inferd::xgboost
