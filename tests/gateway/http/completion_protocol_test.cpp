// gateway/http/completion_protocol.h: the /v1/completions request parsing
// (prompt forms, defaults, refusals naming the field) and the completion
// objects and chunks written back.
#include "gateway/http/completion_protocol.h"

#include <optional>
#include <string>

#include "gateway/core/json_text.h"
#include "gtest/gtest.h"
#include "tests/gateway/http/protocol_test_support.h"

namespace k3::gateway {
namespace {

using nlohmann::json;

// ---- completion requests ----

TEST(ParseCompletion, TextPrompt) {
  StatusOr<CompletionCall> r = parse_completion_request(
      R"({"model": "k3", "prompt": "Once", "max_tokens": 5, "echo": true, "stop": "x",
          "temperature": 0.7, "top_p": 0.9, "seed": 3, "n": 1, "stream": true,
          "stream_options": {"include_usage": true}, "suffix": "", "best_of": 1,
          "logprobs": 0, "user": "u"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "k3");
  EXPECT_EQ(r->prompt, "Once");
  EXPECT_FALSE(r->prompt_is_ids);
  EXPECT_EQ(r->max_tokens, 5);
  EXPECT_TRUE(r->echo);
  EXPECT_EQ(r->stop, (std::vector<std::string>{"x"}));
  EXPECT_EQ(r->sampling.temperature, 0.7f);
  EXPECT_EQ(r->sampling.seed, 3u);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

TEST(ParseCompletion, Defaults) {
  StatusOr<CompletionCall> r = parse_completion_request(R"({"prompt": ""})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt, "");
  EXPECT_EQ(r->max_tokens, 16);
  EXPECT_FALSE(r->echo);
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->sampling.temperature.has_value());  // the model's default
}

TEST(ParseCompletion, PromptForms) {
  StatusOr<CompletionCall> ids = parse_completion_request(R"({"prompt": [1, 2, 2147483647]})");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_TRUE(ids->prompt_is_ids);
  EXPECT_EQ(ids->prompt_ids, (std::vector<int32_t>{1, 2, 2147483647}));

  StatusOr<CompletionCall> one_text = parse_completion_request(R"({"prompt": ["hello"]})");
  ASSERT_TRUE(one_text.ok()) << one_text.status();
  EXPECT_FALSE(one_text->prompt_is_ids);
  EXPECT_EQ(one_text->prompt, "hello");

  StatusOr<CompletionCall> one_ids = parse_completion_request(R"({"prompt": [[5, 6]]})");
  ASSERT_TRUE(one_ids.ok()) << one_ids.status();
  EXPECT_TRUE(one_ids->prompt_is_ids);
  EXPECT_EQ(one_ids->prompt_ids, (std::vector<int32_t>{5, 6}));

  // A single token id is an array of ints, not a batch.
  StatusOr<CompletionCall> one_id = parse_completion_request(R"({"prompt": [7]})");
  ASSERT_TRUE(one_id.ok()) << one_id.status();
  EXPECT_EQ(one_id->prompt_ids, (std::vector<int32_t>{7}));
}

TEST(ParseCompletion, Errors) {
  const std::string forms = "'prompt' must be a string, an array of token ids";
  EXPECT_EQ(completion_error("{}"), "'prompt' is required");
  EXPECT_EQ(completion_error(R"({"prompt": null})"), "'prompt' is required");
  EXPECT_CONTAINS(completion_error(R"({"prompt": 5})"), forms);
  EXPECT_CONTAINS(completion_error(R"({"prompt": {}})"), forms);
  EXPECT_CONTAINS(completion_error(R"({"prompt": ["a", "b"]})"), forms);
  EXPECT_CONTAINS(completion_error(R"({"prompt": [[1], [2]]})"), forms);
  EXPECT_CONTAINS(completion_error(R"({"prompt": [1, "a"]})"), forms);
  EXPECT_CONTAINS(completion_error(R"({"prompt": [1.5]})"), forms);
  EXPECT_CONTAINS(completion_error(R"({"prompt": [["a"]]})"), forms);
  EXPECT_EQ(completion_error(R"({"prompt": []})"), "'prompt' must not be an empty array");
  EXPECT_EQ(completion_error(R"({"prompt": [[]]})"), "'prompt' must not be an empty array");
  EXPECT_EQ(completion_error(R"({"prompt": [-1]})"),
            "'prompt' token ids must be between 0 and 2147483647");
  EXPECT_EQ(completion_error(R"({"prompt": [2147483648]})"),
            "'prompt' token ids must be between 0 and 2147483647");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "max_tokens": 0})"),
            "'max_tokens' must be at least 1");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "echo": 1})"), "'echo' must be a boolean");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "suffix": "end"})"), "'suffix' is not supported");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "suffix": 1})"), "'suffix' must be a string");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "best_of": 2})"), "'best_of' must be 1");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "logprobs": 21})"),
            "'logprobs' must be between 0 and 20");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "logprobs": true})"),
            "'logprobs' must be an integer");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "n": 9})"), "'n' must be between 1 and 8");
  auto three = parse_completion_request(R"({"prompt": "a", "n": 3})");
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->n, 3);
  EXPECT_EQ(completion_error(R"({"prompt": "a", "temperature": 3})"),
            "'temperature' must be between 0 and 2");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "stop": [1]})"),
            "'stop' must be a string or an array of strings");
  EXPECT_CONTAINS(completion_error("nope"), "invalid JSON");
}

// ---- responses ----

TEST(Responses, Completion) {
  Finish f;
  f.usage.prompt_tokens = 2;
  f.usage.completion_tokens = 1;
  EXPECT_EQ(completion_json("cmpl-1", 9, "k3", "abc", f), json::parse(R"({
      "id": "cmpl-1", "object": "text_completion", "created": 9, "model": "k3",
      "choices": [{"text": "abc", "index": 0, "logprobs": null, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 0}, "k3_restored_tokens": 0}})"));
  EXPECT_EQ(completion_chunk_json("cmpl-1", 9, "k3", "a", std::nullopt), json::parse(R"({
      "id": "cmpl-1", "object": "text_completion", "created": 9, "model": "k3",
      "choices": [{"text": "a", "index": 0, "logprobs": null, "finish_reason": null}]})"));
  EXPECT_EQ(completion_chunk_json("cmpl-1", 9, "k3", "",
                                  FinishReason::kLength)["choices"][0]["finish_reason"],
            "length");
}

TEST(Responses, CompletionLogprobsInOpenAisShapes) {
  const OutputMessage m = message_with_logprobs();
  // (Through the body's text: invalid UTF-8 becomes U+FFFD there.)
  const json done =
      json::parse(dump_body(completion_json("c", 1, "k3", "hi", Finish{}, m.logprobs)));
  EXPECT_EQ(done["choices"][0]["logprobs"], json::parse(R"({"tokens": ["hi"],
      "token_logprobs": [-0.5], "top_logprobs": [{"hi": -0.5, "\ufffd": -2.0}],
      "text_offset": [3]})"))
      << done.dump();
}

}  // namespace
}  // namespace k3::gateway
