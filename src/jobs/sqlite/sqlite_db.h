// A thin RAII layer over sqlite3 handles: errors as Status, statements that
// finalize themselves. Only code in jobs/sqlite/ includes this header.
//
// Thread-safety: none (a connection per thread).
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>

#include "core/status.h"
#include "jobs/cell.h"

namespace inferd::jobs::sqlite {

class Statement {
 public:
  Statement() = default;
  explicit Statement(sqlite3_stmt* s) : stmt_(s) {}
  Statement(Statement&& o) noexcept : stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept {
    std::swap(stmt_, o.stmt_);
    return *this;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt* get() const { return stmt_; }

  // Binds parameter `i` (1-based).
  void Bind(int i, const Cell& cell);
  void Bind(int i, const std::string& text) {
    sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  // Column `i` (0-based) of the current row as a cell.
  Cell Column(int i) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

class Db {
 public:
  ~Db() { sqlite3_close_v2(db_); }
  static Result<std::unique_ptr<Db>> Open(const std::string& path, bool read_only);

  Status Exec(const std::string& sql);
  // One statement; `tail_ok` false: anything after it (another statement) is an error.
  Result<Statement> Prepare(const std::string& sql, bool tail_ok = false);
  // SQLITE_ROW -> true, SQLITE_DONE -> false, else an error.
  Result<bool> Step(Statement& s);
  Status Error(const std::string& what) const;
  sqlite3* get() const { return db_; }

 private:
  explicit Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
};

}  // namespace inferd::jobs::sqlite
