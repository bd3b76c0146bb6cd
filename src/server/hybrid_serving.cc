#include "server/hybrid_serving.h"

#include <chrono>

#include "jobs/stored_outputs.h"

namespace inferd {
namespace {

double SystemUnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The text of one element of the key input (BYTES or an integer type).
std::optional<std::string> KeyFromInput(const Tensor& t) {
  if (t.element_count() != 1) return std::nullopt;
  if (t.dtype == DataType::kBytes) {
    auto elems = SplitBytesElements(t.bytes());
    if (!elems.ok() || elems->size() != 1) return std::nullopt;
    return std::string((*elems)[0]);
  }
  const size_t size = DataTypeByteSize(t.dtype);
  if (size == 0 || t.byte_size < size) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(t.data);
  uint64_t u = 0;
  for (size_t i = 0; i < size; ++i) u |= static_cast<uint64_t>(p[i]) << (8 * i);  // little-endian on the wire
  switch (t.dtype) {
    case DataType::kInt8:
      return std::to_string(static_cast<int8_t>(u));
    case DataType::kInt16:
      return std::to_string(static_cast<int16_t>(u));
    case DataType::kInt32:
      return std::to_string(static_cast<int32_t>(u));
    case DataType::kInt64:
      return std::to_string(static_cast<int64_t>(u));
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
    case DataType::kUint64:
      return std::to_string(u);
    default:
      return std::nullopt;
  }
}

constexpr size_t kMaxKeyBytes = 1024;

}  // namespace

StoredVerdict JudgeStored(const jobs::StoredPrediction& row, const PrecomputedSpec& spec, const std::string& model,
                          const std::string& version, double now_unix_seconds) {
  if (row.model_name != model) return StoredVerdict::kOtherModel;
  if (!spec.any_version && row.model_version != version) return StoredVerdict::kOtherVersion;
  if (spec.max_age_seconds > 0 && now_unix_seconds - row.predicted_at > static_cast<double>(spec.max_age_seconds))
    return StoredVerdict::kTooOld;
  return StoredVerdict::kFresh;
}

Result<std::optional<std::string>> HybridKey(const PrecomputedSpec& spec, const InferRequest& request, int64_t rows) {
  std::optional<std::string> key;
  if (!spec.key_input.empty()) {
    for (const auto& in : request.inputs) {
      if (in.name != spec.key_input) continue;
      if (rows != 1) break;  // a batch of keys runs online
      key = KeyFromInput(in);
      if (!key) return Status::InvalidArgument("input '" + spec.key_input + "' must hold one key");
    }
    if (!key) return std::optional<std::string>();
  } else {
    auto it = request.parameters.find(spec.key_parameter);
    if (it == request.parameters.end()) return std::optional<std::string>();
    if (const auto* s = std::get_if<std::string>(&it->second)) {
      key = *s;
    } else if (const auto* i = std::get_if<int64_t>(&it->second)) {
      key = std::to_string(*i);
    } else {
      return Status::InvalidArgument("parameter '" + spec.key_parameter +
                                     "' (the precomputed key) must be a string or an integer");
    }
    if (rows != 1)
      return Status::InvalidArgument("parameter '" + spec.key_parameter + "' names one row; this request has " +
                                     std::to_string(rows) + " rows");
  }
  if (key->empty()) return Status::InvalidArgument("the precomputed key is empty");
  if (key->size() > kMaxKeyBytes)
    return Status::InvalidArgument("the precomputed key is longer than " + std::to_string(kMaxKeyBytes) + " bytes");
  return key;
}

bool StoreCanAnswer(const PrecomputedSpec& spec, const InferRequest& request) {
  for (const auto& o : request.outputs) {
    if (o.classification > 0) return false;
    bool stored = false;
    for (const auto& name : spec.outputs) stored |= name == o.name;
    if (!stored) return false;
  }
  return true;
}

HybridServing::HybridServing(const jobs::JobStores* stores, Options options)
    : stores_(stores), options_(std::move(options)) {
  const int n = std::max(1, options_.lookup_threads);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { Run(static_cast<size_t>(i)); });
}

HybridServing::~HybridServing() { Shutdown(); }

