#include "backends/llm/aten_decoder.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <rapidjson/document.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "backends/llm/decode_kernels.h"
#include "backends/llm/packed_matrix.h"
#include "llm/lora_adapter.h"
#include "llm/safetensors.h"

namespace inferd::llm {

struct LayerWeights {
  at::Tensor norm1_w, norm1_b, norm2_w, norm2_b;  // biases: GPT-2 only
  at::Tensor qkv_w, qkv_b;                        // [q + k + v, hidden]; bias may be undefined
  at::Tensor o_w, o_b;
  at::Tensor up_w, up_b;  // Llama: gate and up stacked [2 * inter, hidden]; GPT-2: c_fc
  at::Tensor down_w, down_b;
  PackedMatrix qkv_q, o_q, up_q, down_q;  // WeightOptions::int8 or ::bf16
};

struct DecoderWeights {
  DecoderConfig config;
  at::Tensor embed;      // [vocab, hidden]
  at::Tensor positions;  // GPT-2: [max_positions, hidden]
  std::vector<LayerWeights> layers;
  at::Tensor final_w, final_b;
  at::Tensor lm_head;   // [vocab, hidden] (the embedding when tied)
  at::Tensor inv_freq;  // Llama: [head_dim / 2]
  PackedMatrix lm_head_q;
};

namespace {

namespace fs = std::filesystem;

std::string Shape(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The tensors of a model folder by name, across shards.
class WeightFiles {
 public:
  Status Open(const std::string& dir) {
    const fs::path single = fs::path(dir) / "model.safetensors";
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(single)) {
      INFERD_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(single.string()));
      files_.push_back(f);
      for (const auto& [name, e] : f->header().tensors) where_[name] = f.get();
      return Status::OK();
    }
    if (!fs::exists(index)) return Status::NotFound("no model.safetensors or model.safetensors.index.json in " + dir);
    std::ifstream in(index);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
    if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("weight_map") || !doc["weight_map"].IsObject()) {
      return Status::InvalidArgument("model.safetensors.index.json has no weight_map object");
    }
    std::map<std::string, const SafetensorsFile*> shards;
    for (auto it = doc["weight_map"].MemberBegin(); it != doc["weight_map"].MemberEnd(); ++it) {
      if (!it->value.IsString()) return Status::InvalidArgument("model.safetensors.index.json: a shard is not a name");
      const std::string shard(it->value.GetString(), it->value.GetStringLength());
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
        return Status::InvalidArgument("model.safetensors.index.json: shard '" + shard.substr(0, 64) +
                                       "' is not a file name in the model folder");
      }
      if (!shards.count(shard)) {
        INFERD_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open((fs::path(dir) / shard).string()));
        files_.push_back(f);
        shards[shard] = f.get();
      }
      where_[std::string(it->name.GetString(), it->name.GetStringLength())] = shards[shard];
    }
    return Status::OK();
  }

  bool Has(const std::string& name) const { return where_.count(name) > 0; }

  // The tensor as FP32, checked against `shape`.
  Result<at::Tensor> Get(const std::string& name, const std::vector<int64_t>& shape) const {
    auto it = where_.find(name);
    const SafetensorsEntry* e = it == where_.end() ? nullptr : it->second->Find(name);
    if (e == nullptr) return Status::InvalidArgument("model.safetensors has no tensor '" + name + "'");
    if (e->shape != shape) {
      return Status::InvalidArgument("model.safetensors: '" + name + "' has shape " + Shape(e->shape) +
                                     ", config.json needs " + Shape(shape));
    }
    at::ScalarType st;
    switch (e->dtype) {
      case DataType::kFp32:
        st = at::kFloat;
        break;
      case DataType::kFp16:
        st = at::kHalf;
        break;
      case DataType::kBf16:
        st = at::kBFloat16;
        break;
      case DataType::kFp64:
        st = at::kDouble;
        break;
      default:
        return Status::InvalidArgument("model.safetensors: '" + name + "' is not a floating-point tensor");
    }
    std::string_view bytes = it->second->Data(*e);
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(st));
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());  // the file's data may be misaligned
    if (st != at::kFloat) t = t.to(at::kFloat);
    if (!at::isfinite(t).all().item<bool>()) {
      return Status::InvalidArgument("model.safetensors: '" + name + "' holds NaN or infinite values");
    }
    return t;
  }

 private:
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

