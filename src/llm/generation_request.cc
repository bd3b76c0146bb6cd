#include "llm/generation_request.h"

#include <rapidjson/document.h>

#include <climits>
#include <cmath>
#include <cstring>

namespace inferd::llm {
namespace {

constexpr unsigned kRequestJsonFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

Status Bad(std::string_view name, std::string_view what) {
  std::string m(name);
  m.append(" ");
  m.append(what);
  return Status::InvalidArgument(std::move(m));
}

Result<double> Number(const Parameter& p, std::string_view name) {
  if (const auto* d = std::get_if<double>(&p)) return *d;
  if (const auto* i = std::get_if<int64_t>(&p)) return static_cast<double>(*i);
  return Bad(name, "must be a number");
}

Result<int64_t> Integer(const Parameter& p, std::string_view name) {
  if (const auto* i = std::get_if<int64_t>(&p)) return *i;
  if (const auto* d = std::get_if<double>(&p); d != nullptr && std::floor(*d) == *d && std::abs(*d) < 9e15) {
    return static_cast<int64_t>(*d);
  }
  return Bad(name, "must be an integer");
}

Result<bool> Bool(const Parameter& p, std::string_view name) {
  if (const auto* b = std::get_if<bool>(&p)) return *b;
  return Bad(name, "must be true or false");
}

Result<std::string_view> OneString(const Tensor& t) {
  if (t.dtype != DataType::kBytes) return Bad(t.name, "must be BYTES");
  INFERD_ASSIGN_OR_RETURN(auto elems, SplitBytesElements(t.bytes()));
  if (elems.size() != 1) return Bad(t.name, "must hold exactly one string");
  return elems[0];
}

Status ParseStop(const Parameter& p, GenerationRequest* g) {
  const auto* s = std::get_if<std::string>(&p);
  if (s == nullptr) return Bad("stop", "must be a string or an array of strings");
  if (s->empty() || s->front() != '[') {
    if (!s->empty()) g->stop.push_back(*s);
  } else {
    rapidjson::Document d;
    d.Parse<kRequestJsonFlags>(s->data(), s->size());
    if (d.HasParseError() || !d.IsArray()) return Bad("stop", "must be a string or an array of strings");
    for (const auto& v : d.GetArray()) {
      if (!v.IsString()) return Bad("stop", "must be a string or an array of strings");
      if (v.GetStringLength() > 0) g->stop.emplace_back(v.GetString(), v.GetStringLength());
    }
  }
  if (g->stop.size() > kMaxStopStrings) return Bad("stop", "may list at most 16 strings");
  for (const auto& x : g->stop) {
    if (x.size() > kMaxStopBytes) return Bad("stop", "strings may be at most 256 bytes");
  }
  return Status::OK();
}

Status ParseStopIds(const Parameter& p, GenerationRequest* g) {
  const auto* s = std::get_if<std::string>(&p);
  rapidjson::Document d;
  if (s != nullptr) d.Parse<kRequestJsonFlags>(s->data(), s->size());
  if (s == nullptr || d.HasParseError() || !d.IsArray() || d.Size() > 64) {
    return Bad("stop_token_ids", "must be an array of at most 64 token ids");
  }
  for (const auto& v : d.GetArray()) {
    if (!v.IsInt()) return Bad("stop_token_ids", "must be an array of at most 64 token ids");
    g->stop_token_ids.push_back(v.GetInt());
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<ChatMessage>> ParseChatMessages(std::string_view json) {
  rapidjson::Document d;
  d.Parse<kRequestJsonFlags>(json.data(), json.size());
  if (d.HasParseError() || !d.IsArray()) return Bad("messages", "must be an array of {role, content} objects");
  if (d.Size() > kMaxMessages) return Bad("messages", "may hold at most 4096 messages");
  std::vector<ChatMessage> out;
  for (rapidjson::SizeType i = 0; i < d.Size(); ++i) {
    const auto& m = d[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.IsObject()) return Bad(where, "must be an object");
    auto role = m.FindMember("role");
    if (role == m.MemberEnd() || !role->value.IsString()) return Bad(where + ".role", "must be a string");
    ChatMessage msg;
    msg.role.assign(role->value.GetString(), role->value.GetStringLength());
    auto content = m.FindMember("content");
    if (content == m.MemberEnd() || content->value.IsNull()) {
      // An assistant turn that only called tools has no content.
    } else if (content->value.IsString()) {
      msg.content.assign(content->value.GetString(), content->value.GetStringLength());
    } else if (content->value.IsArray()) {
      for (const auto& part : content->value.GetArray()) {
        auto type = part.IsObject() ? part.FindMember("type") : part.MemberEnd();
        if (!part.IsObject() || type == part.MemberEnd() || !type->value.IsString()) {
          return Bad(where + ".content", "parts must be objects with a type");
        }
        const std::string_view t(type->value.GetString(), type->value.GetStringLength());
        if (t != "text")
          return Bad(where + ".content",
                     "part type '" + std::string(t.substr(0, 32)) + "' is not supported (text only)");
        auto text = part.FindMember("text");
        if (text == part.MemberEnd() || !text->value.IsString())
          return Bad(where + ".content", "text parts need a text string");
        msg.content.append(text->value.GetString(), text->value.GetStringLength());
      }
    } else {
      return Bad(where + ".content", "must be a string or an array of parts");
    }
    out.push_back(std::move(msg));
  }
  if (out.empty()) return Bad("messages", "must not be empty");
  return out;
}

Result<GenerationRequest> ParseGenerationRequest(const InferRequest& request) {
  GenerationRequest g;
  int sources = 0;
  for (const Tensor& t : request.inputs) {
    if (t.name == "text_input") {
      INFERD_ASSIGN_OR_RETURN(std::string_view s, OneString(t));
      g.prompt.assign(s);
      ++sources;
    } else if (t.name == "messages") {
      INFERD_ASSIGN_OR_RETURN(std::string_view s, OneString(t));
      INFERD_ASSIGN_OR_RETURN(g.messages, ParseChatMessages(s));
      ++sources;
    } else if (t.name == "input_ids") {
      const int64_t n = t.element_count();
      if (t.dtype == DataType::kInt32 && t.byte_size == static_cast<size_t>(n) * 4) {
        for (int64_t i = 0; i < n; ++i) {
          int32_t v;
          std::memcpy(&v, t.data + i * 4, 4);
          g.prompt_ids.push_back(v);
        }
      } else if (t.dtype == DataType::kInt64 && t.byte_size == static_cast<size_t>(n) * 8) {
        for (int64_t i = 0; i < n; ++i) {
          int64_t v;
          std::memcpy(&v, t.data + i * 8, 8);
          if (v < 0 || v > INT32_MAX) return Bad("input_ids", "holds an id outside the vocabulary");
          g.prompt_ids.push_back(static_cast<int32_t>(v));
        }
      } else {
        return Bad("input_ids", "must be INT32 or INT64 token ids");
      }
      g.has_prompt_ids = true;
      ++sources;
    } else {
      return Bad("input '" + t.name.substr(0, 64) + "'",
                 "is not one a generative model takes (text_input, messages, input_ids)");
    }
  }
  if (sources != 1) return Status::InvalidArgument("give exactly one of text_input, messages or input_ids");
  for (const auto& [name, value] : request.parameters) {
    if (name == "max_tokens") {
      INFERD_ASSIGN_OR_RETURN(int64_t v, Integer(value, name));
      if (v < 1) return Bad(name, "must be at least 1");
      g.max_tokens = v;
    } else if (name == "min_tokens") {
      INFERD_ASSIGN_OR_RETURN(g.min_tokens, Integer(value, name));
      if (g.min_tokens < 0) return Bad(name, "must not be negative");
    } else if (name == "temperature") {
      INFERD_ASSIGN_OR_RETURN(g.sampling.temperature, Number(value, name));
    } else if (name == "top_p") {
      INFERD_ASSIGN_OR_RETURN(g.sampling.top_p, Number(value, name));
    } else if (name == "min_p") {
      INFERD_ASSIGN_OR_RETURN(g.sampling.min_p, Number(value, name));
    } else if (name == "top_k") {
      INFERD_ASSIGN_OR_RETURN(int64_t v, Integer(value, name));
      if (v < -1 || v > INT32_MAX) return Bad(name, "must be -1 or 0 (all tokens) or positive");
      g.sampling.top_k = v < 0 ? 0 : static_cast<int32_t>(v);
    } else if (name == "seed") {
      INFERD_ASSIGN_OR_RETURN(int64_t v, Integer(value, name));
      g.sampling.seed = static_cast<uint64_t>(v);
    } else if (name == "presence_penalty") {
      INFERD_ASSIGN_OR_RETURN(g.sampling.presence_penalty, Number(value, name));
    } else if (name == "frequency_penalty") {
      INFERD_ASSIGN_OR_RETURN(g.sampling.frequency_penalty, Number(value, name));
    } else if (name == "logprobs") {
      INFERD_ASSIGN_OR_RETURN(int64_t v, Integer(value, name));
      if (v < 0 || v > kMaxTopLogprobs) return Bad(name, "must be between 0 and 20");
      g.sampling.logprobs = static_cast<int32_t>(v);
    } else if (name == "stop") {
      INFERD_RETURN_IF_ERROR(ParseStop(value, &g));
    } else if (name == "stop_token_ids") {
      INFERD_RETURN_IF_ERROR(ParseStopIds(value, &g));
    } else if (name == "ignore_eos") {
      INFERD_ASSIGN_OR_RETURN(g.ignore_eos, Bool(value, name));
    } else if (name == "skip_special_tokens") {
      INFERD_ASSIGN_OR_RETURN(g.skip_special_tokens, Bool(value, name));
    } else if (name == "speculative_decoding") {
      INFERD_ASSIGN_OR_RETURN(bool on, Bool(value, name));
      g.speculative = on;
    } else if (name == "lora_adapter") {
      const std::string* s = std::get_if<std::string>(&value);
      if (s == nullptr) return Bad(name, "must be a string (a LoRA adapter's name)");
      g.lora_adapter = *s;
    }
  }
  INFERD_RETURN_IF_ERROR(g.sampling.Validate());
  INFERD_ASSIGN_OR_RETURN(g.structured, ParseStructuredOutput(request.parameters));
  return g;
}

}  // namespace inferd::llm
