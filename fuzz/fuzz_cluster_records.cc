// What a cluster node reads that other processes wrote or users typed: node
// records and placements from etcd (JSON, written by any node of any
// version) and the --cluster URL. A parsed record or placement must encode
// and re-parse to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cluster/cluster_options.h"
#include "cluster/node_record.h"
#include "cluster/placement.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)inferd::cluster::ParseClusterUrl(text);
  if (auto p = inferd::cluster::ParsePlacement(text); p.ok()) {
    auto again = inferd::cluster::ParsePlacement(inferd::cluster::EncodePlacement(*p));
    if (!again.ok() || again->nodes != p->nodes || again->declined != p->declined || again->released != p->released)
      std::abort();
  }
  auto r = inferd::cluster::ParseNodeRecord(text);
  if (!r.ok()) return 0;
  auto again = inferd::cluster::ParseNodeRecord(inferd::cluster::EncodeNodeRecord(*r));
  if (!again.ok() || again->id != r->id || again->http_address != r->http_address ||
      again->grpc_address != r->grpc_address || again->models != r->models || again->used_bytes != r->used_bytes ||
      again->budget_bytes != r->budget_bytes || again->in_flight != r->in_flight || again->rates != r->rates)
    std::abort();
  return 0;
}
