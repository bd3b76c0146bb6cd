#include "frontends/http/client_connection_cap.h"

namespace inferd::http {

bool ClientConnectionCap::TryOpen(const std::string& client) {
  MutexLock l(&mu_);
  size_t& n = open_[client];
  if (n >= max_) {
    if (n == 0) open_.erase(client);
    return false;
  }
  ++n;
  return true;
}

void ClientConnectionCap::Close(const std::string& client) {
  MutexLock l(&mu_);
  auto it = open_.find(client);
  if (it == open_.end()) return;
  if (--it->second == 0) open_.erase(it);
}

size_t ClientConnectionCap::clients() const {
  MutexLock l(&mu_);
  return open_.size();
}

}  // namespace inferd::http
