// Images in chat messages (OpenAI image_url parts; Anthropic image blocks and Responses input_image parts are
// converted to them): the part's URL kept with its field when the messages are parsed, its bytes fetched when the
// request is prepared: a data: URL decoded (base64), a file:// URL read only under --allowed-local-media-path, and
// http(s) refused (this server fetches nothing). Errors are 400s naming the part's field.
#pragma once

#include <string>
#include <vector>

#include "server/json.h"

namespace minfer::server {

struct ImageRef {
  std::string url;
  std::string field;  // e.g. "messages[1].content[0].image_url"
  std::string part;   // the part as the client's API names it, e.g. "input[0].content[1]" on /v1/responses
};

// A converted image part (Anthropic image blocks, Responses input_image parts) carries the client's name for it here.
inline constexpr const char* kImagePartField = "_minfer_part";

// The URL of an image_url part ({"type": "image_url", "image_url": {"url": ...}} or {"image_url": "..."});
// throws ApiError 400 naming the field.
std::string image_part_url(const json& part, const std::string& name);

// The image's file bytes. allowed_local_media_path: the directory file:// URLs may read under ("" = none).
std::string fetch_image(const ImageRef& ref, const std::string& allowed_local_media_path);

// Base64 (RFC 4648, padding optional) -> bytes; false when `text` is not base64.
bool decode_base64(std::string_view text, std::string& out);

}  // namespace minfer::server
