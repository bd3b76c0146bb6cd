// The LoRA stage, first in the routing pipeline: a request whose model is a
// LoRA adapter's name (vLLM's convention: the OpenAI `model` field names the
// adapter) goes on to the adapter's base model, with the adapter in its
// lora_adapter parameter. A request that names the base model and the
// adapter parameter itself passes unchanged; both naming different adapters
// is refused.
#include "scheduler/lora_catalog.h"
#include "server/pipeline/stages.h"

namespace inferd {
namespace {

class LoraStage final : public RequestStage {
 public:
  explicit LoraStage(const LoraCatalog* catalog) : catalog_(catalog) {}
  const char* name() const override { return "lora"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    if (catalog_->empty()) return Verdict::kContinue;
    InferRequest& r = *ctx->request;
    std::optional<LoraEntry> e = catalog_->Find(r.model_name);
    if (!e) return Verdict::kContinue;
    auto it = r.parameters.find("lora_adapter");
    if (it != r.parameters.end()) {
      const std::string* named = std::get_if<std::string>(&it->second);
      if (named == nullptr || *named != e->name) {
        ctx->sink.final(Status::InvalidArgument("the model '" + e->name +
                                                "' is a LoRA adapter; parameter lora_adapter names another"));
        return Verdict::kTaken;
      }
    }
    r.parameters["lora_adapter"] = e->name;
    r.model_name = e->base_model;
    return Verdict::kContinue;
  }

 private:
  const LoraCatalog* catalog_;
};

}  // namespace

std::unique_ptr<RequestStage> MakeLoraStage(const LoraCatalog* catalog) { return std::make_unique<LoraStage>(catalog); }

}  // namespace inferd
