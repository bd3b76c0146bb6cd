#include "backends/llm/packed_matrix.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "backends/llm/decode_kernels.h"

namespace inferd::llm {

PackedMatrix Pack(at::Tensor& w, const at::Tensor& keep, Packing packing) {
  PackedMatrix m;
  const bool bf16 = packing == Packing::kBf16;
  if (w.size(1) % (bf16 ? kernels::kBf16Cols : kernels::kQ8Block) != 0) return m;
  m.rows = w.size(0);
  m.cols = w.size(1);
  const at::Tensor c = w.contiguous();
  if (bf16) {
    m.bf16.resize(static_cast<size_t>(m.rows * m.cols));
    kernels::ToBf16(c.data_ptr<float>(), m.rows * m.cols, m.bf16.data());
  } else {
    m.q.resize(static_cast<size_t>(m.rows * m.cols));
    m.scales.resize(static_cast<size_t>(m.rows * (m.cols / kernels::kQ8Block)));
    kernels::QuantizeQ8(c.data_ptr<float>(), m.rows, m.cols, m.q.data(), m.scales.data());
  }
  if (!w.is_same(keep)) w = at::Tensor();
  return m;
}

at::Tensor Project(const at::Tensor& x, const at::Tensor& w, const PackedMatrix& packed, const at::Tensor& b) {
  if (packed.empty()) return at::linear(x, w, b);
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty({xc.size(0), packed.rows}, at::TensorOptions().dtype(at::kFloat));
  Linear(w, packed, b, xc.data_ptr<float>(), xc.size(0), y.data_ptr<float>());
  return y;
}

namespace {

// Many rows of x (a prompt): blocks of W widened to FP32 for ATen's GEMM, whose packed kernels beat the tiles once
// each weight is reused this often (TTFT of a 512-token prompt on bench_llama: 392 ms with the int8 tiles in steps
// of 64 rows).
void WidenedGemm(const PackedMatrix& m, const float* bias, const float* x, int64_t batch, float* y) {
  const int64_t rows = m.rows, cols = m.cols;
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  constexpr int64_t kChunk = 256;
  at::Tensor xt = at::from_blob(const_cast<float*>(x), {batch, cols}, opts);
  at::Tensor yt = at::from_blob(y, {batch, rows}, opts);
  at::Tensor wt = at::empty({std::min(kChunk, rows), cols}, opts);
  for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int64_t n = std::min(kChunk, rows - r0);
    if (m.is_bf16())
      kernels::FromBf16(m.bf16.data() + r0 * cols, n * cols, wt.data_ptr<float>());
    else
      kernels::DequantizeQ8(m.q.data() + r0 * cols, m.scales.data() + r0 * (cols / kernels::kQ8Block), n, cols,
                            wt.data_ptr<float>());
    at::Tensor part = at::mm(xt, wt.narrow(0, 0, n).t());
    if (bias != nullptr) part.add_(at::from_blob(const_cast<float*>(bias + r0), {n}, opts));
    yt.narrow(1, r0, n).copy_(part);
  }
}

// Enough rows per task that a thread's share is worth the hand-off (~64 KiB of weights), a multiple of 4.
int64_t Grain(int64_t cols, int64_t bytes_per_weight) {
  return std::max<int64_t>(16, (64 << 10) / (cols * bytes_per_weight)) & ~int64_t{3};
}

}  // namespace

void Linear(const at::Tensor& w, const PackedMatrix& packed, const at::Tensor& b, const float* x, int64_t batch,
            float* y) {
  const int64_t rows = packed.empty() ? w.size(0) : packed.rows, cols = packed.empty() ? w.size(1) : packed.cols;
  const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
  if (!packed.empty() && batch > kTiledBatch) return WidenedGemm(packed, bp, x, batch, y);
  if (packed.is_bf16()) {  // bf16 weights, up to kTiledBatch rows: the tiles
    at::parallel_for(0, rows, Grain(cols, 2), [&](int64_t r0, int64_t r1) {
      kernels::GemmSmallBf16(packed.bf16.data() + r0 * cols, bp ? bp + r0 : nullptr, r1 - r0, cols, x, cols, batch,
                             y + r0, rows);
    });
    return;
  }
  if (!packed.empty()) {  // int8 weights, up to kTiledBatch rows: the tiles
    at::parallel_for(0, rows, Grain(cols, 1), [&](int64_t r0, int64_t r1) {
      kernels::GemmSmallQ8(packed.q.data() + r0 * cols, packed.scales.data() + r0 * (cols / kernels::kQ8Block),
                           bp ? bp + r0 : nullptr, r1 - r0, cols, x, cols, batch, y + r0, rows);
    });
    return;
  }
  if (batch > kTiledBatch) {
    const auto opts = at::TensorOptions().dtype(at::kFloat);
    at::Tensor xt = at::from_blob(const_cast<float*>(x), {batch, cols}, opts);
    at::Tensor yt = at::from_blob(y, {batch, rows}, opts);
    if (b.defined())
      at::addmm_out(yt, b, xt, w.t());
    else
      at::mm_out(yt, xt, w.t());
    return;
  }
  const float* wp = w.data_ptr<float>();
  at::parallel_for(0, rows, Grain(cols, static_cast<int64_t>(sizeof(float))), [&](int64_t r0, int64_t r1) {
    kernels::GemmSmall(wp + r0 * cols, bp ? bp + r0 : nullptr, r1 - r0, cols, x, cols, batch, y + r0, rows);
  });
}

}  // namespace inferd::llm
