#include "backends/xgboost/model_check.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <vector>

namespace inferd::xgboost {
namespace {

using rapidjson::Value;

Status Bad(const std::string& what) { return Status::InvalidArgument("malformed XGBoost model: " + what); }

const Value* Member(const Value& v, const char* key) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(key);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

// XGBoost writes its parameters as strings ("5"); accept numbers too.
Result<int64_t> IntField(const Value& obj, const char* key, const std::string& where) {
  const Value* v = Member(obj, key);
  if (!v) return Bad(where + " has no '" + key + "'");
  if (v->IsInt64()) return v->GetInt64();
  if (v->IsString()) {
    int64_t n = 0;
    const char* b = v->GetString();
    const char* e = b + v->GetStringLength();
    auto [p, ec] = std::from_chars(b, e, n);
    if (ec == std::errc() && p == e) return n;
  }
  return Bad(where + " '" + key + "' is not an integer");
}

Result<std::vector<int64_t>> IntArray(const Value& tree, const char* key, size_t n, const std::string& where) {
  const Value* v = Member(tree, key);
  if (!v || !v->IsArray()) return Bad(where + " has no array '" + key + "'");
  if (v->Size() != n) {
    return Bad(where + " '" + key + "' has " + std::to_string(v->Size()) + " entries, not " + std::to_string(n));
  }
  std::vector<int64_t> out;
  out.reserve(n);
  for (const auto& e : v->GetArray()) {
    if (!e.IsInt64()) return Bad(where + " '" + key + "' holds a non-integer");
    out.push_back(e.GetInt64());
  }
  return out;
}

Status CheckArrayOfNumbers(const Value& tree, const char* key, size_t n, const std::string& where) {
  const Value* v = Member(tree, key);
  if (!v || !v->IsArray() || v->Size() != n) {
    return Bad(where + " '" + key + "' is missing or does not have " + std::to_string(n) + " entries");
  }
  for (const auto& e : v->GetArray())
    if (!e.IsNumber()) return Bad(where + " '" + key + "' holds a non-number");
  return Status::OK();
}

// The largest category value a categorical split may name (the library
// sizes a bit field by the largest one).
constexpr int64_t kMaxCategory = int64_t{1} << 24;

Status CheckTree(const Value& tree, size_t index, int64_t num_feature) {
  const std::string where = "tree " + std::to_string(index);
  const Value* param = Member(tree, "tree_param");
  if (!param) return Bad(where + " has no 'tree_param'");
  INFERD_ASSIGN_OR_RETURN(int64_t n, IntField(*param, "num_nodes", where));
  if (n < 1 || n > (int64_t{1} << 30)) return Bad(where + " has " + std::to_string(n) + " nodes");
  if (Member(*param, "size_leaf_vector")) {
    INFERD_ASSIGN_OR_RETURN(int64_t leaf_vector, IntField(*param, "size_leaf_vector", where));
    if (leaf_vector > 1) return Bad(where + " has vector leaves (not supported)");
  }
  const size_t nodes = static_cast<size_t>(n);
  INFERD_ASSIGN_OR_RETURN(auto left, IntArray(tree, "left_children", nodes, where));
  INFERD_ASSIGN_OR_RETURN(auto right, IntArray(tree, "right_children", nodes, where));
  INFERD_ASSIGN_OR_RETURN(auto parents, IntArray(tree, "parents", nodes, where));
  INFERD_ASSIGN_OR_RETURN(auto split, IntArray(tree, "split_indices", nodes, where));
  for (const char* key : {"split_conditions", "default_left", "loss_changes", "sum_hessian", "base_weights"}) {
    INFERD_RETURN_IF_ERROR(CheckArrayOfNumbers(tree, key, nodes, where));
  }
  std::vector<int64_t> split_type(nodes, 0);
  if (Member(tree, "split_type")) {
    INFERD_ASSIGN_OR_RETURN(split_type, IntArray(tree, "split_type", nodes, where));
  }
  size_t categorical = 0;
  for (size_t i = 0; i < nodes; ++i) {
    const std::string node = where + " node " + std::to_string(i);
    for (int64_t c : {left[i], right[i]}) {
      if (c < -1 || c >= n) return Bad(node + ": child " + std::to_string(c) + " outside -1.." + std::to_string(n - 1));
    }
    // The root's parent is written as INT32_MAX ("none"); every other node,
    // deleted ones included, names one in range (the library looks it up).
    if (i > 0 && (parents[i] < 0 || parents[i] >= n)) {
      return Bad(node + ": parent " + std::to_string(parents[i]) + " outside 0.." + std::to_string(n - 1));
    }
    if (split_type[i] != 0 && split_type[i] != 1) return Bad(node + ": unknown split type");
    categorical += split_type[i] == 1 ? 1 : 0;
  }
  // Walk from the root: every child in range, reached once (a tree, no cycles).
  std::vector<bool> seen(nodes, false);
  std::vector<int64_t> stack = {0};
  seen[0] = true;
  while (!stack.empty()) {
    const int64_t i = stack.back();
    stack.pop_back();
    const std::string node = where + " node " + std::to_string(i);
    const int64_t l = left[i], r = right[i];
    if (l == -1 && r == -1) continue;  // leaf
    // The library's predictor steps to left + 1 for "right".
    if (r != l + 1) {
      return Bad(node + ": children " + std::to_string(l) + " and " + std::to_string(r) +
                 " are not adjacent (the right child must be left + 1)");
    }
    for (int64_t c : {l, r}) {
      if (c < 1 || c >= n) {
        return Bad(node + ": child " + std::to_string(c) + " outside 1.." + std::to_string(n - 1));
      }
      if (seen[c]) return Bad(node + ": child " + std::to_string(c) + " is reached twice (not a tree)");
      seen[c] = true;
      stack.push_back(c);
    }
    if (split[i] < 0 || split[i] >= num_feature) {
      return Bad(node + ": splits on feature " + std::to_string(split[i]) + " but the model has " +
                 std::to_string(num_feature) + " features");
    }
  }
  // Categorical splits: one segment per categorical node, inside 'categories'.
  const Value* cats = Member(tree, "categories");
  const size_t num_cats = cats && cats->IsArray() ? cats->Size() : 0;
  if (categorical > 0 || num_cats > 0) {
    INFERD_ASSIGN_OR_RETURN(auto categories, IntArray(tree, "categories", num_cats, where));
    for (int64_t c : categories)
      if (c < 0 || c > kMaxCategory) return Bad(where + ": category " + std::to_string(c) + " out of range");
  }
  INFERD_ASSIGN_OR_RETURN(auto seg, IntArray(tree, "categories_segments", categorical, where));
  INFERD_ASSIGN_OR_RETURN(auto sizes, IntArray(tree, "categories_sizes", categorical, where));
  INFERD_ASSIGN_OR_RETURN(auto cnodes, IntArray(tree, "categories_nodes", categorical, where));
  for (size_t k = 0; k < categorical; ++k) {
    if (cnodes[k] < 0 || cnodes[k] >= n || split_type[cnodes[k]] != 1 || seg[k] < 0 || sizes[k] < 0 ||
        static_cast<uint64_t>(seg[k]) + static_cast<uint64_t>(sizes[k]) > num_cats) {
      return Bad(where + ": categorical split " + std::to_string(k) + " does not match the tree's categories");
    }
  }
  return Status::OK();
}

Status CheckTrees(const Value& model, ModelFacts* facts) {
  const Value* trees = Member(model, "trees");
  const Value* info = Member(model, "tree_info");
  const Value* param = Member(model, "gbtree_model_param");
  if (!trees || !trees->IsArray()) return Bad("gradient booster has no 'trees' array");
  if (!param) return Bad("gradient booster has no 'gbtree_model_param'");
  INFERD_ASSIGN_OR_RETURN(int64_t num_trees, IntField(*param, "num_trees", "gbtree_model_param"));
  if (num_trees != static_cast<int64_t>(trees->Size())) {
    return Bad("gbtree_model_param says " + std::to_string(num_trees) + " trees, 'trees' has " +
               std::to_string(trees->Size()));
  }
  if (!info || !info->IsArray() || info->Size() != trees->Size()) {
    return Bad("'tree_info' does not have one entry per tree");
  }
  for (const auto& g : info->GetArray()) {
    if (!g.IsInt64() || g.GetInt64() < 0 || g.GetInt64() >= facts->num_groups) {
      return Bad("'tree_info' names an output group outside 0.." + std::to_string(facts->num_groups - 1));
    }
  }
  facts->num_trees = num_trees;
  std::vector<bool> ids(trees->Size(), false);
  size_t i = 0;
  for (const auto& t : trees->GetArray()) {
    const Value* id = Member(t, "id");
    if (!id || !id->IsInt64() || id->GetInt64() < 0 || id->GetInt64() >= num_trees || ids[id->GetInt64()]) {
      return Bad("tree " + std::to_string(i) + " has a missing, repeated or out-of-range 'id'");
    }
    ids[id->GetInt64()] = true;
    INFERD_RETURN_IF_ERROR(CheckTree(t, i++, facts->num_feature));
  }
  return Status::OK();
}

// Objects with a repeated key: this check would read one of the values and
// the library another (its reader keeps the last).
Status CheckUniqueKeys(const Value& v, int depth) {
  if (depth > 64) return Bad("nested too deeply");
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) INFERD_RETURN_IF_ERROR(CheckUniqueKeys(e, depth + 1));
  } else if (v.IsObject()) {
    std::vector<std::string_view> keys;
    keys.reserve(v.MemberCount());
    for (const auto& m : v.GetObject()) {
      keys.emplace_back(m.name.GetString(), m.name.GetStringLength());
      INFERD_RETURN_IF_ERROR(CheckUniqueKeys(m.value, depth + 1));
    }
    std::sort(keys.begin(), keys.end());
    if (auto it = std::adjacent_find(keys.begin(), keys.end()); it != keys.end()) {
      return Bad("key '" + std::string(*it) + "' repeats in one object");
    }
  }
  return Status::OK();
}

}  // namespace

