#include "llm/lora_adapter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/datatype.h"

namespace inferd::llm {
namespace {

// A safetensors file from (name -> shape, values), F32 (or BF16 for names in `bf16`).
std::string Safetensors(const std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>& tensors,
                        const std::set<std::string>& bf16 = {}) {
  std::string header = "{", data;
  for (const auto& [name, t] : tensors) {
    const bool half = bf16.count(name) > 0;
    const size_t begin = data.size();
    for (float v : t.second) {
      if (half) {
        const uint16_t b = FloatToBf16(v);
        data.append(reinterpret_cast<const char*>(&b), 2);
      } else {
        data.append(reinterpret_cast<const char*>(&v), 4);
      }
    }
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"" + (half ? "BF16" : "F32") + "\",\"shape\":[";
    for (size_t i = 0; i < t.first.size(); ++i) header += (i ? "," : "") + std::to_string(t.first[i]);
    header += "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  const uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

DecoderConfig Base(int64_t hidden = 16) {
  DecoderConfig c;
  c.hidden_size = hidden;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = hidden / 2;
  c.intermediate_size = 24;
  return c;
}

using Tensors = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;

std::string Name(int layer, const char* parent, const char* module, char ab) {
  return "base_model.model.model.layers." + std::to_string(layer) + "." + parent + "." + module + ".lora_" + ab +
         ".weight";
}

// q_proj [16 <- 16] and v_proj [8 <- 16] of both layers, rank r.
Tensors QvTensors(int64_t r, int64_t hidden = 16) {
  Tensors t;
  for (int l = 0; l < 2; ++l) {
    for (auto [module, out] : {std::pair<const char*, int64_t>{"q_proj", hidden}, {"v_proj", hidden / 2}}) {
      std::vector<float> a(static_cast<size_t>(r * hidden)), b(static_cast<size_t>(out * r));
      for (size_t i = 0; i < a.size(); ++i) a[i] = 0.01f * static_cast<float>(i + l);
      for (size_t i = 0; i < b.size(); ++i) b[i] = -0.02f * static_cast<float>(i);
      t[Name(l, "self_attn", module, 'A')] = {{r, hidden}, a};
      t[Name(l, "self_attn", module, 'B')] = {{out, r}, b};
    }
  }
  return t;
}

const char* kQv = R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
  "base_model_name_or_path": "tiny-llama", "bias": "none", "use_rslora": false, "modules_to_save": null,
  "rank_pattern": {}, "alpha_pattern": {}, "fan_in_fan_out": false, "task_type": "CAUSAL_LM"})";

Result<LoraAdapter> Read(const char* config_json, const Tensors& t, const DecoderConfig& base = Base(),
                         const std::set<std::string>& bf16 = {}) {
  INFERD_ASSIGN_OR_RETURN(LoraConfig c, ParseLoraConfig(config_json, LoraLimits{}));
  INFERD_ASSIGN_OR_RETURN(auto f, SafetensorsFile::FromBytes(Safetensors(t, bf16)));
  return ReadLoraAdapter(c, *f, base);
}

TEST(LoraConfigTest, ReadsPeftsFields) {
  auto c = ParseLoraConfig(kQv, LoraLimits{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rank, 4);
  EXPECT_DOUBLE_EQ(c->scale(), 2.0);
  EXPECT_TRUE(c->targets[static_cast<size_t>(LoraModule::kQ)]);
  EXPECT_TRUE(c->targets[static_cast<size_t>(LoraModule::kV)]);
  EXPECT_FALSE(c->targets[static_cast<size_t>(LoraModule::kK)]);
  EXPECT_EQ(c->base_model, "tiny-llama");
  auto rs = ParseLoraConfig(R"({"r": 16, "lora_alpha": 8, "use_rslora": true, "target_modules": "all-linear",
                                "layers_to_transform": [1]})",
                            LoraLimits{});
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  EXPECT_DOUBLE_EQ(rs->scale(), 2.0);  // 8 / sqrt(16)
  for (bool t : rs->targets) EXPECT_TRUE(t);
  EXPECT_EQ(rs->layers, std::vector<int64_t>{1});
  auto dotted = ParseLoraConfig(R"({"r": 2, "target_modules": ["model.layers.0.mlp.down_proj"]})", LoraLimits{});
  ASSERT_TRUE(dotted.ok());
  EXPECT_TRUE(dotted->targets[static_cast<size_t>(LoraModule::kDown)]);
}

TEST(LoraConfigTest, NamesWhatItRefuses) {
  const std::vector<std::tuple<const char*, StatusCode, const char*>> cases = {
      {"not json", StatusCode::kInvalidArgument, "not a JSON object"},
      {R"({"r": 0, "target_modules": ["q_proj"]})", StatusCode::kInvalidArgument, "'r'"},
      {R"({"r": 128, "target_modules": ["q_proj"]})", StatusCode::kInvalidArgument, "max_lora_rank"},
      {R"({"r": 8})", StatusCode::kInvalidArgument, "target_modules"},
      {R"({"r": 8, "target_modules": ["lm_head"]})", StatusCode::kInvalidArgument, "'lm_head' is not one"},
      {R"({"r": 8, "target_modules": ".*proj"})", StatusCode::kUnimplemented, "regular expression"},
      {R"({"r": 8, "lora_alpha": -1, "target_modules": ["q_proj"]})", StatusCode::kInvalidArgument, "lora_alpha"},
      {R"({"r": 8, "use_dora": true, "target_modules": ["q_proj"]})", StatusCode::kUnimplemented, "DoRA"},
      {R"({"r": 8, "bias": "all", "target_modules": ["q_proj"]})", StatusCode::kUnimplemented, "bias"},
      {R"({"r": 8, "modules_to_save": ["lm_head"], "target_modules": ["q_proj"]})", StatusCode::kUnimplemented,
       "modules_to_save"},
      {R"({"r": 8, "rank_pattern": {"q_proj": 4}, "target_modules": ["q_proj"]})", StatusCode::kUnimplemented,
       "rank_pattern"},
      {R"({"r": 8, "fan_in_fan_out": true, "target_modules": ["q_proj"]})", StatusCode::kUnimplemented,
       "fan_in_fan_out"},
      {R"({"r": 8, "peft_type": "IA3", "target_modules": ["q_proj"]})", StatusCode::kUnimplemented, "peft_type"},
      {R"({"r": 8, "layers_to_transform": [-1], "target_modules": ["q_proj"]})", StatusCode::kInvalidArgument,
       "layers_to_transform"},
  };
  for (const auto& [json, code, needle] : cases) {
    auto c = ParseLoraConfig(json, LoraLimits{});
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_EQ(c.status().code(), code) << json;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  }
}

TEST(LoraAdapterTest, ReadsEveryTargetedMatrix) {
  const Tensors t = QvTensors(4);
  std::set<std::string> bf16 = {Name(1, "self_attn", "v_proj", 'B')};
  auto a = Read(kQv, t, Base(), bf16);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->layers.size(), 2u);
  const LoraPair& q0 = a->layers[0][static_cast<size_t>(LoraModule::kQ)];
  EXPECT_EQ(q0.in, 16);
  EXPECT_EQ(q0.out, 16);
  EXPECT_EQ(q0.a, t.at(Name(0, "self_attn", "q_proj", 'A')).second);
  const LoraPair& v1 = a->layers[1][static_cast<size_t>(LoraModule::kV)];
  ASSERT_EQ(v1.b.size(), 32u);  // scale * B^T: [4, 8]; B [8, 4] held -0.02 * (o * 4 + j)
  const double scale = a->config.scale();
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t o = 0; o < 8; ++o)
      EXPECT_NEAR(v1.b[static_cast<size_t>(j * 8 + o)], scale * -0.02 * static_cast<double>(o * 4 + j),
                  0.01 * scale);  // BF16
  EXPECT_TRUE(a->layers[0][static_cast<size_t>(LoraModule::kK)].empty());
  EXPECT_EQ(a->bytes(), 2 * (4 * 16 + 16 * 4 + 4 * 16 + 8 * 4) * 4);
  // The adapter name some PEFT versions keep in the tensor names.
  Tensors named;
  for (const auto& [name, v] : t) named[name.substr(0, name.size() - 7) + ".default.weight"] = v;
  EXPECT_TRUE(Read(kQv, named).ok());
}

