// HybridServing: precomputed + online serving (docs/hybrid.md). A model whose
// config has `precomputed.*` parameters (core/precomputed_spec.h) names a
// prediction table -- what a batch job wrote, in SQLite, PostgreSQL or Redis, over a
// named connection of the jobs config. A request that carries a key is
// answered from the table when a fresh row for the serving version exists
// ("source": "precomputed"), else it runs online ("source": "online") and its
// answer may be written back.
//
// Lookups and write-backs run on this component's own threads (never on an
// I/O thread or a model worker): each thread has its own connection per
// table, so lookups to PostgreSQL run in parallel. Their queue is bounded; a
// lookup that finds it full is a store error (answered online, or 503 under
// `on_store_error: fail`); a write-back that finds it full is dropped
// (counted).
//
// Thread-safety: all methods are thread-safe. `Done` callbacks run on a
// lookup thread (or on the caller's, once Shutdown started) exactly once.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/infer_request.h"
#include "core/model_spec.h"
#include "core/mutex.h"
#include "jobs/job_stores.h"
#include "jobs/prediction_store.h"
#include "jobs/stored_outputs.h"
#include "metrics/prometheus.h"

namespace inferd {

// What a stored row is for a request of (model, version) now; pure.
enum class StoredVerdict { kFresh, kOtherModel, kOtherVersion, kTooOld };
StoredVerdict JudgeStored(const jobs::StoredPrediction& row, const PrecomputedSpec& spec, const std::string& model,
                          const std::string& version, double now_unix_seconds);

// The key a request carries for `spec`: nullopt when it carries none (the
// request runs online as usual). INVALID_ARGUMENT for a key parameter that is
// not a string or an integer, an empty key, or a key with a request of more
// than one row (a key names one row).
Result<std::optional<std::string>> HybridKey(const PrecomputedSpec& spec, const InferRequest& request, int64_t rows);

// Whether a stored row can answer `request`: it asks only for stored outputs
// and for no classification (those run online).
bool StoreCanAnswer(const PrecomputedSpec& spec, const InferRequest& request);

class HybridServing {
 public:
  struct Options {
    int lookup_threads = 2;
    size_t max_queued = 1024;  // lookups and write-backs waiting for a thread
    std::chrono::milliseconds reconnect_interval{1000};
    // Wall-clock time in Unix seconds (rows' predicted_at); tests inject one.
    std::function<double()> unix_now;
  };
  // `stores` (not owned) opens the tables through the operator's jobs config.
  HybridServing(const jobs::JobStores* stores, Options options);
  ~HybridServing();  // Shutdown()
  HybridServing(const HybridServing&) = delete;
  HybridServing& operator=(const HybridServing&) = delete;

  // A model's load calls it: the connection is configured (sqlite,
  // postgres or redis), the table is a valid name, the stored outputs decode.
  Status CheckModel(const ModelSpec& spec) const;

  struct Outcome {
    enum class Kind { kHit, kMiss, kStale, kError } kind = Kind::kMiss;
    std::vector<Tensor> outputs;  // kHit: every stored output
    Status error;                 // kError: why the store could not answer
  };
  using Done = std::function<void(Outcome)>;
  // Looks `key` up for (spec.name, version) on a lookup thread; `done` gets
  // the outcome. `spec` must outlive the call (the caller holds its version).
  void Lookup(std::shared_ptr<const ModelSpec> spec, std::string version, std::string key, Done done);
  // Queues writing a one-row online answer under `key` (precomputed.write_back).
  void WriteBack(std::shared_ptr<const ModelSpec> spec, std::string version, std::string key,
                 const InferResponse& response);
  // A request with a key that the store could not answer (StoreCanAnswer).
  void CountBypass(const std::string& model);

  // inferd_precomputed_lookups_total{model,result}, inferd_precomputed_write_backs_total{model,result}.
  void WriteMetrics(PrometheusWriter& w) const;
  struct Counts {
    uint64_t hit = 0, miss = 0, stale = 0, error = 0, bypass = 0;
    uint64_t written = 0, write_errors = 0, write_dropped = 0;
  };
  Counts CountsOf(const std::string& model) const;

  // Stops taking work: queued lookups are answered UNAVAILABLE, queued
  // write-backs dropped, running ones finish; joins. Idempotent.
  void Shutdown();

 private:
  // Runs on lookup thread `thread` with OK, or with why it was not queued or
  // was cancelled (then on the caller's thread).
  using Task = std::function<void(size_t thread, const Status& refused)>;
  enum class Posted { kQueued, kFull, kStopped };
  // Queues `task`; moves from it only when queued.
  Posted Post(Task&& task);
  void Run(size_t thread);
  // The store for `spec` that thread `thread` uses (opened on first use).
  Result<jobs::PredictionStore*> Store(const PrecomputedSpec& spec, size_t thread);
  void Count(const std::string& model, uint64_t Counts::*field);
  // The stored outputs' decoder of a loaded version, built on its first
  // lookup or write-back and kept while the version lives (`spec` shares the
  // version's ownership, so an expired entry is a version that is gone).
  Result<std::shared_ptr<const jobs::StoredOutputs>> Decoder(const std::shared_ptr<const ModelSpec>& spec);

  const jobs::JobStores* const stores_;
  const Options options_;

  Mutex mu_;
  CondVar cv_;
  std::deque<Task> tasks_ TSA_GUARDED_BY(mu_);
  bool stop_ TSA_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;

  // Connection + table + writable -> one store per thread.
  mutable Mutex stores_mu_;
  std::map<std::string, std::vector<std::unique_ptr<jobs::PredictionStore>>> open_ TSA_GUARDED_BY(stores_mu_);

  struct CachedDecoder {
    std::weak_ptr<const ModelSpec> spec;
    std::shared_ptr<const jobs::StoredOutputs> outputs;
  };
  Mutex decoders_mu_;
  std::map<const ModelSpec*, CachedDecoder> decoders_ TSA_GUARDED_BY(decoders_mu_);

  mutable Mutex counts_mu_;
  std::map<std::string, Counts, std::less<>> counts_ TSA_GUARDED_BY(counts_mu_);
};

}  // namespace inferd
