#include "auth/access_policy.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace inferd::auth {
namespace {

constexpr std::string_view kBearer = "Bearer ";
// The tokens file is small text; a bigger one is a mistake (or an attack on the reload).
constexpr size_t kMaxTokensFileBytes = 16 << 20;

std::string Trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

Result<std::string> ReadSmallFile(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::InvalidArgument(std::string("cannot read ") + what + " " + path);
  std::string text;
  char buf[65536];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    text.append(buf, static_cast<size_t>(f.gcount()));
    if (text.size() > kMaxTokensFileBytes) {
      return Status::InvalidArgument(std::string(what) + " " + path + " is larger than " +
                                     std::to_string(kMaxTokensFileBytes >> 20) + " MiB");
    }
  }
  return text;
}

Scope ScopeOf(Need need) {
  switch (need) {
    case Need::kInfer:
      return Scope::kInfer;
    case Need::kRead:
    case Need::kHealth:
      return Scope::kRead;
    case Need::kModels:
      return Scope::kModels;
    case Need::kJobs:
      return Scope::kJobs;
    case Need::kCluster:
      return Scope::kCluster;
  }
  return Scope::kRead;
}

bool Management(Need need) { return need == Need::kModels || need == Need::kJobs || need == Need::kCluster; }

}  // namespace

std::string_view NeedName(Need need) { return need == Need::kHealth ? "health" : ScopeName(ScopeOf(need)); }

Result<std::unique_ptr<AccessPolicy>> AccessPolicy::Create(AccessOptions options, Clock* clock) {
  std::unique_ptr<AccessPolicy> p(new AccessPolicy(std::move(options), clock));
  auto tokens = p->Read();
  if (!tokens.ok()) return tokens.status();
  {
    MutexLock l(&p->tokens_mu_);
    p->tokens_ = std::move(*tokens);
  }
  return p;
}

std::shared_ptr<const AccessPolicy> AccessPolicy::Open() {
  // Check answers OK before it reads a token or the clock: nothing is protected.
  std::shared_ptr<AccessPolicy> p(new AccessPolicy(AccessOptions{}, nullptr));
  MutexLock l(&p->tokens_mu_);
  p->tokens_ = std::make_shared<const Tokens>();
  return p;
}

Result<std::shared_ptr<const AccessPolicy::Tokens>> AccessPolicy::Read() const {
  auto t = std::make_shared<Tokens>();
  std::vector<TokenEntry> entries;
  if (!options_.tokens_file.empty()) {
    auto text = ReadSmallFile(options_.tokens_file, "the tokens file");
    if (!text.ok()) return text.status();
    auto set = TokenSet::Parse(*text);
    if (!set.ok())
      return Status::InvalidArgument("the tokens file " + options_.tokens_file + ": " + set.status().message());
    entries = set->tokens();
  }
  if (!options_.admin_token.empty()) {
    TokenEntry admin;
    admin.name = "admin-token";
    admin.digest = Sha256(options_.admin_token);
    admin.scopes = kAllScopes;
    entries.push_back(std::move(admin));
  }
  t->set = TokenSet::Of(std::move(entries));
  MutexLock l(&t->mu);
  t->buckets.resize(t->set.tokens().size());
  for (size_t i = 0; i < t->buckets.size(); ++i) {
    t->buckets[i].tokens = std::max(1.0, t->set.tokens()[i].requests_per_second);  // a second's burst
    t->buckets[i].refilled = clock_->Now();
  }
  return std::shared_ptr<const Tokens>(std::move(t));
}

