// The grammars the server enforces, over K3's XTML output (CHAT_STRINGS.md):
//
//   [think text <|close|>think<|sep|><|open|>response<|sep|>]   (thinking on)
//   BODY <|close|>response<|sep|>
//   [<|open|>tools<|sep|> CALL... <|close|>tools<|sep|>]
//   <|close|>message<|sep|><|end_of_msg|>
//
// BODY is compact JSON for response_format (json_object: any object;
// json_schema: the schema) or free text. A CALL is
//   <|open|>call tool="NAME" index="N"<|sep|> ARGUMENT... <|close|>call<|sep|>
// with one typed argument element per property of the tool's `parameters`
// (declaration order; required ones always, optional ones optionally):
//   <|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|>
// where T is string (VALUE: the raw text, under the property's length and
// pattern limits), number, boolean, null, object or array (VALUE: compact
// JSON under the property's schema). Parameters that are not an object with
// properties take one `json` element (type="object") holding the JSON.
// tool_choice: auto: tools optional; required: at least one call; a named
// function: calls of that one only; none: no tools element.
// parallel_tool_calls false: at most one call.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/grammar/grammar.h"
#include "shared/status.h"

namespace k3::grammar {

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();
};

struct OutputSpec {
  enum class Body { kText, kJsonObject, kJsonSchema } body = Body::kText;
  nlohmann::ordered_json schema;  // kJsonSchema
  bool thinking = false;          // the generation prompt opened the think channel
  enum class ToolChoice { kAuto, kNone, kRequired, kNamed } tool_choice = ToolChoice::kNone;
  std::vector<ToolSpec> tools;
  std::string named;  // kNamed
  bool parallel_tool_calls = true;
};

// A JSON document then end of message (what `k3ctl grammar-check` checks):
// `schema` null for json_object (any object). A schema that admits no value
// (`false`) compiles to a grammar that accepts nothing; output_grammar(), which
// the model is constrained by, refuses such a schema.
StatusOr<std::shared_ptr<const Grammar>> json_document_grammar(
    const nlohmann::ordered_json* schema);

// The whole assistant output after the generation prompt.
StatusOr<std::shared_ptr<const Grammar>> output_grammar(const OutputSpec& spec);

// The markup that closes the think channel and opens the response:
// <|close|>think<|sep|><|open|>response<|sep|>.
std::string think_close_markup();
// The think channel alone: think text, then think_close_markup() (what a
// think budget with nothing else to enforce constrains; the reply after it
// is free).
std::shared_ptr<const Grammar> think_channel_grammar();

// Symbols of a markup string: the four control tokens' texts become 256..259.
std::vector<int> markup_symbols(std::string_view text);

}  // namespace k3::grammar