TEST(LoraAdapterTest, RefusesBadAdaptersByName) {
  // A rank other than r.
  auto rank = Read(kQv, QvTensors(8));
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("needs [4, 16]"), std::string::npos) << rank.status().message();
  // An adapter for another base (hidden 32).
  auto other = Read(kQv, QvTensors(4, 32));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("another base model"), std::string::npos) << other.status().message();
  // A missing matrix.
  Tensors missing = QvTensors(4);
  missing.erase(Name(1, "self_attn", "v_proj", 'B'));
  auto m = Read(kQv, missing);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("lacks lora_B of layer 1's v_proj"), std::string::npos) << m.status().message();
  // A tensor that is not a projection's LoRA matrix, one for a module not targeted, one for a layer not there.
  Tensors extra = QvTensors(4);
  extra["base_model.model.lm_head.lora_A.weight"] = {{4, 16}, std::vector<float>(64, 0.0f)};
  auto e = Read(kQv, extra);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("is not a LoRA matrix"), std::string::npos) << e.status().message();
  Tensors k = QvTensors(4);
  k[Name(0, "self_attn", "k_proj", 'A')] = {{4, 16}, std::vector<float>(64, 0.0f)};
  auto kr = Read(kQv, k);
  ASSERT_FALSE(kr.ok());
  EXPECT_NE(kr.status().message().find("target_modules does not name"), std::string::npos) << kr.status().message();
  Tensors far = QvTensors(4);
  far[Name(7, "self_attn", "q_proj", 'A')] = {{4, 16}, std::vector<float>(64, 0.0f)};
  auto fr = Read(kQv, far);
  ASSERT_FALSE(fr.ok());
  EXPECT_NE(fr.status().message().find("the model has 2 layers"), std::string::npos) << fr.status().message();
  // Values that are not finite; a base that is not Llama.
  Tensors nan = QvTensors(4);
  nan[Name(0, "self_attn", "q_proj", 'A')].second[3] = std::nanf("");
  EXPECT_FALSE(Read(kQv, nan).ok());
  DecoderConfig gpt2 = Base();
  gpt2.architecture = Architecture::kGpt2;
  auto g = Read(kQv, QvTensors(4), gpt2);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("Llama"), std::string::npos);
}

TEST(LoraAdapterTest, LoadsAFolderAndChecksItsFiles) {
  const auto dir = std::filesystem::temp_directory_path() / ("inferd-lora-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_EQ(LoadLoraAdapter(dir.string(), Base(), LoraLimits{}).status().code(), StatusCode::kNotFound);
  std::ofstream(dir / "adapter_config.json") << kQv;
  std::ofstream(dir / "adapter_model.safetensors", std::ios::binary) << Safetensors(QvTensors(4));
  auto a = LoadLoraAdapter(dir.string(), Base(), LoraLimits{});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->config.rank, 4);
  LoraLimits small;
  small.max_file_bytes = 100;
  auto big = LoadLoraAdapter(dir.string(), Base(), small);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("the limit is 100"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace inferd::llm
