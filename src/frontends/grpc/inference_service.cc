// inference.GRPCInferenceService: each RPC decodes its message, calls the
// server facade and encodes the answer; nothing else lives here.
#include <google/protobuf/util/json_util.h>

#include "frontends/grpc/grpc_codec.h"
#include "frontends/grpc/grpc_forwarder.h"
#include "frontends/grpc/services.h"
#include "server/inference_server.h"
#include "server/load_parameters.h"

namespace inferd::grpcfe {
namespace {

using inference::ModelInferRequest;
using inference::ModelStreamInferResponse;

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* c, const Status& st) {
  auto* reactor = c->DefaultReactor();
  reactor->Finish(ToGrpcStatus(st));
  return reactor;
}

void SetDuration(inference::StatisticDuration* d, const DurationSnapshot& s) {
  d->set_count(s.count);
  d->set_ns(s.ns);
}

void SetTensorMetadata(const std::vector<TensorMetadata>& from,
                       google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* to) {
  for (const auto& t : from) {
    auto* m = to->Add();
    m->set_name(t.name);
    m->set_datatype(std::string(DataTypeToWire(t.dtype)));
    m->mutable_shape()->Add(t.shape.begin(), t.shape.end());
  }
}

// The "config" parameter of a load (a JSON model config); file overrides are
// not supported.
template <typename Params>
Result<std::optional<std::string>> LoadConfigParameter(const Params& params) {
  std::vector<LoadParameter> list;
  for (const auto& [key, p] : params) {
    const bool is_string = p.parameter_choice_case() == inference::ModelRepositoryParameter::kStringParam;
    list.push_back({key, is_string, is_string ? p.string_param() : std::string()});
  }
  return ConfigFromLoadParameters(list);
}

// One ModelInfer call. The request runs on a server worker, which Finishes
// the call. When the call is cancelled (the client cancelled it, or its
// deadline passed) the request's cancellation flag is raised, so a request
// still queued never runs. OnDone, after Finish, deletes this.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(InferenceServer* server, grpc::CallbackServerContext* c) : server_(server), call_(c) {}
  const std::shared_ptr<Cancellation>& cancellation() const { return cancellation_; }
  LibraryCall& call() { return call_; }
  void OnCancel() override {
    cancellation_->Cancel();
    server_->CountClientCancellation();
  }
  void OnDone() override { delete this; }
  // Both reactions are trivial and never block, so gRPC may run them inline
  // (as it does for its DefaultReactor). Otherwise it hands every OnDone to
  // another thread: measured +12 us of server CPU per tiny request.
  bool InternalInlineable() override { return true; }

 private:
  InferenceServer* server_;
  LibraryCall call_;
  std::shared_ptr<Cancellation> cancellation_ = std::make_shared<Cancellation>();
};

