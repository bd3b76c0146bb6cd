// The bearer-token file (--auth-tokens-file, auth/token_set.h). Invariants:
// no crash; a file that parses holds at least one token, every token has a
// name and a scope, and the presented bytes match at most the one entry
// whose digest they have.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "auth/token_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto set = inferd::auth::TokenSet::Parse(text);
  if (!set.ok()) {
    if (set.status().message().empty()) std::abort();
    return 0;
  }
  if (set->tokens().empty()) std::abort();
  for (const auto& t : set->tokens()) {
    if (t.name.empty() || t.scopes == 0 || (t.scopes & ~inferd::auth::kAllScopes) != 0) std::abort();
    (void)t.AllowsModel(text.substr(0, 16));
  }
  const auto* m = set->Match(text);
  if (m != nullptr && m->digest != inferd::auth::Sha256(text)) std::abort();
  return 0;
}
