#include "llm/lora_adapter.h"

#include <rapidjson/document.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/datatype.h"

namespace inferd::llm {
namespace {

constexpr std::array<std::string_view, kLoraModules> kModuleNames = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                                     "gate_proj", "up_proj", "down_proj"};

Status LoraBad(std::string_view field, std::string_view why) {
  return Status::InvalidArgument("adapter_config.json: '" + std::string(field) + "' " + std::string(why));
}

Status LoraUnsupported(std::string_view what) {
  return Status::Unimplemented("adapter_config.json: " + std::string(what) + " is not supported");
}

// A target_modules entry: a module name, or a dotted path ending in one (PEFT matches by suffix).
Status AddTarget(std::string_view entry, LoraConfig* c) {
  const size_t dot = entry.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? entry : entry.substr(dot + 1);
  for (int m = 0; m < kLoraModules; ++m) {
    if (last == kModuleNames[static_cast<size_t>(m)]) {
      c->targets[static_cast<size_t>(m)] = true;
      return Status::OK();
    }
  }
  return Status::InvalidArgument("adapter_config.json: target module '" + std::string(entry.substr(0, 64)) +
                                 "' is not one this model has (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                                 "down_proj)");
}

// Expected [out, in] of a module's weight in the base model.
std::pair<int64_t, int64_t> ModuleShape(LoraModule m, const DecoderConfig& b) {
  const int64_t q = b.num_heads * b.head_dim, kv = b.num_kv_heads * b.head_dim;
  switch (m) {
    case LoraModule::kQ:
      return {q, b.hidden_size};
    case LoraModule::kK:
    case LoraModule::kV:
      return {kv, b.hidden_size};
    case LoraModule::kO:
      return {b.hidden_size, q};
    case LoraModule::kGate:
    case LoraModule::kUp:
      return {b.intermediate_size, b.hidden_size};
    case LoraModule::kDown:
      return {b.hidden_size, b.intermediate_size};
  }
  return {0, 0};
}

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// base_model.model.model.layers.<i>.<self_attn|mlp>.<module>.lora_<A|B>[.<adapter>].weight
struct TensorName {
  int64_t layer = 0;
  LoraModule module = LoraModule::kQ;
  bool is_b = false;
};

bool ParseTensorName(std::string_view name, TensorName* t) {
  constexpr std::string_view kPrefix = "base_model.model.model.layers.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return false;
  name.remove_prefix(kPrefix.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 6) return false;
  auto [p, ec] = std::from_chars(name.data(), name.data() + dot, t->layer);
  if (ec != std::errc() || p != name.data() + dot) return false;
  name.remove_prefix(dot + 1);
  for (int m = 0; m < kLoraModules; ++m) {
    const std::string parent = m <= static_cast<int>(LoraModule::kO) ? "self_attn." : "mlp.";
    const std::string head = parent + std::string(kModuleNames[static_cast<size_t>(m)]) + ".lora_";
    if (name.substr(0, head.size()) != head) continue;
    std::string_view rest = name.substr(head.size());
    if (rest.empty() || (rest[0] != 'A' && rest[0] != 'B')) return false;
    t->is_b = rest[0] == 'B';
    rest.remove_prefix(1);
    if (rest == ".weight") {
      t->module = static_cast<LoraModule>(m);
      return true;
    }
    // An adapter name between: ".<name>.weight".
    constexpr std::string_view kTail = ".weight";
    if (rest.size() > kTail.size() + 1 && rest[0] == '.' && rest.substr(rest.size() - kTail.size()) == kTail &&
        rest.substr(1, rest.size() - 1 - kTail.size()).find('.') == std::string_view::npos) {
      t->module = static_cast<LoraModule>(m);
      return true;
    }
    return false;
  }
  return false;
}

Status ToFloat(const SafetensorsEntry& e, std::string_view bytes, std::vector<float>* out) {
  const size_t n = bytes.size() / DataTypeByteSize(e.dtype);
  out->resize(n);
  if (e.dtype == DataType::kFp32) {
    std::memcpy(out->data(), bytes.data(), n * sizeof(float));
  } else if (e.dtype == DataType::kFp16 || e.dtype == DataType::kBf16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      (*out)[i] = e.dtype == DataType::kFp16 ? HalfToFloat(h) : Bf16ToFloat(h);
    }
  } else {
    return Status::InvalidArgument("adapter tensors must be F32, F16 or BF16");
  }
  for (float v : *out) {
    if (!std::isfinite(v)) return Status::InvalidArgument("an adapter tensor holds a value that is not finite");
  }
  return Status::OK();
}

}  // namespace

std::string_view LoraModuleName(LoraModule m) { return kModuleNames[static_cast<size_t>(m)]; }

double LoraConfig::scale() const {
  return rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
}

int64_t LoraAdapter::bytes() const {
  int64_t n = 0;
  for (const auto& layer : layers)
    for (const LoraPair& p : layer) n += static_cast<int64_t>((p.a.size() + p.b.size()) * sizeof(float));
  return n;
}

