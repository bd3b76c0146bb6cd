// ClientConnectionCap: how many connections each client address holds open
// on a port, and whether it may open another (--http-max-connections-per-
// client). A client at its cap gets its new connections closed as they come;
// other clients are not affected. Keyed by the full address (an IPv4 client
// and its IPv4-mapped IPv6 form are one client).
//
// Thread-safety: thread-safe (one mutex; taken once per connection opened
// and once per connection closed, never per request).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/mutex.h"

namespace inferd::http {

class ClientConnectionCap {
 public:
  explicit ClientConnectionCap(size_t max_per_client) : max_(max_per_client) {}

  // Counts a connection of `client` (an address's bytes) and returns true,
  // or returns false when it already holds max_per_client.
  bool TryOpen(const std::string& client);
  // A connection TryOpen counted has closed.
  void Close(const std::string& client);
  // Clients with a connection open now.
  size_t clients() const;

 private:
  const size_t max_;
  mutable Mutex mu_;
  std::unordered_map<std::string, size_t> open_ TSA_GUARDED_BY(mu_);
};

}  // namespace inferd::http
