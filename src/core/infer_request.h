// Inference requests and responses as the server facade sees them: already
// decoded from any wire protocol, not yet validated against a model.
//
// Ownership: an InferRequest is owned by one party at a time (unique_ptr):
// the front end builds it, the server takes it on a successful enqueue.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/cancellation.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/trace.h"

namespace inferd {

// KServe v2 "parameters": a map of bool, int64, double or string.
using Parameter = std::variant<bool, int64_t, double, std::string>;
using Parameters = std::map<std::string, Parameter, std::less<>>;

struct RequestedOutput {
  std::string name;
  bool binary = false;      // return as binary tensor data (HTTP binary extension)
  bool binary_set = false;  // `binary` was given explicitly for this output
  // Triton's classification extension: answer the top k entries as BYTES
  // (server/classification.h); 0 = the tensor itself.
  uint32_t classification = 0;
};

// Cluster mode: a request as its client sent it (end-to-end headers only, an
// HTTP body decompressed), kept so that a node that does not hold the model
// can forward it to one that does unchanged (server/pipeline/forward_stage.cc).
// Over gRPC: `target` is the RPC's method path, `headers` the call's custom
// metadata, `body` the serialized request message (one ModelInferRequest,
// also for a request that came on a ModelStreamInfer stream).
struct WireRequest {
  enum class Protocol { kHttp, kGrpc };
  Protocol protocol = Protocol::kHttp;
  std::string method;  // HTTP only
  std::string target;  // HTTP: path and query; gRPC: /package.Service/Method
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<const std::string> body;
  // gRPC: the call's deadline, passed on to the peer (max: none).
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
};

// A peer's answer to a forwarded request, relayed as is: the whole answer, or
// one part of a streamed one (the first part carries status and headers).
// Over gRPC: `body` is one serialized response message (ModelInferResponse,
// or ModelStreamInferResponse for a stream's part); a call that failed has no
// body and status 0, and the headers grpc-status and grpc-message carry its
// code and message.
struct RelayedAnswer {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct InferRequest {
  std::string model_name;
  std::string model_version;  // "" = the model's default version
  std::string id;
  Parameters parameters;
  std::vector<Tensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty = all outputs
  bool binary_data_output = false;       // request-level binary_data_output

  // Scheduling hints (from parameters "priority" and "timeout").
  uint32_t priority = 0;    // 0 = the model's default level
  uint64_t timeout_us = 0;  // 0 = the model's default
  // Background work (batch jobs): queued behind every other request of the
  // model, whatever its priority level; `priority` is ignored.
  bool background = false;
  // Asked through a generative API (OpenAI's routes): only a generative model
  // (scheduler kind "generative") answers it; another one refuses it with
  // INVALID_ARGUMENT naming its platform (the validation stage).
  bool generative_api = false;

  // The transport's sticky key (HTTP header Inferd-Sticky-Key, gRPC metadata
  // inferd-sticky-key): keeps one user on one version of a traffic split.
  // "" = none (the policy's sticky_key parameter may still name one).
  std::string sticky_key;

  // Set by a front end whose body decodes by the serving version's declared
  // inputs (TF Serving's :predict, Triton's generate extension): the pipeline
  // calls it once, on the version the request is pinned to, right after
  // admission (model_version then names that version); it fills the request
  // (its inputs). An error answers the request with its status. Null:
  // already decoded.
  std::function<Status(const std::vector<TensorMetadata>& inputs, InferRequest& request)> decode;
  // Runs `decode`, if set, once: it is released first (with the body it holds).
  Status RunDecode(const std::vector<TensorMetadata>& inputs) {
    if (!decode) return Status::OK();
    auto d = std::move(decode);
    decode = nullptr;
    return d(inputs, *this);
  }

  // Cluster mode: the request's wire form (set by the HTTP and gRPC front ends; null =
  // never forwarded), and the node that forwarded it here ("" = its client
  // sent it here): a forwarded request is served here, never forwarded again.
  std::shared_ptr<const WireRequest> wire;
  std::string forwarded_by;
  // Tracing (core/trace.h): the span this request's spans go under -- the
  // front end's root span, then the model span the server opens (an
  // ensemble's steps and BLS calls are children of their caller's). Null:
  // not traced (the common case: nothing is recorded).
  std::shared_ptr<const TraceParent> trace;
  // Raised by the front end when the client gives up; null = not cancellable.
  // A cancelled request still queued is answered CANCELLED and never runs.
  std::shared_ptr<const Cancellation> cancellation;

  bool cancelled() const { return cancellation && cancellation->cancelled(); }
};

struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<Tensor> outputs;
  // Response-level parameters (KServe v2 "parameters"; gRPC
  // ModelInferResponse.parameters); none unless a feature sets them.
  Parameters parameters;
  // A decoupled model ended the request with the final flag alone (Triton's
  // TRITONSERVER_RESPONSE_COMPLETE_FINAL without a response): a stream sends
  // nothing for it unless the client asked to see every final flag
  // (triton_enable_empty_final_response).
  bool final_flag_only = false;
  // Cluster mode: a peer answered this request (forwarded); the front end
  // writes this as it is instead of rendering the fields above.
  std::shared_ptr<const RelayedAnswer> relayed;
};

// Called exactly once per accepted request, from a server worker thread.
// Must not block: front ends post the result to their own threads.
using InferCallback = std::function<void(Result<InferResponse>)>;

// A part of a request's answer sent before its final one (decoupled models,
// token streaming): zero or more calls, in order, from a server worker
// thread, all before the final callback; must not block. Returns false when
// the client is gone, so the producer may stop early (it still answers the
// final callback).
using PartialCallback = std::function<bool(InferResponse)>;

// Where a request's answers go: zero or more partial responses, then exactly
// one final answer. The unary path sets only `final` (one std::function, as
// before partial responses existed). A front end that can deliver parts
// (a gRPC stream, an HTTP event stream) sets `partial`; when it is null, a
// model that answers in parts must refuse the request or send one answer.
struct ResponseSink {
  PartialCallback partial;
  InferCallback final;
};

}  // namespace inferd
