#include "backends/llm/llm_backend.h"

#include <ATen/Parallel.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/aten/blas_threads.h"
#include "backends/generative.h"
#include "backends/llm/aten_decoder.h"
#include "llm/decoder_config.h"
#include "llm/tokenizer_loader.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

Result<std::string> ReadFile(const fs::path& p, size_t limit) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) return Status::NotFound("cannot read " + p.string());
  if (size > limit) return Status::InvalidArgument(p.filename().string() + " is too large");
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Threads(const ModelSpec& spec) {
  auto it = spec.parameters.find("INTRA_OP_THREAD_COUNT");
  int n = 1;
  if (it != spec.parameters.end()) std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
  return std::clamp(n, 1, 256);
}

// generation_config.json's eos_token_id (an id or a list), when present.
std::vector<int32_t> GenerationConfigEos(const std::string& dir) {
  std::vector<int32_t> out;
  auto text = ReadFile(fs::path(dir) / "generation_config.json", 1 << 20);
  if (!text.ok()) return out;
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag>(text->data(), text->size());
  if (d.HasParseError() || !d.IsObject()) return out;
  auto it = d.FindMember("eos_token_id");
  if (it == d.MemberEnd()) return out;
  if (it->value.IsInt()) out.push_back(it->value.GetInt());
  if (it->value.IsArray()) {
    for (const auto& v : it->value.GetArray())
      if (v.IsInt()) out.push_back(v.GetInt());
  }
  return out;
}

class LlmInstance final : public GenerativeInstance {
 public:
  LlmInstance(std::shared_ptr<const llm::DecoderWeights> weights, std::shared_ptr<const GenerativeModelInfo> info,
              int threads)
      : decoder_(llm::MakeAtenDecoder(std::move(weights))), info_(std::move(info)), threads_(threads) {}
  void OnWorkerThreadStart() override {
    aten::KeepBlasOnCallingThread();  // blas_threads.h
    aten::SetIntraOpThreads(threads_);
  }
  llm::DecoderModel& decoder() override { return *decoder_; }
  const GenerativeModelInfo& info() const override { return *info_; }

 private:
  std::unique_ptr<llm::DecoderModel> decoder_;
  std::shared_ptr<const GenerativeModelInfo> info_;
  int threads_;
};

class LlmModel final : public LoadedModel {
 public:
  LlmModel(std::shared_ptr<const llm::DecoderWeights> weights, std::shared_ptr<const GenerativeModelInfo> info,
           int threads, std::string note)
      : weights_(std::move(weights)), info_(std::move(info)), threads_(threads), note_(std::move(note)) {}
  Result<std::unique_ptr<ModelInstance>> CreateInstance(int) override {
    return std::unique_ptr<ModelInstance>(std::make_unique<LlmInstance>(weights_, info_, threads_));
  }
  std::string LoadNote() const override { return note_; }

 private:
  std::shared_ptr<const llm::DecoderWeights> weights_;
  std::shared_ptr<const GenerativeModelInfo> info_;
  int threads_;
  std::string note_;
};

class LlmBackend final : public Backend {
 public:
  std::string_view name() const override { return "llm"; }
  std::vector<std::string> aliases() const override { return {"transformers"}; }
  std::vector<std::string> platforms() const override { return {"llm_decoder"}; }
  std::vector<std::string> model_filenames() const override {
    return {"model.safetensors", "model.safetensors.index.json"};
  }
  bool supports_decoupled() const override { return true; }
  std::string_view scheduler_kind() const override { return "generative"; }

