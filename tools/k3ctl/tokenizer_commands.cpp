// k3ctl tokenize / detokenize / chat-render / chat-parse, and
// `k3ctl bench tokenizer` (contracts: ARCHITECTURE.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/chat/xtml_parser.h"
#include "shared/chat/xtml_render.h"
#include "shared/chat/xtml_tokens.h"
#include "shared/tokenizer/chunking.h"
#include "shared/tokenizer/tokenizer.h"
#include "shared/tokenizer/utf8.h"
#include "tools/k3ctl/commands.h"
#include "tools/mkmodel/corpus.h"

namespace k3::tools {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using tokenizer::SplitPattern;
using tokenizer::TokenId;
using tokenizer::Tokenizer;

SplitPattern pattern_of(const std::string& name) {
  return name == "o200k" ? SplitPattern::kO200k : SplitPattern::kKimi;
}

void print_line(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

void print_error_line(const std::string& what) {
  print_line(json({{"error", what}}).dump());
}

// One JSON string per line in, one JSON array of ids per line out. A line
// that cannot be encoded prints {"error": ...} and the exit code becomes 1.
void run_tokenize(const std::string& vocab, const std::string& pattern) {
  tokenizer::TokenizerOptions options;
  options.pattern = pattern_of(pattern);
  StatusOr<Tokenizer> tok = Tokenizer::load(vocab, options);
  if (!tok.ok()) return fail(msg(tok.status()));
  std::string line;
  std::vector<TokenId> ids;
  std::string out;
  bool failed = false;
  for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    const std::string where = cat("line ", line_no, ": ");
    if (std::optional<size_t> bad = tokenizer::first_invalid_utf8(line)) {
      print_error_line(cat(where, "not valid UTF-8 (ill-formed byte at offset ", *bad, ")"));
      failed = true;
      continue;
    }
    json value = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      // Parse again for the parser's message (lone surrogates, bad escapes...).
      std::string why = "not a JSON string";
      try {
        const json again = json::parse(line);
        if (again.is_string()) why = "not a JSON string";
      } catch (const json::exception& e) {
        why = cat("not a valid JSON string: ", e.what());
      }
      print_error_line(cat(where, why));
      failed = true;
      continue;
    }
    if (!value.is_string()) {
      print_error_line(cat(where, "expected a JSON string"));
      failed = true;
      continue;
    }
    ids.clear();
    if (Status s = tok->encode_append(value.get_ref<const std::string&>(), &ids); !s.ok()) {
      print_error_line(cat(where, s.message()));
      failed = true;
      continue;
    }
    out.clear();
    out += '[';
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(ids[i]);
    }
    out += ']';
    print_line(out);
  }
  if (failed) fail("some lines could not be tokenized (see the error objects on stdout)");
}

// One JSON array of ids per line in, one JSON string per line out (bytes that
// are not UTF-8 become U+FFFD).
void run_detokenize(const std::string& vocab) {
  StatusOr<Tokenizer> tok = Tokenizer::load(vocab);
  if (!tok.ok()) return fail(msg(tok.status()));
  std::string line;
  bool failed = false;
  for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    const std::string where = cat("line ", line_no, ": ");
    json value = json::parse(line, nullptr, /*allow_exceptions=*/false);
    std::vector<TokenId> ids;
    bool ok = value.is_array();
    for (size_t i = 0; ok && i < value.size(); ++i) {
      ok = value[i].is_number_integer() && value[i].get<int64_t>() >= INT32_MIN &&
           value[i].get<int64_t>() <= INT32_MAX;
      if (ok) ids.push_back(static_cast<TokenId>(value[i].get<int64_t>()));
    }
    if (!ok) {
      print_error_line(cat(where, "expected a JSON array of token ids"));
      failed = true;
      continue;
    }
    StatusOr<std::string> text = tok->decode(ids);
    if (!text.ok()) {
      print_error_line(cat(where, text.status().message()));
      failed = true;
      continue;
    }
    print_line(json(*text).dump());
  }
  if (failed) fail("some lines could not be detokenized (see the error objects on stdout)");
}

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

struct ChatRenderFlags {
  std::string model;
  bool ids = false;
  bool developer_as_system = false;
};

