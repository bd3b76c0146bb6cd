// InferenceServer's hybrid path (docs/hybrid.md): a request with a
// precomputed key is looked up in the model's prediction store on a lookup
// thread (server/hybrid_serving.h); a fresh row answers it
// ("source": "precomputed"), otherwise it goes on to the scheduler as any
// request ("source": "online"; written back when configured).
#include "server/hybrid_serving.h"
#include "server/inference_server.h"

namespace inferd {
namespace {

// An online answer may be written back when it holds every stored output as
// the model computes it: all outputs asked for, no classification.
bool AnswerHasEveryStoredOutput(const PrecomputedSpec& pc, const InferRequest& request) {
  if (request.outputs.empty()) return true;
  if (!StoreCanAnswer(pc, request)) return false;
  for (const auto& name : pc.outputs) {
    bool asked = false;
    for (const auto& o : request.outputs) asked |= o.name == name;
    if (!asked) return false;
  }
  return true;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The key as error messages show it: quoted, at most 64 bytes.
std::string ShownKey(const std::string& key) { return "'" + (key.size() > 64 ? key.substr(0, 64) + "..." : key) + "'"; }

}  // namespace

void InferenceServer::DispatchHybrid(std::string key, Forwarded f) {
  std::shared_ptr<const ModelSpec> spec(f.version, &f.version->spec());
  const PrecomputedSpec& pc = *spec->precomputed;
  const std::string version = f.version->version_string();
  // What runs online says so, and is written back when configured.
  const bool write_back = pc.write_back && AnswerHasEveryStoredOutput(pc, *f.request);
  // The client's callback: a stored answer goes straight to it; what runs
  // online goes through the wrapper below (exactly one of them is called).
  auto client = std::make_shared<InferCallback>(std::move(f.sink.final));
  f.sink.final = [hybrid = hybrid_.get(), spec, version, key, write_back, client](Result<InferResponse> r) {
    if (r.ok()) {
      r->parameters["source"] = std::string("online");
      if (write_back) hybrid->WriteBack(spec, version, key, *r);
    }
    (*client)(std::move(r));
  };
  // A request without inputs only asks the store: it cannot run online.
  const bool lookup_only = f.request->inputs.empty();
  if (!StoreCanAnswer(pc, *f.request)) {
    hybrid_->CountBypass(spec->name);
    if (lookup_only)
      return (*client)(Status::InvalidArgument("model '" + spec->name +
                                               "': the request asks for outputs the precomputed store does not hold "
                                               "(it holds: " +
                                               Joined(pc.outputs) + ") and has no inputs to run online"));
    return Forward(std::move(f));
  }
  // The lookup callback runs on a lookup thread (or here, when the lookup
  // queue is full); the request waits for it in `parked`.
  auto parked = std::make_shared<Forwarded>(std::move(f));
  hybrid_->Lookup(
      spec, version, key,
      [this, parked, client, spec, version, key_shown = ShownKey(key), lookup_only](HybridServing::Outcome o) {
        using Kind = HybridServing::Outcome::Kind;
        const PrecomputedSpec& pc = *spec->precomputed;
        if (o.kind == Kind::kHit) {
          InferResponse resp;
          resp.model_name = spec->name;
          resp.model_version = version;
          resp.id = parked->request->id;
          const auto& wanted = parked->request->outputs;
          if (wanted.empty()) {
            resp.outputs = std::move(o.outputs);
          } else {
            for (const auto& w : wanted)
              for (auto& t : o.outputs)
                if (t.name == w.name) resp.outputs.push_back(std::move(t));
          }
          resp.parameters["source"] = std::string("precomputed");
          return (*client)(std::move(resp));
        }
        if (shutting_down_.load()) return (*client)(Status::Unavailable("the server is shutting down"));
        if (lookup_only) {  // nothing to run online
          if (o.kind == Kind::kError)
            return (*client)(Status::Unavailable("model '" + spec->name + "': the precomputed store ('" +
                                                 pc.connection + "', table '" + pc.table +
                                                 "') cannot answer: " + o.error.message()));
          return (*client)(Status::NotFound("model '" + spec->name + "' has no " +
                                            (o.kind == Kind::kStale ? "fresh " : "") + "precomputed answer for key " +
                                            key_shown + ", and the request has no inputs to run it online"));
        }
        if (o.kind == Kind::kError && pc.fail_on_store_error) {
          return (*client)(Status::Unavailable("model '" + spec->name + "': the precomputed store ('" + pc.connection +
                                               "', table '" + pc.table + "') cannot answer: " + o.error.message()));
        }
        Forward(std::move(*parked));
      });
}

}  // namespace inferd