// Requests and responses of one ModelStreamInfer call. Requests are decoded
// and handed to the server as they arrive; responses are written in the
// order they complete, one write at a time. The stream ends (OK) when the
// client has closed its side, or the server drains, and every accepted
// request has been answered and sent. When the client cancels the stream (or
// stops reading), the requests it still has queued are cancelled.
//
// Lifetime: gRPC deletes nothing; OnDone deletes this, which gRPC calls
// after Finish and after every reaction has returned. Finish is only called
// with no request in flight, so no server callback can outlive the reactor.
// StartRead/StartWrite/Finish are never called with mu_ held (a completion
// may run inline), and Finish is the last thing a path does with `this`.
class StreamReactor final : public grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>,
                            public Drainable {
 public:
  StreamReactor(ServiceContext* ctx, grpc::CallbackServerContext* call)
      : ctx_(ctx), call_(call), sticky_key_(StickyKeyOf(call_)) {
    if (!ctx_->drains.Add(this)) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
      return;
    }
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      bool finish;
      {
        MutexLock g(&mu_);
        reads_done_ = true;
        finish = ShouldFinishLocked();
      }
      if (finish) Finish(grpc::Status::OK);
      return;
    }
    {
      MutexLock g(&mu_);
      if (finished_) return;
    }
    Submit();
    incoming_.Clear();
    bool read = false;
    {
      MutexLock g(&mu_);
      if (draining_ || broken_) return;  // the last completion finishes the stream
      if (in_flight_ + queue_.size() < ctx_->max_stream_in_flight)
        read = true;
      else
        read_paused_ = true;
    }
    if (read) StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    const ModelStreamInferResponse* next = nullptr;
    bool read = false, finish = false;
    {
      MutexLock g(&mu_);
      queue_.pop_front();
      if (!ok) {
        broken_ = true;  // the client is gone: later responses have nowhere to go
        queue_.clear();
        cancellation_->Cancel();
      }
      if (!queue_.empty())
        next = &queue_.front();
      else
        writing_ = false;
      if (read_paused_ && !reads_done_ && !draining_ && !broken_ &&
          in_flight_ + queue_.size() < ctx_->max_stream_in_flight) {
        read_paused_ = false;
        read = true;
      }
      finish = ShouldFinishLocked();
    }
    if (next) StartWrite(next);
    if (read) StartRead(&incoming_);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnCancel() override {
    cancellation_->Cancel();
    ctx_->server->CountClientCancellation();
    bool finish;
    {
      MutexLock g(&mu_);
      broken_ = true;
      finish = ShouldFinishLocked();
    }
    if (finish) Finish(grpc::Status::CANCELLED);
  }

  void Drain() override {
    bool finish;
    {
      MutexLock g(&mu_);
      draining_ = true;
      finish = ShouldFinishLocked();
    }
    if (finish) Finish(grpc::Status::OK);
  }

  void OnDone() override {
    ctx_->drains.Remove(this);
    delete this;
  }

 private:
  // Decodes incoming_ and hands it to the server (or answers its error).
  void Submit() {
    const bool raw = incoming_.raw_input_contents_size() > 0;
    const bool mark_final = WantsFinalFlag(incoming_);
    std::string forwarded_by;
    // Each request of the stream is authorized for its model (and counted against its token's rate).
    Status allowed = AuthorizeCall(*ctx_, call_, auth::Need::kInfer, incoming_.model_name());
    auto wire = allowed.ok() ? GrpcWireForm(*ctx_, call_, incoming_, kModelStreamInferMethod, &forwarded_by) : nullptr;
    auto decoded = allowed.ok() ? DecodeInferRequest(&incoming_) : Result<std::unique_ptr<InferRequest>>(allowed);
    if (!decoded.ok()) {
      // Logged (and traced, when sampled) like a request that fails later.
      if (auto observed = ObserveCall(*ctx_, call_, "ModelStreamInfer", nullptr, incoming_.model_name(),
                                      incoming_.model_version(), incoming_.id())) {
        FinishObserved(*observed, nullptr, ToGrpcStatus(decoded.status()), nullptr, std::string());
      }
      auto resp = ErrorResponse(decoded.status(), incoming_.model_name(), incoming_.model_version(), incoming_.id());
      if (mark_final) MarkFinal(&resp);
      Push(std::move(resp), false);
      return;
    }
    {
      MutexLock g(&mu_);
      ++in_flight_;
    }
    const InferRequest& r = **decoded;
    std::shared_ptr<ObservedCall> observed =
        ObserveCall(*ctx_, call_, "ModelStreamInfer", nullptr, r.model_name, r.model_version, r.id);
    if (observed) (*decoded)->trace = observed->request.context;
    (*decoded)->cancellation = cancellation_;
    (*decoded)->sticky_key = sticky_key_;
    (*decoded)->wire = std::move(wire);
    (*decoded)->forwarded_by = std::move(forwarded_by);
    // A model that answers in parts (decoupled) sends each part as its own
    // stream response; the final answer follows, marked final when the
    // client asked. An empty final answer -- after parts, or a decoupled
    // model's final flag alone (no response at all for this request, as
    // Triton's square example sends for 0) -- is sent only then.
    auto parts = std::make_shared<std::atomic<size_t>>(0);
    ResponseSink sink;
    sink.partial = [this, raw, parts](InferResponse part) {
      parts->fetch_add(1, std::memory_order_relaxed);
      ModelStreamInferResponse resp;
      if (part.relayed) {  // one response of a peer's stream, as it wrote it
        if (part.relayed->body.empty()) return true;
        if (!resp.ParseFromString(part.relayed->body)) resp.set_error_message("a peer's response could not be read");
        return Push(std::move(resp), /*answered=*/false);
      }
      EncodeInferResponse(part, raw, resp.mutable_infer_response());
      return Push(std::move(resp), /*answered=*/false);
    };
    sink.final = [this, raw, mark_final, parts, name = r.model_name, version = r.model_version, id = r.id,
                  observed](Result<InferResponse> result) {
      if (observed) {
        grpc::Status st = result.ok() ? grpc::Status::OK : ToGrpcStatus(result.status());
        if (result.ok() && result->relayed) {
          if (auto failed = RelayedFailure(*result->relayed)) st = *failed;
        }
        FinishObserved(*observed, nullptr, st, nullptr, result.ok() ? result->model_version : std::string());
      }
      if (result.ok() && result->relayed) {
        // The peer streamed this request's responses (final flags included) as parts; or its call failed.
        auto failed = RelayedFailure(*result->relayed);
        if (!failed) return Answered();
        ModelStreamInferResponse resp = ErrorResponse(Status::Unavailable(failed->error_message()), name, version, id);
        if (mark_final) MarkFinal(&resp);
        Push(std::move(resp), true);
        return;
      }
      if (result.ok() && result->outputs.empty() &&
          (parts->load(std::memory_order_relaxed) > 0 || result->final_flag_only) && !mark_final) {
        return Answered();
      }
      ModelStreamInferResponse resp;
      if (result.ok())
        EncodeInferResponse(*result, raw, resp.mutable_infer_response());
      else
        resp = ErrorResponse(result.status(), name, version, id);
      if (mark_final) MarkFinal(&resp);
      Push(std::move(resp), true);
    };
    ctx_->server->InferAsync(std::move(*decoded), std::move(sink));
  }

  // Triton's streaming clients may ask (request parameter
  // triton_enable_empty_final_response) to be told which response is a
  // request's last; with one response per request, every response is.
  static bool WantsFinalFlag(const ModelInferRequest& r) {
    auto it = r.parameters().find("triton_enable_empty_final_response");
    return it != r.parameters().end() && it->second.bool_param();
  }
  static void MarkFinal(ModelStreamInferResponse* resp) {
    (*resp->mutable_infer_response()->mutable_parameters())["triton_final_response"].set_bool_param(true);
  }

  static ModelStreamInferResponse ErrorResponse(const Status& st, const std::string& model, const std::string& version,
                                                const std::string& id) {
    ModelStreamInferResponse resp;
    resp.set_error_message(st.message());
    auto* r = resp.mutable_infer_response();
    r->set_model_name(model);
    r->set_model_version(version);
    r->set_id(id);
    return resp;
  }

  // Queues a response (`answered`: it ends an in-flight request) and writes
  // it if no write is in progress. False when the client is gone.
  bool Push(ModelStreamInferResponse resp, bool answered) {
    const ModelStreamInferResponse* write = nullptr;
    bool finish, open;
    {
      MutexLock g(&mu_);
      if (answered) --in_flight_;
      open = !broken_ && !finished_;
      if (open) {
        queue_.push_back(std::move(resp));
        if (!writing_) {
          writing_ = true;
          write = &queue_.front();
        }
      }
      finish = ShouldFinishLocked();
    }
    if (write) StartWrite(write);
    if (finish) Finish(grpc::Status::OK);
    return open;
  }

  // A request ended without a response of its own to write.
  void Answered() {
    bool finish;
    {
      MutexLock g(&mu_);
      --in_flight_;
      finish = ShouldFinishLocked();
    }
    if (finish) Finish(grpc::Status::OK);
  }

  bool ShouldFinishLocked() TSA_REQUIRES(mu_) {
    if (finished_ || in_flight_ > 0 || writing_) return false;
    if (!(reads_done_ || draining_ || broken_)) return false;
    finished_ = true;
    return true;
  }

  ServiceContext* ctx_;
  const LibraryCall call_;        // gRPC's context, until OnDone
  const std::string sticky_key_;  // the stream's, for every request on it
  const std::shared_ptr<Cancellation> cancellation_ = std::make_shared<Cancellation>();  // covers every request
  ModelInferRequest incoming_;  // the read buffer; one read at a time
  Mutex mu_;
  // The front is being written while writing_.
  std::deque<ModelStreamInferResponse> queue_ TSA_GUARDED_BY(mu_);
  size_t in_flight_ TSA_GUARDED_BY(mu_) = 0;  // handed to the server, not yet answered
  bool writing_ TSA_GUARDED_BY(mu_) = false;
  bool reads_done_ TSA_GUARDED_BY(mu_) = false;
  bool read_paused_ TSA_GUARDED_BY(mu_) = false;
  bool draining_ TSA_GUARDED_BY(mu_) = false;
  bool broken_ TSA_GUARDED_BY(mu_) = false;
  bool finished_ TSA_GUARDED_BY(mu_) = false;
};

