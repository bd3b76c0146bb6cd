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

namespace inferd {

class RequestSubmitter {
 public:
  virtual ~RequestSubmitter() = default;
  virtual void Submit(std::unique_ptr<InferRequest> request, InferCallback callback) = 0;
};

}  // namespace inferd
