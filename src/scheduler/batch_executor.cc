#include "scheduler/batch_executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "core/number_text.h"
#include "core/padding.h"
#include "scheduler/durations.h"

namespace inferd {
namespace {

// The config's `reshape` of an input, for a tensor of `rows` rows.
void ApplyReshape(const ModelSpec& spec, const TensorSpec& in, int64_t rows, Tensor* t) {
  if (!in.reshape) return;
  Shape s;
  if (spec.max_batch_size > 0) s.push_back(rows);
  s.insert(s.end(), in.reshape->begin(), in.reshape->end());
  // Resolve a single -1 from the element count.
  int64_t known = 1, unknown_at = -1;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] < 0)
      unknown_at = static_cast<int64_t>(k);
    else
      known *= s[k];
  }
  if (unknown_at >= 0 && known > 0) s[static_cast<size_t>(unknown_at)] = t->element_count() / known;
  t->shape = std::move(s);
}

// A padded input of the batch: each request's part padded along the input's
// variable dimension to the bucket of the longest (batching.pad_inputs).
Result<Tensor> PadInput(const PaddingSpec& padding, const PaddedInput& pad, const std::vector<const Tensor*>& parts,
                        const std::string& name, ModelStats* stats) {
  int64_t longest = 0;
  bool equal = true;
  uint64_t real = 0;
  for (const Tensor* t : parts) {
    if (pad.axis >= t->shape.size()) return Status::InvalidArgument("input '" + name + "' has no dimension to pad");
    if (t->shape[pad.axis] != parts.front()->shape[pad.axis]) equal = false;
    longest = std::max(longest, t->shape[pad.axis]);
    real += static_cast<uint64_t>(t->element_count());
  }
  const int64_t length = padding.PaddedLength(longest);
  Result<Tensor> t =
      equal && length == longest ? ConcatRows(parts, name) : PadConcat(parts, pad.axis, length, pad.pad_bytes, name);
  BatchingStats* b = stats ? stats->batching() : nullptr;  // enabled by the batcher of a padded model
  if (t.ok() && b && !pad.mask) {
    b->real_elements.fetch_add(real, std::memory_order_relaxed);
    b->padded_elements.fetch_add(static_cast<uint64_t>(t->element_count()), std::memory_order_relaxed);
  }
  return t;
}

// A ragged input (allow_ragged_batch): every request's elements, concatenated
// into one 1-D tensor, as Triton gives them to a backend.
Result<Tensor> ConcatRagged(const std::vector<const Tensor*>& parts, const std::string& name) {
  size_t bytes = 0;
  int64_t elements = 0;
  for (const Tensor* t : parts) {
    if (t->dtype != parts.front()->dtype) return Status::InvalidArgument("input '" + name + "': datatypes differ");
    bytes += t->byte_size;
    elements += t->element_count();
  }
  std::byte* out = nullptr;
  Tensor t = Tensor::Allocate(name, parts.front()->dtype, {elements}, bytes, &out);
  for (const Tensor* p : parts) {
    if (p->byte_size) std::memcpy(out, p->data, p->byte_size);
    out += p->byte_size;
  }
  return t;
}

