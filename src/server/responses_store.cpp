#include "server/responses_store.h"

#include <sqlite3.h>

#include "base/error.h"

namespace minfer::server {
namespace {

// A prepared statement, finalized when it goes out of scope.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      fail("responses store: {} ({})", sqlite3_errmsg(db), sql);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind(int index, const std::string& text) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }
  // SQLITE_ROW or SQLITE_DONE; anything else is an error.
  int step() {
    const int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail("responses store: {}", sqlite3_errmsg(db_));
    return rc;
  }
  std::string text(int column) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))) : std::string();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace

ResponseStore::ResponseStore(const std::string& path, int64_t capacity) : capacity_(capacity) {
  if (path.empty()) return;
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    fail("--responses-store {}: cannot open the SQLite database: {}", path, why);
  }
  sqlite3_busy_timeout(db_, 5000);  // another server on the same file: wait for its write, not fail
  char* error = nullptr;
  const char* schema =
      "PRAGMA journal_mode=WAL;"
      "CREATE TABLE IF NOT EXISTS responses (id TEXT PRIMARY KEY, record TEXT NOT NULL, "
      "created REAL NOT NULL DEFAULT (julianday('now')));";
  if (sqlite3_exec(db_, schema, nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string why = error ? error : "unknown error";
    sqlite3_free(error);
    sqlite3_close(db_);
    db_ = nullptr;
    fail("--responses-store {}: not a responses database: {}", path, why);
  }
}

ResponseStore::~ResponseStore() {
  if (db_) sqlite3_close(db_);
}

void ResponseStore::put(const std::string& id, const json& record) {
  std::lock_guard lock(mu_);
  if (db_) {
    Statement s(db_, "INSERT OR REPLACE INTO responses (id, record) VALUES (?1, ?2)");
    s.bind(1, id);
    s.bind(2, record.dump(-1, ' ', false, json::error_handler_t::replace));
    s.step();
    return;
  }
  if (auto it = memory_.find(id); it != memory_.end()) {
    lru_.erase(it->second.second);
    memory_.erase(it);
  }
  lru_.push_front(id);
  memory_.emplace(id, std::make_pair(record, lru_.begin()));
  while (static_cast<int64_t>(memory_.size()) > capacity_) {
    memory_.erase(lru_.back());
    lru_.pop_back();
  }
}

std::optional<json> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  if (db_) {
    Statement s(db_, "SELECT record FROM responses WHERE id = ?1");
    s.bind(1, id);
    if (s.step() != SQLITE_ROW) return std::nullopt;
    json record = json::parse(s.text(0), nullptr, /*allow_exceptions=*/false);
    // A row this server did not write (or a damaged one) is no stored response.
    if (!record.is_object() || !record.contains("response") || !record["response"].is_object() ||
        !record.contains("input_items") || !record["input_items"].is_array())
      return std::nullopt;
    return record;
  }
  auto it = memory_.find(id);
  if (it == memory_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.second);  // most recently used now
  return it->second.first;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  if (db_) {
    Statement s(db_, "DELETE FROM responses WHERE id = ?1");
    s.bind(1, id);
    s.step();
    return sqlite3_changes(db_) > 0;
  }
  auto it = memory_.find(id);
  if (it == memory_.end()) return false;
  lru_.erase(it->second.second);
  memory_.erase(it);
  return true;
}

}  // namespace minfer::server
