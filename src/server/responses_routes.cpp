#include "server/responses_routes.h"

#include <fmt/format.h>

#include <string>

#include "server/api_error.h"

namespace minfer::server {
namespace {

json stored(ResponseStore& store, const std::string& id) {
  std::optional<json> record = store.get(id);
  if (!record)
    throw ApiError(404,
                   fmt::format("no stored response '{}' (unknown, deleted, evicted, or created with store: false)", id),
                   "response_id", "response_not_found");
  return std::move(*record);
}

json input_items_page(json items, std::string_view query) {
  const bool ascending = query.find("order=asc") != std::string_view::npos;
  if (!ascending) std::reverse(items.begin(), items.end());
  json page = {{"object", "list"}, {"data", items}, {"has_more", false}, {"first_id", nullptr}, {"last_id", nullptr}};
  if (!items.empty()) {
    page["first_id"] = items.front().value("id", "");
    page["last_id"] = items.back().value("id", "");
  }
  return page;
}

}  // namespace

json stored_response_route(ResponseStore& store, http::verb method, std::string_view rest, std::string_view query) {
  constexpr std::string_view kItems = "/input_items";
  const bool items = rest.ends_with(kItems);
  const std::string id(items ? rest.substr(0, rest.size() - kItems.size()) : rest);
  if (id.empty() || id.find('/') != std::string::npos)
    throw ApiError(404, fmt::format("no route for /v1/responses/{}", rest), "", "not_found");
  if (items) {
    if (method != http::verb::get) throw ApiError(405, "/v1/responses/{id}/input_items expects GET");
    return input_items_page(stored(store, id)["input_items"], query);
  }
  if (method == http::verb::delete_) {
    if (!store.erase(id))
      throw ApiError(404, fmt::format("no stored response '{}' to delete", id), "response_id", "response_not_found");
    return {{"id", id}, {"object", "response"}, {"deleted", true}};
  }
  return stored(store, id)["response"];
}

}  // namespace minfer::server
