#include "frontends/codec/openai.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>

#include "frontends/codec/json_limits.h"
#include "frontends/codec/json_writer.h"
#include "llm/generation_request.h"
#include "llm/unicode_tables.h"

namespace inferd::openai {
namespace {

constexpr unsigned kFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;
using Value = rapidjson::Value;

Status Bad(std::string_view field, std::string_view what) {
  std::string m = "'";
  m.append(field);
  m.append("' ");
  m.append(what);
  return Status::InvalidArgument(std::move(m));
}

std::string Serialize(const Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return {sb.GetString(), sb.GetSize()};
}

Tensor Bytes(const char* name, std::string_view s) {
  auto buf = std::make_shared<std::string>();
  AppendBytesElement(buf.get(), s);
  return Tensor::Own(name, DataType::kBytes, {1}, std::move(buf));
}

Result<Tensor> TokenIds(const Value& v, std::string_view field) {
  if (v.Size() == 0) return Bad(field, "must not be empty");
  auto buf = std::make_shared<std::string>();
  buf->resize(v.Size() * 4);
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    if (!v[i].IsInt() || v[i].GetInt() < 0) return Bad(field, "must hold token ids (non-negative integers)");
    const int32_t id = v[i].GetInt();
    std::memcpy(buf->data() + i * 4, &id, 4);
  }
  return Tensor::Own("input_ids", DataType::kInt32, {static_cast<int64_t>(v.Size())}, std::move(buf));
}

// The prompt of /v1/completions: a string, token ids, or a list of one of either.
Result<Tensor> Prompt(const Value& p) {
  if (p.IsString()) return Bytes("text_input", {p.GetString(), p.GetStringLength()});
  if (!p.IsArray() || p.Empty()) return Bad("prompt", "must be a string or an array of token ids");
  if (p[0].IsInt()) return TokenIds(p, "prompt");
  if (p.Size() != 1) return Bad("prompt", "may hold one prompt only (use n for several choices)");
  if (p[0].IsString()) return Bytes("text_input", {p[0].GetString(), p[0].GetStringLength()});
  if (p[0].IsArray()) return TokenIds(p[0], "prompt");
  return Bad("prompt", "must be a string or an array of token ids");
}

struct Reader {
  const Value& o;
  InferRequest* r;

  const Value* Get(const char* name) const {
    auto it = o.FindMember(name);
    return it == o.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
  }
  Status Number(const char* name, const char* as = nullptr) {
    const Value* v = Get(name);
    if (v == nullptr) return Status::OK();
    if (!v->IsNumber() || !std::isfinite(v->GetDouble())) return Bad(name, "must be a number");
    r->parameters[as ? as : name] = v->GetDouble();
    return Status::OK();
  }
  Status Integer(const char* name, const char* as = nullptr) {
    const Value* v = Get(name);
    if (v == nullptr) return Status::OK();
    if (!v->IsInt64()) return Bad(name, "must be an integer");
    r->parameters[as ? as : name] = v->GetInt64();
    return Status::OK();
  }
  Status Bool(const char* name) {
    const Value* v = Get(name);
    if (v == nullptr) return Status::OK();
    if (!v->IsBool()) return Bad(name, "must be true or false");
    r->parameters[name] = v->GetBool();
    return Status::OK();
  }
};

}  // namespace