Result<std::shared_ptr<const DecoderWeights>> LoadLlama(const WeightFiles& f, const DecoderConfig& c) {
  auto w = std::make_shared<DecoderWeights>();
  w->config = c;
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q = c.num_heads * D, kv = c.num_kv_heads * D;
  INFERD_ASSIGN_OR_RETURN(w->embed, f.Get("model.embed_tokens.weight", {c.vocab_size, H}));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights L;
    INFERD_ASSIGN_OR_RETURN(L.norm1_w, f.Get(p + "input_layernorm.weight", {H}));
    INFERD_ASSIGN_OR_RETURN(L.norm2_w, f.Get(p + "post_attention_layernorm.weight", {H}));
    INFERD_ASSIGN_OR_RETURN(at::Tensor wq, f.Get(p + "self_attn.q_proj.weight", {q, H}));
    INFERD_ASSIGN_OR_RETURN(at::Tensor wk, f.Get(p + "self_attn.k_proj.weight", {kv, H}));
    INFERD_ASSIGN_OR_RETURN(at::Tensor wv, f.Get(p + "self_attn.v_proj.weight", {kv, H}));
    L.qkv_w = at::cat({wq, wk, wv}, 0).contiguous();
    if (c.attention_bias) {
      INFERD_ASSIGN_OR_RETURN(at::Tensor bq, f.Get(p + "self_attn.q_proj.bias", {q}));
      INFERD_ASSIGN_OR_RETURN(at::Tensor bk, f.Get(p + "self_attn.k_proj.bias", {kv}));
      INFERD_ASSIGN_OR_RETURN(at::Tensor bv, f.Get(p + "self_attn.v_proj.bias", {kv}));
      L.qkv_b = at::cat({bq, bk, bv}, 0).contiguous();
    }
    INFERD_ASSIGN_OR_RETURN(L.o_w, f.Get(p + "self_attn.o_proj.weight", {H, q}));
    // Qwen2 has biases on q, k and v only; Llama's attention_bias covers o too.
    if (c.attention_bias && f.Has(p + "self_attn.o_proj.bias")) {
      INFERD_ASSIGN_OR_RETURN(L.o_b, f.Get(p + "self_attn.o_proj.bias", {H}));
    }
    INFERD_ASSIGN_OR_RETURN(at::Tensor gate, f.Get(p + "mlp.gate_proj.weight", {I, H}));
    INFERD_ASSIGN_OR_RETURN(at::Tensor up, f.Get(p + "mlp.up_proj.weight", {I, H}));
    L.up_w = at::cat({gate, up}, 0).contiguous();
    INFERD_ASSIGN_OR_RETURN(L.down_w, f.Get(p + "mlp.down_proj.weight", {H, I}));
    if (c.mlp_bias) {
      INFERD_ASSIGN_OR_RETURN(at::Tensor bg, f.Get(p + "mlp.gate_proj.bias", {I}));
      INFERD_ASSIGN_OR_RETURN(at::Tensor bu, f.Get(p + "mlp.up_proj.bias", {I}));
      L.up_b = at::cat({bg, bu}, 0).contiguous();
      INFERD_ASSIGN_OR_RETURN(L.down_b, f.Get(p + "mlp.down_proj.bias", {H}));
    }
    w->layers.push_back(std::move(L));
  }
  INFERD_ASSIGN_OR_RETURN(w->final_w, f.Get("model.norm.weight", {H}));
  if (c.tie_word_embeddings || !f.Has("lm_head.weight")) {
    if (!c.tie_word_embeddings) return Status::InvalidArgument("model.safetensors has no tensor 'lm_head.weight'");
    w->lm_head = w->embed;
  } else {
    INFERD_ASSIGN_OR_RETURN(w->lm_head, f.Get("lm_head.weight", {c.vocab_size, H}));
  }
  // HF's rotary frequencies, in FP32 as it computes them.
  w->inv_freq = 1.0 / at::pow(c.rope_theta, at::arange(0, D, 2, at::kLong).to(at::kFloat) / static_cast<double>(D));
  w->inv_freq = w->inv_freq.to(at::kFloat);
  return std::shared_ptr<const DecoderWeights>(std::move(w));
}