// One JSON request on stdin; the segments as [[text, is_markup], ...].
void run_chat_render(const ChatRenderFlags& flags) {
  StatusOr<Tokenizer> tok = Tokenizer::load(flags.model);
  if (!tok.ok()) return fail(msg(tok.status()));
  if (StatusOr<chat::ControlIds> ids = chat::ControlIds::find(*tok); !ids.ok()) {
    return fail(msg(ids.status()));
  }
  const std::string input = read_stdin();
  ordered_json request = ordered_json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) {
    print_error_line("the request is not valid JSON");
    return fail("the request is not valid JSON");
  }
  chat::RenderOptions options;
  options.developer_as_system = flags.developer_as_system;
  StatusOr<chat::Segments> segments = chat::render_chat(request, options);
  if (!segments.ok()) {
    print_error_line(msg(segments.status()));
    return fail(msg(segments.status()));
  }
  if (flags.ids) {
    StatusOr<std::vector<TokenId>> ids = chat::encode_segments(*tok, *segments);
    if (!ids.ok()) {
      print_error_line(msg(ids.status()));
      return fail(msg(ids.status()));
    }
    print_line(json(*ids).dump());
    return;
  }
  ordered_json out = ordered_json::array();
  for (const chat::Segment& s : *segments) out.push_back(ordered_json::array({s.text, s.markup}));
  print_line(out.dump());
}

// A JSON array of output ids on stdin; the parsed assistant message.
void run_chat_parse(const std::string& model, bool no_thinking) {
  StatusOr<Tokenizer> tok = Tokenizer::load(model);
  if (!tok.ok()) return fail(msg(tok.status()));
  json value = json::parse(read_stdin(), nullptr, /*allow_exceptions=*/false);
  std::vector<TokenId> ids;
  bool ok = value.is_array();
  for (size_t i = 0; ok && i < value.size(); ++i) {
    ok = value[i].is_number_integer();
    if (ok) ids.push_back(static_cast<TokenId>(value[i].get<int64_t>()));
  }
  if (!ok) {
    print_error_line("expected a JSON array of token ids");
    return fail("expected a JSON array of token ids");
  }
  StatusOr<chat::ParsedMessage> m = chat::parse_output_ids(*tok, ids, !no_thinking);
  if (!m.ok()) {
    print_error_line(msg(m.status()));
    return fail(msg(m.status()));
  }
  ordered_json calls = ordered_json::array();
  for (const chat::ToolCall& c : m->tool_calls) {
    calls.push_back(
        {{"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  print_line(ordered_json({{"reasoning_content", m->reasoning_content},
                           {"content", m->content},
                           {"tool_calls", calls},
                           {"ended", m->ended}})
                 .dump());
}

// --- bench tokenizer ---

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(v >> s) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// The mixed corpus: mkmodel's embedded multilingual text (prose in a dozen
// scripts, emoji, numbers, code, URLs, CRLF) cut into paragraphs, cycled up
// to `bytes`.
std::vector<std::string> bench_corpus(size_t bytes) {
  const std::string_view text = tools::embedded_corpus();
  std::vector<std::string> paragraphs;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    end = end == std::string_view::npos ? text.size() : end + 2;
    paragraphs.emplace_back(text.substr(pos, end - pos));
    pos = end;
  }
  std::vector<std::string> docs;
  size_t total = 0;
  for (size_t i = 0; total < bytes; ++i) {
    docs.push_back(paragraphs[i % paragraphs.size()]);
    total += docs.back().size();
  }
  return docs;
}

// splitmix64: the long inputs are the same on every run and machine.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }

 private:
  uint64_t state_;
};

// Text with long runs of whitespace or non-whitespace, where Kimi's encoder
// cuts chunks (shared/tokenizer/chunking.h): what the chunking costs, and that
// encoding stays fast where a quadratic BPE or split would not.
struct LongText {
  std::string name;
  std::string text;
};

