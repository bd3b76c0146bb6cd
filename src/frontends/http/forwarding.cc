// Cluster mode's HTTP side of forwarding: a request's wire form kept for the
// forward stage, and a peer's relayed answer written back unchanged.
#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "frontends/http/router.h"
#include "server/forwarder.h"

namespace inferd::http {
namespace {

// Hop-by-hop headers and those a forward sets itself: never passed on.
bool IsHopHeader(std::string_view lower) {
  static constexpr std::array<std::string_view, 12> kDropped = {
      "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host",
      // The body is passed on decompressed; the peer answers uncompressed (this node compresses for its client).
      "content-length", "content-encoding", "accept-encoding", "inferd-forwarded-by"};
  return std::find(kDropped.begin(), kDropped.end(), lower) != kDropped.end();
}

std::string LowerName(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::shared_ptr<const WireRequest> WireFormOf(InferenceServer& server, const Request& req) {
  if (!server.admin().clustered() || req.Header("inferd-forwarded-by") != nullptr) return nullptr;
  auto wire = std::make_shared<WireRequest>();
  wire->method = req.method;
  wire->target = req.query.empty() ? req.path : req.path + "?" + req.query;
  for (const auto& [name, value] : req.headers)
    if (!IsHopHeader(name)) wire->headers.emplace_back(name, value);
  wire->body = req.body;
  return wire;
}

void KeepWireForm(InferenceServer& server, const Request& req, InferRequest& r) {
  r.trace = req.trace;
  if (!server.admin().clustered()) return;
  if (const std::string* by = req.Header("inferd-forwarded-by")) {
    r.forwarded_by = by->empty() ? "?" : *by;
    return;  // served here: never forwarded again
  }
  r.wire = WireFormOf(server, req);
}

void RouteModelRead(InferenceServer* server, const Request& req, const std::string& model, bool wait_for_load,
                    Responder respond, std::function<void(Responder)> here) {
  server->RouteModelRead(
      model, WireFormOf(*server, req), wait_for_load,
      [here = std::move(here), respond](const Status& st) {
        if (!st.ok()) return respond(ErrorResponse(st));
        here(respond);
      },
      [respond](Result<InferResponse> r) {
        if (!r.ok()) return respond(ErrorResponse(r.status()));
        if (!r->relayed) return respond(ErrorResponse(Status::Unavailable("the node that served it sent no answer")));
        respond(RelayedResponse(*r->relayed, false));
      });
}

Response RelayedResponse(const RelayedAnswer& a, bool more) {
  Response r;
  r.status = a.status > 0 ? a.status : 200;
  r.content_type.clear();
  r.more = more;
  r.body = a.body;
  for (const auto& [name, value] : a.headers) {
    const std::string lower = LowerName(name);
    if (lower == "content-type") {
      r.content_type = value;
    } else if (!IsHopHeader(lower) && lower != "server" && lower != "date") {
      r.headers.emplace_back(name, value);
    }
  }
  return r;
}

}  // namespace inferd::http