Result<std::shared_ptr<const DecoderWeights>> LoadGpt2(const WeightFiles& f, const DecoderConfig& c) {
  auto w = std::make_shared<DecoderWeights>();
  w->config = c;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const std::string root = f.Has("wte.weight") ? "" : "transformer.";
  INFERD_ASSIGN_OR_RETURN(w->embed, f.Get(root + "wte.weight", {c.vocab_size, H}));
  INFERD_ASSIGN_OR_RETURN(w->positions, f.Get(root + "wpe.weight", {c.max_positions, H}));
  // Conv1D stores [in, out]: transposed once here so every projection is at::linear.
  auto conv = [&](const std::string& name, int64_t in, int64_t out) -> Result<at::Tensor> {
    INFERD_ASSIGN_OR_RETURN(at::Tensor t, f.Get(name, {in, out}));
    return t.t().contiguous();
  };
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = root + "h." + std::to_string(i) + ".";
    LayerWeights L;
    INFERD_ASSIGN_OR_RETURN(L.norm1_w, f.Get(p + "ln_1.weight", {H}));
    INFERD_ASSIGN_OR_RETURN(L.norm1_b, f.Get(p + "ln_1.bias", {H}));
    INFERD_ASSIGN_OR_RETURN(L.norm2_w, f.Get(p + "ln_2.weight", {H}));
    INFERD_ASSIGN_OR_RETURN(L.norm2_b, f.Get(p + "ln_2.bias", {H}));
    INFERD_ASSIGN_OR_RETURN(L.qkv_w, conv(p + "attn.c_attn.weight", H, 3 * H));
    INFERD_ASSIGN_OR_RETURN(L.qkv_b, f.Get(p + "attn.c_attn.bias", {3 * H}));
    INFERD_ASSIGN_OR_RETURN(L.o_w, conv(p + "attn.c_proj.weight", H, H));
    INFERD_ASSIGN_OR_RETURN(L.o_b, f.Get(p + "attn.c_proj.bias", {H}));
    INFERD_ASSIGN_OR_RETURN(L.up_w, conv(p + "mlp.c_fc.weight", H, I));
    INFERD_ASSIGN_OR_RETURN(L.up_b, f.Get(p + "mlp.c_fc.bias", {I}));
    INFERD_ASSIGN_OR_RETURN(L.down_w, conv(p + "mlp.c_proj.weight", I, H));
    INFERD_ASSIGN_OR_RETURN(L.down_b, f.Get(p + "mlp.c_proj.bias", {H}));
    w->layers.push_back(std::move(L));
  }
  INFERD_ASSIGN_OR_RETURN(w->final_w, f.Get(root + "ln_f.weight", {H}));
  INFERD_ASSIGN_OR_RETURN(w->final_b, f.Get(root + "ln_f.bias", {H}));
  w->lm_head = w->embed;
  return std::shared_ptr<const DecoderWeights>(std::move(w));
}

// Int8 (or bf16) copies of every matrix the decode path multiplies by.
void QuantizeLlama(DecoderWeights* w, bool bf16) {
  const Packing packing = bf16 ? Packing::kBf16 : Packing::kInt8;
  auto pack = [&](at::Tensor& m) { return Pack(m, w->embed, packing); };
  for (LayerWeights& L : w->layers) {
    L.qkv_q = pack(L.qkv_w);
    L.o_q = pack(L.o_w);
    L.up_q = pack(L.up_w);
    L.down_q = pack(L.down_w);
  }
  w->lm_head_q = pack(w->lm_head);
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor var = x.pow(2).mean(-1, /*keepdim=*/true);
  return w * (x * at::rsqrt(var + eps));
}

at::Tensor RotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

class AtenDecoder final : public DecoderModel {
 public:
  AtenDecoder(std::shared_ptr<const DecoderWeights> w, bool fast_decode)
      : w_(std::move(w)), fast_decode_(fast_decode) {}

  const DecoderConfig& config() const override { return w_->config; }

  int64_t CacheBytesPerBlock(int64_t block_size) const override {
    const auto& c = w_->config;
    return c.num_layers * 2 * block_size * c.num_kv_heads * c.head_dim * static_cast<int64_t>(sizeof(float));
  }

  Status AllocateCache(int64_t num_blocks, int64_t block_size) override {
    if (num_blocks <= 0 || block_size <= 0) return Status::InvalidArgument("the KV cache needs at least one block");
    try {
      const auto& c = w_->config;
      cache_ = at::Tensor();
      cache_ = at::zeros({c.num_layers, 2, num_blocks * block_size, c.num_kv_heads, c.head_dim});
      num_blocks_ = num_blocks;
      block_size_ = block_size;
      return Status::OK();
    } catch (const std::exception& e) {
      return Status::ResourceExhausted(std::string("cannot allocate the KV cache: ") + e.what());
    }
  }

  Status Forward(std::span<const StepInput> batch, std::vector<float>* logits) override {
    logits->clear();
    if (batch.empty()) return Status::OK();
    if (!cache_.defined()) return Status::FailedPrecondition("the KV cache is not allocated");
    try {
      c10::InferenceMode guard;
      if (fast_decode_ && SmallStep(batch)) return Decode(batch, logits);
      return Run(batch, logits);
    } catch (const std::exception& e) {
      return Status::Internal(std::string("decoder step failed: ") + e.what());
    }
  }