std::vector<LongText> long_texts() {
  std::vector<LongText> out;
  SplitMix rng(24);
  {
    std::string bytes(750'000, '\0');
    for (char& c : bytes) c = static_cast<char>(rng.next());
    out.push_back({"base64_1mb", base64_encode(bytes)});
  }
  {
    // Minified script: no whitespace but for a rare space, so most runs of
    // non-whitespace are longer than a chunk's.
    // The script's tokens, space-separated here (none holds a space).
    static constexpr std::string_view kTokenList =
        "function return var this .prototype ( ) { } ; , = === !== && || ? : + - * < > [ ] !0 !1 "
        "null \"k3\" 'k3' => .length .push void(0)";
    std::vector<std::string_view> tokens;
    for (size_t at = 0; at < kTokenList.size();) {
      const size_t end = std::min(kTokenList.find(' ', at), kTokenList.size());
      tokens.push_back(kTokenList.substr(at, end - at));
      at = end + 1;
    }
    std::string code;
    while (code.size() < 1'000'000) {
      if (rng.below(3) == 0) {
        for (size_t n = 1 + rng.below(6); n > 0; --n)
          code += static_cast<char>('a' + rng.below(26));
        if (rng.below(4) == 0) code += std::to_string(rng.below(1000));
      } else {
        code += tokens[rng.below(tokens.size())];
      }
      if (rng.below(20000) == 0) code += ' ';
    }
    out.push_back({"minified_code_1mb", std::move(code)});
  }
  {
    // A CJK paragraph: Han sentences and full-width punctuation, no spaces.
    static constexpr std::string_view kSentences[] = {
        "人工智能正在改变世界，",           "大型语言模型可以写代码、翻译和回答问题。",
        "深度学习模型在二〇一七年提出。",   "我们今天去北京吧！",
        "這是一個繁體中文的句子；",         "価格は千五百円です。",
        "专家混合模型把计算分给很多专家，", "每个词元只激活其中几个。"};
    std::string para;
    while (para.size() < 1'000'000) para += kSentences[rng.below(std::size(kSentences))];
    out.push_back({"cjk_paragraph_1mb", std::move(para)});
  }
  out.push_back({"spaces_200k", std::string(200'000, ' ')});
  return out;
}

// FNV-1a over 32-bit ids, as the node script computes it.
uint32_t ids_checksum(uint32_t h, const std::vector<TokenId>& ids) {
  for (TokenId id : ids) h = (h ^ static_cast<uint32_t>(id)) * 16777619u;
  return h;
}

struct EncodeRun {
  double mb_per_s = 0;
  size_t tokens = 0;
  uint32_t checksum = 2166136261u;
};

StatusOr<EncodeRun> time_encode(const Tokenizer& tok, const std::vector<std::string>& docs,
                                int rounds) {
  size_t bytes = 0;
  for (const std::string& d : docs) bytes += d.size();
  EncodeRun best;
  std::vector<TokenId> ids;
  for (int r = 0; r < rounds; ++r) {
    EncodeRun run;
    const auto t0 = std::chrono::steady_clock::now();
    for (const std::string& d : docs) {
      ids.clear();
      K3_RETURN_IF_ERROR(tok.encode_append(d, &ids));
      run.tokens += ids.size();
      run.checksum = ids_checksum(run.checksum, ids);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.mb_per_s = static_cast<double>(bytes) / 1e6 / s;
    if (run.mb_per_s > best.mb_per_s) best = run;
  }
  return best;
}

// The folder holding the node packages and scripts (tests/node).
std::string find_node_dir(const std::string& flag) {
  std::vector<std::string> candidates;
  if (!flag.empty()) candidates.push_back(flag);
  if (const char* env = std::getenv("K3_NODE_DIR")) candidates.emplace_back(env);
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back((exe.parent_path() / "../../tests/node").string());
  candidates.emplace_back("tests/node");
  for (const std::string& c : candidates) {
    if (std::filesystem::exists(c + "/bench_tiktoken.cjs", ec) &&
        std::filesystem::exists(c + "/node_modules/@dqbd/tiktoken", ec)) {
      return std::filesystem::weakly_canonical(c, ec).string();
    }
  }
  return {};
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Runs `command`, returns its stdout (nullopt when it fails).
std::optional<std::string> run_capture(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) return std::nullopt;
  return out;
}

struct BenchFlags {
  std::string vocab;
  std::string pattern = "kimi";
  double mb = 8;
  int rounds = 3;
  std::string node_dir;
  bool no_node = false;
};

void run_bench_tokenizer(const BenchFlags& flags) {
  const std::vector<std::string> docs = bench_corpus(static_cast<size_t>(flags.mb * 1e6));
  size_t bytes = 0;
  for (const std::string& d : docs) bytes += d.size();
  tokenizer::TokenizerOptions options;
  options.pattern = pattern_of(flags.pattern);
  EncodeRun cached;
  for (bool cache : {true, false}) {
    options.piece_cache = cache;
    StatusOr<Tokenizer> tok = Tokenizer::load(flags.vocab, options);
    if (!tok.ok()) return fail(msg(tok.status()));
    StatusOr<EncodeRun> run = time_encode(*tok, docs, flags.rounds);
    if (!run.ok()) return fail(msg(run.status()));
    if (cache) cached = *run;
    print_line(ordered_json({{"metric", "tokenizer_encode"},
                             {"impl", "k3"},
                             {"piece_cache", cache},
                             {"pattern", flags.pattern},
                             {"vocab_ranks", tok->num_ranks()},
                             {"bytes", bytes},
                             {"documents", docs.size()},
                             {"tokens", run->tokens},
                             {"value", run->mb_per_s},
                             {"unit", "MB/s"}})
                   .dump());
  }
  // Long runs (k3 only: the WASM tokenizer has no chunking, so its ids would
  // differ).
  {
    options.piece_cache = true;
    StatusOr<Tokenizer> tok = Tokenizer::load(flags.vocab, options);
    if (!tok.ok()) return fail(msg(tok.status()));
    std::vector<std::string_view> chunks;
    for (const LongText& input : long_texts()) {
      StatusOr<EncodeRun> run = time_encode(*tok, {input.text}, flags.rounds);
      if (!run.ok()) return fail(msg(run.status()));
      chunks.clear();
      if (options.pattern == SplitPattern::kKimi) {
        tokenizer::split_into_chunks(input.text, &chunks);
      } else {
        chunks.push_back(input.text);
      }
      print_line(ordered_json({{"metric", "tokenizer_encode_long_text"},
                               {"impl", "k3"},
                               {"input", input.name},
                               {"pattern", flags.pattern},
                               {"bytes", input.text.size()},
                               {"chunks", chunks.size()},
                               {"tokens", run->tokens},
                               {"value", run->mb_per_s},
                               {"unit", "MB/s"}})
                     .dump());
    }
  }
  auto skipped = [&](const std::string& why) {
    print_line(
        ordered_json(
            {{"metric", "tokenizer_encode"}, {"impl", "@dqbd/tiktoken (wasm)"}, {"skipped", why}})
            .dump());
  };
  if (flags.no_node) return skipped("--no-node");
  const std::string node_dir = find_node_dir(flags.node_dir);
  if (node_dir.empty()) {
    return skipped(
        "tests/node with node_modules not found (run npm ci in tests/node, or pass "
        "--node-dir)");
  }
  if (!run_capture("node --version 2>/dev/null").has_value()) return skipped("node not found");
  // The same vocabulary and input for the WASM tokenizer, in temporary files.
  char dir_template[] = "/tmp/k3-bench-tokenizer-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return fail("cannot create a temporary directory");
  const std::string dir = dir_template;
  StatusOr<Tokenizer> tok = Tokenizer::load(flags.vocab, options);
  if (!tok.ok()) return fail(msg(tok.status()));
  {
    std::ofstream ranks(dir + "/tiktoken.model", std::ios::binary);
    for (TokenId r = 0; r < tok->num_ranks(); ++r) {
      ranks << base64_encode(tok->token_bytes(r)) << ' ' << r << '\n';
    }
    std::ofstream corpus(dir + "/corpus.json", std::ios::binary);
    corpus << json(docs).dump();
  }
  const std::string command =
      cat("node ", shell_quote(node_dir + "/bench_tiktoken.cjs"), " --ranks ",
          shell_quote(dir + "/tiktoken.model"), " --pattern ", shell_quote(flags.pattern),
          " --corpus ", shell_quote(dir + "/corpus.json"), " --rounds ", flags.rounds);
  std::optional<std::string> out = run_capture(command);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  json result = out.has_value() ? json::parse(*out, nullptr, false) : json();
  if (!result.is_object() || !result.contains("mb_per_s")) {
    return skipped(cat("the node benchmark failed: ", out.value_or("(no output)")));
  }
  const double theirs = result["mb_per_s"].get<double>();
  const bool same_ids = result["tokens"].get<size_t>() == cached.tokens &&
                        result["checksum"].get<uint32_t>() == cached.checksum;
  print_line(ordered_json({{"metric", "tokenizer_encode"},
                           {"impl", "@dqbd/tiktoken (wasm)"},
                           {"version", result.value("version", "")},
                           {"pattern", flags.pattern},
                           {"bytes", bytes},
                           {"tokens", result["tokens"]},
                           {"ids_match_k3", same_ids},
                           {"value", theirs},
                           {"unit", "MB/s"}})
                 .dump());
  print_line(ordered_json({{"metric", "tokenizer_encode_speedup_vs_tiktoken_wasm"},
                           {"value", cached.mb_per_s / theirs},
                           {"unit", "x"}})
                 .dump());
  if (!same_ids) fail("the WASM tokenizer produced different ids on the benchmark corpus");
}

void add_tokenizer_commands(CLI::App& app) {
  {
    auto vocab = std::make_shared<std::string>();
    auto pattern = std::make_shared<std::string>("kimi");
    auto* cmd = app.add_subcommand(
        "tokenize", "stdin: one JSON string per line; stdout: one JSON array of ids per line");
    cmd->add_option("--vocab", *vocab,
                    "a model directory, a tiktoken ranks file (tiktoken.model or any name not "
                    "ending in .json: BASE64 RANK per line) or a tokenizer.json")
        ->required();
    cmd->add_option("--pattern", *pattern,
                    "kimi: Kimi's split pattern and its chunking of long text | o200k: "
                    "o200k_base's pattern, text whole")
        ->check(CLI::IsMember({"kimi", "o200k"}));
    cmd->callback([vocab, pattern] { run_tokenize(*vocab, *pattern); });
  }
  {
    auto vocab = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand(
        "detokenize", "stdin: one JSON array of ids per line; stdout: one JSON string per line");
    cmd->add_option("--vocab", *vocab, "tiktoken.model, tokenizer.json or a model directory")
        ->required();
    cmd->callback([vocab] { run_detokenize(*vocab); });
  }
  {
    auto flags = std::make_shared<ChatRenderFlags>();
    auto* cmd = app.add_subcommand(
        "chat-render",
        "stdin: one chat request (JSON); stdout: the XTML segments [[text, markup]]");
    cmd->add_option("--model", flags->model, "model directory (its tokenizer files)")->required();
    cmd->add_flag("--ids", flags->ids, "print the token ids instead of the segments");
    cmd->add_flag("--developer-as-system", flags->developer_as_system,
                  "render the 'developer' role as 'system' (as the gateway does; without it the "
                  "role is dropped, as the reference drops it)");
    cmd->callback([flags] { run_chat_render(*flags); });
  }
  {
    auto model = std::make_shared<std::string>();
    auto no_thinking = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand(
        "chat-parse", "stdin: a JSON array of output ids; stdout: the parsed assistant message");
    cmd->add_option("--model", *model, "model directory (its tokenizer files)")->required();
    cmd->add_flag("--no-thinking", *no_thinking,
                  "the generation prompt opened the response channel, not think");
    cmd->callback([model, no_thinking] { run_chat_parse(*model, *no_thinking); });
  }
  {
    auto flags = std::make_shared<BenchFlags>();
    auto* cmd = bench_command(app)->add_subcommand(
        "tokenizer",
        "encode speed (MB/s) on a mixed corpus, beside @dqbd/tiktoken (WASM), and on long runs "
        "(base64, minified code, a CJK paragraph, spaces)");
    cmd->add_option("--vocab", flags->vocab, "tiktoken.model, tokenizer.json or a model directory")
        ->required();
    cmd->add_option("--pattern", flags->pattern, "split pattern: kimi | o200k")
        ->check(CLI::IsMember({"kimi", "o200k"}));
    cmd->add_option("--mb", flags->mb, "corpus size in MB (default 8)")
        ->check(CLI::Range(0.01, 1e4));
    cmd->add_option("--rounds", flags->rounds, "timed rounds (the best counts)")
        ->check(CLI::Range(1, 100));
    cmd->add_option("--node-dir", flags->node_dir, "tests/node (found from the binary by default)");
    cmd->add_flag("--no-node", flags->no_node, "skip the @dqbd/tiktoken figure");
    cmd->callback([flags] { run_bench_tokenizer(*flags); });
  }
}

const CommandRegistrar kTokenizerCommands(add_tokenizer_commands);

}  // namespace
}  // namespace k3::tools