// A batch input (ModelSpec::batch_inputs), computed from the formed batch.
Tensor MakeBatchInput(const BatchInputSpec& b, const std::vector<std::unique_ptr<PendingRequest>>& batch) {
  using Kind = BatchInputSpec::Kind;
  std::vector<double> values;
  Shape shape;
  const int64_t n = static_cast<int64_t>(batch.size());
  auto count = [&](const PendingRequest& p) {
    const Tensor& t = p.request->inputs[b.source_index];
    return static_cast<double>(t.element_count() / std::max<int64_t>(1, p.rows));
  };
  switch (b.kind) {
    case Kind::kElementCount:
    case Kind::kAccumulatedElementCount:
    case Kind::kAccumulatedElementCountWithZero: {
      double sum = 0;
      if (b.kind == Kind::kAccumulatedElementCountWithZero) values.push_back(0);
      for (const auto& p : batch) {
        sum += count(*p);
        values.push_back(b.kind == Kind::kElementCount ? count(*p) : sum);
      }
      shape = {static_cast<int64_t>(values.size())};
      break;
    }
    case Kind::kMaxElementCountAsShape: {
      double most = 0;
      for (const auto& p : batch) most = std::max(most, count(*p));
      values.assign(static_cast<size_t>(most), 0.0);
      shape = {static_cast<int64_t>(most)};
      break;
    }
    case Kind::kItemShape:
    case Kind::kItemShapeFlatten: {
      int64_t rank = 0;
      for (const auto& p : batch) {
        const Shape& s = p->request->inputs[b.source_index].shape;
        rank = static_cast<int64_t>(s.size()) - 1;
        for (int64_t r = 0; r < p->rows; ++r)
          for (size_t k = 1; k < s.size(); ++k) values.push_back(static_cast<double>(s[k]));
      }
      const int64_t items = rank > 0 ? static_cast<int64_t>(values.size()) / rank : n;
      shape = b.kind == Kind::kItemShape ? Shape{items, rank} : Shape{static_cast<int64_t>(values.size())};
      break;
    }
  }
  std::string element;
  std::string bytes;
  bytes.reserve(values.size() * DataTypeByteSize(b.dtype));
  for (double v : values) {
    element.clear();
    AppendNumber(&element, b.dtype, true, static_cast<int64_t>(v), v);
    bytes += element;
  }
  return Tensor::Copy(b.target, b.dtype, std::move(shape),
                      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
}

// Builds the backend's input tensors for the batch.
Result<std::vector<Tensor>> GatherInputs(const ModelSpec& spec,
                                         const std::vector<std::unique_ptr<PendingRequest>>& batch, int64_t total_rows,
                                         ModelStats* stats) {
  std::vector<Tensor> inputs;
  inputs.reserve(spec.inputs.size());
  std::vector<const Tensor*> parts(batch.size());
  const std::optional<PaddingSpec>& padding = spec.batching.padding;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    for (size_t r = 0; r < batch.size(); ++r) parts[r] = &batch[r]->request->inputs[i];
    if (spec.inputs[i].ragged) {
      INFERD_ASSIGN_OR_RETURN(Tensor t, ConcatRagged(parts, spec.inputs[i].name));
      inputs.push_back(std::move(t));
      continue;
    }
    const PaddedInput* pad = padding ? padding->Find(i) : nullptr;
    if (pad) {
      INFERD_ASSIGN_OR_RETURN(Tensor t, PadInput(*padding, *pad, parts, spec.inputs[i].name, stats));
      inputs.push_back(std::move(t));
      continue;
    }
    INFERD_ASSIGN_OR_RETURN(Tensor t, ConcatRows(parts, spec.inputs[i].name));
    ApplyReshape(spec, spec.inputs[i], total_rows, &t);
    inputs.push_back(std::move(t));
  }
  for (const auto& b : spec.batch_inputs) inputs.push_back(MakeBatchInput(b, batch));
  return inputs;
}

Status CheckOutput(const ModelSpec& spec, const Tensor& out, int64_t total_rows) {
  const TensorSpec* os = spec.FindOutput(out.name);
  if (!spec.outputs.empty() && os == nullptr) return Status::OK();  // extra outputs are ignored later
  if (os && !os->dtype_assumed && os->dtype != out.dtype) {
    return Status::Internal("model '" + spec.name + "' produced output '" + out.name + "' as " +
                            std::string(DataTypeToWire(out.dtype)) + " but its config says " +
                            std::string(DataTypeToWire(os->dtype)));
  }
  if (spec.max_batch_size > 0 && (out.shape.empty() || out.shape[0] != total_rows)) {
    return Status::Internal("model '" + spec.name + "' output '" + out.name + "' has shape " +
                            ShapeToString(out.shape) + ", expected batch dimension " + std::to_string(total_rows));
  }
  return out.Validate();
}

bool Wanted(const InferRequest& req, const std::string& name) {
  if (req.outputs.empty()) return true;
  for (const auto& o : req.outputs)
    if (o.name == name) return true;
  return false;
}

}  // namespace

void FailRequest(PendingRequest& p, const Status& status, FailureReason reason, ModelStats* stats, Clock& clock) {
  if (stats) {
    stats->RecordFailure(reason, Ns(clock.Now() - p.arrival));
    stats->AddPending(-1);
  }
  p.callback(status);
}