 private:
  // A sequence's part of the step against the model and the cache: its tokens, positions and block table.
  Status Check(const StepInput& in) const {
    const DecoderConfig& c = w_->config;
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    if (n == 0) return Status::InvalidArgument("a sequence in the step has no tokens");
    if (in.num_logits < 0 || in.num_logits > n) {
      return Status::InvalidArgument("num_logits " + std::to_string(in.num_logits) + " is outside [0, " +
                                     std::to_string(n) + "]");
    }
    for (int32_t t : in.tokens) {
      if (t < 0 || t >= c.vocab_size)
        return Status::InvalidArgument("token id " + std::to_string(t) + " is outside the vocabulary");
    }
    const int64_t end = in.position + n;
    if (in.position < 0 || end > c.max_positions) {
      return Status::InvalidArgument("positions up to " + std::to_string(end) + " exceed the model's context of " +
                                     std::to_string(c.max_positions));
    }
    if (static_cast<int64_t>(in.blocks.size()) * block_size_ < end) {
      return Status::InvalidArgument("the block table does not cover the sequence's positions");
    }
    for (int32_t b : in.blocks) {
      if (b < 0 || b >= num_blocks_) return Status::InvalidArgument("a block id is outside the cache");
    }
    if (in.lora != nullptr) return CheckLora(*in.lora);
    return Status::OK();
  }

  // An adapter's matrices against this model's projections (ReadLoraAdapter checked them against a config; this
  // one must be the same shape).
  Status CheckLora(const LoraAdapter& a) const {
    const DecoderConfig& c = w_->config;
    if (c.architecture != Architecture::kLlama) return Status::InvalidArgument("LoRA adapters need a Llama model");
    if (static_cast<int64_t>(a.layers.size()) != c.num_layers)
      return Status::InvalidArgument("the LoRA adapter has " + std::to_string(a.layers.size()) + " layers, the model " +
                                     std::to_string(c.num_layers));
    for (const auto& layer : a.layers) {
      for (int m = 0; m < kLoraModules; ++m) {
        const LoraPair& p = layer[static_cast<size_t>(m)];
        if (p.empty()) continue;
        const auto [out, in] = ModuleShape(static_cast<LoraModule>(m));
        if (p.in != in || p.out != out || p.a.size() % static_cast<size_t>(in) != 0 ||
            p.b.size() != p.a.size() / static_cast<size_t>(in) * static_cast<size_t>(out)) {
          return Status::InvalidArgument("the LoRA adapter's " +
                                         std::string(LoraModuleName(static_cast<LoraModule>(m))) +
                                         " does not fit the model");
        }
      }
    }
    return Status::OK();
  }

  // [out, in] of a projection an adapter may target, and where its output columns begin in the stacked matrix that
  // computes it (q, k, v in qkv; gate, up in up).
  std::pair<int64_t, int64_t> ModuleShape(LoraModule m) const {
    const DecoderConfig& c = w_->config;
    const int64_t H = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    const int64_t I = c.intermediate_size;
    switch (m) {
      case LoraModule::kQ:
        return {q, H};
      case LoraModule::kK:
      case LoraModule::kV:
        return {kv, H};
      case LoraModule::kO:
        return {H, q};
      case LoraModule::kGate:
      case LoraModule::kUp:
        return {I, H};
      case LoraModule::kDown:
        return {H, I};
    }
    return {0, 0};
  }
  int64_t ModuleOffset(LoraModule m) const {
    const DecoderConfig& c = w_->config;
    switch (m) {
      case LoraModule::kK:
        return c.num_heads * c.head_dim;
      case LoraModule::kV:
        return (c.num_heads + c.num_kv_heads) * c.head_dim;
      case LoraModule::kUp:
        return c.intermediate_size;
      default:
        return 0;
    }
  }

  // The ATen path: every sequence's adapter update of module `m` of layer `l` added to its rows of y (the stacked
  // projection's output), x being the projection's input.
  void AddLora(at::Tensor& y, const at::Tensor& x, std::span<const StepInput> batch, size_t l,
               std::initializer_list<LoraModule> modules) const {
    const auto opts = at::TensorOptions().dtype(at::kFloat);
    int64_t row = 0;
    for (const StepInput& in : batch) {
      const int64_t n = static_cast<int64_t>(in.tokens.size());
      if (in.lora != nullptr) {
        for (LoraModule m : modules) {
          const LoraPair& p = in.lora->layers[l][static_cast<size_t>(m)];
          if (p.empty()) continue;
          const int64_t r = static_cast<int64_t>(p.a.size()) / p.in;
          at::Tensor a = at::from_blob(const_cast<float*>(p.a.data()), {r, p.in}, opts);
          at::Tensor b = at::from_blob(const_cast<float*>(p.b.data()), {r, p.out}, opts);
          y.narrow(0, row, n).narrow(1, ModuleOffset(m), p.out).add_(at::mm(at::mm(x.narrow(0, row, n), a.t()), b));
        }
      }
      row += n;
    }
  }

