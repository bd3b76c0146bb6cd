// TokenSet: the bearer tokens a server accepts and what each may do
// (docs/security.md). Read from a JSON file (`--auth-tokens-file`):
//
//   {"tokens": [
//     {"name": "ops", "sha256": "<64 hex digits>", "scopes": ["*"]},
//     {"name": "fraud-app", "token": "<16+ characters>", "scopes": ["infer", "read"],
//      "models": ["fraud", "fraud-*"], "requests_per_second": 200}]}
//
// Scopes: `infer` (inference: KServe/Triton, TF Serving, generate, OpenAI),
// `read` (health, metadata, model lists, statistics), `models` (the model
// repository: load, unload, labels, rollback, rollouts, traffic), `jobs`
// (batch jobs), `cluster` (cluster status and node administration), `*`
// (all of them). `models` (optional) limits a token to those models (a name,
// or a prefix ending in `*`) wherever a route names a model. A token is given
// in clear (`token`) or as the SHA-256 of its text (`sha256`, what a file
// shared with operators should hold); either way only its digest is kept.
//
// Matching a presented token hashes it once, finds the entries whose
// digest starts with the same 8 bytes (an index: one lookup however many
// tokens there are) and compares each one's whole digest in constant time.
// The time taken says nothing about the tokens: a guess's digest is not
// the guesser's to choose, and finding one that shares 8 bytes with a
// token's takes ~2^64 tries.
//
// Thread-safety: immutable after Parse; Match and the accessors are const.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace inferd::auth {

enum class Scope : uint32_t { kInfer = 1, kRead = 2, kModels = 4, kJobs = 8, kCluster = 16 };
inline constexpr uint32_t kAllScopes = 31;
// "infer", "read", "models", "jobs", "cluster".
std::string_view ScopeName(Scope scope);

using Digest = std::array<uint8_t, 32>;  // SHA-256
Digest Sha256(std::string_view text);

struct TokenEntry {
  std::string name;  // for logs and metrics; never the token
  Digest digest{};
  uint32_t scopes = 0;              // Scope bits
  std::vector<std::string> models;  // empty: every model; "x*": names starting with x
  double requests_per_second = 0;   // 0: no limit of its own

  bool Has(Scope s) const { return (scopes & static_cast<uint32_t>(s)) != 0; }
  bool AllowsModel(std::string_view model) const;
};

class TokenSet {
 public:
  // Limits a file must keep within.
  static constexpr size_t kMaxTokens = 10000;
  static constexpr size_t kMaxModelsPerToken = 1000;
  static constexpr size_t kMinTokenLength = 16;

  // INVALID_ARGUMENT naming the entry and field at fault (never echoing a token).
  static Result<TokenSet> Parse(std::string_view json);
  // A set of `entries` as they are (not checked; the admin token's entry).
  static TokenSet Of(std::vector<TokenEntry> entries);

  // The entry whose token is `presented`, or null.
  const TokenEntry* Match(std::string_view presented) const;
  const std::vector<TokenEntry>& tokens() const { return tokens_; }

 private:
  void Index();

  std::vector<TokenEntry> tokens_;
  std::vector<std::pair<uint64_t, size_t>> index_;  // (a digest's first 8 bytes, its entry), sorted
};

}  // namespace inferd::auth