  Status AutoComplete(const std::string& version_dir, ModelSpec* spec) override {
    (void)version_dir;
    auto bytes = [](const char* name, Shape dims) {
      TensorSpec t;
      t.name = name;
      t.dtype = DataType::kBytes;
      t.dims = std::move(dims);
      t.optional = true;
      return t;
    };
    spec->inputs.push_back(bytes("text_input", {1}));
    spec->inputs.push_back(bytes("messages", {1}));
    TensorSpec ids;
    ids.name = "input_ids";
    ids.dtype = DataType::kInt32;
    ids.dims = {-1};
    ids.optional = true;
    spec->inputs.push_back(std::move(ids));
    if (spec->outputs.empty()) {
      spec->outputs.push_back(bytes("text_output", {1}));
      spec->outputs.push_back(bytes("logprobs", {1}));
    }
    spec->decoupled = true;
    return Status::OK();
  }

  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string& dir) override {
    INFERD_ASSIGN_OR_RETURN(std::string config_text, ReadFile(fs::path(dir) / "config.json", 1 << 20));
    INFERD_ASSIGN_OR_RETURN(llm::DecoderConfig config, llm::ParseDecoderConfig(config_text));
    INFERD_ASSIGN_OR_RETURN(llm::TokenizerBundle tok, llm::LoadTokenizer(dir));
    if (tok.tokenizer->vocab_size() > config.vocab_size) {
      return Status::InvalidArgument("the tokenizer has " + std::to_string(tok.tokenizer->vocab_size()) +
                                     " tokens, more than config.json's vocab_size " +
                                     std::to_string(config.vocab_size));
    }
    auto info = std::make_shared<GenerativeModelInfo>();
    info->tokenizer = tok.tokenizer;
    const llm::Tokenizer& t = *tok.tokenizer;
    if (auto it = spec.parameters.find("chat_template"); it != spec.parameters.end()) {
      auto named = llm::ChatTemplateFromName(it->second);
      if (!named) {
        return Status::InvalidArgument("parameter 'chat_template' '" + it->second +
                                       "' is not one of chatml, llama2, llama3, mistral, zephyr, gemma, plain");
      }
      info->chat_template = *named;
    } else if (tok.chat_template) {
      info->chat_template = *tok.chat_template;
    } else if (t.TokenId("<|im_start|>")) {
      info->chat_template = llm::ChatTemplate::kChatML;
    }
    info->bos_id = config.bos_token_id >= 0 ? config.bos_token_id : t.bos_id();
    auto text_of = [&](int32_t id) { return id >= 0 ? t.Decode(std::span<const int32_t>(&id, 1), false) : ""; };
    info->bos_text = !tok.bos_text.empty() ? tok.bos_text : text_of(info->bos_id);
    const int32_t eos = !config.eos_token_ids.empty() ? config.eos_token_ids.front() : t.eos_id();
    info->eos_text = !tok.eos_text.empty() ? tok.eos_text : text_of(eos);
    // BOS is prepended when the tokenizer says so, or (unsaid) when it has a
    // BOS distinct from its EOS (GPT-2's one <|endoftext|> is not prepended).
    info->add_bos = tok.add_bos.value_or(t.adds_bos() || (info->bos_id >= 0 && info->bos_id != eos));
    auto add_end = [&](int32_t id) {
      if (id >= 0 && std::find(info->end_ids.begin(), info->end_ids.end(), id) == info->end_ids.end()) {
        info->end_ids.push_back(id);
      }
    };
    for (int32_t id : config.eos_token_ids) add_end(id);
    for (int32_t id : GenerationConfigEos(dir)) add_end(id);
    if (config.eos_token_ids.empty()) add_end(t.eos_id());
    for (const std::string& end : llm::ChatEndTokens(info->chat_template)) {
      if (auto id = t.TokenId(end)) info->chat_end_ids.push_back(*id);
    }
    llm::WeightOptions wopts;
    if (auto it = spec.parameters.find("quantization"); it != spec.parameters.end()) {
      if (it->second == "int8") {
        wopts.int8 = true;
      } else if (it->second == "bf16") {
        wopts.bf16 = true;
      } else if (it->second != "none" && !it->second.empty()) {
        return Status::InvalidArgument("parameter 'quantization' '" + it->second.substr(0, 32) +
                                       "' is not one of none, int8, bf16");
      }
    }
    INFERD_ASSIGN_OR_RETURN(auto weights, llm::LoadDecoderWeights(dir, config, wopts));
    std::string note = config.model_type + ": " + std::to_string(config.num_layers) + " layers, hidden " +
                       std::to_string(config.hidden_size) + ", vocab " + std::to_string(config.vocab_size) +
                       ", context " + std::to_string(config.max_positions) + ", chat template " +
                       std::string(llm::ChatTemplateName(info->chat_template)) +
                       (wopts.int8   ? ", int8 weights"
                        : wopts.bf16 ? ", bf16 weights"
                                     : "");
    if (tok.has_jinja_template && !tok.chat_template && spec.parameters.count("chat_template") == 0) {
      note += " (tokenizer_config.json's chat_template was not recognised; set the chat_template parameter)";
    }
    return std::unique_ptr<LoadedModel>(
        std::make_unique<LlmModel>(std::move(weights), std::move(info), Threads(spec), std::move(note)));
  }
};

}  // namespace

std::unique_ptr<Backend> MakeLlmBackend() { return std::make_unique<LlmBackend>(); }
Status RegisterLlmBackend(BackendRegistry* registry) { return registry->Register(MakeLlmBackend()); }

}  // namespace inferd