  // The raw-buffer path: the updates of `modules` (which read the same input x) for the rows of each adapter in the
  // step (lora_groups_), gathered by adapter: its rows' inputs packed once, x A^T for all of them at once (A read
  // once), then r scaled rows of B^T added to each row's output. Adapters are split between the intra-op threads
  // (each writes its own rows).
  void AddLoraRows(size_t l, std::initializer_list<LoraModule> modules, const float* x, int64_t in, float* y,
                   int64_t y_stride) {
    if (lora_groups_.empty()) return;
    if (lora_scratch_.size() < lora_groups_.size()) lora_scratch_.resize(lora_groups_.size());
    at::parallel_for(0, static_cast<int64_t>(lora_groups_.size()), 1, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g) {
        const auto& [adapter, rows] = lora_groups_[static_cast<size_t>(g)];
        auto& [xs, ts] = lora_scratch_[static_cast<size_t>(g)];
        const int64_t n = static_cast<int64_t>(rows.size());
        bool packed = false;
        for (LoraModule m : modules) {
          const LoraPair& p = adapter->layers[l][static_cast<size_t>(m)];
          if (p.empty()) continue;
          const int64_t r = static_cast<int64_t>(p.a.size()) / p.in;
          if (!packed) {
            xs.resize(static_cast<size_t>(n * in));
            for (int64_t i = 0; i < n; ++i) std::copy_n(x + rows[static_cast<size_t>(i)] * in, in, xs.data() + i * in);
            packed = true;
          }
          ts.resize(static_cast<size_t>(n * r));
          kernels::GemmSmall(p.a.data(), nullptr, r, in, xs.data(), in, n, ts.data(), r);
          const int64_t off = ModuleOffset(m);
          for (int64_t i = 0; i < n; ++i) {
            float* yr = y + rows[static_cast<size_t>(i)] * y_stride + off;
            kernels::AddRows(ts.data() + i * r, r, p.b.data(), p.out, yr);
          }
        }
      }
    });
  }

  // A step of Llama-architecture sequences with at most kTiledBatch tokens in all (decode steps, speculative
  // verifications, short chunks): the raw-buffer path (decode_kernels.h), one row per token.
  bool SmallStep(std::span<const StepInput> batch) const {
    if (w_->config.architecture != Architecture::kLlama) return false;
    size_t rows = 0;
    for (const StepInput& in : batch) rows += in.tokens.size();
    return rows <= static_cast<size_t>(kTiledBatch);
  }

  Status Decode(std::span<const StepInput> batch, std::vector<float>* logits) {
    const DecoderConfig& c = w_->config;
    const int64_t H = c.hidden_size, D = c.head_dim;
    const int64_t nh = c.num_heads, nkv = c.num_kv_heads, group = nh / nkv, I = c.intermediate_size;
    const int64_t qkv_rows = (nh + 2 * nkv) * D, slots = num_blocks_ * block_size_;
    const float eps = static_cast<float>(c.norm_eps);
    // One row per token. Checks, each sequence's cache offsets (positions 0 .. its last token's), and per row:
    // its position, its new slot, where its sequence's offsets begin (a row attends to position + 1 of them).
    int64_t B = 0;
    for (const StepInput& in : batch) B += static_cast<int64_t>(in.tokens.size());
    std::vector<int64_t> position(static_cast<size_t>(B)), new_slot(static_cast<size_t>(B)),
        ctx_begin(static_cast<size_t>(B));
    std::vector<int32_t> token(static_cast<size_t>(B));
    std::vector<char> wanted(static_cast<size_t>(B), 0);
    offsets_.clear();
    lora_groups_.clear();
    int64_t r = 0;
    for (const StepInput& in : batch) {
      INFERD_RETURN_IF_ERROR(Check(in));
      const int64_t n = static_cast<int64_t>(in.tokens.size()), end = in.position + n;
      const int64_t begin = static_cast<int64_t>(offsets_.size());
      for (int64_t p = 0; p < end; ++p) {
        const int64_t slot = in.blocks[static_cast<size_t>(p / block_size_)] * block_size_ + p % block_size_;
        offsets_.push_back(slot * nkv * D);
      }
      if (in.lora != nullptr) {
        auto g =
            std::find_if(lora_groups_.begin(), lora_groups_.end(), [&](const auto& e) { return e.first == in.lora; });
        if (g == lora_groups_.end()) g = lora_groups_.insert(lora_groups_.end(), {in.lora, {}});
        for (int64_t i = 0; i < n; ++i) g->second.push_back(r + i);
      }
      for (int64_t i = 0; i < n; ++i, ++r) {
        position[r] = in.position + i;
        new_slot[r] = offsets_[static_cast<size_t>(begin + position[r])] / (nkv * D);
        ctx_begin[r] = begin;
        token[r] = in.tokens[static_cast<size_t>(i)];
        wanted[r] = i >= n - in.num_logits;
      }
    }
    x_.assign(static_cast<size_t>(B * H), 0.0f);
    h_.resize(static_cast<size_t>(B * std::max(H, nh * D)));
    qkv_.resize(static_cast<size_t>(B * qkv_rows));
    up_.resize(static_cast<size_t>(B * 2 * I));
    act_.resize(static_cast<size_t>(B * I));
    o_.resize(static_cast<size_t>(B * H));
    scores_.resize(static_cast<size_t>(group * c.max_positions));
    rope_.resize(static_cast<size_t>(B * D));  // per row: cos[D/2], sin[D/2]
    const float* embed = w_->embed.data_ptr<float>();
    const float* inv_freq = w_->inv_freq.data_ptr<float>();
    for (int64_t s = 0; s < B; ++s) {
      std::copy_n(embed + static_cast<int64_t>(token[s]) * H, H, x_.data() + s * H);
      float* cs = rope_.data() + s * D;
      for (int64_t i = 0; i < D / 2; ++i) {
        const float f = static_cast<float>(position[s]) * inv_freq[i];  // as the ATen path computes it
        cs[i] = std::cos(f);
        cs[D / 2 + i] = std::sin(f);
      }
    }
    float* cache = cache_.data_ptr<float>();
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    for (size_t l = 0; l < w_->layers.size(); ++l) {
      const LayerWeights& L = w_->layers[l];
      float* kc = cache + (static_cast<int64_t>(l) * 2 + 0) * slots * nkv * D;
      float* vc = cache + (static_cast<int64_t>(l) * 2 + 1) * slots * nkv * D;
      for (int64_t s = 0; s < B; ++s)
        kernels::RmsNorm(x_.data() + s * H, L.norm1_w.data_ptr<float>(), H, eps, h_.data() + s * H);
      Linear(L.qkv_w, L.qkv_q, L.qkv_b, h_.data(), B, qkv_.data());
      AddLoraRows(l, {LoraModule::kQ, LoraModule::kK, LoraModule::kV}, h_.data(), H, qkv_.data(), qkv_rows);
      for (int64_t s = 0; s < B; ++s) {
        float* q = qkv_.data() + s * qkv_rows;
        float* k = q + nh * D;
        const float* v = k + nkv * D;
        const float* cs = rope_.data() + s * D;
        kernels::Rope(q, nh, D, cs, cs + D / 2);
        kernels::Rope(k, nkv, D, cs, cs + D / 2);
        std::copy_n(k, nkv * D, kc + new_slot[s] * nkv * D);
        std::copy_n(v, nkv * D, vc + new_slot[s] * nkv * D);
      }
      // Every row's keys and values are in the cache before any row attends (rows of one sequence see the
      // earlier ones').
      for (int64_t s = 0; s < B; ++s) {
        const float* q = qkv_.data() + s * qkv_rows;
        const int64_t* offs = offsets_.data() + ctx_begin[s];
        const int64_t ctx = position[s] + 1;
        for (int64_t kvh = 0; kvh < nkv; ++kvh) {  // query heads kvh * group .. share key/value head kvh
          kernels::AttendGroup(q + kvh * group * D, group, kc + kvh * D, vc + kvh * D, offs, ctx, D, scale,
                               scores_.data(), h_.data() + s * nh * D + kvh * group * D);
        }
      }
      Linear(L.o_w, L.o_q, L.o_b, h_.data(), B, o_.data());
      AddLoraRows(l, {LoraModule::kO}, h_.data(), nh * D, o_.data(), H);
      for (int64_t s = 0; s < B; ++s) kernels::Axpy(1.0f, o_.data() + s * H, x_.data() + s * H, H);
      for (int64_t s = 0; s < B; ++s)
        kernels::RmsNorm(x_.data() + s * H, L.norm2_w.data_ptr<float>(), H, eps, h_.data() + s * H);
      Linear(L.up_w, L.up_q, L.up_b, h_.data(), B, up_.data());
      AddLoraRows(l, {LoraModule::kGate, LoraModule::kUp}, h_.data(), H, up_.data(), 2 * I);
      for (int64_t s = 0; s < B; ++s) {
        float* u = up_.data() + s * 2 * I;
        kernels::SwiGlu(u, u + I, I);
        std::copy_n(u, I, act_.data() + s * I);
      }
      Linear(L.down_w, L.down_q, L.down_b, act_.data(), B, h_.data());
      AddLoraRows(l, {LoraModule::kDown}, act_.data(), I, h_.data(), H);
      for (int64_t s = 0; s < B; ++s) kernels::Axpy(1.0f, h_.data() + s * H, x_.data() + s * H, H);
    }
    // The final norm and the head, for the sequences that want logits.
    int64_t rows = 0;
    for (int64_t s = 0; s < B; ++s) {
      if (!wanted[s]) continue;
      kernels::RmsNorm(x_.data() + s * H, w_->final_w.data_ptr<float>(), H, eps, h_.data() + rows * H);
      ++rows;
    }
    logits->resize(static_cast<size_t>(rows * c.vocab_size));
    if (rows > 0) Linear(w_->lm_head, w_->lm_head_q, at::Tensor(), h_.data(), rows, logits->data());
    return Status::OK();
  }

  Status Run(std::span<const StepInput> batch, std::vector<float>* logits) {
    const DecoderConfig& c = w_->config;
    const bool llama = c.architecture == Architecture::kLlama;
    // Tokens, positions and cache slots of every sequence, packed.
    std::vector<int64_t> tokens, positions, slots, last_rows;
    std::vector<std::vector<int64_t>> context_slots(batch.size());
    bool lora = false;
    for (size_t s = 0; s < batch.size(); ++s) {
      const StepInput& in = batch[s];
      INFERD_RETURN_IF_ERROR(Check(in));
      lora = lora || in.lora != nullptr;
      const int64_t n = static_cast<int64_t>(in.tokens.size());
      const int64_t end = in.position + n;
      for (int64_t i = 0; i < n; ++i) {
        tokens.push_back(in.tokens[static_cast<size_t>(i)]);
        positions.push_back(in.position + i);
      }
      auto slot = [&](int64_t p) {
        return in.blocks[static_cast<size_t>(p / block_size_)] * block_size_ + p % block_size_;
      };
      for (int64_t p = in.position; p < end; ++p) slots.push_back(slot(p));
      context_slots[s].reserve(static_cast<size_t>(end));
      for (int64_t p = 0; p < end; ++p) context_slots[s].push_back(slot(p));
      for (int64_t i = n - in.num_logits; i < n; ++i) last_rows.push_back(static_cast<int64_t>(tokens.size()) - n + i);
    }
    const auto long_opts = at::TensorOptions().dtype(at::kLong);
    at::Tensor tok = at::from_blob(tokens.data(), {static_cast<int64_t>(tokens.size())}, long_opts);
    at::Tensor pos = at::from_blob(positions.data(), {static_cast<int64_t>(positions.size())}, long_opts);
    at::Tensor slot_t = at::from_blob(slots.data(), {static_cast<int64_t>(slots.size())}, long_opts);
    std::vector<at::Tensor> ctx_t;
    for (auto& cs : context_slots)
      ctx_t.push_back(at::from_blob(cs.data(), {static_cast<int64_t>(cs.size())}, long_opts));

    const int64_t T = tok.size(0), H = c.hidden_size, D = c.head_dim;
    const int64_t nh = c.num_heads, nkv = c.num_kv_heads, group = nh / nkv;
    at::Tensor x = w_->embed.index_select(0, tok);
    at::Tensor cos, sin;
    if (llama) {
      at::Tensor freqs = pos.to(at::kFloat).unsqueeze(1) * w_->inv_freq.unsqueeze(0);  // [T, D/2]
      at::Tensor emb = at::cat({freqs, freqs}, -1).unsqueeze(1);                       // [T, 1, D]
      cos = emb.cos();
      sin = emb.sin();
    } else {
      x = x + w_->positions.index_select(0, pos);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    for (size_t l = 0; l < w_->layers.size(); ++l) {
      const LayerWeights& L = w_->layers[l];
      at::Tensor h =
          llama ? RmsNorm(x, L.norm1_w, c.norm_eps) : at::layer_norm(x, {H}, L.norm1_w, L.norm1_b, c.norm_eps);
      at::Tensor qkv = Project(h, L.qkv_w, L.qkv_q, L.qkv_b);
      if (lora) AddLora(qkv, h, batch, l, {LoraModule::kQ, LoraModule::kK, LoraModule::kV});
      at::Tensor q = qkv.narrow(1, 0, nh * D).view({T, nh, D});
      at::Tensor k = qkv.narrow(1, nh * D, nkv * D).view({T, nkv, D});
      at::Tensor v = qkv.narrow(1, (nh + nkv) * D, nkv * D).view({T, nkv, D});
      if (llama) {
        q = q * cos + RotateHalf(q) * sin;
        k = k * cos + RotateHalf(k) * sin;
      }
      at::Tensor kcache = cache_[static_cast<int64_t>(l)][0];
      at::Tensor vcache = cache_[static_cast<int64_t>(l)][1];
      kcache.index_copy_(0, slot_t, k.contiguous());
      vcache.index_copy_(0, slot_t, v.contiguous());
      std::vector<at::Tensor> outs;
      outs.reserve(batch.size());
      int64_t row = 0;
      for (size_t s = 0; s < batch.size(); ++s) {
        const int64_t n = static_cast<int64_t>(batch[s].tokens.size());
        const int64_t ctx = ctx_t[s].size(0);
        at::Tensor qs = q.narrow(0, row, n).permute({1, 0, 2}).reshape({nkv, group * n, D});  // [nkv, g*n, D]
        at::Tensor ks = kcache.index_select(0, ctx_t[s]).permute({1, 2, 0});                  // [nkv, D, ctx]
        at::Tensor vs = vcache.index_select(0, ctx_t[s]).permute({1, 0, 2});                  // [nkv, ctx, D]
        at::Tensor scores = at::bmm(qs, ks).mul_(scale);                                      // [nkv, g*n, ctx]
        if (n > 1) {
          // Query i (position p0 + i) sees keys 0..p0 + i.
          at::Tensor qpos = at::arange(batch[s].position, batch[s].position + n, long_opts).unsqueeze(1);
          at::Tensor kpos = at::arange(ctx, long_opts).unsqueeze(0);
          at::Tensor masked = (kpos > qpos).repeat({group, 1}).unsqueeze(0);  // [1, g*n, ctx]
          scores.masked_fill_(masked, -std::numeric_limits<float>::infinity());
        }
        at::Tensor probs = at::softmax(scores, -1);
        at::Tensor o = at::bmm(probs, vs).view({nh, n, D}).permute({1, 0, 2}).reshape({n, nh * D});
        outs.push_back(o);
        row += n;
      }
      at::Tensor attn = outs.size() == 1 ? outs[0] : at::cat(outs, 0);
      at::Tensor o = Project(attn, L.o_w, L.o_q, L.o_b);
      if (lora) AddLora(o, attn, batch, l, {LoraModule::kO});
      x = x + o;
      h = llama ? RmsNorm(x, L.norm2_w, c.norm_eps) : at::layer_norm(x, {H}, L.norm2_w, L.norm2_b, c.norm_eps);
      at::Tensor up = Project(h, L.up_w, L.up_q, L.up_b);
      if (lora) AddLora(up, h, batch, l, {LoraModule::kGate, LoraModule::kUp});
      at::Tensor act;
      if (llama) {
        const int64_t I = c.intermediate_size;
        act = at::silu(up.narrow(1, 0, I)) * up.narrow(1, I, I);
      } else if (c.hidden_act == "relu") {
        act = at::relu(up);
      } else if (c.hidden_act == "gelu") {
        act = at::gelu(up);
      } else {
        act = at::gelu(up, "tanh");
      }
      at::Tensor down = Project(act, L.down_w, L.down_q, L.down_b);
      if (lora) AddLora(down, act, batch, l, {LoraModule::kDown});
      x = x + down;
    }
    if (last_rows.empty()) return Status::OK();
    at::Tensor rows = at::from_blob(last_rows.data(), {static_cast<int64_t>(last_rows.size())}, long_opts);
    at::Tensor last = x.index_select(0, rows);
    last = llama ? RmsNorm(last, w_->final_w, c.norm_eps)
                 : at::layer_norm(last, {H}, w_->final_w, w_->final_b, c.norm_eps);
    at::Tensor out = Project(last, w_->lm_head, w_->lm_head_q, at::Tensor()).contiguous();
    logits->assign(out.data_ptr<float>(), out.data_ptr<float>() + out.numel());
    return Status::OK();
  }

  std::shared_ptr<const DecoderWeights> w_;
  const bool fast_decode_;
  at::Tensor cache_;  // [layers, 2, num_blocks * block_size, kv_heads, head_dim]
  // The decode path's buffers, kept across steps (sized for the largest batch seen).
  std::vector<float> x_, h_, qkv_, up_, act_, o_, scores_, rope_;
  std::vector<int64_t> offsets_;
  // The step's adapters and the rows each serves; the packed inputs and x A^T of one adapter's rows.
  std::vector<std::pair<const LoraAdapter*, std::vector<int64_t>>> lora_groups_;
  std::vector<std::pair<std::vector<float>, std::vector<float>>> lora_scratch_;  // per group: packed x, x A^T
  int64_t num_blocks_ = 0;
  int64_t block_size_ = 0;
};

}  // namespace

