// libFuzzer target: config.json parsing and validation on arbitrary text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shared/checkpoint/model_config.h"
#include "shared/checkpoint/model_tensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = k3::checkpoint::parse_model_config(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (c.ok()) {
    // An accepted config must describe a model whose tensor list can be built.
    if (c->layer_is_kda.size() != static_cast<size_t>(c->num_hidden_layers)) __builtin_trap();
    if (c->num_hidden_layers <= 8 && c->num_experts <= 64) (void)k3::checkpoint::dense_tensors(*c);
  }
  return 0;
}
