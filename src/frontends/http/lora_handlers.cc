// vLLM's LoRA adapter routes (docs/generative.md, "LoRA adapters"); they need
// the `models` scope (the admin token):
//   POST /v1/load_lora_adapter    {"lora_name", "lora_path"[, "base_model_name"]}
//        200 "Success: LoRA adapter '<name>' added successfully."
//   POST /v1/unload_lora_adapter  {"lora_name"}
//        200 "Success: LoRA adapter '<name>' removed successfully."
// Errors in OpenAI's shape: 400 for a bad body or adapter (the reason), 404
// for an unknown base model, folder or adapter, 409 for a name in use.
#include <rapidjson/document.h>

#include "frontends/codec/json_tensor.h"
#include "frontends/http/router.h"
#include "server/lora_service.h"

namespace inferd::http {
namespace {

Result<std::string> StringField(const rapidjson::Value& doc, const char* name, bool required) {
  auto it = doc.FindMember(name);
  if (it == doc.MemberEnd() || it->value.IsNull()) {
    if (required) return Status::InvalidArgument(std::string("the body needs \"") + name + "\"");
    return std::string();
  }
  if (!it->value.IsString()) return Status::InvalidArgument(std::string("\"") + name + "\" must be a string");
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

Response Text(std::string body) {
  Response r;
  r.status = 200;
  r.body = std::move(body);
  r.content_type = "text/plain; charset=utf-8";
  return r;
}

}  // namespace

void HandleLoraAdmin(InferenceServer* server, Request&& req, bool load, Responder respond) {
  if (req.method != "POST") return respond(MethodNotAllowed(req, kAllowPost));
  rapidjson::Document doc;
  if (req.body) doc.Parse<json::kParseFlags>(req.body->data(), req.body->size());
  if (!req.body || doc.HasParseError() || !doc.IsObject()) {
    return respond(OpenAiError(Status::InvalidArgument("the body must be a JSON object")));
  }
  const rapidjson::Value& body = doc;
  auto name = StringField(body, "lora_name", true);
  if (!name.ok()) return respond(OpenAiError(name.status()));
  if (!load) {
    Status st = server->admin().loras().Unload(*name);
    if (!st.ok()) return respond(OpenAiError(st));
    return respond(Text("Success: LoRA adapter '" + *name + "' removed successfully."));
  }
  auto path = StringField(body, "lora_path", true);
  if (!path.ok()) return respond(OpenAiError(path.status()));
  auto base = StringField(body, "base_model_name", false);
  if (!base.ok()) return respond(OpenAiError(base.status()));
  // Reading the adapter takes milliseconds to seconds: on the admin thread, never the I/O thread.
  server->admin().Run([server, name = *name, path = *path, base = *base, respond](bool cancelled) {
    if (cancelled) return respond(OpenAiError(Status::Unavailable("the server is shutting down")));
    auto e = server->admin().loras().Load(name, path, base);
    if (!e.ok()) return respond(OpenAiError(e.status()));
    respond(Text("Success: LoRA adapter '" + name + "' added successfully."));
  });
}

}  // namespace inferd::http
