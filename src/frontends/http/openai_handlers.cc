// The OpenAI-compatible routes (codec: frontends/codec/openai.h):
//   POST /v1/chat/completions, POST /v1/completions   one JSON answer, or
//        server-sent events with "stream": true (chunks, the usage chunk with
//        stream_options.include_usage, then "data: [DONE]")
//   GET  /v1/models                                   the ready generative models and their LoRA adapters
//   POST /v1/load_lora_adapter, /v1/unload_lora_adapter  vLLM's adapter routes (lora_handlers.cc)
// `n` choices are n requests to the model (seeded ones with seed + i), the
// only calls into the server (the pipeline checks the model). Errors
// are OpenAI's {"error": {...}}; after a stream has begun, an error is an
// event with that object, then [DONE].
#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <set>

#include "frontends/codec/openai.h"
#include "frontends/http/router.h"
#include "server/lora_service.h"

namespace inferd::http {

Response OpenAiError(const Status& st) {
  Response r = ErrorResponse(st);                           // its status and headers (WWW-Authenticate, Retry-After)
  if (st.code() == StatusCode::kCancelled) r.status = 499;  // the client went away; nobody reads it
  r.body = openai::EncodeError(st);
  return r;
}

namespace {

constexpr const char* kGenerativePlatform = "llm_decoder";

std::string NewId(openai::Endpoint e) {
  static std::atomic<uint64_t> counter{std::random_device{}()};
  uint64_t x = counter.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull;  // splitmix64
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(x));
  return std::string(e == openai::Endpoint::kChat ? "chatcmpl-" : "cmpl-") + buf;
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The state one OpenAI call shares between its choices' callbacks.
struct Call {
  openai::Endpoint endpoint;
  std::string id, model;
  int64_t created = 0;
  bool stream = false, include_usage = false, logprobs = false;
  Responder respond;
  std::shared_ptr<const Cancellation> cancellation;

  Mutex mu;
  int remaining TSA_GUARDED_BY(mu) = 0;
  bool answered TSA_GUARDED_BY(mu) = false;  // the final respond() happened (unary, or an error before the stream)
  bool started TSA_GUARDED_BY(mu) = false;   // a stream event was sent
  std::vector<bool> first TSA_GUARDED_BY(mu);
  std::vector<openai::Choice> choices TSA_GUARDED_BY(mu);
  std::optional<Status> error TSA_GUARDED_BY(mu);
  openai::Usage usage TSA_GUARDED_BY(mu);
  bool named TSA_GUARDED_BY(mu) = false;  // the first part sent said which model answered

  // Every part goes out here: the first names the model for the access log and the request's span.
  void Send(Response r) TSA_REQUIRES(mu) {
    if (!named) {
      named = true;
      r.model = model;
    }
    respond(std::move(r));
  }

  bool Part(int index, const InferResponse& part) {
    MutexLock l(&mu);
    if (answered || error) return false;
    if (part.relayed) {  // a peer's stream (one choice: the peer answers every choice itself)
      Send(RelayedResponse(*part.relayed, /*more=*/true));
      started = true;
      return !(cancellation && cancellation->cancelled());
    }
    openai::Choice c = openai::ChoiceFrom(part);
    c.finish_reason.clear();
    Send(WithModelVersion(ServerSentEvent(openai::EncodeChunk(endpoint, id, created, model, index, first[index], c,
                                                              logprobs, include_usage),
                                          /*more=*/true),
                          part.model_version));
    first[index] = false;
    started = true;
    return !(cancellation && cancellation->cancelled());
  }

