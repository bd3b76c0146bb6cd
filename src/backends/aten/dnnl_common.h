// What the oneDNN kernels (onnx/ops/dnnl_gemm.cc, onnx/ops/dnnl_conv.cc,
// int8_conv.cc) share: the cache of primitives by input shape, the
// attributes every primitive is made with, and running a primitive with a
// scratchpad of its own. Included by .cc files only (it includes dnnl.hpp).
// Thread-safety: PrimitiveCache is; the functions keep no state.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <utility>

#include "backends/aten/conv_geometry.h"  // kMaxShapes
#include "core/mutex.h"

namespace inferd::aten {

// Primitives (or whatever one shape needs) by input shape, made on first use
// outside the lock (a JIT compile takes 0.1-0.3 ms) and kept up to
// kMaxShapes; beyond that each call makes its own (oneDNN's own cache then
// makes a seen shape ~3 us). `make` may return null (no primitive for the
// shape): that answer is kept too.
template <typename Key, typename Entry>
class PrimitiveCache {
 public:
  template <typename Make>
  std::shared_ptr<const Entry> Get(const Key& key, Make make) const {
    {
      MutexLock l(&mu_);
      if (auto it = map_.find(key); it != map_.end()) return it->second;
    }
    std::shared_ptr<const Entry> e = make();
    MutexLock l(&mu_);
    if (map_.size() < kMaxShapes) map_.emplace(key, e);
    return e;
  }

 private:
  mutable Mutex mu_;
  mutable std::map<Key, std::shared_ptr<const Entry>> map_ TSA_GUARDED_BY(mu_);
};

// A user-managed scratchpad (primitives are shared by a model's instances and
// run concurrently), and `eltwise` (undef: none) as the post-op.
inline dnnl::primitive_attr Attr(dnnl::algorithm eltwise = dnnl::algorithm::undef) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (eltwise != dnnl::algorithm::undef) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, eltwise, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

// Bytes for a buffer of layout `d`.
inline at::Tensor Bytes(const dnnl::memory::desc& d) {
  return at::empty({static_cast<int64_t>(d.get_size())}, at::TensorOptions().dtype(at::kByte));
}

// Queues `p` on `s` with a scratchpad of `scratch`'s size made for this call
// (kept alive by `pad` until the caller has waited on `s`).
inline void Execute(const dnnl::stream& s, const dnnl::engine& eng, const dnnl::primitive& p,
                    const dnnl::memory::desc& scratch, std::unordered_map<int, dnnl::memory> args, at::Tensor* pad) {
  if (scratch.get_size() > 0) {
    *pad = Bytes(scratch);
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratch, eng, pad->data_ptr()));
  }
  p.execute(s, args);
}

}  // namespace inferd::aten
