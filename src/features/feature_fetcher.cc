#include "features/feature_fetcher.h"

namespace inferd::features {

FeatureFetcher::FeatureFetcher(std::vector<redis::RedisEndpoint> endpoints, Options options) : options_(options) {
  for (auto& e : endpoints) {
    const std::string name = e.name;
    workers_.emplace(name, std::make_unique<Worker>(std::move(e)));
  }
  for (auto& [name, w] : workers_) w->thread = std::thread([this, w = w.get()] { Run(w); });
}

FeatureFetcher::~FeatureFetcher() { Shutdown(); }

void FeatureFetcher::Fetch(const std::string& connection, std::string key, std::vector<std::string> fields, Done done) {
  auto it = workers_.find(connection);
  if (it == workers_.end())
    return done(Status::FailedPrecondition("'" + connection + "' is not a redis connection of the jobs config"));
  Worker& w = *it->second;
  Status refused;
  {
    MutexLock g(&w.mu);
    if (w.stop) {
      refused = Status::Unavailable("the server is shutting down");
    } else if (w.queue.size() >= options_.max_queued) {
      refused = Status::Unavailable("too many feature lookups waiting for Redis connection '" + connection + "' (" +
                                    std::to_string(options_.max_queued) + ")");
    } else {
      w.queue.push_back(Pending{std::move(key), std::move(fields), std::move(done)});
      w.cv.NotifyOne();
      return;
    }
    ++w.counts.errors;
  }
  done(refused);
}

void FeatureFetcher::Run(Worker* w) {
  MutexLock g(&w->mu);
  for (;;) {
    while (!w->stop && (w->queue.empty() || w->held)) w->cv.Wait(&w->mu);
    if (w->stop) return;  // Shutdown answers what is queued
    // Everything waiting that asks for the same fields goes out in one pipeline.
    std::vector<Pending> batch;
    batch.push_back(std::move(w->queue.front()));
    w->queue.pop_front();
    while (!w->queue.empty() && batch.size() < options_.max_pipeline &&
           w->queue.front().fields == batch.front().fields) {
      batch.push_back(std::move(w->queue.front()));
      w->queue.pop_front();
    }
    g.Unlock();
    std::vector<std::string> keys;
    keys.reserve(batch.size());
    for (const auto& p : batch) keys.push_back(p.key);
    auto replies = w->client.HmgetMany(keys, batch.front().fields);
    {
      MutexLock c(&w->mu);  // counted before the answers, so a caller that got one sees it counted
      ++w->counts.round_trips;
      (replies.ok() ? w->counts.fetches : w->counts.errors) += keys.size();
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!replies.ok())
        batch[i].done(replies.status());
      else
        batch[i].done(std::move((*replies)[i]));
    }
    batch.clear();  // callbacks released outside the lock
    g.Lock();
  }
}

FeatureFetcher::Counts FeatureFetcher::CountsOf(const std::string& connection) const {
  auto it = workers_.find(connection);
  if (it == workers_.end()) return Counts{};
  MutexLock g(&it->second->mu);
  return it->second->counts;
}

void FeatureFetcher::Hold() {
  for (auto& [name, w] : workers_) {
    MutexLock g(&w->mu);
    w->held = true;
  }
}

void FeatureFetcher::Release() {
  for (auto& [name, w] : workers_) {
    {
      MutexLock g(&w->mu);
      w->held = false;
    }
    w->cv.NotifyAll();
  }
}

void FeatureFetcher::Shutdown() {
  for (auto& [name, w] : workers_) {
    std::deque<Pending> cancelled;
    {
      MutexLock g(&w->mu);
      w->stop = true;
      cancelled.swap(w->queue);
    }
    w->cv.NotifyAll();
    if (w->thread.joinable()) w->thread.join();
    for (auto& p : cancelled) p.done(Status::Unavailable("the server is shutting down"));
  }
}

void FeatureFetcher::Count(const std::string& model, Outcome outcome) {
  MutexLock g(&counts_mu_);
  ++by_model_[model][static_cast<size_t>(outcome)];
}

void FeatureFetcher::WriteMetrics(PrometheusWriter& w) const {
  std::map<std::string, std::array<uint64_t, 4>> by_model;
  {
    MutexLock g(&counts_mu_);
    by_model = by_model_;
  }
  w.Family("inferd_feature_lookups_total", "counter",
           "Requests whose input was filled from Redis by result: fetched (every feature found), defaulted (some "
           "took their defaults), missing (an entity or feature without a default: 404), error (Redis failed: 503, "
           "or held bad data: 500)");
  static const char* kResults[] = {"fetched", "defaulted", "missing", "error"};
  for (const auto& [model, c] : by_model)
    for (size_t i = 0; i < 4; ++i)
      w.Sample("inferd_feature_lookups_total", {{"model", model}, {"result", kResults[i]}}, static_cast<double>(c[i]));
  w.Family("inferd_feature_round_trips_total", "counter",
           "Pipelines sent to a Redis connection (one round trip each, for every fetch waiting)");
  for (const auto& [name, worker] : workers_)
    w.Sample("inferd_feature_round_trips_total", {{"connection", name}},
             static_cast<double>(CountsOf(name).round_trips));
  w.Family("inferd_feature_fetches_total", "counter", "Entities fetched (HMGETs answered) from a Redis connection");
  for (const auto& [name, worker] : workers_)
    w.Sample("inferd_feature_fetches_total", {{"connection", name}}, static_cast<double>(CountsOf(name).fetches));
}

}  // namespace inferd::features
