#include "auth/token_set.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <unordered_map>
#include <utility>

#include "core/percent_decoding.h"

namespace inferd::auth {
namespace {

using Value = rapidjson::Value;

// Every scope and its name in the file.
constexpr std::pair<Scope, std::string_view> kScopes[] = {{Scope::kInfer, "infer"},
                                                          {Scope::kRead, "read"},
                                                          {Scope::kModels, "models"},
                                                          {Scope::kJobs, "jobs"},
                                                          {Scope::kCluster, "cluster"}};

Status Bad(size_t index, std::string_view name, std::string_view what) {
  std::string m = "tokens[" + std::to_string(index) + "]";
  if (!name.empty()) m.append(" (").append(name).append(")");
  m.append(" ").append(what);
  return Status::InvalidArgument(std::move(m));
}

bool ValidName(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Printable ASCII without spaces: what an Authorization header can carry unchanged.
bool ValidToken(std::string_view t) {
  for (char c : t) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

std::string_view Str(const Value& v) { return {v.GetString(), v.GetStringLength()}; }

Result<uint32_t> ParseScopes(const Value& v, size_t i, std::string_view name) {
  if (!v.IsArray() || v.Empty()) return Bad(i, name, "'scopes' must be a non-empty array of scopes");
  uint32_t scopes = 0;
  for (const Value& s : v.GetArray()) {
    if (!s.IsString()) return Bad(i, name, "'scopes' must hold strings");
    const std::string_view text = Str(s);
    if (text == "*") {
      scopes |= kAllScopes;
      continue;
    }
    const auto* known =
        std::find_if(std::begin(kScopes), std::end(kScopes), [&](const auto& entry) { return entry.second == text; });
    if (known != std::end(kScopes)) {
      scopes |= static_cast<uint32_t>(known->first);
    } else {
      return Bad(
          i, name,
          "'scopes': unknown scope '" + std::string(text.substr(0, 32)) + "' (infer, read, models, jobs, cluster, *)");
    }
  }
  return scopes;
}

Status ParseModels(const Value& v, size_t i, std::string_view name, TokenEntry* e) {
  if (!v.IsArray() || v.Empty() || v.Size() > TokenSet::kMaxModelsPerToken) {
    return Bad(i, name,
               "'models' must be an array of 1 to " + std::to_string(TokenSet::kMaxModelsPerToken) +
                   " model names (a trailing * matches a prefix)");
  }
  for (const Value& m : v.GetArray()) {
    if (!m.IsString() || m.GetStringLength() == 0 || m.GetStringLength() > 256) {
      return Bad(i, name, "'models' must hold model names of 1 to 256 characters");
    }
    const std::string_view text = Str(m);
    if (text.find('*') < text.size() - 1) return Bad(i, name, "'models': '*' may only end a name");
    e->models.emplace_back(text);
  }
  return Status::OK();
}

Result<TokenEntry> ParseEntry(const Value& v, size_t i) {
  if (!v.IsObject()) return Bad(i, "", "must be an object");
  TokenEntry e;
  const Value* token = nullptr;
  const Value* sha = nullptr;
  const Value* scopes = nullptr;
  const Value* models = nullptr;
  for (const auto& m : v.GetObject()) {
    const std::string_view key = Str(m.name);
    if (key == "name") {
      if (!m.value.IsString() || !ValidName(Str(m.value))) {
        return Bad(i, "", "'name' must be 1 to 64 letters, digits, '.', '_' or '-'");
      }
      e.name = std::string(Str(m.value));
    } else if (key == "token") {
      token = &m.value;
    } else if (key == "sha256") {
      sha = &m.value;
    } else if (key == "scopes") {
      scopes = &m.value;
    } else if (key == "models") {
      models = &m.value;
    } else if (key == "requests_per_second") {
      if (!m.value.IsNumber() || !(m.value.GetDouble() > 0) || !std::isfinite(m.value.GetDouble())) {
        return Bad(i, "", "'requests_per_second' must be a number > 0");
      }
      e.requests_per_second = m.value.GetDouble();
    } else {
      return Bad(i, "",
                 "has an unknown field '" + std::string(key.substr(0, 32)) +
                     "' (name, token, sha256, scopes, models, requests_per_second)");
    }
  }
  if (e.name.empty()) return Bad(i, "", "needs a 'name'");
  if ((token == nullptr) == (sha == nullptr)) return Bad(i, e.name, "needs exactly one of 'token' and 'sha256'");
  if (token != nullptr) {
    // The message never quotes the token.
    if (!token->IsString() || token->GetStringLength() < TokenSet::kMinTokenLength || !ValidToken(Str(*token))) {
      return Bad(i, e.name,
                 "'token' must be at least " + std::to_string(TokenSet::kMinTokenLength) +
                     " printable characters without spaces");
    }
    e.digest = Sha256(Str(*token));
  } else {
    if (!sha->IsString() || sha->GetStringLength() != 64) return Bad(i, e.name, "'sha256' must be 64 hex digits");
    const std::string_view hex = Str(*sha);
    for (size_t b = 0; b < 32; ++b) {
      const int hi = HexDigitValue(hex[2 * b]), lo = HexDigitValue(hex[2 * b + 1]);
      if (hi < 0 || lo < 0) return Bad(i, e.name, "'sha256' must be 64 hex digits");
      e.digest[b] = static_cast<uint8_t>(hi * 16 + lo);
    }
  }
  if (scopes == nullptr) return Bad(i, e.name, "needs 'scopes'");
  auto s = ParseScopes(*scopes, i, e.name);
  if (!s.ok()) return s.status();
  e.scopes = *s;
  if (models != nullptr) {
    if (Status st = ParseModels(*models, i, e.name, &e); !st.ok()) return st;
  }
  return e;
}

}  // namespace

std::string_view ScopeName(Scope scope) {
  for (const auto& [s, name] : kScopes) {
    if (s == scope) return name;
  }
  return "?";
}

Digest Sha256(std::string_view text) {
  Digest d{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  return d;
}

bool TokenEntry::AllowsModel(std::string_view model) const {
  if (models.empty()) return true;
  for (const std::string& m : models) {
    if (!m.empty() && m.back() == '*') {
      if (model.substr(0, m.size() - 1) == std::string_view(m).substr(0, m.size() - 1)) return true;
    } else if (model == m) {
      return true;
    }
  }
  return false;
}

Result<TokenSet> TokenSet::Parse(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(json.data(), json.size());
  if (doc.HasParseError()) {
    return Status::InvalidArgument(std::string("not JSON: ") + rapidjson::GetParseError_En(doc.GetParseError()) +
                                   " at offset " + std::to_string(doc.GetErrorOffset()));
  }
  if (!doc.IsObject()) return Status::InvalidArgument("must be an object {\"tokens\": [...]}");
  for (const auto& m : doc.GetObject()) {
    if (Str(m.name) != "tokens") {
      return Status::InvalidArgument("unknown field '" + std::string(Str(m.name).substr(0, 32)) + "' (tokens)");
    }
  }
  auto it = doc.FindMember("tokens");
  if (it == doc.MemberEnd() || !it->value.IsArray() || it->value.Empty() || it->value.Size() > kMaxTokens) {
    return Status::InvalidArgument("'tokens' must be an array of 1 to " + std::to_string(kMaxTokens) + " tokens");
  }
  TokenSet set;
  set.tokens_.reserve(it->value.Size());
  std::unordered_map<std::string, size_t> names;
  std::map<Digest, size_t> digests;
  for (size_t i = 0; i < it->value.Size(); ++i) {
    auto e = ParseEntry(it->value[static_cast<rapidjson::SizeType>(i)], i);
    if (!e.ok()) return e.status();
    if (!names.emplace(e->name, i).second) return Bad(i, e->name, "has the name of an earlier token");
    if (auto [at, fresh] = digests.emplace(e->digest, i); !fresh) {
      return Bad(i, e->name, "is the same token as '" + set.tokens_[at->second].name + "'");
    }
    set.tokens_.push_back(std::move(*e));
  }
  set.Index();
  return set;
}

namespace {
uint64_t Prefix(const Digest& d) {
  uint64_t p = 0;
  for (size_t b = 0; b < 8; ++b) p = (p << 8) | d[b];
  return p;
}
}  // namespace

TokenSet TokenSet::Of(std::vector<TokenEntry> entries) {
  TokenSet s;
  s.tokens_ = std::move(entries);
  s.Index();
  return s;
}

void TokenSet::Index() {
  index_.clear();
  index_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) index_.emplace_back(Prefix(tokens_[i].digest), i);
  std::sort(index_.begin(), index_.end());
}

const TokenEntry* TokenSet::Match(std::string_view presented) const {
  const Digest d = Sha256(presented);
  const uint64_t p = Prefix(d);
  auto it = std::lower_bound(index_.begin(), index_.end(), std::make_pair(p, size_t{0}));
  for (; it != index_.end() && it->first == p; ++it) {
    const TokenEntry& e = tokens_[it->second];
    if (CRYPTO_memcmp(d.data(), e.digest.data(), d.size()) == 0) return &e;
  }
  return nullptr;
}

}  // namespace inferd::auth