namespace {

// One request's answer from `outputs` (the whole batch's when `slice`, its
// rows starting at `offset`; else the request's own).
// `require_requested`: every output the request names must be there (a
// decoupled model's parts, and its empty final answer, need not hold them).
Result<InferResponse> BuildResponse(const ModelSpec& spec, const PendingRequest& p, const std::vector<Tensor>& outputs,
                                    bool slice, int64_t offset, bool require_requested = true,
                                    int64_t padded_length = 0) {
  InferResponse resp;
  resp.model_name = p.request->model_name;
  resp.model_version = p.request->model_version;
  resp.id = p.request->id;
  for (const Tensor& o : outputs) {
    if (!spec.outputs.empty() && spec.FindOutput(o.name) == nullptr) continue;
    if (!Wanted(*p.request, o.name)) continue;
    Tensor piece = o;
    if (slice) {
      INFERD_ASSIGN_OR_RETURN(piece, o.SliceRows(offset, p.rows));
    }
    if (padded_length > p.length && piece.shape.size() > 1 && piece.shape[1] == padded_length) {
      const auto& unpad = spec.batching.padding->unpad_outputs;
      if (std::find(unpad.begin(), unpad.end(), o.name) != unpad.end()) {
        INFERD_ASSIGN_OR_RETURN(piece, CutAxis(piece, 1, p.length));
      }
    }
    const TensorSpec* os = spec.FindOutput(o.name);
    if (os && os->reshape && ElementCount(os->dims) > 0) {
      Shape s;
      if (spec.max_batch_size > 0) s.push_back(p.rows);
      s.insert(s.end(), os->dims.begin(), os->dims.end());
      piece.shape = std::move(s);
    }
    resp.outputs.push_back(std::move(piece));
  }
  for (const auto& want : p.request->outputs) {
    if (!require_requested) break;
    bool found = false;
    for (const auto& o : resp.outputs) found = found || o.name == want.name;
    if (!found)
      return Status::InvalidArgument("model '" + spec.name + "' produced no output named '" + want.name + "'");
  }
  return resp;
}

void LogExecutionError(const ModelSpec& spec, const PendingRequest& first, size_t batch_size, const Status& status,
                       ModelStats* stats, TimePoint now) {
  if (stats && !stats->ShouldLogError(now.time_since_epoch().count())) return;
  std::string why = status.message();  // one log line: a traceback's lines joined by " | "
  for (size_t at = why.find('\n'); at != std::string::npos; at = why.find('\n', at)) why.replace(at, 1, " | ");
  spdlog::error("model '{}' version {}: execution of a batch of {} failed: {}", spec.name, first.request->model_version,
                batch_size, why);
}

// Contract 10 of backend.h: each request's own inputs, one result each.
std::vector<Result<InferResponse>> RunPerRequest(ModelInstance& instance, const ModelSpec& spec,
                                                 std::vector<std::unique_ptr<PendingRequest>>& batch, ModelStats* stats,
                                                 Clock& clock) {
  bool reshaped = false;
  for (const auto& in : spec.inputs) reshaped = reshaped || in.reshape.has_value();
  std::vector<InferRequest> copies;  // only when a reshape changes the inputs' shapes
  if (reshaped) copies.reserve(batch.size());
  std::vector<const InferRequest*> requests;
  for (auto& p : batch) {
    if (!reshaped) {
      requests.push_back(p->request.get());
      continue;
    }
    InferRequest& copy = copies.emplace_back(*p->request);
    for (size_t i = 0; i < spec.inputs.size() && i < copy.inputs.size(); ++i)
      ApplyReshape(spec, spec.inputs[i], p->rows, &copy.inputs[i]);
    requests.push_back(&copy);
  }
  // Decoupled models send parts through the request's partial callback
  // (backend.h contract 12); the senders live until ExecuteRequests returns.
  std::vector<PartialSender> partial;
  if (spec.decoupled) {
    for (auto& p : batch) {
      if (!p->partial) {
        partial.emplace_back();
        continue;
      }
      partial.emplace_back([&spec, p = p.get()](std::vector<Tensor> outputs) {
        Status st;
        for (const Tensor& o : outputs)
          if (st.ok()) st = CheckOutput(spec, o, p->rows);
        auto resp = st.ok() ? BuildResponse(spec, *p, outputs, false, 0, /*require_requested=*/false)
                            : Result<InferResponse>(st);
        if (!resp.ok()) {
          spdlog::error("model '{}': a partial response was dropped: {}", spec.name, resp.status().message());
          return true;
        }
        return p->partial(std::move(*resp));
      });
    }
  }
  auto outputs = instance.ExecuteRequests(requests, partial);
  std::vector<Result<InferResponse>> results;
  results.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (i >= outputs.size()) {
      results.emplace_back(Status::Internal("model '" + spec.name + "' answered " + std::to_string(outputs.size()) +
                                            " of " + std::to_string(batch.size()) + " requests"));
      continue;
    }
    if (!outputs[i].ok()) {
      LogExecutionError(spec, *batch[i], 1, outputs[i].status(), stats, clock.Now());
      results.emplace_back(outputs[i].status());
      continue;
    }
    Status st;
    for (const Tensor& o : *outputs[i]) {
      st = CheckOutput(spec, o, batch[i]->rows);
      if (!st.ok()) break;
    }
    if (!st.ok()) {
      results.emplace_back(st);
      continue;
    }
    results.push_back(BuildResponse(spec, *batch[i], *outputs[i], false, 0, !spec.decoupled));
    if (spec.decoupled && results.back().ok() && outputs[i]->empty()) results.back()->final_flag_only = true;
  }
  return results;
}

