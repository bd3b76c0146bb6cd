#include "server/response_cache.h"

#include <gtest/gtest.h>

#include <cstring>

namespace inferd {
namespace {

InferRequest Req(std::vector<float> values, Shape shape, std::string version = "1") {
  InferRequest r;
  r.model_name = "m";
  r.model_version = std::move(version);
  r.inputs.push_back(
      Tensor::Copy("x", DataType::kFp32, std::move(shape), std::as_bytes(std::span<const float>(values))));
  return r;
}

InferResponse Answer(float v, size_t n = 4) {
  InferResponse resp;
  resp.model_name = "m";
  resp.model_version = "1";
  std::vector<float> data(n, v);
  resp.outputs.push_back(
      Tensor::Copy("y", DataType::kFp32, {static_cast<int64_t>(n)}, std::as_bytes(std::span<const float>(data))));
  return resp;
}

TEST(ResponseCacheKey, CoversShapeDatatypeVersionOutputsAndParameters) {
  const std::vector<float> v{1, 2, 3, 4, 5, 6};
  const std::string base = ResponseCacheKey(Req(v, {2, 3}));
  EXPECT_EQ(ResponseCacheKey(Req(v, {2, 3})), base);
  EXPECT_NE(ResponseCacheKey(Req(v, {3, 2})), base);  // same bytes, other shape (Triton would collide)
  EXPECT_NE(ResponseCacheKey(Req(v, {2, 3}, "2")), base);
  InferRequest r = Req(v, {2, 3});
  r.inputs[0].dtype = DataType::kInt32;
  EXPECT_NE(ResponseCacheKey(r), base);
  r = Req(v, {2, 3});
  r.inputs[0].name = "z";
  EXPECT_NE(ResponseCacheKey(r), base);
  r = Req(v, {2, 3});
  r.outputs.push_back(RequestedOutput{"y"});
  const std::string with_output = ResponseCacheKey(r);
  EXPECT_NE(with_output, base);
  r.outputs[0].classification = 3;
  EXPECT_NE(ResponseCacheKey(r), with_output);
  r = Req(v, {2, 3});
  r.parameters["mode"] = std::string("a");
  const std::string with_param = ResponseCacheKey(r);
  EXPECT_NE(with_param, base);
  r.parameters["mode"] = std::string("b");
  EXPECT_NE(ResponseCacheKey(r), with_param);
  // Length prefixes: moving a byte between fields changes the key.
  InferRequest a = Req(v, {2, 3}), b = Req(v, {2, 3});
  a.model_name = "ab";
  a.model_version = "c";
  b.model_name = "a";
  b.model_version = "bc";
  EXPECT_NE(ResponseCacheKey(a), ResponseCacheKey(b));
}

TEST(ResponseCache, HitsOwnTheirBytesAndCountHitsAndMisses) {
  ResponseCache cache(1 << 20);
  const std::string key = ResponseCacheKey(Req({1}, {1}));
  EXPECT_EQ(cache.Lookup(key), nullptr);
  {
    InferResponse a = Answer(7);
    cache.Insert(key, a);
  }  // the answer's own buffer is gone
  auto hit = cache.Lookup(key);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->outputs.at(0).as<float>()[3], 7.0f);
  auto s = cache.Stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_GT(s.bytes, 16u);
}

TEST(ResponseCache, EvictsTheLeastRecentlyUsedWithinItsBudget) {
  const std::string k1 = ResponseCacheKey(Req({1}, {1})), k2 = ResponseCacheKey(Req({2}, {1})),
                    k3 = ResponseCacheKey(Req({3}, {1}));
  // What one entry (key, 400 bytes of output, overheads) costs; room for two, not three.
  ResponseCache probe(1 << 20);
  probe.Insert(k1, Answer(1, 100));
  const uint64_t entry = probe.Stats().bytes;
  ASSERT_GT(entry, 400u);
  ResponseCache cache(2 * entry + entry / 2);
  cache.Insert(k1, Answer(1, 100));
  cache.Insert(k2, Answer(2, 100));
  ASSERT_NE(cache.Lookup(k1), nullptr);  // k1 is now the most recent
  cache.Insert(k3, Answer(3, 100));      // evicts k2
  EXPECT_NE(cache.Lookup(k1), nullptr);
  EXPECT_EQ(cache.Lookup(k2), nullptr);
  EXPECT_NE(cache.Lookup(k3), nullptr);
  auto s = cache.Stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_LE(s.bytes, cache.capacity());
  // Larger than the whole budget: not kept, nothing evicted for it.
  cache.Insert(ResponseCacheKey(Req({4}, {1})), Answer(4, 1000));
  EXPECT_EQ(cache.Stats().entries, 2u);
  // Re-inserting a key replaces its entry.
  cache.Insert(k1, Answer(9, 100));
  EXPECT_EQ(cache.Lookup(k1)->outputs[0].as<float>()[0], 9.0f);
  EXPECT_EQ(cache.Stats().entries, 2u);
  cache.EraseModel("m");
  EXPECT_EQ(cache.Stats().entries, 0u);
  EXPECT_EQ(cache.Stats().bytes, 0u);
}

}  // namespace
}  // namespace inferd
