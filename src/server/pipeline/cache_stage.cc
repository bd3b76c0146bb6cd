// The response cache (response_cache { enable: true }; docs/cache.md): a hit
// answers at once; a miss stores the successful answer -- after rules and
// classification, which the key covers -- for the next identical request.
#include "server/pipeline/stages.h"
#include "server/response_cache.h"

namespace inferd {
namespace {

uint64_t NanosSince(const Clock& clock, TimePoint t0) {
  return static_cast<uint64_t>(std::max<int64_t>(0, (clock.Now() - t0).count()));
}

class CacheStage final : public RequestStage {
 public:
  CacheStage(ResponseCache* cache, Clock* clock) : cache_(cache), clock_(clock) {}
  const char* name() const override { return "cache"; }
  bool Traced(const RequestContext& ctx) const override { return ctx.handle.spec().response_cache && !ctx.skip_cache; }

  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    ModelVersion& version = *ctx->handle.version;
    if (!version.spec().response_cache || ctx->skip_cache) return Verdict::kContinue;
    const TimePoint t0 = clock_->Now();
    // The snapshot's identity: its address and load time (a reloaded version
    // is a new object, loaded later). The key holds the version that answers.
    std::string key = ResponseCacheKey(*ctx->request, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&version)),
                                       static_cast<uint64_t>(version.loaded_at().time_since_epoch().count()));
    if (auto hit = cache_->Lookup(key)) {
      InferResponse resp = *hit;
      resp.id = ctx->request->id;
      version.stats()->RecordCacheHit(NanosSince(*clock_, t0));
      ctx->sink.final(std::move(resp));
      return Verdict::kTaken;
    }
    ctx->sink.final = [cache = cache_, key = std::move(key), stats = version.stats(),
                       lookup_ns = NanosSince(*clock_, t0), clock = clock_,
                       final = std::move(ctx->sink.final)](Result<InferResponse> r) mutable {
      if (r.ok()) {
        const TimePoint t1 = clock->Now();
        cache->Insert(std::move(key), *r);
        stats->RecordCacheMiss(lookup_ns + NanosSince(*clock, t1));
      }
      final(std::move(r));
    };
    return Verdict::kContinue;
  }

 private:
  ResponseCache* const cache_;
  Clock* const clock_;
};

}  // namespace

std::unique_ptr<RequestStage> MakeCacheStage(ResponseCache* cache, Clock* clock) {
  return std::make_unique<CacheStage>(cache, clock);
}

}  // namespace inferd
