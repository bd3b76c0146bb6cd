// RequestObserver: what the front ends call around each request they serve,
// when tracing or the access log is on (docs/observability.md): Start opens
// the request's root span ("InferRequest", kind SERVER: Triton's top-level
// span) when the request is traced, and gives the context that the request
// carries into the server (InferRequest::trace) and the traceparent header
// the answer returns; Finish ends the span with the request's outcome and
// writes the access-log line. Off (neither configured): active() is false and
// front ends skip both calls.
//
// Thread-safety: thread-safe; an ObservedRequest belongs to one thread at a
// time. Ownership: shares the TraceService and the AccessLog.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/trace.h"
#include "tracing/access_log.h"
#include "tracing/trace_service.h"

namespace inferd::tracing {

struct ObservedRequest {
  Span root;                                   // active when traced
  std::shared_ptr<const TraceParent> context;  // what the request carries (null: not traced)
  std::string traceparent;                     // the header the answer returns ("" when not traced)
  TimePoint start{};
  int64_t start_unix_ns = 0;
};

class RequestObserver {
 public:
  RequestObserver() = default;
  RequestObserver(std::shared_ptr<TraceService> traces, std::shared_ptr<AccessLog> log)
      : traces_(std::move(traces)), log_(std::move(log)) {}

  bool active() const { return traces_ != nullptr || log_ != nullptr; }
  bool tracing() const { return traces_ != nullptr; }
  TraceService* traces() const { return traces_.get(); }
  AccessLog* access_log() const { return log_.get(); }

  // A request arrived: whether it is traced (`inference`: it runs a model,
  // so it may be; other requests are only logged), and whether it is to be
  // observed at all. Front ends let a request that Observes refuses pass
  // untouched (tracing on, no access log, the request not traced: most
  // requests at Triton's default rate of one in 1,000).
  TraceService::Decision Decide(bool inference, std::string_view traceparent, std::string_view tracestate) const;
  bool Observes(const TraceService::Decision& d) const { return log_ != nullptr || d.traced(); }
  // An observed request's start (`start`: when it began to be read), with
  // Decide's decision. Fills `r` (a fresh one).
  void Start(ObservedRequest& r, TraceService::Decision&& d, TimePoint start) const;
  // The request was answered. `record` carries what the front end knows
  // (protocol, method, target, model, version, status, bytes, client, request
  // id); time, latency and the trace id are filled in here. `error`: the
  // answer's status when it failed (the span's status).
  void Finish(ObservedRequest& request, AccessRecord&& record, const Status& error) const;
  // The same, for a request answered at `end` (a front end that hands the answer over first).
  void Finish(ObservedRequest& request, AccessRecord&& record, const Status& error, TimePoint end) const;

 private:
  std::shared_ptr<TraceService> traces_;
  std::shared_ptr<AccessLog> log_;
};

}  // namespace inferd::tracing
