#include "cluster/cluster_options.h"

#include <algorithm>
#include <charconv>

#include "cluster/node_record.h"

namespace inferd::cluster {

Status CheckHostPort(std::string_view what, std::string_view hp) {
  const std::string shown(hp);
  const size_t colon = hp.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return Status::InvalidArgument(std::string(what) + " '" + shown + "': expected HOST:PORT");
  std::string_view host = hp.substr(0, colon);
  if (host.front() == '[' && host.back() != ']')
    return Status::InvalidArgument(std::string(what) + " '" + shown + "': unbalanced [ in the host");
  const bool host_ok = std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == ':' || c == '[' || c == ']' || c == '_';
  });
  if (!host_ok) return Status::InvalidArgument(std::string(what) + " '" + shown + "': bad character in the host");
  std::string_view port = hp.substr(colon + 1);
  int value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535)
    return Status::InvalidArgument(std::string(what) + " '" + shown + "': the port must be 1..65535");
  return Status::OK();
}

Result<std::vector<std::string>> ParseClusterUrl(std::string_view url) {
  constexpr std::string_view kScheme = "etcd://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return Status::InvalidArgument("--cluster '" + std::string(url) +
                                   "': expected etcd://HOST:PORT[,HOST:PORT...] (only etcd is supported)");
  std::vector<std::string> endpoints;
  std::string_view rest = url.substr(kScheme.size());
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view one = rest.substr(0, comma);
    if (one.substr(0, kScheme.size()) == kScheme) one.remove_prefix(kScheme.size());
    if (!one.empty() && one.back() == '/') one.remove_suffix(1);
    if (one.find('/') != std::string_view::npos)
      return Status::InvalidArgument("--cluster '" + std::string(url) + "': an endpoint has no path");
    if (Status st = CheckHostPort("--cluster endpoint", one); !st.ok()) return st;
    endpoints.emplace_back(one);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (endpoints.size() > 16) return Status::InvalidArgument("--cluster: at most 16 etcd endpoints");
  return endpoints;
}

Status CheckClusterOptions(const ClusterOptions& o) {
  if (o.endpoints.empty()) return Status::InvalidArgument("--cluster: no etcd endpoint");
  for (const std::string& e : o.endpoints)
    if (Status st = CheckHostPort("--cluster endpoint", e); !st.ok()) return st;
  if (o.name.empty() || o.name.size() > 64 || o.name.find('/') != std::string::npos)
    return Status::InvalidArgument("--cluster-name '" + o.name + "': 1 to 64 characters, no '/'");
  if (Status st = CheckNodeId(o.node_id); !st.ok())
    return Status::InvalidArgument("--cluster-node-id: " + st.message());
  if (Status st = CheckHostPort("--cluster-advertise", o.http_address); !st.ok()) return st;
  if (!o.grpc_address.empty())
    if (Status st = CheckHostPort("the advertised gRPC address", o.grpc_address); !st.ok()) return st;
  if (o.lease_ttl < std::chrono::seconds(2) || o.lease_ttl > std::chrono::seconds(600))
    return Status::InvalidArgument("--cluster-lease-ttl-secs: 2 to 600");
  if (o.refresh < std::chrono::milliseconds(10) || o.refresh * 3 > o.lease_ttl)
    return Status::InvalidArgument(
        "--cluster-refresh-ms: at least 10 and at most a third of the lease TTL (a node renews its lease "
        "three times per TTL)");
  if (o.store_timeout < std::chrono::milliseconds(10))
    return Status::InvalidArgument("the etcd call timeout must be at least 10 ms");
  return Status::OK();
}

}  // namespace inferd::cluster
