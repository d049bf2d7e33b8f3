// Images in chat requests (server/image_parts.h, chat_request.h): base64 data URLs, file:// only under the allowed
// directory, http(s) refused, image parts kept as template parts with their fields; every refusal a 400 naming the
// field. Runs under ASan/UBSan with the other unit tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api_error_support.h"
#include "server/chat_request.h"
#include "server/image_parts.h"

namespace minfer::server {
namespace {

TEST(ServerImageParts, Base64DecodesWithAndWithoutPadding) {
  std::string out;
  ASSERT_TRUE(decode_base64("aGVsbG8=", out));
  EXPECT_EQ(out, "hello");
  ASSERT_TRUE(decode_base64("aGVsbG8", out));
  EXPECT_EQ(out, "hello");
  ASSERT_TRUE(decode_base64("aGk=", out));
  EXPECT_EQ(out, "hi");
  EXPECT_FALSE(decode_base64("@@@@", out));
  EXPECT_FALSE(decode_base64("", out));
}

TEST(ServerImageParts, UrlsAreFetchedOnlyWhereAllowed) {
  EXPECT_EQ(fetch_image({"data:image/png;base64,aGVsbG8=", "f"}, ""), "hello");
  for (const char* url : {"https://x/y.png", "http://x", "data:image/png,raw", "ftp://x", "data:;base64,%%%"}) {
    const ApiError e = parse_error([&] { fetch_image({url, "messages[0].content[1].image_url"}, ""); });
    EXPECT_EQ(e.status(), 400) << url;
    EXPECT_EQ(e.param(), "messages[0].content[1].image_url") << url;
  }
  const auto dir = std::filesystem::temp_directory_path() / "minfer_image_parts_test";
  std::filesystem::create_directories(dir / "media");
  std::ofstream(dir / "media" / "a.png") << "bytes";
  std::ofstream(dir / "b.png") << "secret";
  const std::string allowed = (dir / "media").string();
  EXPECT_EQ(fetch_image({"file://" + allowed + "/a.png", "f"}, allowed), "bytes");
  EXPECT_EQ(parse_error([&] { fetch_image({"file://" + allowed + "/a.png", "f"}, ""); }).status(), 400);
  EXPECT_EQ(parse_error([&] { fetch_image({"file://" + allowed + "/../b.png", "f"}, allowed); }).status(), 400);
  EXPECT_EQ(parse_error([&] { fetch_image({"file://" + allowed + "/none.png", "f"}, allowed); }).status(), 400);
  std::filesystem::remove_all(dir);
}

TEST(ServerImageParts, ChatMessagesKeepImagePartsForTheTemplate) {
  const json body = json::parse(R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                   {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                                   {"type": "image_url", "image_url": "data:image/png;base64,BBBB"}]}]})");
  const ChatFields chat = parse_chat_fields(Fields(body));
  ASSERT_EQ(chat.images.size(), 2u);
  EXPECT_EQ(chat.images[0].url, "data:image/png;base64,AAAA");
  EXPECT_EQ(chat.images[1].field, "messages[1].content[2].image_url");
  const json& content = chat.messages[1]["content"];
  ASSERT_TRUE(content.is_array());
  EXPECT_EQ(content[0]["text"], "What is this?");
  EXPECT_EQ(content[1]["type"], "image");
  EXPECT_EQ(chat.messages[0]["content"], "Be brief.");
  const ApiError e = parse_error([] {
    parse_chat_fields(Fields(json::parse(R"({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"uri": "x"}}]}]})")));
  });
  EXPECT_EQ(e.param(), "messages[0].content[0].image_url");
}

}  // namespace
}  // namespace minfer::server