Result<ParsedRequest> ParseRequest(Endpoint endpoint, std::string_view body, const JsonLimits& limits) {
  rapidjson::Document d;
  const json::LimitedParse parsed = json::ParseWithin<kFlags>(&d, body, limits);
  if (!parsed.over.empty()) return parsed.LimitError();
  if (parsed.result.IsError()) return Status::InvalidArgument("the request body is not valid JSON");
  if (!d.IsObject()) return Status::InvalidArgument("the request body must be a JSON object");
  ParsedRequest p;
  p.endpoint = endpoint;
  auto req = std::make_unique<InferRequest>();
  Reader in{d, req.get()};
  const Value* model = in.Get("model");
  if (model == nullptr || !model->IsString() || model->GetStringLength() == 0) return Bad("model", "is required");
  p.model.assign(model->GetString(), model->GetStringLength());
  req->model_name = p.model;
  if (endpoint == Endpoint::kChat) {
    const Value* messages = in.Get("messages");
    if (messages == nullptr) return Bad("messages", "is required");
    const std::string json = Serialize(*messages);
    INFERD_RETURN_IF_ERROR(llm::ParseChatMessages(json).status());
    req->inputs.push_back(Bytes("messages", json));
  } else {
    const Value* prompt = in.Get("prompt");
    if (prompt == nullptr) return Bad("prompt", "is required");
    INFERD_ASSIGN_OR_RETURN(Tensor t, Prompt(*prompt));
    req->inputs.push_back(std::move(t));
  }
  // max_completion_tokens is the newer name; either sets max_tokens.
  INFERD_RETURN_IF_ERROR(in.Integer("max_tokens"));
  INFERD_RETURN_IF_ERROR(in.Integer("max_completion_tokens", "max_tokens"));
  INFERD_RETURN_IF_ERROR(in.Number("temperature"));
  INFERD_RETURN_IF_ERROR(in.Number("top_p"));
  INFERD_RETURN_IF_ERROR(in.Number("min_p"));
  INFERD_RETURN_IF_ERROR(in.Number("presence_penalty"));
  INFERD_RETURN_IF_ERROR(in.Number("frequency_penalty"));
  INFERD_RETURN_IF_ERROR(in.Integer("top_k"));
  INFERD_RETURN_IF_ERROR(in.Integer("seed"));
  INFERD_RETURN_IF_ERROR(in.Integer("min_tokens"));
  INFERD_RETURN_IF_ERROR(in.Bool("ignore_eos"));
  INFERD_RETURN_IF_ERROR(in.Bool("skip_special_tokens"));
  INFERD_RETURN_IF_ERROR(in.Bool("speculative_decoding"));
  if (const Value* stop = in.Get("stop")) {
    if (stop->IsString()) {
      rapidjson::Value arr(rapidjson::kArrayType);
      arr.PushBack(rapidjson::Value(stop->GetString(), stop->GetStringLength(), d.GetAllocator()), d.GetAllocator());
      req->parameters["stop"] = Serialize(arr);
    } else if (stop->IsArray()) {
      req->parameters["stop"] = Serialize(*stop);
    } else {
      return Bad("stop", "must be a string or an array of strings");
    }
  }
  if (const Value* ids = in.Get("stop_token_ids")) req->parameters["stop_token_ids"] = Serialize(*ids);
  if (const Value* n = in.Get("n")) {
    if (!n->IsInt() || n->GetInt() < 1 || n->GetInt() > kMaxChoices) return Bad("n", "must be between 1 and 16");
    p.n = n->GetInt();
  }
  if (const Value* s = in.Get("stream")) {
    if (!s->IsBool()) return Bad("stream", "must be true or false");
    p.stream = s->GetBool();
  }
  if (const Value* so = in.Get("stream_options")) {
    if (!so->IsObject()) return Bad("stream_options", "must be an object");
    auto u = so->FindMember("include_usage");
    if (u != so->MemberEnd() && !u->value.IsNull()) {
      if (!u->value.IsBool()) return Bad("stream_options.include_usage", "must be true or false");
      p.include_usage = u->value.GetBool();
    }
  }
  if (endpoint == Endpoint::kChat) {
    const Value* lp = in.Get("logprobs");
    if (lp != nullptr && !lp->IsBool()) return Bad("logprobs", "must be true or false");
    p.logprobs = lp != nullptr && lp->GetBool();
    int64_t top = 0;
    if (const Value* t = in.Get("top_logprobs")) {
      if (!t->IsInt() || t->GetInt() < 0 || t->GetInt() > 20) return Bad("top_logprobs", "must be between 0 and 20");
      if (!p.logprobs) return Bad("top_logprobs", "needs logprobs set to true");
      top = t->GetInt();
    }
    if (p.logprobs) req->parameters["logprobs"] = top;
  } else if (const Value* lp = in.Get("logprobs")) {
    if (!lp->IsInt() || lp->GetInt() < 0 || lp->GetInt() > 5) return Bad("logprobs", "must be between 0 and 5");
    p.logprobs = true;
    req->parameters["logprobs"] = static_cast<int64_t>(lp->GetInt());
  }
  // What the server cannot honour is refused rather than silently ignored.
  if (const Value* t = in.Get("tools"); t != nullptr && !(t->IsArray() && t->Empty())) {
    return Bad("tools", "are not supported by this server");
  }
  if (const Value* e = in.Get("echo"); e != nullptr && !(e->IsBool() && !e->GetBool())) {
    return Bad("echo", "is not supported by this server");
  }
  if (in.Get("suffix") != nullptr) return Bad("suffix", "is not supported by this server");
  if (const Value* b = in.Get("best_of"); b != nullptr && !(b->IsInt() && b->GetInt() == p.n)) {
    return Bad("best_of", "other than n is not supported by this server");
  }
  if (const Value* lb = in.Get("logit_bias"); lb != nullptr && !(lb->IsObject() && lb->MemberCount() == 0)) {
    return Bad("logit_bias", "is not supported by this server");
  }
  // Structured outputs (OpenAI's, vLLM's and llama.cpp's spellings) go to the
  // scheduler as parameters: JSON text for objects and arrays, strings as they are.
  for (const char* name : {"response_format", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
                           "structured_outputs", "json_schema", "grammar", "guided_whitespace_pattern"}) {
    const Value* v = in.Get(name);
    if (v == nullptr || v->IsNull()) continue;
    if (v->IsString()) {
      req->parameters[name] = std::string(v->GetString(), v->GetStringLength());
    } else if (v->IsObject() || v->IsArray()) {
      req->parameters[name] = Serialize(*v);
    } else {
      return Bad(name, "must be an object, an array or a string");
    }
  }
  // The scheduler's own checks (ranges), early, so every choice is valid.
  INFERD_RETURN_IF_ERROR(llm::ParseGenerationRequest(*req).status());
  p.request = std::move(req);
  return p;
}

