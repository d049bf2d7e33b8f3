#include "server/image_parts.h"

#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/api_error.h"

namespace minfer::server {

std::string image_part_url(const json& part, const std::string& name) {
  const auto it = part.find("image_url");
  if (it != part.end() && it->is_string()) return it->get<std::string>();
  if (it == part.end() || !it->is_object() || !it->contains("url") || !(*it)["url"].is_string())
    bad_request(name + ".image_url", "'{}.image_url' must be {{\"url\": \"data:...\"}} or a URL string", name);
  return (*it)["url"].get<std::string>();
}

bool decode_base64(std::string_view text, std::string& out) {
  std::string padded(text);
  while (padded.size() % 4 != 0) padded += '=';
  if (padded.empty()) return false;
  out.resize(padded.size() / 4 * 3);
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(padded.data()), static_cast<int>(padded.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the padding's zero bytes too.
  size_t pad = 0;
  for (size_t i = padded.size(); i > 0 && padded[i - 1] == '=' && pad < 2; --i) ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return true;
}

namespace {

std::string read_local(const ImageRef& ref, std::string_view path, const std::string& allowed) {
  namespace fs = std::filesystem;
  if (allowed.empty())
    bad_request(ref.field,
                "'{}' is a file:// URL: this server reads local files only under "
                "--allowed-local-media-path",
                ref.field);
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(fs::path(std::string(path)), ec);
  const fs::path root = fs::weakly_canonical(fs::path(allowed), ec);
  const auto [root_end, file_it] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
  if (ec || root_end != root.end()) bad_request(ref.field, "'{}' is outside --allowed-local-media-path", ref.field);
  std::ifstream in(file, std::ios::binary);
  if (!in || !fs::is_regular_file(file))
    bad_request(ref.field, "'{}': no readable file at {}", ref.field, file.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

std::string fetch_image(const ImageRef& ref, const std::string& allowed_local_media_path) {
  const std::string_view url = ref.url;
  if (url.starts_with("data:")) {
    const size_t comma = url.find(',');
    if (comma == std::string_view::npos || url.substr(0, comma).find(";base64") == std::string_view::npos)
      bad_request(ref.field, "'{}' must be a base64 data URL (data:image/png;base64,...)", ref.field);
    std::string bytes;
    if (!decode_base64(url.substr(comma + 1), bytes))
      bad_request(ref.field, "'{}': the data URL is not valid base64", ref.field);
    return bytes;
  }
  if (url.starts_with("file://")) return read_local(ref, url.substr(7), allowed_local_media_path);
  if (url.starts_with("http://") || url.starts_with("https://"))
    bad_request(ref.field, "'{}' is an http(s) URL: this server fetches nothing; send the image as a data: URL",
                ref.field);
  bad_request(ref.field, "'{}' must be a data: URL (or file:// under --allowed-local-media-path)", ref.field);
}

}  // namespace minfer::server
