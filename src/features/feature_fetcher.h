// FeatureFetcher: fetches entities' features from Redis for requests on
// their way in (docs/features.md). One thread and one connection per named
// redis connection; every fetch waiting when the thread is free goes out in
// one pipeline (one round trip for a burst of requests), up to `max_pipeline`.
//
// Thread-safety: all methods are thread-safe. `Done` runs exactly once, on
// the connection's thread (or on the caller's, when the fetch is refused:
// unknown connection, full queue, shutting down).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "metrics/prometheus.h"
#include "redis/redis_client.h"

namespace inferd::features {

class FeatureFetcher {
 public:
  struct Options {
    size_t max_pipeline = 256;  // HMGETs per round trip
    size_t max_queued = 4096;   // fetches waiting per connection; beyond: UNAVAILABLE
  };
  using Done = std::function<void(Result<redis::FieldValues>)>;

  FeatureFetcher(std::vector<redis::RedisEndpoint> endpoints, Options options);
  ~FeatureFetcher();  // Shutdown()
  FeatureFetcher(const FeatureFetcher&) = delete;
  FeatureFetcher& operator=(const FeatureFetcher&) = delete;

  bool HasConnection(const std::string& name) const { return workers_.count(name) > 0; }
  // HMGET `key` `fields` on connection `connection`.
  void Fetch(const std::string& connection, std::string key, std::vector<std::string> fields, Done done);

  struct Counts {
    uint64_t fetches = 0;      // HMGETs answered (values or an error for the key)
    uint64_t round_trips = 0;  // pipelines sent
    uint64_t errors = 0;       // fetches failed with the connection (or refused)
  };
  Counts CountsOf(const std::string& connection) const;

  // Per model: how its requests' features came out.
  enum class Outcome { kFetched, kDefaulted, kMissing, kError };
  void Count(const std::string& model, Outcome outcome);
  // inferd_feature_lookups_total{model,result}, inferd_feature_round_trips_total{connection},
  // inferd_feature_fetches_total{connection}.
  void WriteMetrics(PrometheusWriter& w) const;

  // Tests: while held, fetches queue and no pipeline starts (Release sends
  // what waits), so a test can see a burst go out in one round trip.
  void Hold();
  void Release();

  // Answers queued fetches UNAVAILABLE, lets running pipelines finish, joins. Idempotent.
  void Shutdown();

 private:
  struct Pending {
    std::string key;
    std::vector<std::string> fields;
    Done done;
  };
  struct Worker {
    explicit Worker(redis::RedisEndpoint e) : client(std::move(e)) {}
    redis::RedisClient client;  // used by `thread` only
    Mutex mu;
    CondVar cv;
    std::deque<Pending> queue TSA_GUARDED_BY(mu);
    bool stop TSA_GUARDED_BY(mu) = false;
    bool held TSA_GUARDED_BY(mu) = false;
    Counts counts TSA_GUARDED_BY(mu);
    std::thread thread;
  };
  void Run(Worker* w);

  const Options options_;
  std::map<std::string, std::unique_ptr<Worker>> workers_;  // fixed at construction
  mutable Mutex counts_mu_;
  std::map<std::string, std::array<uint64_t, 4>> by_model_ TSA_GUARDED_BY(counts_mu_);  // per Outcome
};

}  // namespace inferd::features
