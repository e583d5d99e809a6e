// XTML at the token level: a rendered prompt encoded segment by segment, and
// the model's output ids parsed back (OutputParser over a StreamDecoder).
#pragma once

#include <span>
#include <vector>

#include "shared/chat/segment.h"
#include "shared/chat/xtml_parser.h"
#include "shared/status.h"
#include "shared/tokenizer/tokenizer.h"

namespace k3::chat {

using tokenizer::TokenId;
using tokenizer::Tokenizer;

// The ids of the four control tokens; NotFound when the tokenizer lacks one
// (the checkpoint's tokenizer_config.json must name them).
struct ControlIds {
  TokenId open = -1, close = -1, sep = -1, end_of_msg = -1;
  static StatusOr<ControlIds> find(const Tokenizer& tokenizer);
};

// Each text segment encoded on its own as ordinary text; each markup segment
// must be exactly one special token of the tokenizer (else InvalidArgument).
StatusOr<std::vector<TokenId>> encode_segments(const Tokenizer& tokenizer,
                                               const Segments& segments);

// Output ids -> deltas. Special ids never reach the text; a UTF-8 character
// split across tokens comes out whole. Not thread-safe: one per generation.
class OutputTokenParser {
 public:
  static StatusOr<OutputTokenParser> create(const Tokenizer& tokenizer, bool thinking);

  // Appends to *delta (may be null) what `id` completes; refuses an id
  // outside the vocabulary.
  Status feed(TokenId id, ChatDelta* delta);
  // End of stream (cut off or after <|end_of_msg|>).
  void finish(ChatDelta* delta);

  const ParsedMessage& message() const { return parser_.message(); }
  bool done() const { return parser_.done(); }

 private:
  OutputTokenParser(const Tokenizer& tokenizer, ControlIds ids, bool thinking)
      : tokenizer_(tokenizer),
        ids_(ids),
        decoder_(tokenizer, tokenizer::StreamDecoder::Specials::kSkip),
        parser_(thinking) {}
  void flush_text(ChatDelta* delta);

  Tokenizer tokenizer_;
  ControlIds ids_;
  tokenizer::StreamDecoder decoder_;
  OutputParser parser_;
};

// Parses a whole output.
StatusOr<ParsedMessage> parse_output_ids(const Tokenizer& tokenizer, std::span<const TokenId> ids,
                                         bool thinking);

}  // namespace k3::chat
