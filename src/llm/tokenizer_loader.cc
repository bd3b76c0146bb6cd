#include "llm/tokenizer_loader.h"

#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "llm/bpe_tokenizer.h"
#include "llm/sentencepiece/sentencepiece_tokenizer.h"

namespace inferd::llm {
namespace {

namespace fs = std::filesystem;

Result<std::string> ReadSmallFile(const fs::path& p) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) return Status::NotFound("cannot read " + p.string());
  if (size > kMaxTokenizerFileBytes) return Status::InvalidArgument(p.filename().string() + " is larger than 64 MiB");
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "bos_token": "<s>" or {"content": "<s>", ...}.
std::string TokenText(const rapidjson::Value& doc, const char* key) {
  auto it = doc.FindMember(key);
  if (it == doc.MemberEnd()) return "";
  if (it->value.IsString()) return {it->value.GetString(), it->value.GetStringLength()};
  if (it->value.IsObject()) {
    auto c = it->value.FindMember("content");
    if (c != it->value.MemberEnd() && c->value.IsString()) return {c->value.GetString(), c->value.GetStringLength()};
  }
  return "";
}

}  // namespace

Result<TokenizerBundle> LoadTokenizer(const std::string& dir) {
  TokenizerBundle b;
  const fs::path d(dir);
  if (fs::exists(d / "tokenizer.json")) {
    INFERD_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(d / "tokenizer.json"));
    auto t = ByteLevelBpe::FromTokenizerJson(text);
    if (t.ok()) {
      b.tokenizer = std::move(t).value();
    } else if (!fs::exists(d / "tokenizer.model")) {
      return t.status();
    }
  }
  if (!b.tokenizer && fs::exists(d / "tokenizer.model")) {
    INFERD_ASSIGN_OR_RETURN(auto t, LoadSentencePiece((d / "tokenizer.model").string()));
    b.tokenizer = std::move(t);
  }
  if (!b.tokenizer && fs::exists(d / "vocab.json") && fs::exists(d / "merges.txt")) {
    INFERD_ASSIGN_OR_RETURN(std::string vocab, ReadSmallFile(d / "vocab.json"));
    INFERD_ASSIGN_OR_RETURN(std::string merges, ReadSmallFile(d / "merges.txt"));
    INFERD_ASSIGN_OR_RETURN(auto t, ByteLevelBpe::FromVocabAndMerges(vocab, merges));
    b.tokenizer = std::move(t);
  }
  if (!b.tokenizer) {
    return Status::NotFound("no tokenizer in " + dir +
                            " (tokenizer.json, tokenizer.model, or vocab.json + merges.txt)");
  }
  if (fs::exists(d / "tokenizer_config.json")) {
    INFERD_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(d / "tokenizer_config.json"));
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
    if (doc.HasParseError() || !doc.IsObject())
      return Status::InvalidArgument("tokenizer_config.json is not a JSON object");
    b.bos_text = TokenText(doc, "bos_token");
    b.eos_text = TokenText(doc, "eos_token");
    if (auto it = doc.FindMember("add_bos_token"); it != doc.MemberEnd() && it->value.IsBool()) {
      b.add_bos = it->value.GetBool();
    }
    if (auto it = doc.FindMember("chat_template"); it != doc.MemberEnd() && it->value.IsString()) {
      b.has_jinja_template = true;
      b.chat_template = DetectChatTemplate({it->value.GetString(), it->value.GetStringLength()});
    }
  }
  return b;
}

}  // namespace inferd::llm
