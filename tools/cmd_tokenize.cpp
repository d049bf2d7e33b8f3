// `minfer tokenize`: encode text to ids, or decode ids to text, with any tokenizer minfer reads
// (tokenizer.json, a GGUF file, a llama2.c tokenizer .bin).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"

namespace minfer::tools {
namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::optional<std::string> text;
  std::optional<std::string> decode;
  bool no_special = false;
};

// "1 2 3" or "1,2,3" or "[1, 2, 3]".
std::vector<int32_t> parse_ids(std::string text) {
  for (char& c : text) {
    if (c == ',' || c == '[' || c == ']') c = ' ';
  }
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    try {
      size_t used = 0;
      const long v = std::stol(word, &used);
      if (used != word.size()) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      fail("--decode: '{}' is not an integer token id", word);
    }
  }
  return ids;
}

void run(const TokenizeArgs& args) {
  const auto tokenizer = tokenizer_from_file(args.tokenizer);
  if (args.decode) {
    const std::string text = tokenizer->decode(parse_ids(*args.decode), /*skip_special=*/args.no_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return;
  }
  std::string text;
  if (args.text) {
    text = *args.text;
  } else {
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0;) text.append(buffer, n);
  }
  const auto ids = tokenizer->encode(text, /*add_special=*/!args.no_special, /*parse_special=*/!args.no_special);
  fmt::print("{}\n", fmt::join(ids, " "));
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd =
      app.add_subcommand("tokenize", "Encode text to token ids (space-separated), or decode ids to text with --decode");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json (tokenizer_config.json beside it is read too), a .gguf file, or a llama2.c "
                  "tokenizer .bin")
      ->required();
  cmd->add_option("--text", args->text, "Text to encode (default: standard input)");
  cmd->add_option("--decode", args->decode, "Token ids to decode, e.g. \"1 403 407\"");
  cmd->add_flag("--no-special", args->no_special,
                "Encode: add no BOS and treat special-token text as plain text; decode: drop special tokens");
  cmd->callback([args] { run(*args); });
}

}  // namespace minfer::tools
