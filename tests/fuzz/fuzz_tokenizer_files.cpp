// libFuzzer target: the tokenizer files of a checkpoint (untrusted input).
// The first byte picks the parser: tiktoken.model text, tokenizer_config.json
// over a small fixed vocabulary, or a Hugging Face tokenizer.json; whatever is
// accepted must hold together (ranks 0..n-1, added ids past the ranks).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shared/tokenizer/tokenizer_files.h"

using namespace k3::tokenizer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto ranks = parse_tiktoken_model(text);
      if (ranks.ok())
        for (const std::string& r : *ranks)
          if (r.empty()) __builtin_trap();  // a rank is at least one byte
      break;
    }
    case 1: {
      TokenizerSpec spec;
      for (int i = 0; i < 256; ++i) spec.ranks.push_back(std::string(1, static_cast<char>(i)));
      if (parse_tokenizer_config(text, &spec).ok()) {
        for (const auto& [id, tok] : spec.added)
          if (id < static_cast<TokenId>(spec.ranks.size())) __builtin_trap();
        (void)settle_vocab_size(std::nullopt, true, &spec);
      }
      break;
    }
    default: {
      auto spec = parse_hf_tokenizer_json(text);
      if (spec.ok())
        for (const auto& [id, tok] : spec->added)
          if (id < static_cast<TokenId>(spec->ranks.size())) __builtin_trap();
      (void)vocab_size_from_config_json(text);
    }
  }
  return 0;
}