// The times of one execution, for the spans of the traced requests in it.
struct ExecutionTimes {
  TimePoint start, infer_start, infer_end, end;
  int64_t rows = 0;
  size_t requests = 0;
  int instance = -1;
};

void TraceExecution(const PendingRequest& p, const ExecutionTimes& t) {
  const std::shared_ptr<const TraceParent>& parent = p.request->trace;
  const int64_t start = UnixNanos(t.start);
  Span queue(parent, "queue", SpanKind::kInternal, UnixNanos(p.enqueued));
  queue.End(start);
  Span compute(parent, "compute", SpanKind::kInternal, start);
  compute.SetAttribute("inferd.batch_size", t.rows);
  compute.SetAttribute("inferd.batch_requests", static_cast<int64_t>(t.requests));
  if (t.instance >= 0) compute.SetAttribute("inferd.instance", static_cast<int64_t>(t.instance));
  const int64_t end = UnixNanos(t.end);
  compute.AddEvent("COMPUTE_START", start);
  compute.AddEvent("COMPUTE_INPUT_END", UnixNanos(t.infer_start));
  compute.AddEvent("COMPUTE_OUTPUT_START", UnixNanos(t.infer_end));
  compute.AddEvent("COMPUTE_END", end);
  compute.End(end);
}

}  // namespace

void ExecuteBatch(ModelInstance& instance, const ModelSpec& spec, std::vector<std::unique_ptr<PendingRequest>>& batch,
                  ModelStats* stats, Clock& clock, int instance_index) {
  if (batch.empty()) return;
  const TimePoint start = clock.Now();
  int64_t total_rows = 0;
  for (const auto& p : batch) total_rows += p->rows;

  auto fail_all = [&](const Status& st, FailureReason reason) {
    for (auto& p : batch) FailRequest(*p, st, reason, stats, clock);
  };

  std::vector<Result<InferResponse>> results;
  TimePoint infer_start, infer_end;
  if (instance.takes_requests()) {
    infer_start = clock.Now();
    results = RunPerRequest(instance, spec, batch, stats, clock);
    infer_end = clock.Now();
  } else {
    auto inputs = GatherInputs(spec, batch, total_rows, stats);
    if (!inputs.ok()) return fail_all(inputs.status(), FailureReason::kOther);
    infer_start = clock.Now();
    auto outputs = instance.Execute(*inputs);
    infer_end = clock.Now();
    if (!outputs.ok()) {
      LogExecutionError(spec, *batch.front(), batch.size(), outputs.status(), stats, infer_end);
      return fail_all(outputs.status(), FailureReason::kBackend);
    }
    for (const Tensor& o : *outputs) {
      Status st = CheckOutput(spec, o, total_rows);
      if (!st.ok()) return fail_all(st, FailureReason::kBackend);
    }
    // Slice per request. Responses are built before any callback so output
    // time is measured for the whole batch.
    results.reserve(batch.size());
    int64_t offset = 0, padded_length = 0;  // padded models: what the outputs' sequence dimension may hold
    if (spec.batching.padding) {
      int64_t longest = 0;
      for (const auto& p : batch) longest = std::max(longest, p->length);
      padded_length = spec.batching.padding->PaddedLength(longest);
    }
    for (auto& p : batch) {
      results.push_back(BuildResponse(spec, *p, *outputs, batch.size() > 1, offset, true, padded_length));
      offset += p->rows;
    }
  }
  const TimePoint end = clock.Now();

  const uint64_t input_ns = Ns(infer_start - start), infer_ns = Ns(infer_end - infer_start),
                 output_ns = Ns(end - infer_end);
  if (stats)
    stats->RecordExecution(static_cast<int>(spec.max_batch_size > 0 ? total_rows : 1), input_ns, infer_ns, output_ns);
  const uint64_t now_ms = WallMillis();
  for (size_t i = 0; i < batch.size(); ++i) {
    PendingRequest& p = *batch[i];
    if (stats) {
      if (results[i].ok()) {
        stats->RecordSuccess(Ns(end - p.arrival), Ns(start - p.enqueued), input_ns, infer_ns, output_ns, now_ms);
      } else {
        const bool backend = results[i].status().code() != StatusCode::kInvalidArgument;
        stats->RecordFailure(backend ? FailureReason::kBackend : FailureReason::kInvalid, Ns(end - p.arrival));
      }
      stats->AddPending(-1);
    }
    p.callback(std::move(results[i]));
  }
  // The batch's answers go first; its traced requests' spans are recorded after them (off their latency).
  for (const auto& p : batch) {
    if (p->request->trace) {
      TraceExecution(*p, {start, infer_start, infer_end, end, total_rows, batch.size(), instance_index});
    }
  }
}

}  // namespace inferd
