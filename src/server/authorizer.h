// Authorizer: bearer-token protection of routes. Management routes (model
// repository: index, listing, load/unload, labels, rollback, and every admin
// route later issues add) need the token once one is configured; inference,
// metadata and health routes need it only when `all_routes` is set.
//
// Front ends pass the request's `Authorization` value (HTTP header, gRPC
// metadata `authorization`): "Bearer <token>". The comparison takes the same
// time wherever the tokens differ.
//
// The token comes from a file or an environment variable, never from the
// command line (where `ps` would show it): ReadToken.
//
// Thread-safety: immutable after construction; Check is const.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace inferd {

struct AuthOptions {
  std::string token;        // "" = nothing is protected
  bool all_routes = false;  // also inference, metadata and health
};

class Authorizer {
 public:
  explicit Authorizer(AuthOptions options = {}) : options_(std::move(options)) {}

  bool enabled() const { return !options_.token.empty(); }
  // OK, or UNAUTHENTICATED saying what is missing.
  Status Check(std::string_view authorization, bool management_route) const;

 private:
  AuthOptions options_;
};

// The token from `file` (its content, surrounding whitespace trimmed) or
// from the environment variable `env_var` (its value); "" when neither is
// given. Errors: unreadable file, unset variable, empty token, or both given.
Result<std::string> ReadToken(const std::string& file, const std::string& env_var, const char* env_value);

}  // namespace inferd
