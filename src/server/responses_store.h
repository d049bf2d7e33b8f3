// Stored responses of the OpenAI Responses API (POST /v1/responses with `store`, GET / DELETE /v1/responses/{id},
// previous_response_id): each record is {"response": the response object, "input_items": the conversation items it
// was given}. In memory with a bound and least-recently-used eviction by default; with a file, an SQLite database that
// survives restarts (one connection in serialized mode behind the store's mutex, so concurrent requests are safe).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/json.h"

struct sqlite3;

namespace minfer::server {

class ResponseStore {
 public:
  // path empty: in memory, at most `capacity` records (the least recently used evicted first). Otherwise the SQLite
  // database at path (created if missing); throws minfer::Error naming the file when it cannot be opened.
  explicit ResponseStore(const std::string& path = "", int64_t capacity = 4096);
  ~ResponseStore();
  ResponseStore(const ResponseStore&) = delete;
  ResponseStore& operator=(const ResponseStore&) = delete;

  void put(const std::string& id, const json& record);
  std::optional<json> get(const std::string& id);
  bool erase(const std::string& id);  // false: no such record

 private:
  std::mutex mu_;
  sqlite3* db_ = nullptr;  // null: in memory
  int64_t capacity_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, std::pair<json, std::list<std::string>::iterator>> memory_;
};

}  // namespace minfer::server