Status AccessPolicy::Reload() {
  if (options_.tokens_file.empty()) return Status::OK();
  auto tokens = Read();
  if (!tokens.ok()) {
    reload_failures_.fetch_add(1, std::memory_order_relaxed);
    return tokens.status();
  }
  {
    MutexLock l(&tokens_mu_);
    tokens_ = std::move(*tokens);
  }
  reloads_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

bool AccessPolicy::Protects(Need need) const {
  if (!enabled()) return false;
  if (Management(need)) return true;
  if (need == Need::kHealth) return options_.all_routes;
  return options_.all_routes || !options_.tokens_file.empty();
}

Status AccessPolicy::Check(std::string_view authorization, Need need, std::string_view model) const {
  if (!Protects(need)) return Status::OK();
  if (authorization.empty()) {
    unauthenticated_.fetch_add(1, std::memory_order_relaxed);
    return Status::Unauthenticated(std::string(Management(need) ? "management routes" : "this server's routes") +
                                   " need a bearer token (Authorization: Bearer <token>)");
  }
  const std::shared_ptr<const Tokens> tokens = Current();
  const TokenEntry* entry = Find(*tokens, authorization);
  if (entry == nullptr) {
    unauthenticated_.fetch_add(1, std::memory_order_relaxed);
    return Status::Unauthenticated("invalid bearer token");
  }
  // Health needs a known token only; every other route its scope.
  if (need != Need::kHealth && !entry->Has(ScopeOf(need))) {
    permission_denied_.fetch_add(1, std::memory_order_relaxed);
    return Status::PermissionDenied("this token does not have the '" + std::string(NeedName(need)) +
                                    "' scope this route needs");
  }
  if (Status st = ModelAllowed(*entry, model); !st.ok()) return st;
  if (entry->requests_per_second > 0 && !Admit(*tokens, static_cast<size_t>(entry - tokens->set.tokens().data()))) {
    rate_limited_.fetch_add(1, std::memory_order_relaxed);
    return Status::RateLimited("this token is over its request rate (requests_per_second " +
                               std::to_string(static_cast<int64_t>(entry->requests_per_second)) + ")");
  }
  return Status::OK();
}

Status AccessPolicy::CheckModel(std::string_view authorization, Need need, std::string_view model) const {
  if (!Protects(need)) return Status::OK();
  const std::shared_ptr<const Tokens> tokens = Current();
  const TokenEntry* entry = Find(*tokens, authorization);
  return entry == nullptr ? Status::OK() : ModelAllowed(*entry, model);  // no entry: Check refused the call
}

const TokenEntry* AccessPolicy::Find(const Tokens& tokens, std::string_view authorization) {
  if (authorization.size() <= kBearer.size() || authorization.substr(0, kBearer.size()) != kBearer) return nullptr;
  return tokens.set.Match(authorization.substr(kBearer.size()));
}

Status AccessPolicy::ModelAllowed(const TokenEntry& entry, std::string_view model) const {
  if (model.empty() || entry.AllowsModel(model)) return Status::OK();
  permission_denied_.fetch_add(1, std::memory_order_relaxed);
  return Status::PermissionDenied("this token may not use this model");
}

bool AccessPolicy::Admit(const Tokens& tokens, size_t i) const {
  const double rate = tokens.set.tokens()[i].requests_per_second;
  const double burst = std::max(1.0, rate);
  const TimePoint now = clock_->Now();
  MutexLock l(&tokens.mu);
  Tokens::Bucket& b = tokens.buckets[i];
  if (now > b.refilled) {
    b.tokens = std::min(burst, b.tokens + std::chrono::duration<double>(now - b.refilled).count() * rate);
    b.refilled = now;
  }
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

AccessPolicy::Counters AccessPolicy::counters() const {
  Counters c;
  c.unauthenticated = unauthenticated_.load(std::memory_order_relaxed);
  c.permission_denied = permission_denied_.load(std::memory_order_relaxed);
  c.rate_limited = rate_limited_.load(std::memory_order_relaxed);
  c.reloads = reloads_.load(std::memory_order_relaxed);
  c.reload_failures = reload_failures_.load(std::memory_order_relaxed);
  return c;
}

Result<std::string> ReadToken(const std::string& file, const std::string& env_var, const char* env_value) {
  if (!file.empty() && !env_var.empty()) {
    return Status::InvalidArgument("give the admin token in a file or an environment variable, not both");
  }
  std::string token;
  if (!file.empty()) {
    auto text = ReadSmallFile(file, "the admin token file");
    if (!text.ok()) return text.status();
    token = Trim(std::move(*text));
    if (token.empty()) return Status::InvalidArgument("the admin token file " + file + " is empty");
  } else if (!env_var.empty()) {
    if (!env_value) return Status::InvalidArgument("the environment variable " + env_var + " is not set");
    token = Trim(env_value);
    if (token.empty()) return Status::InvalidArgument("the environment variable " + env_var + " is empty");
  }
  return token;
}

}  // namespace inferd::auth