Result<ModelFacts> CheckModelJson(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseNanAndInfFlag | rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError()) return Bad("not JSON");
  INFERD_RETURN_IF_ERROR(CheckUniqueKeys(doc, 0));
  const Value* learner = Member(doc, "learner");
  if (!learner) return Bad("no 'learner'");
  const Value* mp = Member(*learner, "learner_model_param");
  if (!mp) return Bad("no 'learner_model_param'");
  ModelFacts f;
  INFERD_ASSIGN_OR_RETURN(f.num_feature, IntField(*mp, "num_feature", "learner_model_param"));
  if (f.num_feature < 1 || f.num_feature > kMaxFeatures) {
    return Bad("the model has " + std::to_string(f.num_feature) + " features (1 to " + std::to_string(kMaxFeatures) +
               " are served)");
  }
  INFERD_ASSIGN_OR_RETURN(int64_t num_class, IntField(*mp, "num_class", "learner_model_param"));
  int64_t num_target = 1;
  if (Member(*mp, "num_target")) {
    INFERD_ASSIGN_OR_RETURN(num_target, IntField(*mp, "num_target", "learner_model_param"));
  }
  if (num_class < 0 || num_target < 1 || num_class > 100000 || num_target > 100000) {
    return Bad("num_class / num_target out of range");
  }
  f.num_groups = std::max<int64_t>({num_class, num_target, 1});
  if (const Value* obj = Member(*learner, "objective"); obj) {
    if (const Value* name = Member(*obj, "name"); name && name->IsString()) f.objective = name->GetString();
  }
  const Value* gb = Member(*learner, "gradient_booster");
  const Value* name = gb ? Member(*gb, "name") : nullptr;
  if (!name || !name->IsString()) return Bad("no gradient booster name");
  f.booster = name->GetString();
  if (f.booster == "gbtree") {
    const Value* model = Member(*gb, "model");
    if (!model) return Bad("gbtree has no 'model'");
    INFERD_RETURN_IF_ERROR(CheckTrees(*model, &f));
  } else if (f.booster == "dart") {
    const Value* inner = Member(*gb, "gbtree");
    const Value* model = inner ? Member(*inner, "model") : nullptr;
    if (!model) return Bad("dart has no 'gbtree.model'");
    INFERD_RETURN_IF_ERROR(CheckTrees(*model, &f));
    const Value* drop = Member(*gb, "weight_drop");
    if (!drop || !drop->IsArray() || static_cast<int64_t>(drop->Size()) != f.num_trees) {
      return Bad("dart 'weight_drop' does not have one weight per tree");
    }
  } else if (f.booster == "gblinear") {
    const Value* model = Member(*gb, "model");
    const Value* w = model ? Member(*model, "weights") : nullptr;
    if (!w || !w->IsArray()) return Bad("gblinear has no 'weights'");
    const uint64_t want = static_cast<uint64_t>(f.num_feature + 1) * static_cast<uint64_t>(f.num_groups);
    if (w->Size() != want) {
      return Bad("gblinear has " + std::to_string(w->Size()) +
                 " weights, not (features + 1) x groups = " + std::to_string(want));
    }
  } else {
    return Bad("unknown gradient booster '" + f.booster + "'");
  }
  return f;
}

}  // namespace inferd::xgboost