  void Final(int index, Result<InferResponse> r) {
    MutexLock l(&mu);
    --remaining;
    if (answered) return;
    if (r.ok() && r->relayed) {
      answered = true;
      return Send(RelayedResponse(*r->relayed, /*more=*/false));
    }
    if (!r.ok() && r.status().code() == StatusCode::kNotFound) {  // the model is unknown: OpenAI's wording
      r = Status::NotFound("The model `" + model + "` does not exist.");
    }
    if (!r.ok()) {
      const bool first_error = !error;
      if (first_error) error = r.status();
      if (!started) {  // nothing sent yet: an ordinary HTTP error answers the call
        answered = true;
        return Send(OpenAiError(r.status()));
      }
      // In a stream: the first error as an event, then [DONE] once every choice has ended.
      if (first_error) Send(ServerSentEvent(openai::EncodeError(r.status()), /*more=*/true));
      if (remaining == 0) Send(ServerSentEvent("[DONE]", false));
      return;
    }
    openai::Choice c = openai::ChoiceFrom(*r);
    usage.prompt_tokens = std::max(usage.prompt_tokens, c.prompt_tokens);  // one prompt, n choices
    usage.cached_tokens = std::max(usage.cached_tokens, c.cached_tokens);
    usage.completion_tokens += c.completion_tokens;
    if (!stream) {
      choices[index] = std::move(c);
      if (remaining > 0) return;
      answered = true;
      return Send(WithModelVersion(
          JsonResponse(200, openai::EncodeResponse(endpoint, id, created, model, choices, logprobs, usage)),
          r->model_version));
    }
    if (!error) {
      Send(WithModelVersion(
          ServerSentEvent(
              openai::EncodeChunk(endpoint, id, created, model, index, first[index], c, logprobs, include_usage), true),
          r->model_version));
      first[index] = false;
      started = true;
    }
    if (remaining > 0) return;
    if (include_usage && !error)
      Send(ServerSentEvent(openai::EncodeUsageChunk(endpoint, id, created, model, usage), true));
    Send(ServerSentEvent("[DONE]", false));
  }
};

// One trip into the server per choice: no metadata or admission calls before them. The pipeline waits for an
// on-demand model's load, refuses a model that is not generative (validation), and the model's scheduler renders
// the chat template and tokenises on its own thread.
void Complete(InferenceServer* server, Request&& req, openai::Endpoint endpoint, Responder respond) {
  if (req.method != "POST") return respond(MethodNotAllowed(req, kAllowPost));
  auto parsed = openai::ParseRequest(endpoint, req.body ? std::string_view(*req.body) : std::string_view(),
                                     server->front_end().json_limits);
  if (!parsed.ok()) return respond(OpenAiError(parsed.status()));
  const std::string* authorization = req.Header("authorization");
  if (Status st = server->front_end().access->CheckModel(authorization ? *authorization : std::string_view(),
                                                         auth::Need::kInfer, parsed->model);
      !st.ok()) {
    return respond(OpenAiError(st));
  }
  parsed->request->cancellation = req.cancellation;
  parsed->request->generative_api = true;
  if (const std::string* key = req.Header("inferd-sticky-key")) parsed->request->sticky_key = *key;
  auto call = std::make_shared<Call>();
  call->endpoint = endpoint;
  call->id = NewId(endpoint);
  call->model = parsed->model;
  call->created = UnixNow();
  call->stream = parsed->stream;
  call->include_usage = parsed->include_usage;
  call->logprobs = parsed->logprobs;
  call->respond = std::move(respond);
  call->cancellation = req.cancellation;
  {
    MutexLock l(&call->mu);
    call->remaining = parsed->n;
    call->first.assign(static_cast<size_t>(parsed->n), true);
    call->choices.resize(static_cast<size_t>(parsed->n));
  }
  for (int i = 0; i < parsed->n; ++i) {
    ResponseSink sink;
    if (parsed->stream) sink.partial = [call, i](InferResponse part) { return call->Part(i, part); };
    sink.final = [call, i](Result<InferResponse> r) { call->Final(i, std::move(r)); };
    auto request = openai::ChoiceRequest(*parsed, i);
    // Forwarded whole (the peer answers every choice) when the call asks one choice; n > 1 is served here.
    if (parsed->n == 1)
      KeepWireForm(*server, req, *request);
    else
      request->trace = req.trace;  // each choice's spans under the request's
    server->InferAsync(std::move(request), std::move(sink));
  }
}

void ListModels(InferenceServer* server, const Request& req, const Responder& respond) {
  if (!IsGet(req)) return respond(MethodNotAllowed(req, kAllowGet));
  auto index = server->admin().RepositoryIndex(/*ready_only=*/true);
  if (!index.ok()) return respond(OpenAiError(index.status()));
  std::vector<openai::ModelCard> cards;
  std::set<std::string> bases;
  for (const auto& e : *index) {
    if (!cards.empty() && cards.back().id == e.name) continue;
    auto md = server->GetModelMetadata(e.name, "");
    if (md.ok() && md->platform == kGenerativePlatform) {
      cards.push_back({e.name, ""});
      bases.insert(e.name);
    }
  }
  // The adapters of the listed models (vLLM lists each adapter as a model whose parent is its base).
  for (const LoraEntry& a : server->admin().loras().List())
    if (bases.count(a.base_model)) cards.push_back({a.name, a.base_model});
  respond(JsonResponse(200, openai::EncodeModelList(cards, UnixNow())));
}

}  // namespace

bool HandleOpenAi(InferenceServer* server, Request&& req, const std::vector<std::string>& parts, Responder& respond) {
  if (parts.size() == 3 && parts[0] == "v1" && parts[1] == "chat" && parts[2] == "completions") {
    Complete(server, std::move(req), openai::Endpoint::kChat, std::move(respond));
    return true;
  }
  if (parts.size() == 2 && parts[0] == "v1" && parts[1] == "completions") {
    Complete(server, std::move(req), openai::Endpoint::kCompletions, std::move(respond));
    return true;
  }
  if (parts.size() == 2 && parts[0] == "v1" && parts[1] == "models") {
    ListModels(server, req, respond);
    return true;
  }
  if (parts.size() == 2 && parts[0] == "v1" && (parts[1] == "load_lora_adapter" || parts[1] == "unload_lora_adapter")) {
    HandleLoraAdmin(server, std::move(req), parts[1] == "load_lora_adapter", std::move(respond));
    return true;
  }
  return false;
}

}  // namespace inferd::http