Status HybridServing::CheckModel(const ModelSpec& spec) const {
  if (!spec.precomputed) return Status::OK();
  const PrecomputedSpec& pc = *spec.precomputed;
  INFERD_RETURN_IF_ERROR(stores_->CheckStore(pc.connection, pc.table));
  if (!jobs::IsSqlIdentifier(pc.key_column))
    return Status::InvalidArgument("precomputed.key_column '" + pc.key_column +
                                   "' is not a column name (letters, digits and '_', at most 63 bytes)");
  for (const auto& o : pc.outputs) {
    if (!jobs::IsSqlIdentifier(o))
      return Status::InvalidArgument("output '" + o +
                                     "' cannot be a column of a prediction table (letters, digits "
                                     "and '_', at most 63 bytes)");
  }
  auto outputs = jobs::StoredOutputs::Make(spec, pc.outputs);
  return outputs.ok() ? Status::OK() : outputs.status();
}

HybridServing::Posted HybridServing::Post(Task&& task) {
  MutexLock g(&mu_);
  if (stop_) return Posted::kStopped;
  if (tasks_.size() >= options_.max_queued) return Posted::kFull;
  tasks_.push_back(std::move(task));
  cv_.NotifyOne();
  return Posted::kQueued;
}

void HybridServing::Shutdown() {
  std::deque<Task> cancelled;
  {
    MutexLock g(&mu_);
    stop_ = true;
    cancelled.swap(tasks_);
  }
  cv_.NotifyAll();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  for (auto& task : cancelled) task(0, Status::Unavailable("the server is shutting down"));
}

void HybridServing::Run(size_t thread) {
  MutexLock g(&mu_);
  for (;;) {
    while (!stop_ && tasks_.empty()) cv_.Wait(&mu_);
    if (stop_) return;  // Shutdown answers what is queued
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    g.Unlock();
    task(thread, Status::OK());
    task = nullptr;  // released outside the lock
    g.Lock();
  }
}

Result<jobs::PredictionStore*> HybridServing::Store(const PrecomputedSpec& spec, size_t thread) {
  std::string id = spec.connection;
  id += '\0';
  id += spec.table;
  id += '\0';
  id += spec.key_column;
  id += '\0';
  id += spec.write_back ? 'w' : 'r';
  for (const auto& o : spec.outputs) {
    id += '\0';
    id += o;
  }
  {
    MutexLock g(&stores_mu_);
    auto it = open_.find(id);
    if (it != open_.end() && it->second[thread]) return it->second[thread].get();
  }
  jobs::StoreTable table;
  table.table = spec.table;
  table.key_column = spec.key_column;
  table.value_columns = spec.outputs;
  table.reconnect_interval = options_.reconnect_interval;
  INFERD_ASSIGN_OR_RETURN(auto store, stores_->OpenStore(spec.connection, std::move(table), spec.write_back));
  MutexLock g(&stores_mu_);
  auto& slots = open_[id];
  slots.resize(threads_.size());
  slots[thread] = std::move(store);  // only this thread fills its slot
  return slots[thread].get();
}

void HybridServing::Lookup(std::shared_ptr<const ModelSpec> spec, std::string version, std::string key, Done done) {
  auto task = [this, spec = std::move(spec), version = std::move(version), key = std::move(key),
               done = std::move(done)](size_t thread, const Status& refused) {
    const std::string& model = spec->name;
    auto fail = [&](Status st) {
      Count(model, &Counts::error);
      Outcome o;
      o.kind = Outcome::Kind::kError;
      o.error = std::move(st);
      done(std::move(o));
    };
    if (!refused.ok()) return fail(refused);
    const PrecomputedSpec& pc = *spec->precomputed;
    auto store = Store(pc, thread);
    if (!store.ok()) return fail(store.status());
    auto row = (*store)->Lookup(key);
    if (!row.ok()) return fail(row.status());
    Outcome o;
    if (!row->has_value()) {
      Count(model, &Counts::miss);
      o.kind = Outcome::Kind::kMiss;
      return done(std::move(o));
    }
    const double now = options_.unix_now ? options_.unix_now() : SystemUnixNow();
    if (JudgeStored(**row, pc, model, version, now) != StoredVerdict::kFresh) {
      Count(model, &Counts::stale);
      o.kind = Outcome::Kind::kStale;
      return done(std::move(o));
    }
    auto decoder = Decoder(spec);
    if (!decoder.ok()) return fail(decoder.status());
    auto tensors = (*decoder)->ToTensors((*row)->values);
    if (!tensors.ok())
      return fail(Status::Internal("the stored row for this key cannot answer: " + tensors.status().message()));
    Count(model, &Counts::hit);
    o.kind = Outcome::Kind::kHit;
    o.outputs = std::move(*tensors);
    done(std::move(o));
  };
  Task queued = std::move(task);
  switch (Post(std::move(queued))) {  // moved from only when queued
    case Posted::kQueued:
      return;
    case Posted::kFull:  // the store cannot keep up: the caller falls back as configured
      return queued(
          0, Status::Unavailable("too many precomputed lookups waiting (" + std::to_string(options_.max_queued) + ")"));
    case Posted::kStopped:
      return queued(0, Status::Unavailable("the server is shutting down"));
  }
}

