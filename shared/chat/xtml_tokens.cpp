#include "shared/chat/xtml_tokens.h"

namespace k3::chat {

StatusOr<ControlIds> ControlIds::find(const Tokenizer& tokenizer) {
  ControlIds ids;
  for (auto [content, target] :
       {std::pair{kOpenToken, &ids.open}, std::pair{kCloseToken, &ids.close},
        std::pair{kSepToken, &ids.sep}, std::pair{kEndOfMsgToken, &ids.end_of_msg}}) {
    std::optional<TokenId> id = tokenizer.special_id(content);
    if (!id.has_value()) {
      return absl::NotFoundError(cat("the tokenizer has no special token ", content,
                                     " (tokenizer_config.json must name the XTML control tokens)"));
    }
    *target = *id;
  }
  return ids;
}

StatusOr<std::vector<TokenId>> encode_segments(const Tokenizer& tokenizer,
                                               const Segments& segments) {
  std::vector<TokenId> ids;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    if (s.markup) {
      std::optional<TokenId> id = tokenizer.special_id(s.text);
      if (!id.has_value()) {
        return absl::InvalidArgumentError(
            cat("segment ", i, ": markup '", s.text, "' is not a special token of the tokenizer"));
      }
      ids.push_back(*id);
    } else {
      Status status = tokenizer.encode_append(s.text, &ids);
      if (!status.ok())
        return absl::InvalidArgumentError(cat("segment ", i, ": ", status.message()));
    }
  }
  return ids;
}

StatusOr<OutputTokenParser> OutputTokenParser::create(const Tokenizer& tokenizer, bool thinking) {
  K3_ASSIGN_OR_RETURN(ControlIds ids, ControlIds::find(tokenizer));
  return OutputTokenParser(tokenizer, ids, thinking);
}

void OutputTokenParser::flush_text(ChatDelta* delta) {
  std::string text;
  decoder_.finish(&text);
  parser_.feed_text(text, delta);
}

Status OutputTokenParser::feed(TokenId id, ChatDelta* delta) {
  if (!tokenizer_.contains(id)) {
    return absl::InvalidArgumentError(
        cat("token id ", id, " is outside the vocabulary of ", tokenizer_.vocab_size()));
  }
  if (tokenizer_.is_special(id)) {
    flush_text(delta);
    Control control = Control::kOther;
    if (id == ids_.open) {
      control = Control::kOpen;
    } else if (id == ids_.close) {
      control = Control::kClose;
    } else if (id == ids_.sep) {
      control = Control::kSep;
    } else if (id == ids_.end_of_msg) {
      control = Control::kEndOfMsg;
    }
    parser_.feed_control(control, delta);
    return absl::OkStatus();
  }
  std::string text;
  K3_RETURN_IF_ERROR(decoder_.feed(id, &text));
  parser_.feed_text(text, delta);
  return absl::OkStatus();
}

void OutputTokenParser::finish(ChatDelta* delta) {
  flush_text(delta);
  parser_.finish(delta);
}

StatusOr<ParsedMessage> parse_output_ids(const Tokenizer& tokenizer, std::span<const TokenId> ids,
                                         bool thinking) {
  K3_ASSIGN_OR_RETURN(OutputTokenParser parser, OutputTokenParser::create(tokenizer, thinking));
  for (TokenId id : ids) K3_RETURN_IF_ERROR(parser.feed(id, nullptr));
  parser.finish(nullptr);
  return parser.message();
}

}  // namespace k3::chat
