// K3's tokenizer: tiktoken's encoding (split with the pattern, a piece that is
// a rank becomes that token, else rank-BPE) over the checkpoint's ranks, plus
// the special tokens above the ranks, matched only in text the caller marks
// as markup. Under Kimi's pattern, long text is first cut into chunks as Kimi's
// shipped encoder cuts it (chunking.h), each chunk encoded on its own.
//
//   auto tok = Tokenizer::load(model_dir);          // StatusOr<Tokenizer>
//   auto ids = tok->encode("Hello");                 // ordinary text
//   StreamDecoder dec(*tok);                         // ids -> text, streaming
//   std::string text; dec.feed(id, &text); ... dec.finish(&text);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"
#include "shared/tokenizer/split_pattern.h"
#include "shared/tokenizer/tokenizer_files.h"
#include "shared/tokenizer/vocab.h"

namespace k3::tokenizer {

struct TokenizerOptions {
  // kKimi: Kimi's tokenizer, its chunking of long text included (chunking.h).
  // kO200k: OpenAI's o200k_base as tiktoken's encode runs it (text whole).
  SplitPattern pattern = SplitPattern::kKimi;
  std::optional<int64_t> vocab_size;  // overrides config.json's
  // Remember the tokens of recent pieces that needed BPE (bounded memory).
  bool piece_cache = true;
};

// Immutable after load; copies share the tables. Thread-safe: encode and
// decode may run on one Tokenizer from many threads (the piece cache locks
// internally).
class Tokenizer {
 public:
  // From a model directory, a tiktoken.model file or a tokenizer.json file
  // (see load_tokenizer_spec).
  static StatusOr<Tokenizer> load(const std::string& path, const TokenizerOptions& options = {});
  // From parsed files (vocab_size must be settled).
  static StatusOr<Tokenizer> create(const TokenizerSpec& spec,
                                    const TokenizerOptions& options = {});

  // Ordinary text: special tokens are not recognised (their characters are
  // text). Refuses text that is not valid UTF-8, naming the byte offset.
  // Under kKimi, linear in the text's length: no piece spans more than a chunk
  // (kChunkMaxRun code points of a run), and BPE is O(n log n) in a piece's.
  StatusOr<std::vector<TokenId>> encode(std::string_view text) const;
  Status encode_append(std::string_view text, std::vector<TokenId>* out) const;

  // Markup: every special token's content (added or reserved) becomes its id
  // (the longest one where several start at the same place); the text between
  // is ordinary. Under kKimi the chunks are cut over the whole text first,
  // special tokens' characters counted, and specials are found within a chunk
  // (the reference's encode with allowed_special="all" on each chunk).
  StatusOr<std::vector<TokenId>> encode_markup(std::string_view text) const;
  Status encode_markup_append(std::string_view text, std::vector<TokenId>* out) const;

  // Token bytes concatenated (a special token contributes its content); may
  // end inside a UTF-8 character. Refuses ids outside [0, vocab_size).
  StatusOr<std::string> decode_bytes(std::span<const TokenId> ids) const;
  // decode_bytes as UTF-8, each ill-formed subpart replaced by U+FFFD.
  StatusOr<std::string> decode(std::span<const TokenId> ids) const;

  // The bytes of a rank, or the content of a special token; empty for an id
  // outside the vocabulary.
  std::string_view token_bytes(TokenId id) const;
  bool is_special(TokenId id) const { return id >= num_ranks() && id < vocab_size(); }
  bool contains(TokenId id) const { return id >= 0 && id < vocab_size(); }
  // The id of the special token with this content (added or reserved).
  std::optional<TokenId> special_id(std::string_view content) const;

  TokenId num_ranks() const;
  TokenId vocab_size() const;
  SplitPattern pattern() const;
  // The config's bos_token / eos_token ids, when it names them.
  std::optional<TokenId> bos_id() const;
  std::optional<TokenId> eos_id() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  // The chunks of valid text to encode apart: Kimi's chunks under kKimi, else
  // the text whole. The span lives until this thread's next call.
  std::span<const std::string_view> chunks_of(std::string_view text) const;
  // One chunk of valid text, ordinary or markup.
  void encode_ordinary_chunk(std::string_view chunk, std::vector<TokenId>* out) const;
  void encode_markup_chunk(std::string_view chunk, std::vector<TokenId>* out) const;
  std::shared_ptr<const Impl> impl_;
};

// Incremental detokenizer: turns ids into text as they are generated, holding
// back the bytes of a UTF-8 character that a later token completes. What it
// emits is always valid UTF-8 (bytes that can never form a character become
// U+FFFD). Not thread-safe: one per stream.
class StreamDecoder {
 public:
  enum class Specials {
    kShow,  // a special token appends its content
    kSkip,  // special tokens add nothing
  };
  explicit StreamDecoder(const Tokenizer& tokenizer, Specials specials = Specials::kShow)
      : tokenizer_(tokenizer), specials_(specials) {}

  // Appends to *text what `id` completes. Refuses an id outside the vocabulary.
  Status feed(TokenId id, std::string* text);
  // Appends the held-back bytes (as U+FFFD: they end the stream incomplete).
  void finish(std::string* text);
  // Bytes held back now (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  Specials specials_;
  std::string pending_;
};

}  // namespace k3::tokenizer