Status FillStatistics(const InferenceServer& server, const inference::ModelStatisticsRequest& req,
                      inference::ModelStatisticsResponse* resp) {
  auto stats = server.GetStatistics(req.name(), req.version());
  if (!stats.ok()) return stats.status();
  for (const auto& s : *stats) {
    auto* m = resp->add_model_stats();
    m->set_name(s.name);
    m->set_version(s.version);
    m->set_last_inference(s.last_inference_ms);
    m->set_inference_count(s.inference_count);
    m->set_execution_count(s.execution_count);
    auto* is = m->mutable_inference_stats();
    SetDuration(is->mutable_success(), s.success);
    SetDuration(is->mutable_fail(), s.fail);
    SetDuration(is->mutable_queue(), s.queue);
    SetDuration(is->mutable_compute_input(), s.compute_input);
    SetDuration(is->mutable_compute_infer(), s.compute_infer);
    SetDuration(is->mutable_compute_output(), s.compute_output);
    SetDuration(is->mutable_cache_hit(), s.cache_hit);
    SetDuration(is->mutable_cache_miss(), s.cache_miss);
    for (const auto& b : s.batch_stats) {
      auto* bs = m->add_batch_stats();
      bs->set_batch_size(static_cast<uint64_t>(b.batch_size));
      SetDuration(bs->mutable_compute_input(), {b.count, b.input_ns});
      SetDuration(bs->mutable_compute_infer(), {b.count, b.infer_ns});
      SetDuration(bs->mutable_compute_output(), {b.count, b.output_ns});
    }
  }
  return Status::OK();
}

}  // namespace

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* c,
                                                       const inference::ServerLiveRequest*,
                                                       inference::ServerLiveResponse* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kHealth); !st.ok()) return Done(c, st);
  resp->set_live(ctx_->server->IsLive());
  return Done(c, Status::OK());
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* c,
                                                        const inference::ServerReadyRequest*,
                                                        inference::ServerReadyResponse* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kHealth); !st.ok()) return Done(c, st);
  resp->set_ready(!ctx_->stopping.load() && ctx_->server->IsReady());
  return Done(c, Status::OK());
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* c,
                                                       const inference::ModelReadyRequest* req,
                                                       inference::ModelReadyResponse* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kRead, req->name()); !st.ok()) return Done(c, st);
  // A readiness probe, as in Triton: an unknown model or version is simply
  // not ready (ready=false, OK); clients such as tritonclient raise on errors.
  auto ready = ctx_->server->IsModelReady(req->name(), req->version());
  resp->set_ready(ready.ok() && *ready);
  return Done(c, Status::OK());
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(grpc::CallbackServerContext* c,
                                                           const inference::ServerMetadataRequest*,
                                                           inference::ServerMetadataResponse* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kRead); !st.ok()) return Done(c, st);
  const inferd::ServerMetadata md = ctx_->server->GetServerMetadata();
  resp->set_name(md.name);
  resp->set_version(md.version);
  for (const auto& e : md.extensions) resp->add_extensions(e);
  return Done(c, Status::OK());
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(grpc::CallbackServerContext* c,
                                                          const inference::ModelMetadataRequest* req,
                                                          inference::ModelMetadataResponse* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kRead, req->name()); !st.ok()) return Done(c, st);
  // An on-demand model loads first, as for ModelInfer; gRPC keeps `req` and
  // `resp` until Finish, which the continuation calls (possibly on a loader
  // thread). A model another node holds is answered there (cluster mode).
  auto* reactor = c->DefaultReactor();
  InferenceServer* server = ctx_->server;
  RouteModelRead(*ctx_, c, reactor, *req, kModelMetadataMethod, req->name(), /*wait_for_load=*/true, resp,
                 [server, reactor, req, resp] {
                   auto md = server->GetModelMetadata(req->name(), req->version());
                   if (!md.ok()) return reactor->Finish(ToGrpcStatus(md.status()));
                   resp->set_name(md->name);
                   for (const auto& v : md->versions) resp->add_versions(v);
                   resp->set_platform(md->platform);
                   SetTensorMetadata(md->inputs, resp->mutable_inputs());
                   SetTensorMetadata(md->outputs, resp->mutable_outputs());
                   reactor->Finish(grpc::Status::OK);
                 });
  return reactor;
}

