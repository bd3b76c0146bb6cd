#include "backends/aten/int8_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <string>
#include <utility>

namespace inferd::aten {
namespace {

// Rows per thread's share below which the outputs are split instead (a few
// rows: every thread reads all of x and its own part of the weights).
constexpr int64_t kRowsPerShare = 8;

}  // namespace

std::optional<std::shared_ptr<const Int8Linear>> Int8Linear::Make(const at::Tensor& w, bool transposed,
                                                                  const at::Tensor& bias, Int8Epilogue epilogue) {
  if (w.scalar_type() != at::kFloat || w.dim() != 2 || w.size(0) < 1 || w.size(1) < 1) return std::nullopt;
  if (!at::isfinite(w).all().item<bool>()) return std::nullopt;  // a NaN or infinite weight has no int8 value
  at::Tensor nk = (transposed ? w : w.t()).contiguous();         // [N, K]
  const int64_t n = nk.size(0), k = nk.size(1);
  if (bias.defined() && (bias.scalar_type() != at::kFloat || bias.numel() != n)) return std::nullopt;
  auto out = std::make_shared<Int8Linear>();
  out->w_ = quant::PackInt8Weights(nk.data_ptr<float>(), n, k);
  if (bias.defined()) {
    at::Tensor b = bias.reshape({n}).contiguous();
    out->bias_.assign(b.data_ptr<float>(), b.data_ptr<float>() + n);
  }
  out->epilogue_ = epilogue;
  return std::shared_ptr<const Int8Linear>(std::move(out));
}

Result<at::Tensor> Int8Linear::Run(const at::Tensor& x) const {
  const int64_t k = w_.k, n = w_.n;
  if (x.scalar_type() != at::kFloat || x.dim() != 2 || x.size(1) != k || x.size(0) < 1) {
    return Status::InvalidArgument("takes a float [M, " + std::to_string(k) + "] input here, got " +
                                   std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
  }
  const int64_t m = x.size(0);
  at::Tensor xc = x.stride(1) == 1 ? x : x.contiguous();
  quant::QuantizedRows q;
  quant::QuantizeRows(xc.data_ptr<float>(), m, k, xc.stride(0), quant::ChosenActivationCode(), &q);
  at::Tensor y = at::empty({m, n}, x.options());
  float* yp = y.data_ptr<float>();
  const float* bias = bias_.empty() ? nullptr : bias_.data();
  const int64_t blocks = (n + quant::kInt8Block - 1) / quant::kInt8Block;
  const int64_t threads = at::get_num_threads();
  if (threads <= 1 || m * n * k < (int64_t{1} << 16)) {
    quant::Int8GemmPart(q, w_, bias, yp, n, {0, m, 0, blocks});
  } else if (m >= kRowsPerShare * threads) {
    at::parallel_for(0, m, kRowsPerShare, [&](int64_t r0, int64_t r1) {
      quant::Int8GemmPart(q, w_, bias, yp, n, {r0, r1, 0, blocks});
    });
  } else {
    at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
      quant::Int8GemmPart(q, w_, bias, yp, n, {0, m, b0, b1});
    });
  }
  if (epilogue_ == Int8Epilogue::kGeluErf) y = at::gelu(y);
  return y;
}

}  // namespace inferd::aten
