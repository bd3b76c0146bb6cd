#include "backends/aten/conv_geometry.h"

#include <string>

namespace inferd::aten {

bool PackableConv(const at::Tensor& weight, const at::Tensor& bias, const ConvGeometry& g) {
  if (weight.scalar_type() != at::kFloat || weight.dim() != 4 || g.groups < 1) return false;
  for (int64_t d : weight.sizes())
    if (d < 1) return false;
  for (int d = 0; d < 2; ++d)
    if (g.strides[d] < 1 || g.dilations[d] < 1 || g.padding[d] < 0) return false;
  if (weight.size(0) % g.groups != 0) return false;
  return !bias.defined() || (bias.scalar_type() == at::kFloat && bias.numel() == weight.size(0));
}

Result<std::vector<int64_t>> ConvOutputShape(at::ScalarType dtype, at::IntArrayRef in, at::IntArrayRef weight,
                                             const ConvGeometry& g) {
  const int64_t in_channels = weight[1] * g.groups;
  if (dtype != at::kFloat || in.size() != 4 || in[1] != in_channels) {
    return Status::InvalidArgument("Conv takes a float [N, " + std::to_string(in_channels) +
                                   ", H, W] input here, got " +
                                   (dtype != at::kFloat ? std::string(c10::toString(dtype)) + " " : "") + c10::str(in));
  }
  if (c10::multiply_integers(in) == 0) return Status::InvalidArgument("Conv of an empty input");
  std::vector<int64_t> out = {in[0], weight[0], 0, 0};
  for (int d = 0; d < 2; ++d) {
    const int64_t span = g.dilations[d] * (weight[2 + d] - 1) + 1, padded = in[2 + d] + 2 * g.padding[d];
    if (padded < span) return Status::InvalidArgument("Conv input " + c10::str(in) + " is smaller than its kernel");
    out[2 + d] = (padded - span) / g.strides[d] + 1;
  }
  return out;
}

}  // namespace inferd::aten