std::unique_ptr<InferRequest> ChoiceRequest(const ParsedRequest& parsed, int index) {
  auto r = std::make_unique<InferRequest>(*parsed.request);
  if (index > 0) {
    auto it = r->parameters.find("seed");
    if (it != r->parameters.end()) it->second = std::get<int64_t>(it->second) + index;
  }
  return r;
}

Choice ChoiceFrom(const InferResponse& response) {
  Choice c;
  for (const Tensor& t : response.outputs) {
    if (t.dtype != DataType::kBytes) continue;
    auto elems = SplitBytesElements(t.bytes());
    if (!elems.ok() || elems->empty()) continue;
    if (t.name == "text_output") c.text.assign((*elems)[0]);
    if (t.name == "logprobs") c.logprobs_json.assign((*elems)[0]);
  }
  auto get = [&](const char* name) -> const Parameter* {
    auto it = response.parameters.find(name);
    return it == response.parameters.end() ? nullptr : &it->second;
  };
  if (const Parameter* f = get("finish_reason"); f && std::holds_alternative<std::string>(*f)) {
    c.finish_reason = std::get<std::string>(*f);
  }
  auto count = [&](const char* name) -> int64_t {
    const Parameter* p = get(name);
    return p && std::holds_alternative<int64_t>(*p) ? std::get<int64_t>(*p) : 0;
  };
  c.prompt_tokens = count("prompt_tokens");
  c.completion_tokens = count("completion_tokens");
  c.cached_tokens = count("cached_tokens");
  return c;
}

namespace {

void AppendText(std::string* out, std::string_view s) { json::AppendEscaped(out, llm::SanitizeUtf8(s)); }

void AppendHead(std::string* out, const std::string& id, int64_t created, const std::string& model,
                const char* object) {
  out->append("{\"id\":");
  json::AppendEscaped(out, id);
  out->append(",\"object\":\"").append(object).append("\",\"created\":");
  json::AppendNumber(out, created);
  out->append(",\"model\":");
  json::AppendEscaped(out, model);
}

void AppendUsage(std::string* out, const Usage& u) {
  out->append("{\"prompt_tokens\":");
  json::AppendNumber(out, u.prompt_tokens);
  out->append(",\"completion_tokens\":");
  json::AppendNumber(out, u.completion_tokens);
  out->append(",\"total_tokens\":");
  json::AppendNumber(out, u.prompt_tokens + u.completion_tokens);
  out->append(",\"prompt_tokens_details\":{\"cached_tokens\":");
  json::AppendNumber(out, u.cached_tokens);
  out->append("}}");
}

// Chat: {"content": [...]} as the scheduler wrote it. Completions: OpenAI's
// legacy shape {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
void AppendLogprobs(std::string* out, Endpoint e, const std::string& entries, bool wanted, size_t text_offset) {
  if (!wanted) return out->append("null"), void();
  const std::string list = entries.empty() ? "[]" : entries;
  if (e == Endpoint::kChat) {
    out->append("{\"content\":").append(list).append("}");
    return;
  }
  rapidjson::Document d;
  d.Parse(list.data(), list.size());
  std::string tokens = "[", lps = "[", tops = "[", offsets = "[";
  size_t offset = text_offset;
  if (d.IsArray()) {
    for (rapidjson::SizeType i = 0; i < d.Size(); ++i) {
      const auto& x = d[i];
      if (!x.IsObject() || !x.HasMember("token") || !x.HasMember("logprob")) continue;
      const std::string_view tok(x["token"].GetString(), x["token"].GetStringLength());
      const char* sep = i ? "," : "";
      tokens.append(sep);
      json::AppendEscaped(&tokens, tok);
      lps.append(sep);
      json::AppendNumber(&lps, x["logprob"].GetDouble());
      tops.append(sep).append("{");
      if (x.HasMember("top_logprobs") && x["top_logprobs"].IsArray()) {
        bool first = true;
        for (const auto& t : x["top_logprobs"].GetArray()) {
          if (!first) tops.append(",");
          first = false;
          json::AppendKey(&tops, std::string_view(t["token"].GetString(), t["token"].GetStringLength()));
          json::AppendNumber(&tops, t["logprob"].GetDouble());
        }
      }
      tops.append("}");
      offsets.append(sep);
      json::AppendNumber(&offsets, static_cast<int64_t>(offset));
      offset += tok.size();
    }
  }
  out->append("{\"tokens\":").append(tokens).append("],\"token_logprobs\":").append(lps);
  out->append("],\"top_logprobs\":").append(tops).append("],\"text_offset\":").append(offsets).append("]}");
}

void AppendFinish(std::string* out, const std::string& reason) {
  out->append(",\"finish_reason\":");
  if (reason.empty()) {
    out->append("null");
  } else {
    json::AppendEscaped(out, reason);
  }
}

}  // namespace

