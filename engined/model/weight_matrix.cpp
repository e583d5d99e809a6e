#include "engined/model/weight_matrix.h"

namespace k3::engined {

WeightMatrix WeightMatrix::prepared(int bits, int64_t rows, int64_t cols, std::vector<uint8_t> data,
                                    std::vector<float> scales) {
  WeightMatrix m(kernels::DenseMatrix::adopt(bits, rows, cols, std::move(data), std::move(scales)));
  m.prepared_ = true;
  return m;
}

WeightMatrix WeightMatrix::view(int bits, int64_t rows, int64_t cols, const uint8_t* data,
                                const float* scales, std::shared_ptr<const void> keep) {
  WeightMatrix m(kernels::DenseMatrix::view(bits, rows, cols, data, scales));
  m.prepared_ = true;
  m.keep_ = std::move(keep);
  return m;
}

}  // namespace k3::engined
