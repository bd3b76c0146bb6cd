// ClusterOptions: how a node joins a cluster (`inferd serve --cluster ...`),
// and the parsing and checks of the flags that fill them.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace inferd::cluster {

struct ClusterOptions {
  std::vector<std::string> endpoints;             // etcd client endpoints, host:port
  std::string name = "default";                   // keys live under /inferd/<name>/
  std::string node_id;                            // unique in the cluster
  std::string http_address;                       // host:port peers reach this node's HTTP API at
  std::string grpc_address;                       // host:port of its gRPC API ("" = none)
  std::chrono::seconds lease_ttl{5};              // a node that stops renewing is gone this long after
  std::chrono::milliseconds refresh{1000};        // how often a node renews, publishes and reads the view
  std::chrono::milliseconds store_timeout{2000};  // deadline of one call to etcd
  // Requests per second one copy of a model serves before the model gets
  // another copy (beyond two, up to one per live node); a copy beyond two is
  // released when one fewer would each serve under 3/4 of it. 0: never more
  // than two copies by rate.
  double copy_rate = 50;

  std::string Prefix() const { return "/inferd/" + name + "/"; }
  std::string NodesPrefix() const { return Prefix() + "nodes/"; }
  std::string PlacementPrefix() const { return Prefix() + "placement/"; }
};

// "etcd://HOST:PORT[,HOST:PORT...]" (also "etcd://HOST:PORT,etcd://HOST:PORT")
// -> the endpoints. INVALID_ARGUMENT with what is wrong.
Result<std::vector<std::string>> ParseClusterUrl(std::string_view url);

// "HOST:PORT" with a port in 1..65535 and a non-empty host.
Status CheckHostPort(std::string_view what, std::string_view host_port);

// Every option that a flag sets: endpoints, name, node id, addresses, the
// lease and refresh times (a node renews at least three times per lease).
Status CheckClusterOptions(const ClusterOptions& o);

}  // namespace inferd::cluster
