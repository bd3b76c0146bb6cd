// InferenceServer: the one API every front end (HTTP now, gRPC later) calls.
// Front ends translate wire formats to these calls and map Status codes to
// their protocol at the edge; no request logic lives in them.
//
// Thread-safety: all public methods are thread-safe. InferAsync never runs
// model code on the calling thread; its callback runs exactly once, either
// synchronously (request rejected before queueing) or later on a model
// worker thread, and must not block.
//
// Ownership: the BackendRegistry and Clock are not owned and must outlive
// the server.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/clock.h"
#include "core/infer_request.h"
#include "metrics/prometheus.h"
#include "repository/repository.h"
#include "server/model_version.h"
#include "server/server_types.h"

namespace inferd {

enum class ModelControlMode { kNone, kExplicit };

struct ServerOptions {
  std::string model_repository;
  ModelControlMode control_mode = ModelControlMode::kNone;
  // kExplicit: models to load at start-up ("*" = all).
  std::vector<std::string> startup_models;
  // Queue bound for models whose config sets no max_queue_size.
  size_t default_max_queue_size = 1024;
  // Intra-op threads for models without INTRA_OP_THREAD_COUNT.
  int default_intra_op_threads = 1;
  // If true, /v2/health/ready also needs every repository model READY.
  bool strict_readiness = false;
};

class InferenceServer {
 public:
  InferenceServer(ServerOptions options, const BackendRegistry* backends, Clock* clock);
  ~InferenceServer();

  // Loads the start-up models. A model that fails to load is logged and
  // shown in the repository index; only an unreadable repository fails Start.
  Status Start();
  // Stops accepting inference (UNAVAILABLE), finishes accepted requests,
  // releases all models. Idempotent.
  void Shutdown();

  bool IsLive() const { return live_.load(); }
  bool IsReady() const;

  ServerMetadata GetServerMetadata() const;
  Result<ModelMetadata> GetModelMetadata(const std::string& name, const std::string& version) const;
  // OK(true/false) for a known model; NOT_FOUND for an unknown one.
  Result<bool> IsModelReady(const std::string& name, const std::string& version) const;
  Result<std::string> GetModelConfigJson(const std::string& name, const std::string& version) const;
  // `name` empty = all loaded models.
  Result<std::vector<ModelStatsSnapshot>> GetStatistics(const std::string& name, const std::string& version) const;

  Result<std::vector<RepositoryIndexEntry>> RepositoryIndex(bool ready_only) const;
  // `config_json`: optional ModelConfig JSON replacing config.pbtxt.
  Status LoadModel(const std::string& name, const std::optional<std::string>& config_json = {});
  Status UnloadModel(const std::string& name);

  void InferAsync(std::unique_ptr<InferRequest> request, InferCallback callback);

  // Prometheus exposition of all model and server metrics.
  void WriteMetrics(PrometheusWriter& w) const;

  const ServerOptions& options() const { return options_; }

 private:
  struct ModelEntry {
    std::map<int64_t, std::shared_ptr<ModelVersion>> versions;  // loaded, ascending
    std::string state = "UNAVAILABLE";
    std::string reason;
  };

  Result<std::shared_ptr<ModelVersion>> FindVersion(const std::string& name, const std::string& version) const;
  Status LoadModelLocked(const std::string& name, const std::optional<std::string>& config_text);

  ServerOptions options_;
  const BackendRegistry* backends_;
  Clock* clock_;
  ModelRepository repository_;
  ModelVersion::Options version_options_;

  std::atomic<bool> live_{true};
  std::atomic<bool> started_{false};
  std::atomic<bool> shutting_down_{false};

  std::mutex load_mu_;  // serializes load/unload (held across backend loads; never by infer)
  mutable std::shared_mutex mu_;
  std::map<std::string, ModelEntry> models_;  // guarded by mu_
};

}  // namespace inferd
