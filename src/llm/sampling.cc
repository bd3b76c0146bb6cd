#include "llm/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace inferd::llm {

Status SamplingParams::Validate() const {
  auto bad = [](const char* field, const char* range) {
    return Status::InvalidArgument(std::string(field) + " must be " + range);
  };
  if (!(temperature >= 0 && temperature <= 2)) return bad("temperature", "between 0 and 2");
  if (top_k < 0) return bad("top_k", "0 (all tokens) or positive");
  if (!(top_p > 0 && top_p <= 1)) return bad("top_p", "greater than 0 and at most 1");
  if (!(min_p >= 0 && min_p <= 1)) return bad("min_p", "between 0 and 1");
  if (!(presence_penalty >= -2 && presence_penalty <= 2)) return bad("presence_penalty", "between -2 and 2");
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2)) return bad("frequency_penalty", "between -2 and 2");
  if (logprobs > kMaxTopLogprobs) return bad("top_logprobs", "between 0 and 20");
  return Status::OK();
}

Sampler::Sampler(std::optional<uint64_t> seed) : rng_(seed ? *seed : std::random_device{}()) {}

SampledToken Sampler::Sample(std::span<float> logits, const SamplingParams& p,
                             const std::unordered_map<int32_t, int32_t>& generated) {
  const int32_t n = static_cast<int32_t>(logits.size());
  SampledToken out;
  // Log-probabilities of the model's distribution, before any processing.
  float log_z = 0;
  if (p.logprobs >= 0) {
    const float mx = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (float l : logits) z += std::exp(static_cast<double>(l - mx));
    log_z = mx + static_cast<float>(std::log(z));
    if (p.logprobs > 0) {
      const int32_t k = std::min(p.logprobs, n);
      order_.resize(static_cast<size_t>(n));
      std::iota(order_.begin(), order_.end(), 0);
      std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
               (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
      });
      for (int32_t i = 0; i < k; ++i) {
        const int32_t t = order_[static_cast<size_t>(i)];
        out.top.emplace_back(t, logits[static_cast<size_t>(t)] - log_z);
      }
    }
  }
  const std::vector<float> raw =
      p.logprobs >= 0 ? std::vector<float>(logits.begin(), logits.end()) : std::vector<float>();
  for (const auto& [token, count] : generated) {
    if (token < 0 || token >= n) continue;
    logits[static_cast<size_t>(token)] -=
        static_cast<float>(p.frequency_penalty * count + (count > 0 ? p.presence_penalty : 0.0));
  }
  auto finish = [&](int32_t token) {
    out.token = token;
    if (p.logprobs >= 0) out.logprob = raw[static_cast<size_t>(token)] - log_z;
    return out;
  };
  if (p.temperature < 1e-5) {
    // Greedy; ties go to the lowest id.
    return finish(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  // Candidates, most likely first, cut by top-k.
  order_.resize(static_cast<size_t>(n));
  std::iota(order_.begin(), order_.end(), 0);
  const int32_t k = p.top_k > 0 ? std::min(p.top_k, n) : n;
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  if (k < n || p.top_p < 1.0 || p.min_p > 0) {
    std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), by_logit);
  }
  order_.resize(static_cast<size_t>(k));
  // Softmax at the temperature over the candidates.
  const float mx =
      logits[static_cast<size_t>(*std::max_element(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] < logits[static_cast<size_t>(b)];
      }))];
  probs_.resize(order_.size());
  double z = 0;
  for (size_t i = 0; i < order_.size(); ++i) {
    probs_[i] = static_cast<float>(std::exp((logits[static_cast<size_t>(order_[i])] - mx) / p.temperature));
    z += probs_[i];
  }
  size_t keep = order_.size();
  if (p.top_p < 1.0) {
    // The smallest prefix whose mass reaches top_p (at least one token).
    double mass = 0;
    for (size_t i = 0; i < order_.size(); ++i) {
      mass += probs_[i] / z;
      if (mass >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0) {
    const double floor = p.min_p * (probs_[0] / z);  // order_ is sorted when min_p > 0
    size_t m = 1;
    while (m < keep && probs_[m] / z >= floor) ++m;
    keep = m;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += probs_[i];
  // A uniform draw in [0, total) from 53 random bits (the same on every platform for a seed).
  const double u = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) * total;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs_[i];
    if (u < acc) return finish(order_[i]);
  }
  return finish(order_[keep - 1]);
}

}  // namespace inferd::llm
