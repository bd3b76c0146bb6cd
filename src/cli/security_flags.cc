#include "cli/security_flags.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace inferd::cli {

void AddSecurityFlags(CLI::App* cmd, SecurityFlags* flags) {
  cmd->add_option("--admin-token-file", flags->admin_token_file,
                  "File holding a bearer token with every scope; alone, it protects the management routes "
                  "(repository, labels, rollouts, jobs, cluster): Authorization: Bearer <token> (HTTP) or "
                  "authorization metadata (gRPC); 401 / UNAUTHENTICATED without it")
      ->check(CLI::ExistingFile);
  cmd->add_option("--admin-token-env", flags->admin_token_env,
                  "Name of an environment variable holding that token (instead of a file; never the token "
                  "itself on the command line)");
  cmd->add_option("--auth-tokens-file", flags->auth_tokens_file,
                  "JSON file of bearer tokens with scopes (infer, read, models, jobs, cluster), optional model "
                  "restrictions and request rates (docs/security.md); every route but health then needs a token "
                  "with its scope (403 / PERMISSION_DENIED without). Re-read on SIGHUP and when it changes")
      ->check(CLI::ExistingFile);
  cmd->add_option("--auth-all-routes", flags->auth_all_routes,
                  "Require a token on every API route (inference, metadata, health too), not only those its "
                  "scopes name")
      ->capture_default_str();
  cmd->add_option("--credentials-check-interval-ms", flags->reload_check_ms,
                  "How often the tokens file (and TLS files) are checked for changes; a changed one is re-read "
                  "(so is every one on SIGHUP)")
      ->capture_default_str()
      ->check(CLI::Range(50, 3600000));
}

Result<std::shared_ptr<auth::AccessPolicy>> BuildAccessPolicy(const SecurityFlags& flags, Clock* clock) {
  auto token = auth::ReadToken(flags.admin_token_file, flags.admin_token_env,
                               flags.admin_token_env.empty() ? nullptr : std::getenv(flags.admin_token_env.c_str()));
  if (!token.ok()) return token.status();
  if (token->empty() && flags.auth_tokens_file.empty()) {
    if (flags.auth_all_routes) {
      return Status::InvalidArgument(
          "--auth-all-routes needs tokens (--admin-token-file, --admin-token-env or --auth-tokens-file)");
    }
    return std::shared_ptr<auth::AccessPolicy>();
  }
  auth::AccessOptions o;
  o.admin_token = std::move(*token);
  o.tokens_file = flags.auth_tokens_file;
  o.all_routes = flags.auth_all_routes;
  auto policy = auth::AccessPolicy::Create(std::move(o), clock);
  if (!policy.ok()) return policy.status();
  const bool file = !flags.auth_tokens_file.empty();
  spdlog::info("bearer tokens required for {}{}",
               flags.auth_all_routes ? "every API route"
               : file                ? "every API route but health"
                                     : "management routes",
               file ? " (tokens file " + flags.auth_tokens_file + ")" : std::string());
  return std::shared_ptr<auth::AccessPolicy>(std::move(*policy));
}

}  // namespace inferd::cli
