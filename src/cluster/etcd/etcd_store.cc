#include "cluster/etcd/etcd_store.h"

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "etcd_rpc.grpc.pb.h"

namespace inferd::cluster {

struct EtcdStore::Impl {
  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  };
  std::vector<Endpoint> endpoints;
  std::chrono::milliseconds timeout;
  std::atomic<size_t> current{0};

  Endpoint& Pick() { return endpoints[current.load(std::memory_order_relaxed) % endpoints.size()]; }

  void Deadline(grpc::ClientContext& ctx) const { ctx.set_deadline(std::chrono::system_clock::now() + timeout); }

  // gRPC status -> inferd Status; an unreachable endpoint moves calls to the next one.
  Status Check(const grpc::Status& s, const Endpoint& e, const char* what) {
    if (s.ok()) return Status::OK();
    const std::string msg = std::string("etcd ") + what + " at " + e.address + ": " + s.error_message();
    switch (s.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        current.fetch_add(1, std::memory_order_relaxed);
        return s.error_code() == grpc::StatusCode::UNAVAILABLE ? Status::Unavailable(msg)
                                                               : Status::DeadlineExceeded(msg);
      case grpc::StatusCode::NOT_FOUND:
        return Status::NotFound(msg);
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::OUT_OF_RANGE:
        return Status::InvalidArgument(msg);
      default:
        // etcd answers "etcdserver: lease not found" as NOT_FOUND, "too many requests" as
        // RESOURCE_EXHAUSTED, leader changes as UNAVAILABLE: anything else is retried next round too.
        return Status::Unavailable(msg);
    }
  }
};

namespace {

// The end of the range of keys that start with `prefix`: the prefix with its
// last byte below 0xff incremented (etcd's prefix convention).
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char& c = reinterpret_cast<unsigned char&>(end.back());
    if (c < 0xff) {
      ++c;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

StoredKey FromKeyValue(const etcdserverpb::KeyValue& kv) {
  StoredKey k;
  k.key = kv.key();
  k.value = kv.value();
  k.create_revision = kv.create_revision();
  k.mod_revision = kv.mod_revision();
  k.lease = kv.lease();
  return k;
}

}  // namespace

EtcdStore::EtcdStore(std::vector<std::string> endpoints, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->timeout = timeout;
  for (std::string& address : endpoints) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetMaxReceiveMessageSize(64 << 20);  // a listing of many nodes' records
    Impl::Endpoint e;
    e.address = address;
    e.channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    e.kv = etcdserverpb::KV::NewStub(e.channel);
    e.lease = etcdserverpb::Lease::NewStub(e.channel);
    impl_->endpoints.push_back(std::move(e));
  }
}

EtcdStore::~EtcdStore() = default;

Result<int64_t> EtcdStore::GrantLease(std::chrono::seconds ttl) {
  Impl::Endpoint& e = impl_->Pick();
  grpc::ClientContext ctx;
  impl_->Deadline(ctx);
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl.count());
  etcdserverpb::LeaseGrantResponse resp;
  if (Status st = impl_->Check(e.lease->LeaseGrant(&ctx, req, &resp), e, "lease grant"); !st.ok()) return st;
  if (!resp.error().empty()) return Status::Unavailable("etcd lease grant: " + resp.error());
  return resp.id();
}

Status EtcdStore::KeepAlive(int64_t lease) {
  Impl::Endpoint& e = impl_->Pick();
  grpc::ClientContext ctx;
  impl_->Deadline(ctx);
  auto stream = e.lease->LeaseKeepAlive(&ctx);
  etcdserverpb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse resp;
  const bool exchanged = stream->Write(req) && stream->Read(&resp);
  stream->WritesDone();
  if (exchanged) {
    ctx.TryCancel();  // one round trip is all we wanted
    (void)stream->Finish();
    if (resp.ttl() <= 0) return Status::NotFound("etcd: lease " + std::to_string(lease) + " expired");
    return Status::OK();
  }
  grpc::Status s = stream->Finish();
  if (s.ok()) s = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended without an answer");
  return impl_->Check(s, e, "lease keep-alive");
}

Status EtcdStore::RevokeLease(int64_t lease) {
  Impl::Endpoint& e = impl_->Pick();
  grpc::ClientContext ctx;
  impl_->Deadline(ctx);
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  return impl_->Check(e.lease->LeaseRevoke(&ctx, req, &resp), e, "lease revoke");
}

Status EtcdStore::Put(const std::string& key, const std::string& value, int64_t lease) {
  Impl::Endpoint& e = impl_->Pick();
  grpc::ClientContext ctx;
  impl_->Deadline(ctx);
  etcdserverpb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  etcdserverpb::PutResponse resp;
  return impl_->Check(e.kv->Put(&ctx, req, &resp), e, "put");
}

Result<bool> EtcdStore::ApplyIf(const std::vector<ConditionalWrite>& writes) {
  if (writes.size() > kMaxWritesPerApply) return Status::InvalidArgument("too many writes for one transaction");
  Impl::Endpoint& e = impl_->Pick();
  grpc::ClientContext ctx;
  impl_->Deadline(ctx);
  etcdserverpb::TxnRequest req;
  for (const ConditionalWrite& w : writes) {
    // Applies only while the key's modification revision is `expected` (an absent key's is 0).
    etcdserverpb::Compare* c = req.add_compare();
    c->set_key(w.key);
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_target(etcdserverpb::Compare::MOD);
    c->set_mod_revision(w.expected);
    etcdserverpb::RequestOp* op = req.add_success();
    if (w.remove) {
      op->mutable_request_delete_range()->set_key(w.key);
    } else {
      op->mutable_request_put()->set_key(w.key);
      op->mutable_request_put()->set_value(w.value);
    }
  }
  etcdserverpb::TxnResponse resp;
  if (Status st = impl_->Check(e.kv->Txn(&ctx, req, &resp), e, "txn"); !st.ok()) return st;
  return resp.succeeded();
}

Result<std::vector<StoredKey>> EtcdStore::List(const std::string& prefix) {
  INFERD_ASSIGN_OR_RETURN(PrefixChanges all, ListChanged(prefix, 0));
  return std::move(all.changed);
}

Result<PrefixChanges> EtcdStore::ListChanged(const std::string& prefix, int64_t after) {
  Impl::Endpoint& e = impl_->Pick();
  grpc::ClientContext ctx;
  impl_->Deadline(ctx);
  etcdserverpb::RangeRequest req;
  req.set_key(prefix);
  req.set_range_end(PrefixEnd(prefix));
  if (after > 0) req.set_min_mod_revision(after + 1);  // etcd filters; its count stays that of the whole range
  etcdserverpb::RangeResponse resp;
  if (Status st = impl_->Check(e.kv->Range(&ctx, req, &resp), e, "range"); !st.ok()) return st;
  PrefixChanges out;
  out.changed.reserve(resp.kvs_size());
  for (const etcdserverpb::KeyValue& kv : resp.kvs()) out.changed.push_back(FromKeyValue(kv));
  out.total = resp.count();
  out.revision = resp.header().revision();
  return out;
}

}  // namespace inferd::cluster
