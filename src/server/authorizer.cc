#include "server/authorizer.h"

#include <fstream>
#include <sstream>

namespace inferd {
namespace {

constexpr std::string_view kBearer = "Bearer ";

// Compares in time that depends only on the length of what was given, not
// on where it differs from the token (which is never empty here).
bool SameToken(std::string_view given, std::string_view token) {
  unsigned diff = given.size() != token.size() ? 1u : 0u;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(token[i % token.size()]);
  }
  return diff == 0;
}

std::string Trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

}  // namespace

Status Authorizer::Check(std::string_view authorization, bool management_route) const {
  if (!enabled() || (!management_route && !options_.all_routes)) return Status::OK();
  if (authorization.empty()) {
    return Status::Unauthenticated(std::string(management_route ? "management routes" : "this server's routes") +
                                   " need a bearer token (Authorization: Bearer <token>)");
  }
  if (authorization.size() < kBearer.size() || authorization.substr(0, kBearer.size()) != kBearer ||
      !SameToken(authorization.substr(kBearer.size()), options_.token)) {
    return Status::Unauthenticated("invalid bearer token");
  }
  return Status::OK();
}

Result<std::string> ReadToken(const std::string& file, const std::string& env_var, const char* env_value) {
  if (!file.empty() && !env_var.empty()) {
    return Status::InvalidArgument("give the admin token in a file or an environment variable, not both");
  }
  std::string token;
  if (!file.empty()) {
    std::ifstream f(file);
    if (!f) return Status::InvalidArgument("cannot read the admin token file " + file);
    std::stringstream ss;
    ss << f.rdbuf();
    token = Trim(ss.str());
    if (token.empty()) return Status::InvalidArgument("the admin token file " + file + " is empty");
  } else if (!env_var.empty()) {
    if (!env_value) return Status::InvalidArgument("the environment variable " + env_var + " is not set");
    token = Trim(env_value);
    if (token.empty()) return Status::InvalidArgument("the environment variable " + env_var + " is empty");
  }
  return token;
}

}  // namespace inferd
