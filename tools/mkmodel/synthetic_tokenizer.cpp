#include "tools/mkmodel/synthetic_tokenizer.h"

#include <nlohmann/json.hpp>

#include "tools/mkmodel/bpe_train.h"
#include "tools/mkmodel/corpus.h"

namespace k3::tools {

StatusOr<SyntheticTokenizer> make_synthetic_tokenizer(int64_t target_ranks) {
  if (target_ranks < 256) return absl::InvalidArgumentError("vocab ranks must be >= 256");
  K3_ASSIGN_OR_RETURN(
      std::vector<std::string> ranks,
      train_bpe_ranks_from_text(embedded_corpus(), static_cast<size_t>(target_ranks)));
  SyntheticTokenizer t;
  t.num_ranks = static_cast<int64_t>(ranks.size());
  t.vocab_size = t.num_ranks + kReservedSpecialIds;
  t.tiktoken_model = tiktoken_model_text(ranks);
  // Kimi's layout of the special ids right after the ranks (kNamedSpecials):
  // [BOS], [EOS], <|end_of_msg|> (the turn end, the config's eos), then the
  // XTML markup, marked special: false as in the published file.
  const int64_t n = t.num_ranks;
  t.bos_id = n;
  t.eos_id = n + 1;
  t.end_of_msg_id = n + 2;
  t.open_id = n + 3;
  t.close_id = n + 4;
  t.sep_id = n + 5;
  t.media_pad_id = n + 21;
  t.pad_id = n + 255;
  nlohmann::ordered_json added = nlohmann::ordered_json::object();
  for (const NamedSpecial& s : kNamedSpecials)
    added[std::to_string(n + s.offset)] = {{"content", s.content}, {"lstrip", false},
                                           {"normalized", false},  {"rstrip", false},
                                           {"single_word", false}, {"special", s.special}};
  nlohmann::ordered_json config = {{"added_tokens_decoder", added},
                                   {"bos_token", "[BOS]"},
                                   {"eos_token", "[EOS]"},
                                   {"model_max_length", 1048576},
                                   {"tokenizer_class", "TikTokenTokenizer"}};
  t.tokenizer_config_json = config.dump(2) + "\n";
  return t;
}

}  // namespace k3::tools
