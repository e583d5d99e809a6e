// The OpenAI JSON the gateway writes: chat and completion objects and
// chunks, logprobs, models, errors with their HTTP status, and SSE framing
// (the parsers' tests are in openai_json_test.cpp).
#include <string>

#include "gateway/http/openai_json.h"
#include "gtest/gtest.h"
#include "shared/chat/segment.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

TEST(Responses, ChatCompletion) {
  OutputMessage m;
  m.content = "Hello";
  m.reasoning_content = "think";
  Finish f;
  f.reason = FinishReason::kLength;
  f.usage = {.prompt_tokens = 10, .completion_tokens = 5, .cached_tokens = 4, .restored_tokens = 2};
  const json j = chat_completion_json("chatcmpl-1", 1700000000, "k3", m, f);
  EXPECT_EQ(j, json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "k3",
    "choices": [{"index": 0, "logprobs": null, "finish_reason": "length",
                 "message": {"role": "assistant", "content": "Hello",
                             "reasoning_content": "think"}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
              "prompt_tokens_details": {"cached_tokens": 4}, "k3_restored_tokens": 2}})"));
}

TEST(Responses, ChatCompletionWithToolCalls) {
  OutputMessage m;
  m.tool_calls.push_back({"call_a", "get_weather", R"({"city":"Paris"})"});
  m.tool_calls.push_back({"call_b", "noop", "{}"});
  Finish f;
  f.reason = FinishReason::kToolCalls;
  const json j = chat_completion_json("c", 1, "k3", m, f);
  const json& message = j["choices"][0]["message"];
  EXPECT_EQ(message, json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_a", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
      {"id": "call_b", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]})"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
}

TEST(Responses, ChatCompletionEmptyContentIsString) {
  const json j = chat_completion_json("c", 1, "k3", OutputMessage{}, Finish{});
  EXPECT_EQ(j["choices"][0]["message"], json::parse(R"({"role":"assistant","content":""})"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST(Responses, ChatChunks) {
  OutputDelta first;
  json j = chat_chunk_json("c", 5, "k3", first, /*first=*/true);
  EXPECT_EQ(j, json::parse(R"({"id": "c", "object": "chat.completion.chunk", "created": 5,
      "model": "k3", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
      "logprobs": null, "finish_reason": null}]})"));

  OutputDelta reasoning;
  reasoning.reasoning_content = "hm";
  j = chat_chunk_json("c", 5, "k3", reasoning, false);
  EXPECT_EQ(j["choices"][0]["delta"], json::parse(R"({"reasoning_content": "hm"})"));

  OutputDelta text;
  text.content = "Hi";
  j = chat_chunk_json("c", 5, "k3", text, true);
  EXPECT_EQ(j["choices"][0]["delta"], json::parse(R"({"role": "assistant", "content": "Hi"})"));

  OutputDelta call_open;
  call_open.tool_calls.push_back({.index = 0, .id = "call_x", .name = "f", .arguments = ""});
  j = chat_chunk_json("c", 5, "k3", call_open, false);
  EXPECT_EQ(j["choices"][0]["delta"], json::parse(R"({"tool_calls": [{"index": 0, "id": "call_x",
      "type": "function", "function": {"name": "f", "arguments": ""}}]})"));

  OutputDelta call_more;
  call_more.tool_calls.push_back({.index = 1, .id = "", .name = "", .arguments = "{\"a\":"});
  j = chat_chunk_json("c", 5, "k3", call_more, false);
  EXPECT_EQ(j["choices"][0]["delta"],
            json::parse(R"({"tool_calls": [{"index": 1, "function": {"arguments": "{\"a\":"}}]})"));
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
}

TEST(Responses, FinishAndUsageChunks) {
  EXPECT_EQ(chat_finish_chunk_json("c", 5, "k3", FinishReason::kStop),
            json::parse(R"({"id": "c", "object": "chat.completion.chunk", "created": 5,
                "model": "k3", "choices": [{"index": 0, "delta": {}, "logprobs": null,
                "finish_reason": "stop"}]})"));
  const Usage u{.prompt_tokens = 3, .completion_tokens = 4};
  EXPECT_EQ(usage_chunk_json("c", 5, "k3", u, true),
            json::parse(R"({"id": "c", "object": "chat.completion.chunk", "created": 5,
                "model": "k3", "choices": [], "usage": {"prompt_tokens": 3,
                "completion_tokens": 4, "total_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 0}, "k3_restored_tokens": 0}})"));
  EXPECT_EQ(usage_chunk_json("c", 5, "k3", u, false)["object"], "text_completion");
}

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

TEST(Responses, Models) {
  EXPECT_EQ(models_json({{"k3", 100, "k3serve"}}), json::parse(R"({"object": "list", "data": [
      {"id": "k3", "object": "model", "created": 100, "owned_by": "k3serve"}]})"));
  EXPECT_EQ(models_json({}), json::parse(R"({"object": "list", "data": []})"));
}

