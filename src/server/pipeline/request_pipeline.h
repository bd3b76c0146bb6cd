// The request pipeline: every inference request, from any front end, is
// resolved once into a pinned ServingHandle (the version that serves it, held
// for the request's life, like TF Serving's ServableHandle) and then passes
// the stages in the order that server/pipeline/pipeline_order.cc declares:
// admission, decoding a body by the version's declared inputs, scheduling
// parameters, feature join, precomputed lookup, validation, response cache,
// output rules and classification, shadow mirror, and the enqueue on the
// pinned version's scheduler.
//
// A stage either lets the request go on (kContinue; it may have wrapped the
// sink to work on the answer), or takes it (kTaken): it answered the request,
// or holds it and hands it back later through RequestPipeline::Continue, which
// goes on at the stage after it (a Redis fetch, a store lookup).
//
// Thread-safety: a RequestPipeline is immutable after construction; Run and
// Continue are called concurrently (front-end threads, lookup threads). A
// RequestContext belongs to one thread at a time (whoever holds its
// unique_ptr). Stages must be thread-safe; their Process must not block.
//
// Ownership: the pipeline owns its stages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/infer_request.h"
#include "manager/model_version.h"

namespace inferd {

// The version a request was routed to, pinned: it stays loaded (and its
// scheduler alive) while the handle lives, whatever swaps meanwhile.
struct ServingHandle {
  std::shared_ptr<ModelVersion> version;
  std::shared_ptr<ModelVersion> shadow;  // null: not mirrored (server/shadow_traffic.h)
  const ModelSpec& spec() const { return version->spec(); }
};

// One request on its way through the pipeline.
struct RequestContext {
  std::unique_ptr<InferRequest> request;
  ResponseSink sink;
  ServingHandle handle;
  TimePoint arrival;
  bool may_wait = false;       // may wait for its model to load (on demand), once
  bool asked_default = false;  // the caller left the version to the server
  int64_t rows = 0;            // set by validation
  bool skip_cache = false;     // on the precomputed store's path (its answers are never cached)
  size_t next_stage = 0;       // where Continue goes on
  // Traced requests: when the stage that holds the request began (Unix ns; 0: none).
  int64_t held_since_ns = 0;
};

class RequestPipeline;

class RequestStage {
 public:
  enum class Verdict { kContinue, kTaken };
  virtual ~RequestStage() = default;
  // A short name for logs and docs ("admission", "cache", ...).
  virtual const char* name() const = 0;
  // kTaken: the stage answered the request through ctx->sink, or moved `ctx`
  // out and hands it back through pipeline.Continue later. kContinue: `ctx`
  // must still be held.
  virtual Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline& pipeline) const = 0;
  // Whether a traced request gets a span for this stage (named after it):
  // stages that do work for it that may take time or answer it (features,
  // precomputed, cache, shadow, decode); the cheap checks never do.
  virtual bool Traced(const RequestContext& /*ctx*/) const { return false; }
};

class RequestPipeline {
 public:
  // The last stage must take every request (the enqueue).
  explicit RequestPipeline(std::vector<std::unique_ptr<RequestStage>> stages);

  // From the first stage.
  void Run(std::unique_ptr<RequestContext> ctx) const;
  // From ctx->next_stage (the stage after the one that held it).
  void Continue(std::unique_ptr<RequestContext> ctx) const;

  // The stages' names in order (docs, tests).
  std::vector<std::string> StageNames() const;

 private:
  std::vector<std::unique_ptr<RequestStage>> stages_;
};

}  // namespace inferd