void HybridServing::WriteBack(std::shared_ptr<const ModelSpec> spec, std::string version, std::string key,
                              const InferResponse& response) {
  const std::string model = spec->name;
  auto decoder = Decoder(spec);
  Result<std::vector<jobs::Cell>> cells = decoder.ok() ? (*decoder)->ToCells(response) : decoder.status();
  if (!cells.ok()) return Count(model, &Counts::write_errors);
  auto task = [this, spec = std::move(spec), version = std::move(version), key = std::move(key),
               cells = std::move(*cells)](size_t thread, const Status& refused) {
    if (!refused.ok()) return Count(spec->name, &Counts::write_dropped);
    auto store = Store(*spec->precomputed, thread);
    Status st = store.ok() ? (*store)->Write(key, spec->name, version, cells) : store.status();
    Count(spec->name, st.ok() ? &Counts::written : &Counts::write_errors);
  };
  Task queued = std::move(task);
  if (Post(std::move(queued)) != Posted::kQueued) Count(model, &Counts::write_dropped);
}

Result<std::shared_ptr<const jobs::StoredOutputs>> HybridServing::Decoder(
    const std::shared_ptr<const ModelSpec>& spec) {
  MutexLock g(&decoders_mu_);
  auto it = decoders_.find(spec.get());
  if (it != decoders_.end() && it->second.spec.lock() == spec) return it->second.outputs;
  // A new (or reloaded) version: forget the versions that are gone, build this one's.
  for (auto e = decoders_.begin(); e != decoders_.end();) e = e->second.spec.expired() ? decoders_.erase(e) : ++e;
  auto outputs = jobs::StoredOutputs::Make(*spec, spec->precomputed->outputs);
  if (!outputs.ok()) return outputs.status();
  auto shared = std::make_shared<const jobs::StoredOutputs>(std::move(*outputs));
  decoders_[spec.get()] = CachedDecoder{spec, shared};
  return shared;
}

void HybridServing::CountBypass(const std::string& model) { Count(model, &Counts::bypass); }

void HybridServing::Count(const std::string& model, uint64_t Counts::*field) {
  MutexLock g(&counts_mu_);
  ++(counts_[model].*field);
}

HybridServing::Counts HybridServing::CountsOf(const std::string& model) const {
  MutexLock g(&counts_mu_);
  auto it = counts_.find(model);
  return it == counts_.end() ? Counts{} : it->second;
}

void HybridServing::WriteMetrics(PrometheusWriter& w) const {
  std::map<std::string, Counts, std::less<>> counts;
  {
    MutexLock g(&counts_mu_);
    counts = counts_;
  }
  w.Family("inferd_precomputed_lookups_total", "counter",
           "Requests with a precomputed key by result: hit (answered from the store), miss (no row), stale (a row "
           "of another version or older than max_age_seconds), error (the store failed), bypass (asked for outputs "
           "the store does not hold)");
  const std::pair<const char*, uint64_t Counts::*> lookups[] = {{"hit", &Counts::hit},
                                                                {"miss", &Counts::miss},
                                                                {"stale", &Counts::stale},
                                                                {"error", &Counts::error},
                                                                {"bypass", &Counts::bypass}};
  for (const auto& [model, c] : counts)
    for (const auto& [result, field] : lookups)
      w.Sample("inferd_precomputed_lookups_total", {{"model", model}, {"result", result}},
               static_cast<double>(c.*field));
  w.Family("inferd_precomputed_write_backs_total", "counter",
           "Online answers written back to the prediction store by result: written, error, dropped (queue full or "
           "shutting down)");
  const std::pair<const char*, uint64_t Counts::*> writes[] = {
      {"written", &Counts::written}, {"error", &Counts::write_errors}, {"dropped", &Counts::write_dropped}};
  for (const auto& [model, c] : counts)
    for (const auto& [result, field] : writes)
      w.Sample("inferd_precomputed_write_backs_total", {{"model", model}, {"result", result}},
               static_cast<double>(c.*field));
}

}  // namespace inferd
