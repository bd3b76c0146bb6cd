#include "llm/decoder_config.h"

#include <rapidjson/document.h>

namespace inferd::llm {
namespace {

constexpr unsigned kConfigJsonFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

using Object = rapidjson::Value::ConstObject;

Status Field(std::string_view field, std::string_view what) {
  std::string m = "config.json: '";
  m.append(field);
  m.append("' ");
  m.append(what);
  return Status::InvalidArgument(std::move(m));
}

// The first of `names` present; null when none is (or it is JSON null).
const rapidjson::Value* Get(const Object& o, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = o.FindMember(n);
    if (it != o.MemberEnd() && !it->value.IsNull()) return &it->value;
  }
  return nullptr;
}

Status GetInt(const Object& o, std::initializer_list<const char*> names, int64_t lo, int64_t hi, int64_t* out,
              bool required) {
  const rapidjson::Value* v = Get(o, names);
  if (v == nullptr) return required ? Field(*names.begin(), "is missing") : Status::OK();
  if (!v->IsInt64() || v->GetInt64() < lo || v->GetInt64() > hi) {
    return Field(*names.begin(), "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v->GetInt64();
  return Status::OK();
}

Status GetDouble(const Object& o, std::initializer_list<const char*> names, double lo, double hi, double* out) {
  const rapidjson::Value* v = Get(o, names);
  if (v == nullptr) return Status::OK();
  if (!v->IsNumber() || !(v->GetDouble() > lo) || !(v->GetDouble() <= hi)) {
    return Field(*names.begin(), "must be a number in (" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v->GetDouble();
  return Status::OK();
}

Status GetBool(const Object& o, const char* name, bool* out) {
  const rapidjson::Value* v = Get(o, {name});
  if (v == nullptr) return Status::OK();
  if (!v->IsBool()) return Field(name, "must be true or false");
  *out = v->GetBool();
  return Status::OK();
}

Status GetTokenIds(const Object& o, const char* name, int64_t vocab, std::vector<int32_t>* out) {
  const rapidjson::Value* v = Get(o, {name});
  if (v == nullptr) return Status::OK();
  auto one = [&](const rapidjson::Value& x) -> Status {
    if (!x.IsInt64() || x.GetInt64() < 0 || x.GetInt64() >= vocab)
      return Field(name, "must be token ids below vocab_size");
    out->push_back(static_cast<int32_t>(x.GetInt64()));
    return Status::OK();
  };
  if (v->IsArray()) {
    if (v->Size() > 64) return Field(name, "lists more than 64 ids");
    for (const auto& x : v->GetArray()) INFERD_RETURN_IF_ERROR(one(x));
    return Status::OK();
  }
  return one(*v);
}

}  // namespace

Result<DecoderConfig> ParseDecoderConfig(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse<kConfigJsonFlags>(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::InvalidArgument("config.json is not a JSON object");
  const Object o = static_cast<const rapidjson::Document&>(doc).GetObject();
  DecoderConfig c;
  const rapidjson::Value* type = Get(o, {"model_type"});
  if (type == nullptr || !type->IsString()) return Field("model_type", "is missing");
  c.model_type.assign(type->GetString(), type->GetStringLength());
  if (c.model_type == "llama" || c.model_type == "mistral" || c.model_type == "qwen2") {
    c.architecture = Architecture::kLlama;
  } else if (c.model_type == "gpt2") {
    c.architecture = Architecture::kGpt2;
  } else {
    return Status::Unimplemented("config.json: model_type '" + c.model_type.substr(0, 64) +
                                 "' is not one inferd runs (llama, mistral, qwen2, gpt2)");
  }
  const bool gpt2 = c.architecture == Architecture::kGpt2;
  INFERD_RETURN_IF_ERROR(GetInt(o, {"vocab_size"}, 1, kMaxVocab, &c.vocab_size, true));
  INFERD_RETURN_IF_ERROR(GetInt(o, {"hidden_size", "n_embd"}, 1, kMaxHiddenSize, &c.hidden_size, true));
  INFERD_RETURN_IF_ERROR(GetInt(o, {"num_hidden_layers", "n_layer"}, 1, kMaxLayers, &c.num_layers, true));
  INFERD_RETURN_IF_ERROR(GetInt(o, {"num_attention_heads", "n_head"}, 1, c.hidden_size, &c.num_heads, true));
  c.num_kv_heads = c.num_heads;
  INFERD_RETURN_IF_ERROR(GetInt(o, {"num_key_value_heads"}, 1, c.num_heads, &c.num_kv_heads, false));
  if (c.num_heads % c.num_kv_heads != 0) return Field("num_key_value_heads", "must divide num_attention_heads");
  c.head_dim = c.hidden_size / c.num_heads;
  INFERD_RETURN_IF_ERROR(GetInt(o, {"head_dim"}, 1, kMaxHiddenSize, &c.head_dim, false));
  if (gpt2 && c.head_dim * c.num_heads != c.hidden_size) return Field("n_head", "must divide n_embd");
  if (c.head_dim % 2 != 0) return Field("head_dim", "must be even");
  c.intermediate_size = gpt2 ? 4 * c.hidden_size : 0;
  INFERD_RETURN_IF_ERROR(
      GetInt(o, {"intermediate_size", "n_inner"}, 1, 16 * kMaxHiddenSize, &c.intermediate_size, !gpt2));
  INFERD_RETURN_IF_ERROR(
      GetInt(o, {"max_position_embeddings", "n_positions"}, 1, kMaxPositions, &c.max_positions, true));
  int64_t window = 0;
  INFERD_RETURN_IF_ERROR(GetInt(o, {"sliding_window"}, 1, kMaxPositions, &window, false));
  bool use_window = c.model_type == "mistral";
  INFERD_RETURN_IF_ERROR(GetBool(o, "use_sliding_window", &use_window));
  // A context no longer than the window needs no sliding-window attention.
  if (use_window && window > 0 && window < c.max_positions) c.max_positions = window;
  INFERD_RETURN_IF_ERROR(GetDouble(o, {"rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps"}, 0, 1, &c.norm_eps));
  INFERD_RETURN_IF_ERROR(GetDouble(o, {"rope_theta"}, 0, 1e12, &c.rope_theta));
  if (const rapidjson::Value* rs = Get(o, {"rope_scaling"})) {
    (void)rs;
    return Status::Unimplemented("config.json: rope_scaling is not supported by inferd yet");
  }
  c.tie_word_embeddings = gpt2;
  INFERD_RETURN_IF_ERROR(GetBool(o, "tie_word_embeddings", &c.tie_word_embeddings));
  c.attention_bias = gpt2 || c.model_type == "qwen2";
  INFERD_RETURN_IF_ERROR(GetBool(o, "attention_bias", &c.attention_bias));
  c.mlp_bias = gpt2;
  INFERD_RETURN_IF_ERROR(GetBool(o, "mlp_bias", &c.mlp_bias));
  c.hidden_act = gpt2 ? "gelu_new" : "silu";
  if (const rapidjson::Value* act = Get(o, {"hidden_act", "activation_function"})) {
    if (!act->IsString()) return Field("hidden_act", "must be a string");
    c.hidden_act.assign(act->GetString(), act->GetStringLength());
  }
  const bool act_ok = gpt2 ? (c.hidden_act == "gelu_new" || c.hidden_act == "gelu" ||
                              c.hidden_act == "gelu_pytorch_tanh" || c.hidden_act == "relu")
                           : c.hidden_act == "silu";
  if (!act_ok) {
    return Status::Unimplemented("config.json: activation '" + c.hidden_act.substr(0, 32) + "' is not supported for " +
                                 c.model_type);
  }
  INFERD_RETURN_IF_ERROR(GetTokenIds(o, "eos_token_id", c.vocab_size, &c.eos_token_ids));
  std::vector<int32_t> bos;
  INFERD_RETURN_IF_ERROR(GetTokenIds(o, "bos_token_id", c.vocab_size, &bos));
  if (!bos.empty()) c.bos_token_id = bos.front();
  if (const rapidjson::Value* dt = Get(o, {"torch_dtype", "dtype"}); dt != nullptr && dt->IsString()) {
    std::string_view s(dt->GetString(), dt->GetStringLength());
    c.torch_dtype = s == "bfloat16" ? DataType::kBf16 : s == "float16" ? DataType::kFp16 : DataType::kFp32;
  }
  return c;
}

}  // namespace inferd::llm