Result<LoraConfig> ParseLoraConfig(std::string_view json, const LoraLimits& limits) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(json.data(), json.size());
  if (d.HasParseError() || !d.IsObject()) return Status::InvalidArgument("adapter_config.json is not a JSON object");
  LoraConfig c;
  const rapidjson::Value& root = d;
  auto get = [&](const char* name) -> const rapidjson::Value* {
    const auto it = root.FindMember(name);
    return it == root.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
  };
  if (const auto* v = get("peft_type"); v != nullptr && !(v->IsString() && std::string_view(v->GetString()) == "LORA"))
    return LoraUnsupported("a peft_type other than LORA");
  const auto* r = get("r");
  if (r == nullptr || !r->IsInt() || r->GetInt() < 1) return LoraBad("r", "must be a positive integer");
  if (r->GetInt() > limits.max_rank) {
    return LoraBad("r", "is " + std::to_string(r->GetInt()) + "; this server takes ranks up to " +
                            std::to_string(limits.max_rank) + " (max_lora_rank)");
  }
  c.rank = r->GetInt();
  const auto* alpha = get("lora_alpha");
  if (alpha == nullptr) {
    c.alpha = c.rank;  // PEFT's default is 8 with r 8; absent means the plain B A
  } else if (!alpha->IsNumber() || !std::isfinite(alpha->GetDouble()) || alpha->GetDouble() <= 0) {
    return LoraBad("lora_alpha", "must be a positive number");
  } else {
    c.alpha = alpha->GetDouble();
  }
  if (const auto* v = get("use_rslora")) {
    if (!v->IsBool()) return LoraBad("use_rslora", "must be true or false");
    c.rslora = v->GetBool();
  }
  if (const auto* v = get("use_dora"); v != nullptr && !(v->IsBool() && !v->GetBool()))
    return LoraUnsupported("use_dora (DoRA)");
  if (const auto* v = get("bias"); v != nullptr && !(v->IsString() && std::string_view(v->GetString()) == "none"))
    return LoraUnsupported("bias other than \"none\" (trained biases)");
  if (const auto* v = get("fan_in_fan_out"); v != nullptr && !(v->IsBool() && !v->GetBool()))
    return LoraUnsupported("fan_in_fan_out");
  if (const auto* v = get("modules_to_save"); v != nullptr && !(v->IsArray() && v->Empty()))
    return LoraUnsupported("modules_to_save");
  for (const char* name : {"rank_pattern", "alpha_pattern"}) {
    if (const auto* v = get(name); v != nullptr && !(v->IsObject() && v->MemberCount() == 0))
      return LoraUnsupported(std::string(name) + " (per-module ranks or alphas)");
  }
  const auto* targets = get("target_modules");
  if (targets == nullptr) return LoraBad("target_modules", "is required");
  if (targets->IsString()) {
    if (std::string_view(targets->GetString()) != "all-linear")
      return LoraUnsupported("a regular expression in target_modules (list the modules)");
    c.targets.fill(true);
  } else if (targets->IsArray() && !targets->Empty() && targets->Size() <= 64) {
    for (const auto& t : targets->GetArray()) {
      if (!t.IsString()) return LoraBad("target_modules", "must be a list of module names");
      INFERD_RETURN_IF_ERROR(AddTarget(std::string_view(t.GetString(), t.GetStringLength()), &c));
    }
  } else {
    return LoraBad("target_modules", "must be a non-empty list of module names or \"all-linear\"");
  }
  if (const auto* v = get("layers_to_transform")) {
    if (v->IsInt()) {
      c.layers.push_back(v->GetInt());
    } else if (v->IsArray() && v->Size() <= static_cast<unsigned>(kMaxLayers)) {
      for (const auto& l : v->GetArray()) {
        if (!l.IsInt()) return LoraBad("layers_to_transform", "must be a layer index or a list of them");
        c.layers.push_back(l.GetInt());
      }
    } else {
      return LoraBad("layers_to_transform", "must be a layer index or a list of them");
    }
    for (int64_t l : c.layers) {
      if (l < 0 || l >= kMaxLayers) return LoraBad("layers_to_transform", "holds a layer index out of range");
    }
  }
  if (const auto* v = get("base_model_name_or_path")) {
    if (!v->IsString()) return LoraBad("base_model_name_or_path", "must be a string");
    c.base_model.assign(v->GetString(), std::min<size_t>(v->GetStringLength(), 1024));
  }
  return c;
}

