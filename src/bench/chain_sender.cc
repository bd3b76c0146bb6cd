#include "bench/chain_sender.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <memory>

#include "bench/http_client.h"

namespace inferd::bench {
namespace {

class ChainedHttpSender final : public Sender {
 public:
  ChainedHttpSender(const std::string& host, uint16_t port, std::string then_model,
                    std::map<std::string, std::string> rename)
      : client_(host, port), path_("/v2/models/" + then_model + "/infer"), rename_(std::move(rename)) {}

  bool Send(const PreparedRequest& req, std::string* error) override {
    auto first = Post(req.path, req.body, req.headers, error);
    if (!first) return false;
    auto body = ChainedBody(*first, rename_);
    if (!body.ok()) {
      if (error->empty()) *error = body.status().ToString();
      return false;
    }
    return Post(path_, *body, {{"Content-Type", "application/json"}}, error).has_value();
  }

 private:
  std::optional<std::string> Post(const std::string& path, const std::string& body,
                                  const std::vector<std::pair<std::string, std::string>>& headers, std::string* error) {
    auto r = client_.Request("POST", path, body, headers);
    if (!r.ok()) {
      if (error->empty()) *error = r.status().ToString();
      return std::nullopt;
    }
    if (r->status != 200) {
      if (error->empty())
        *error = "HTTP " + std::to_string(r->status) + " from " + path + ": " + r->body.substr(0, 300);
      return std::nullopt;
    }
    return std::move(r->body);
  }

  HttpClient client_;
  std::string path_;
  std::map<std::string, std::string> rename_;
};

}  // namespace

SenderFactory ChainedHttpSenderFactory(std::string host, uint16_t port, std::string then_model,
                                       std::map<std::string, std::string> rename) {
  return [host = std::move(host), port, then_model = std::move(then_model), rename = std::move(rename)] {
    return std::make_unique<ChainedHttpSender>(host, port, then_model, rename);
  };
}

Result<std::map<std::string, std::string>> ParseRenames(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(at, comma - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      return Status::InvalidArgument("--then-map wants output=input pairs separated by commas, not '" + item + "'");
    out[item.substr(0, eq)] = item.substr(eq + 1);
    at = comma + 1;
  }
  return out;
}

Result<std::string> ChainedBody(const std::string& first_answer, const std::map<std::string, std::string>& rename) {
  rapidjson::Document doc;
  doc.Parse(first_answer.data(), first_answer.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("outputs") || !doc["outputs"].IsArray())
    return Status::InvalidArgument("the first model's answer has no JSON outputs (use --protocol v2-json)");
  rapidjson::Document out(rapidjson::kObjectType);
  auto& a = out.GetAllocator();
  rapidjson::Value inputs(rapidjson::kArrayType);
  for (auto& o : doc["outputs"].GetArray()) {
    if (!o.IsObject() || !o.HasMember("name") || !o["name"].IsString() || !o.HasMember("data"))
      return Status::InvalidArgument("an output of the first model's answer has no name or no JSON data");
    std::string name = o["name"].GetString();
    if (!rename.empty()) {
      auto it = rename.find(name);
      if (it == rename.end()) continue;
      name = it->second;
    }
    rapidjson::Value t(rapidjson::kObjectType);
    t.AddMember("name", rapidjson::Value(name.c_str(), a), a);
    t.AddMember("datatype", rapidjson::Value(o["datatype"], a), a);
    t.AddMember("shape", rapidjson::Value(o["shape"], a), a);
    t.AddMember("data", rapidjson::Value(o["data"], a), a);
    inputs.PushBack(t, a);
  }
  if (inputs.Empty()) return Status::InvalidArgument("no output of the first model matches --then-map");
  out.AddMember("inputs", inputs, a);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  out.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace inferd::bench