std::string StickyKeyOf(const CallView& c) { return std::string(c.Metadata("inferd-sticky-key")); }

void ServeModelInfer(ServiceContext& ctx, CallView& call, inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response, std::shared_ptr<Cancellation> cancellation,
                     std::function<void(const grpc::Status&)> finish) {
  // Tracing or the access log on: its root span and its line (null otherwise).
  std::shared_ptr<ObservedCall> observed =
      ObserveCall(ctx, call, "ModelInfer", &request, request.model_name(), request.model_version(), request.id());
  auto done = [&](const Status& st) {
    const grpc::Status status = ToGrpcStatus(st);
    if (observed) FinishObserved(*observed, &call, status, nullptr, {});
    finish(status);
  };
  if (Status st = AuthorizeCall(ctx, call, auth::Need::kInfer, request.model_name()); !st.ok()) return done(st);
  if (Status st = ctx.server->Admit(request.model_name(), request.model_version()); !st.ok()) return done(st);
  const bool raw = request.raw_input_contents_size() > 0;
  std::string forwarded_by;
  auto wire = GrpcWireForm(ctx, call, request, kModelInferMethod, &forwarded_by);
  auto decoded = DecodeInferRequest(&request);  // moves the raw input buffers out (no copy)
  if (!decoded.ok()) {
    // An unknown model or version is the more useful answer than a body error.
    auto ready = ctx.server->IsModelReady(request.model_name(), request.model_version());
    return done(ready.ok() ? decoded.status() : ready.status());
  }
  (*decoded)->cancellation = std::move(cancellation);
  (*decoded)->sticky_key = StickyKeyOf(call);
  (*decoded)->wire = std::move(wire);
  (*decoded)->forwarded_by = std::move(forwarded_by);
  if (observed) (*decoded)->trace = observed->request.context;
  ctx.server->InferAsync(std::move(*decoded),
                         [call = &call, response, raw, observed, finish = std::move(finish)](Result<InferResponse> r) {
                           grpc::Status st = grpc::Status::OK;
                           std::string version;
                           if (!r.ok()) {
                             st = ToGrpcStatus(r.status());
                           } else if (r->relayed) {
                             st = RelayUnary(*r->relayed, call, response);
                           } else {
                             EncodeInferResponse(*r, raw, response);
                             version = r->model_version;
                           }
                           if (observed) FinishObserved(*observed, call, st, response, version);
                           finish(st);
                         });
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* c,
                                                       const inference::ModelInferRequest* request,
                                                       inference::ModelInferResponse* response) {
  auto* reactor = new InferReactor(ctx_->server, c);
  // gRPC owns the request until Finish and reads it no more; decoding moves
  // the raw input buffers out of it (no copy), hence the const_cast.
  ServeModelInfer(*ctx_, reactor->call(), *const_cast<inference::ModelInferRequest*>(request), response,
                  reactor->cancellation(), [reactor](const grpc::Status& st) { reactor->Finish(st); });
  return reactor;
}

grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>* InferenceService::ModelStreamInfer(
    grpc::CallbackServerContext* c) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kInfer); !st.ok()) {
    return new RefusedStream<grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>>(st);
  }
  return new StreamReactor(ctx_, c);
}

grpc::ServerUnaryReactor* InferenceService::ModelConfig(grpc::CallbackServerContext* c,
                                                        const inference::ModelConfigRequest* req,
                                                        inference::ModelConfigResponse* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kRead, req->name()); !st.ok()) return Done(c, st);
  auto* reactor = c->DefaultReactor();  // finished by the continuation, as in ModelMetadata
  InferenceServer* server = ctx_->server;
  RouteModelRead(
      *ctx_, c, reactor, *req, kModelConfigMethod, req->name(), /*wait_for_load=*/true, resp,
      [server, reactor, req, resp] {
        auto json = server->GetModelConfigJson(req->name(), req->version());
        if (!json.ok()) return reactor->Finish(ToGrpcStatus(json.status()));
        google::protobuf::util::JsonParseOptions opts;
        opts.ignore_unknown_fields = true;
        auto st = google::protobuf::util::JsonStringToMessage(*json, resp->mutable_config(), opts);
        if (!st.ok()) {
          return reactor->Finish(ToGrpcStatus(Status::Internal("cannot render the model config: " + st.ToString())));
        }
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(grpc::CallbackServerContext* c,
                                                            const inference::ModelStatisticsRequest* req,
                                                            inference::ModelStatisticsResponse* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kRead, req->name()); !st.ok()) return Done(c, st);
  InferenceServer* server = ctx_->server;
  if (req->name().empty()) return Done(c, FillStatistics(*server, *req, resp));  // this node's models
  // One model's: where another node holds it (cluster mode), that node's.
  auto* reactor = c->DefaultReactor();
  RouteModelRead(*ctx_, c, reactor, *req, kModelStatisticsMethod, req->name(), /*wait_for_load=*/false, resp,
                 [server, reactor, req, resp] { reactor->Finish(ToGrpcStatus(FillStatistics(*server, *req, resp))); });
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(grpc::CallbackServerContext* c,
                                                            const inference::RepositoryIndexRequest* req,
                                                            inference::RepositoryIndexResponse* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kModels); !st.ok()) return Done(c, st);
  auto index = ctx_->server->admin().RepositoryIndex(req->ready());
  if (!index.ok()) return Done(c, index.status());
  for (const auto& e : *index) {
    auto* m = resp->add_models();
    m->set_name(e.name);
    m->set_version(e.version);
    m->set_state(e.state);
    m->set_reason(e.reason);
  }
  return Done(c, Status::OK());
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelLoad(grpc::CallbackServerContext* c,
                                                                const inference::RepositoryModelLoadRequest* req,
                                                                inference::RepositoryModelLoadResponse*) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kModels, req->model_name()); !st.ok()) return Done(c, st);
  auto config = LoadConfigParameter(req->parameters());
  if (!config.ok()) return Done(c, config.status());
  auto* reactor = c->DefaultReactor();
  ctx_->server->admin().Run(
      [reactor, server = ctx_->server, name = req->model_name(), config = *config](bool cancelled) {
        const Status st =
            cancelled ? Status::Unavailable("the server is shutting down") : server->admin().LoadModel(name, config);
        reactor->Finish(ToGrpcStatus(st));
      });
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelUnload(grpc::CallbackServerContext* c,
                                                                  const inference::RepositoryModelUnloadRequest* req,
                                                                  inference::RepositoryModelUnloadResponse*) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kModels, req->model_name()); !st.ok()) return Done(c, st);
  auto* reactor = c->DefaultReactor();
  ctx_->server->admin().Run([reactor, server = ctx_->server, name = req->model_name()](bool cancelled) {
    const Status st =
        cancelled ? Status::Unavailable("the server is shutting down") : server->admin().UnloadModel(name);
    reactor->Finish(ToGrpcStatus(st));
  });
  return reactor;
}

}  // namespace inferd::grpcfe
