#include "jobs/sqlite/sqlite_db.h"

namespace inferd::jobs::sqlite {

void Statement::Bind(int i, const Cell& cell) {
  struct Visitor {
    sqlite3_stmt* s;
    int i;
    void operator()(std::monostate) const { sqlite3_bind_null(s, i); }
    void operator()(int64_t v) const { sqlite3_bind_int64(s, i, v); }
    void operator()(double v) const { sqlite3_bind_double(s, i, v); }
    void operator()(const std::string& v) const {
      sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    }
    void operator()(const NumberArray& v) const { (*this)(CellText(v)); }
    void operator()(const JsonText& v) const {
      sqlite3_bind_text(s, i, v.text.data(), static_cast<int>(v.text.size()), SQLITE_TRANSIENT);
    }
  };
  std::visit(Visitor{stmt_, i}, cell);
}

Cell Statement::Column(int i) const {
  switch (sqlite3_column_type(stmt_, i)) {
    case SQLITE_INTEGER:
      return static_cast<int64_t>(sqlite3_column_int64(stmt_, i));
    case SQLITE_FLOAT:
      return sqlite3_column_double(stmt_, i);
    case SQLITE_TEXT:
    case SQLITE_BLOB: {
      const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
      return std::string(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(stmt_, i)));
    }
    default:
      return std::monostate{};
  }
}

Result<std::unique_ptr<Db>> Db::Open(const std::string& path, bool read_only) {
  sqlite3* db = nullptr;
  const int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return Status::InvalidArgument("cannot open SQLite database '" + path + "': " + msg);
  }
  sqlite3_busy_timeout(db, 10000);
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<Db>(new Db(db, path));
}

Status Db::Error(const std::string& what) const {
  return Status::InvalidArgument("SQLite database '" + path_ + "': " + what + ": " + sqlite3_errmsg(db_));
}

Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "error";
    sqlite3_free(err);
    return Status::InvalidArgument("SQLite database '" + path_ + "': " + msg);
  }
  return Status::OK();
}

Result<Statement> Db::Prepare(const std::string& sql, bool tail_ok) {
  sqlite3_stmt* s = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &s, &tail) != SQLITE_OK) {
    return Error("SQL error");
  }
  Statement st(s);
  if (!s) return Status::InvalidArgument("SQLite database '" + path_ + "': the SQL holds no statement");
  if (!tail_ok && tail) {
    for (const char* p = tail; *p; ++p)
      if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r' && *p != ';')
        return Status::InvalidArgument("SQLite database '" + path_ + "': only one SQL statement is allowed");
  }
  return st;
}

Result<bool> Db::Step(Statement& s) {
  const int rc = sqlite3_step(s.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error("step failed");
}

}  // namespace inferd::jobs::sqlite
