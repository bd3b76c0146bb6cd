// AccessPolicy: who may call which route (docs/security.md). Front ends ask
// it once per call with the call's `Authorization` value ("Bearer <token>",
// HTTP header or gRPC metadata), what the route needs, and the model the
// route names (if any).
//
// Tokens come from two places, both optional:
// - the admin token (`--admin-token-file` / `--admin-token-env`): one token
//   with every scope;
// - the tokens file (`--auth-tokens-file`, auth/token_set.h): tokens with
//   scopes, optional model restrictions and request rates; re-read by
//   Reload (SIGHUP, or the file changed) without dropping a request.
// What is protected follows from what is configured:
//   routes needing        admin token only     a tokens file
//   models, jobs, cluster  protected            protected
//   infer, read            with all_routes      protected
//   health                 with all_routes      with all_routes
// Nothing configured: nothing is protected.
//
// Answers, and what they say (nothing that helps a guesser: never which
// part of a token was wrong, never the token):
//   UNAUTHENTICATED    no token, not a bearer token, or an unknown token;
//   PERMISSION_DENIED  a known token without the route's scope or model;
//   RATE_LIMITED       the token is over its requests_per_second (HTTP 429,
//                      gRPC RESOURCE_EXHAUSTED).
//
// Thread-safety: Check is thread-safe and never blocks on a reload (the
// token set is swapped whole); Reload may run on any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "auth/token_set.h"
#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"

namespace inferd::auth {

// What a route needs: a scope, or (health) only to be let in at all.
enum class Need : uint8_t { kHealth, kInfer, kRead, kModels, kJobs, kCluster };
std::string_view NeedName(Need need);

struct AccessOptions {
  std::string admin_token;  // "" = none
  std::string tokens_file;  // "" = none
  bool all_routes = false;  // see the table above
};

class AccessPolicy {
 public:
  // Reads the tokens file (if any). INVALID_ARGUMENT naming the file and
  // what is wrong in it. `clock` (not owned) times requests_per_second.
  static Result<std::unique_ptr<AccessPolicy>> Create(AccessOptions options, Clock* clock);
  // No tokens: every route open (what a server without token flags checks against).
  static std::shared_ptr<const AccessPolicy> Open();
  AccessPolicy(const AccessPolicy&) = delete;
  AccessPolicy& operator=(const AccessPolicy&) = delete;

  // Whether any route is protected.
  bool enabled() const { return !options_.admin_token.empty() || !options_.tokens_file.empty(); }
  bool Protects(Need need) const;
  const AccessOptions& options() const { return options_; }

  // OK, or why not (see above). `model`: the model the route names ("" none).
  Status Check(std::string_view authorization, Need need, std::string_view model = {}) const;
  // The model part alone, for a call that passed Check and names its model
  // in its body (OpenAI's): PERMISSION_DENIED when the token may not use it.
  Status CheckModel(std::string_view authorization, Need need, std::string_view model) const;

  // Re-reads the tokens file; on an error the tokens in use stay (the
  // status names the file and the fault). Without a tokens file: OK.
  Status Reload();

  struct Counters {
    uint64_t unauthenticated = 0;
    uint64_t permission_denied = 0;
    uint64_t rate_limited = 0;
    uint64_t reloads = 0;
    uint64_t reload_failures = 0;
  };
  Counters counters() const;

 private:
  // The tokens in use with their rate buckets (reset by a reload).
  struct Tokens {
    TokenSet set;
    struct Bucket {
      double tokens = 0;
      TimePoint refilled{};
    };
    mutable Mutex mu;
    mutable std::vector<Bucket> buckets TSA_GUARDED_BY(mu);  // one per entry of `set`
  };

  AccessPolicy(AccessOptions options, Clock* clock) : options_(std::move(options)), clock_(clock) {}
  Result<std::shared_ptr<const Tokens>> Read() const;
  // The entry of a "Bearer <token>" value, or null.
  static const TokenEntry* Find(const Tokens& tokens, std::string_view authorization);
  // OK when `model` ("" none) is one of `entry`'s; PERMISSION_DENIED (counted) otherwise.
  Status ModelAllowed(const TokenEntry& entry, std::string_view model) const;
  // Whether `entry` (index `i` of `tokens`) may make one more request now.
  bool Admit(const Tokens& tokens, size_t i) const;

  const AccessOptions options_;
  Clock* const clock_;
  // The tokens in use: copied out under the lock (a pointer copy), swapped whole by a reload. (Not
  // std::atomic<shared_ptr>: libstdc++ 12's lock bit is invisible to ThreadSanitizer.)
  std::shared_ptr<const Tokens> Current() const {
    MutexLock l(&tokens_mu_);
    return tokens_;
  }
  mutable Mutex tokens_mu_;
  std::shared_ptr<const Tokens> tokens_ TSA_GUARDED_BY(tokens_mu_);
  mutable std::atomic<uint64_t> unauthenticated_{0}, permission_denied_{0}, rate_limited_{0};
  std::atomic<uint64_t> reloads_{0}, reload_failures_{0};
};

// The admin token from `file` (its content, surrounding whitespace trimmed)
// or from the environment variable `env_var` (its value); "" when neither is
// given. Errors: unreadable file, unset variable, empty token, or both given.
// (Never from the command line, where `ps` would show it.)
Result<std::string> ReadToken(const std::string& file, const std::string& env_var, const char* env_value);

}  // namespace inferd::auth
