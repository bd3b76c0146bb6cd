// `serve`'s access-control flags (docs/security.md): --admin-token-file,
// --admin-token-env, --auth-tokens-file, --auth-all-routes.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "auth/access_policy.h"
#include "core/clock.h"
#include "core/status.h"

namespace inferd::cli {

struct SecurityFlags {
  std::string admin_token_file, admin_token_env;
  std::string auth_tokens_file;
  bool auth_all_routes = false;
  int reload_check_ms = 2000;  // how often credential files are checked for changes
};

void AddSecurityFlags(CLI::App* cmd, SecurityFlags* flags);
// The access policy the flags describe (null when no token is configured;
// INVALID_ARGUMENT for an unreadable token or tokens file, or
// --auth-all-routes without tokens); logs what is protected.
Result<std::shared_ptr<auth::AccessPolicy>> BuildAccessPolicy(const SecurityFlags& flags, Clock* clock);

}  // namespace inferd::cli
