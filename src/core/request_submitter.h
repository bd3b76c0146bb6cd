// RequestSubmitter: the narrow interface through which a scheduler submits
// requests to other models (an ensemble's steps, a pipeline's next stage)
// without depending on the server. The server implements it: a submitted
// request is routed, validated and queued exactly as a front end's request.
//
// Thread-safety: Submit is thread-safe and never runs model code on the
// calling thread; `callback` runs exactly once.
#pragma once

#include <memory>

#include "core/infer_request.h"
#include "core/model_spec.h"

namespace inferd {

class RequestSubmitter {
 public:
  virtual ~RequestSubmitter() = default;
  virtual void Submit(std::unique_ptr<InferRequest> request, InferCallback callback) = 0;
  // Submit with a sink for partial responses (a decoupled model's parts go
  // to sink.partial). The default cannot deliver parts.
  virtual void SubmitStream(std::unique_ptr<InferRequest> request, ResponseSink sink) {
    Submit(std::move(request), std::move(sink.final));
  }
  // The config of the version a request for (model, version; "" = the
  // default) would reach. A repository model that does not serve is loaded
  // first (an ensemble's load loads its steps, as in Triton), so this blocks:
  // call it while loading, never on a request's path.
  virtual Result<ModelSpec> Describe(const std::string& model, const std::string& version) {
    return Status::Unimplemented("cannot describe model '" + model + "' here");
  }
};

}  // namespace inferd