TEST(Responses, FinishReasonNames) {
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::kToolCalls), "tool_calls");
}

// ---- errors ----

TEST(Errors, HttpStatus) {
  EXPECT_EQ(http_status(absl::OkStatus()), 200);
  EXPECT_EQ(http_status(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(http_status(absl::OutOfRangeError("x")), 400);
  EXPECT_EQ(http_status(absl::FailedPreconditionError("x")), 400);
  EXPECT_EQ(http_status(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(http_status(absl::PermissionDeniedError("x")), 403);
  EXPECT_EQ(http_status(absl::NotFoundError("x")), 404);
  EXPECT_EQ(http_status(absl::AbortedError("x")), 409);
  EXPECT_EQ(http_status(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(http_status(absl::CancelledError("x")), 499);
  EXPECT_EQ(http_status(absl::UnimplementedError("x")), 501);
  EXPECT_EQ(http_status(absl::UnavailableError("x")), 503);
  EXPECT_EQ(http_status(absl::DeadlineExceededError("x")), 504);
  EXPECT_EQ(http_status(absl::InternalError("x")), 500);
  EXPECT_EQ(http_status(absl::UnknownError("x")), 500);
  EXPECT_EQ(http_status(absl::DataLossError("x")), 500);
  EXPECT_EQ(http_status(absl::AlreadyExistsError("x")), 500);
}

TEST(Errors, PayloadTooLarge) {
  const Status s = payload_too_large("body over 1 MiB");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);  // what gRPC sees
  EXPECT_EQ(http_status(s), 413);
  EXPECT_EQ(error_json(s), json::parse(R"({"error": {"message": "body over 1 MiB",
      "type": "invalid_request_error", "param": null, "code": "payload_too_large"}})"));
  // A payload that is not an HTTP error code is ignored.
  Status odd = absl::NotFoundError("x");
  odd.SetPayload("k3.http", absl::Cord("abc"));
  EXPECT_EQ(http_status(odd), 404);
  odd.SetPayload("k3.http", absl::Cord("200"));
  EXPECT_EQ(http_status(odd), 404);
}

TEST(Errors, ErrorJson) {
  EXPECT_EQ(error_json(absl::InvalidArgumentError("'n' must be 1")),
            json::parse(R"({"error": {"message": "'n' must be 1",
                "type": "invalid_request_error", "param": null, "code": "invalid_argument"}})"));
  // An error about a field names it in `param` (OpenAI's shape).
  auto n_error = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}], "n": 9})");
  ASSERT_FALSE(n_error.ok());
  EXPECT_EQ(error_json(n_error.status())["error"]["param"], "n");
  auto code = [](const Status& s) { return error_json(s)["error"]["code"].get<std::string>(); };
  auto type = [](const Status& s) { return error_json(s)["error"]["type"].get<std::string>(); };
  EXPECT_EQ(code(absl::NotFoundError("m")), "model_not_found");
  EXPECT_EQ(code(absl::OutOfRangeError("m")), "context_length_exceeded");
  EXPECT_EQ(code(absl::ResourceExhaustedError("m")), "rate_limit_exceeded");
  EXPECT_EQ(code(absl::UnauthenticatedError("m")), "invalid_api_key");
  EXPECT_EQ(type(absl::UnauthenticatedError("m")), "invalid_request_error");
  EXPECT_EQ(type(absl::CancelledError("m")), "invalid_request_error");
  EXPECT_EQ(type(absl::UnavailableError("m")), "server_error");
  EXPECT_EQ(type(absl::InternalError("m")), "server_error");
  EXPECT_EQ(code(absl::InternalError("m")), "internal_error");
}

// ---- framing ----

TEST(Framing, Sse) {
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // A newline inside a value is escaped, so an event is always one line.
  const std::string e = sse_event(json{{"t", "x\ny"}});
  EXPECT_EQ(e, "data: {\"t\":\"x\\ny\"}\n\n");
  EXPECT_EQ(e.find('\n'), e.size() - 2);
}

TEST(Framing, InvalidUtf8IsReplacedNotThrown) {
  OutputDelta d;
  d.content =
      "a\xff"
      "b";
  const std::string e = sse_event(chat_chunk_json("c", 1, "k3", d, false));
  EXPECT_NE(e.find("a\xef\xbf\xbd"
                   "b"),
            std::string::npos)
      << e;
  EXPECT_EQ(dump_body(json("\xc3")), "\"\xef\xbf\xbd\"");
}

}  // namespace
}  // namespace k3::gateway