std::string EncodeResponse(Endpoint e, const std::string& id, int64_t created, const std::string& model,
                           const std::vector<Choice>& choices, bool logprobs, const Usage& usage) {
  std::string out;
  AppendHead(&out, id, created, model, e == Endpoint::kChat ? "chat.completion" : "text_completion");
  out.append(",\"choices\":[");
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i) out.push_back(',');
    out.append("{\"index\":");
    json::AppendNumber(&out, static_cast<int64_t>(i));
    if (e == Endpoint::kChat) {
      out.append(",\"message\":{\"role\":\"assistant\",\"content\":");
      AppendText(&out, choices[i].text);
      out.append("}");
    } else {
      out.append(",\"text\":");
      AppendText(&out, choices[i].text);
    }
    out.append(",\"logprobs\":");
    AppendLogprobs(&out, e, choices[i].logprobs_json, logprobs, 0);
    AppendFinish(&out, choices[i].finish_reason);
    out.append("}");
  }
  out.append("],\"usage\":");
  AppendUsage(&out, usage);
  out.append("}");
  return out;
}

std::string EncodeChunk(Endpoint e, const std::string& id, int64_t created, const std::string& model, int index,
                        bool first, const Choice& part, bool logprobs, bool include_usage) {
  std::string out;
  AppendHead(&out, id, created, model, e == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  out.append(",\"choices\":[{\"index\":");
  json::AppendNumber(&out, static_cast<int64_t>(index));
  if (e == Endpoint::kChat) {
    out.append(",\"delta\":{");
    if (first) out.append("\"role\":\"assistant\",");
    if (!part.text.empty() || first || part.finish_reason.empty()) {
      out.append("\"content\":");
      AppendText(&out, part.text);
    } else if (out.back() == ',') {
      out.pop_back();
    }
    out.append("}");
  } else {
    out.append(",\"text\":");
    AppendText(&out, part.text);
  }
  out.append(",\"logprobs\":");
  AppendLogprobs(&out, e, part.logprobs_json, logprobs && !part.logprobs_json.empty(), 0);
  AppendFinish(&out, part.finish_reason);
  out.append("}]");
  if (include_usage) out.append(",\"usage\":null");
  out.append("}");
  return out;
}

std::string EncodeUsageChunk(Endpoint e, const std::string& id, int64_t created, const std::string& model,
                             const Usage& usage) {
  std::string out;
  AppendHead(&out, id, created, model, e == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  out.append(",\"choices\":[],\"usage\":");
  AppendUsage(&out, usage);
  out.append("}");
  return out;
}

std::string EncodeModelList(const std::vector<ModelCard>& models, int64_t created) {
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (size_t i = 0; i < models.size(); ++i) {
    if (i) out.push_back(',');
    out.append("{\"id\":");
    json::AppendEscaped(&out, models[i].id);
    out.append(",\"object\":\"model\",\"created\":");
    json::AppendNumber(&out, created);
    out.append(",\"owned_by\":\"inferd\",\"parent\":");
    if (models[i].parent.empty()) {
      out.append("null");
    } else {
      json::AppendEscaped(&out, models[i].parent);
    }
    out.push_back('}');
  }
  out.append("]}");
  return out;
}

std::string_view ErrorType(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kResourceExhausted:
    case StatusCode::kAlreadyExists:
      return "invalid_request_error";
    case StatusCode::kNotFound:
      return "not_found_error";
    case StatusCode::kUnauthenticated:
      return "authentication_error";
    case StatusCode::kPermissionDenied:
      return "permission_error";
    case StatusCode::kRateLimited:
      return "rate_limit_exceeded";
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return "server_overloaded";
    default:
      return "server_error";
  }
}

std::string EncodeError(const Status& s) {
  std::string out = "{\"error\":{\"message\":";
  AppendText(&out, s.message());
  out.append(",\"type\":");
  json::AppendEscaped(&out, ErrorType(s));
  out.append(",\"param\":null,\"code\":");
  if (s.code() == StatusCode::kNotFound) {
    out.append("\"model_not_found\"");
  } else {
    out.append("null");
  }
  out.append("}}");
  return out;
}

}  // namespace inferd::openai