Result<std::shared_ptr<const DecoderWeights>> LoadDecoderWeights(const std::string& dir, const DecoderConfig& config,
                                                                 const WeightOptions& options) {
  try {
    c10::InferenceMode guard;
    WeightFiles files;
    INFERD_RETURN_IF_ERROR(files.Open(dir));
    if (options.int8 && options.bf16) return Status::InvalidArgument("quantization is int8 or bf16, not both");
    if (config.architecture != Architecture::kLlama) {
      if (options.int8 || options.bf16)
        return Status::InvalidArgument(std::string("quantization ") + (options.int8 ? "int8" : "bf16") +
                                       " needs a Llama-architecture model");
      return LoadGpt2(files, config);
    }
    INFERD_ASSIGN_OR_RETURN(auto w, LoadLlama(files, config));
    if (options.int8 || options.bf16) {
      auto q = std::make_shared<DecoderWeights>(*w);
      QuantizeLlama(q.get(), options.bf16);
      return std::shared_ptr<const DecoderWeights>(std::move(q));
    }
    return w;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("cannot load the weights: ") + e.what());
  }
}

std::unique_ptr<DecoderModel> MakeAtenDecoder(std::shared_ptr<const DecoderWeights> weights, bool fast_decode) {
  return std::make_unique<AtenDecoder>(std::move(weights), fast_decode);
}

}  // namespace inferd::llm