Result<LoraAdapter> ReadLoraAdapter(const LoraConfig& config, const SafetensorsFile& weights,
                                    const DecoderConfig& base) {
  if (base.architecture != Architecture::kLlama)
    return Status::InvalidArgument("LoRA adapters need a Llama-architecture base model");
  std::set<int64_t> adapted(config.layers.begin(), config.layers.end());
  for (int64_t l : adapted) {
    if (l >= base.num_layers) {
      return Status::InvalidArgument("layers_to_transform names layer " + std::to_string(l) + "; the model has " +
                                     std::to_string(base.num_layers));
    }
  }
  if (adapted.empty())
    for (int64_t l = 0; l < base.num_layers; ++l) adapted.insert(l);
  LoraAdapter a;
  a.config = config;
  a.layers.resize(static_cast<size_t>(base.num_layers));
  for (const auto& [name, entry] : weights.header().tensors) {
    TensorName t;
    const std::string shown = name.substr(0, 160);
    if (!ParseTensorName(name, &t)) {
      return Status::InvalidArgument("adapter tensor '" + shown +
                                     "' is not a LoRA matrix of a layer's q/k/v/o or gate/up/down projection");
    }
    if (t.layer < 0 || t.layer >= base.num_layers || !adapted.count(t.layer)) {
      return Status::InvalidArgument("adapter tensor '" + shown +
                                     "' is for a layer the adapter does not adapt (the "
                                     "model has " +
                                     std::to_string(base.num_layers) + " layers)");
    }
    if (!config.targets[static_cast<size_t>(t.module)]) {
      return Status::InvalidArgument("adapter tensor '" + shown + "' is for " + std::string(LoraModuleName(t.module)) +
                                     ", which target_modules does not name");
    }
    const auto [out, in] = ModuleShape(t.module, base);
    const std::vector<int64_t> want =
        t.is_b ? std::vector<int64_t>{out, config.rank} : std::vector<int64_t>{config.rank, in};
    if (entry.shape != want) {
      return Status::InvalidArgument("adapter tensor '" + shown + "' is " + ShapeText(entry.shape) + "; " +
                                     std::string(LoraModuleName(t.module)) + " with r " + std::to_string(config.rank) +
                                     " on this base model needs " + ShapeText(want) +
                                     " (a rank other than r, or an adapter for another base model)");
    }
    LoraPair& p = a.layers[static_cast<size_t>(t.layer)][static_cast<size_t>(t.module)];
    p.in = in;
    p.out = out;
    std::vector<float>& dst = t.is_b ? p.b : p.a;
    if (!dst.empty()) return Status::InvalidArgument("adapter tensor '" + shown + "' appears twice");
    INFERD_RETURN_IF_ERROR(ToFloat(entry, weights.Data(entry), &dst));
  }
  for (int64_t l : adapted) {
    for (int m = 0; m < kLoraModules; ++m) {
      if (!config.targets[static_cast<size_t>(m)]) continue;
      const LoraPair& p = a.layers[static_cast<size_t>(l)][static_cast<size_t>(m)];
      if (p.a.empty() || p.b.empty()) {
        return Status::InvalidArgument(
            "adapter_model.safetensors lacks " + std::string(p.a.empty() ? "lora_A" : "lora_B") + " of layer " +
            std::to_string(l) + "'s " + std::string(LoraModuleName(static_cast<LoraModule>(m))));
      }
    }
  }
  // The serving form: b = scale * B^T.
  const float scale = static_cast<float>(config.scale());
  for (auto& layer : a.layers) {
    for (LoraPair& p : layer) {
      if (p.empty()) continue;
      std::vector<float> bt(p.b.size());
      const int64_t r = config.rank;
      for (int64_t o = 0; o < p.out; ++o)
        for (int64_t j = 0; j < r; ++j)
          bt[static_cast<size_t>(j * p.out + o)] = scale * p.b[static_cast<size_t>(o * r + j)];
      p.b = std::move(bt);
    }
  }
  return a;
}

Result<std::shared_ptr<const LoraAdapter>> LoadLoraAdapter(const std::string& dir, const DecoderConfig& base,
                                                           const LoraLimits& limits) {
  namespace fs = std::filesystem;
  const fs::path config_path = fs::path(dir) / "adapter_config.json";
  const fs::path weights_path = fs::path(dir) / "adapter_model.safetensors";
  std::error_code ec;
  const auto config_size = fs::file_size(config_path, ec);
  if (ec) return Status::NotFound("no adapter_config.json in " + dir);
  if (config_size > (1u << 20)) return Status::InvalidArgument("adapter_config.json is larger than 1 MiB");
  const auto weights_size = fs::file_size(weights_path, ec);
  if (ec) return Status::NotFound("no adapter_model.safetensors in " + dir);
  if (weights_size > limits.max_file_bytes) {
    return Status::InvalidArgument("adapter_model.safetensors is " + std::to_string(weights_size) +
                                   " bytes; the limit is " + std::to_string(limits.max_file_bytes));
  }
  std::ifstream in(config_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  INFERD_ASSIGN_OR_RETURN(LoraConfig config, ParseLoraConfig(ss.str(), limits));
  INFERD_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(weights_path.string()));
  INFERD_ASSIGN_OR_RETURN(LoraAdapter adapter, ReadLoraAdapter(config, *file, base));
  return std::shared_ptr<const LoraAdapter>(std::make_shared<LoraAdapter>(std::move(adapter)));
}

}  // namespace inferd::llm
