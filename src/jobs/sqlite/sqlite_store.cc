#include "jobs/sqlite/sqlite_store.h"

#include <set>

#include "core/mutex.h"
#include "jobs/sql_text.h"
#include "jobs/sqlite/sqlite_db.h"

namespace inferd::jobs {
namespace {

// The prediction table a sink writes (and a store's write-back creates).
std::string CreateTableSql(const std::string& table, const std::string& key, const std::vector<std::string>& values) {
  std::string sql = "CREATE TABLE IF NOT EXISTS " + QuoteIdentifier(table) + " (" + QuoteIdentifier(key) +
                    " TEXT PRIMARY KEY NOT NULL, model_name TEXT NOT NULL, model_version TEXT NOT NULL, "
                    "predicted_at REAL NOT NULL";
  for (const auto& v : values) sql += ", " + QuoteIdentifier(v);
  return sql + ")";
}

using sqlite::Db;
using sqlite::Statement;

class SqliteSource final : public RowSource {
 public:
  Status Open(const std::string& path, const std::string& query, const std::string& order_by) {
    INFERD_ASSIGN_OR_RETURN(db_, Db::Open(path, /*read_only=*/true));
    INFERD_RETURN_IF_ERROR(db_->Exec("PRAGMA query_only = 1"));
    const std::string q = StripQueryEnd(query);
    {
      INFERD_ASSIGN_OR_RETURN(Statement inner, db_->Prepare(q));
      if (!sqlite3_stmt_readonly(inner.get()))
        return Status::InvalidArgument("SQLite source: the query must be a read-only SELECT");
      const int n = sqlite3_column_count(inner.get());
      if (n == 0) return Status::InvalidArgument("SQLite source: the query returns no columns");
      for (int i = 0; i < n; ++i) columns_.push_back(sqlite3_column_name(inner.get(), i));
    }
    bool has_key = false;
    for (const auto& c : columns_) has_key |= c == order_by;
    if (!has_key) {
      return Status::InvalidArgument("job spec: 'key' names column '" + order_by +
                                     "', which the query does not return");
    }
    // One read transaction for the count and the rows: they see one snapshot.
    INFERD_RETURN_IF_ERROR(db_->Exec("BEGIN"));
    {
      INFERD_ASSIGN_OR_RETURN(Statement count, db_->Prepare("SELECT count(*) FROM (\n" + q + "\n)"));
      INFERD_ASSIGN_OR_RETURN(bool row, db_->Step(count));
      if (row) total_ = sqlite3_column_int64(count.get(), 0);
    }
    INFERD_ASSIGN_OR_RETURN(
        stmt_, db_->Prepare("SELECT * FROM (\n" + q + "\n) AS inferd_source ORDER BY " + QuoteIdentifier(order_by)));
    if (!sqlite3_stmt_readonly(stmt_.get()))
      return Status::InvalidArgument("SQLite source: the query must be a read-only SELECT");
    return Status::OK();
  }
  ~SqliteSource() override {
    stmt_ = Statement();
    if (db_) (void)db_->Exec("COMMIT");
  }

  const std::vector<std::string>& columns() const override { return columns_; }
  std::optional<int64_t> total_rows() const override { return total_; }

  Result<bool> Next(Row* row) override {
    INFERD_ASSIGN_OR_RETURN(bool got, db_->Step(stmt_));
    if (!got) return false;
    row->ordinal = next_ordinal_++;
    row->error.clear();
    row->cells.resize(columns_.size());
    for (size_t i = 0; i < columns_.size(); ++i) row->cells[i] = stmt_.Column(static_cast<int>(i));
    return true;
  }

 private:
  std::unique_ptr<Db> db_;
  Statement stmt_;
  std::vector<std::string> columns_;
  std::optional<int64_t> total_;
  int64_t next_ordinal_ = 0;
};

class SqliteSink final : public PredictionSink {
 public:
  SqliteSink(std::string path, std::string table) : path_(std::move(path)), table_(std::move(table)) {}

  Status Open() {
    INFERD_ASSIGN_OR_RETURN(db_, Db::Open(path_, /*read_only=*/false));
    INFERD_RETURN_IF_ERROR(db_->Exec("PRAGMA journal_mode = WAL"));
    // WAL + NORMAL: a commit survives the process dying (SIGKILL); only a
    // power loss may lose the last commits (never half of one).
    return db_->Exec("PRAGMA synchronous = NORMAL");
  }

  Status Prepare(const SinkSchema& schema) override {
    std::set<std::string> names;
    std::vector<std::string> all = {schema.key_column};
    for (const char* r : kReservedColumns) all.push_back(r);
    for (const auto& v : schema.value_columns) all.push_back(v);
    for (const auto& n : all) {
      if (!names.insert(n).second)
        return Status::InvalidArgument("sink table '" + table_ + "': column name '" + n +
                                       "' is used twice (the key, model_name, model_version, predicted_at and the "
                                       "outputs need distinct names)");
    }
    std::set<std::string> existing;
    {
      INFERD_ASSIGN_OR_RETURN(Statement info, db_->Prepare("SELECT name FROM pragma_table_info(?)"));
      info.Bind(1, table_);
      for (;;) {
        INFERD_ASSIGN_OR_RETURN(bool row, db_->Step(info));
        if (!row) break;
        existing.insert(std::get<std::string>(info.Column(0)));
      }
    }
    if (existing.empty()) {
      INFERD_RETURN_IF_ERROR(db_->Exec(CreateTableSql(table_, schema.key_column, schema.value_columns)));
    } else {
      for (const auto& n : all) {
        if (!existing.count(n))
          return Status::InvalidArgument("sink table '" + table_ + "' exists without column '" + n +
                                         "' (write to a new table, or drop this one)");
      }
    }
    INFERD_RETURN_IF_ERROR(db_->Exec("CREATE TABLE IF NOT EXISTS " + QuoteIdentifier(table_ + "_errors") +
                                     " (job_id TEXT NOT NULL, row_ordinal INTEGER NOT NULL, key TEXT, "
                                     "message TEXT NOT NULL, PRIMARY KEY (job_id, row_ordinal))"));
    INFERD_RETURN_IF_ERROR(db_->Exec(
        "CREATE TABLE IF NOT EXISTS inferd_job_checkpoints (job_id TEXT PRIMARY KEY NOT NULL, sink_table TEXT "
        "NOT NULL, rows_done INTEGER NOT NULL, rows_written INTEGER NOT NULL, row_errors INTEGER NOT NULL, "
        "finished INTEGER NOT NULL, updated_at REAL NOT NULL)"));
    std::string insert = "INSERT OR REPLACE INTO " + QuoteIdentifier(table_) + " (" +
                         QuoteIdentifier(schema.key_column) + ", model_name, model_version, predicted_at";
    std::string values = "?, ?, ?, ?";
    for (const auto& v : schema.value_columns) {
      insert += ", " + QuoteIdentifier(v);
      values += ", ?";
    }
    INFERD_ASSIGN_OR_RETURN(insert_, db_->Prepare(insert + ") VALUES (" + values + ")"));
    INFERD_ASSIGN_OR_RETURN(insert_error_,
                            db_->Prepare("INSERT OR REPLACE INTO " + QuoteIdentifier(table_ + "_errors") +
                                         " (job_id, row_ordinal, key, message) VALUES (?, ?, ?, ?)"));
    INFERD_ASSIGN_OR_RETURN(checkpoint_, db_->Prepare("INSERT OR REPLACE INTO inferd_job_checkpoints (job_id, "
                                                      "sink_table, rows_done, rows_written, row_errors, finished, "
                                                      "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"));
    values_ = schema.value_columns.size();
    return Status::OK();
  }

  Result<std::optional<Checkpoint>> ReadCheckpoint(const std::string& job_id) override {
    INFERD_ASSIGN_OR_RETURN(Statement s, db_->Prepare("SELECT rows_done, rows_written, row_errors, finished FROM "
                                                      "inferd_job_checkpoints WHERE job_id = ?"));
    s.Bind(1, job_id);
    INFERD_ASSIGN_OR_RETURN(bool row, db_->Step(s));
    if (!row) return std::optional<Checkpoint>();
    Checkpoint c;
    c.rows_done = sqlite3_column_int64(s.get(), 0);
    c.rows_written = sqlite3_column_int64(s.get(), 1);
    c.row_errors = sqlite3_column_int64(s.get(), 2);
    c.finished = sqlite3_column_int64(s.get(), 3) != 0;
    return std::optional<Checkpoint>(c);
  }

  Status Reset(const std::string& job_id) override {
    INFERD_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    Status st = [&]() -> Status {
      INFERD_ASSIGN_OR_RETURN(Statement a, db_->Prepare("DELETE FROM inferd_job_checkpoints WHERE job_id = ?"));
      a.Bind(1, job_id);
      INFERD_RETURN_IF_ERROR(db_->Step(a).status());
      INFERD_ASSIGN_OR_RETURN(Statement b,
                              db_->Prepare("DELETE FROM " + QuoteIdentifier(table_ + "_errors") + " WHERE job_id = ?"));
      b.Bind(1, job_id);
      return db_->Step(b).status();
    }();
    return Finish(st);
  }

  Status Commit(const std::string& job_id, const std::string& model, const std::vector<ResultRow>& rows,
                const std::vector<RowError>& errors, const Checkpoint& cp) override {
    INFERD_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    const double now = UnixNow();
    Status st = [&]() -> Status {
      for (const auto& r : rows) {
        sqlite3_reset(insert_.get());
        insert_.Bind(1, r.key);
        insert_.Bind(2, model);
        insert_.Bind(3, r.model_version);
        insert_.Bind(4, now);
        for (size_t i = 0; i < values_; ++i)
          insert_.Bind(static_cast<int>(5 + i), i < r.values.size() ? r.values[i] : Cell{});
        INFERD_RETURN_IF_ERROR(db_->Step(insert_).status());
      }
      for (const auto& e : errors) {
        sqlite3_reset(insert_error_.get());
        insert_error_.Bind(1, job_id);
        insert_error_.Bind(2, e.ordinal);
        insert_error_.Bind(3, e.key);
        insert_error_.Bind(4, e.message);
        INFERD_RETURN_IF_ERROR(db_->Step(insert_error_).status());
      }
      sqlite3_reset(checkpoint_.get());
      checkpoint_.Bind(1, job_id);
      checkpoint_.Bind(2, table_);
      checkpoint_.Bind(3, cp.rows_done);
      checkpoint_.Bind(4, cp.rows_written);
      checkpoint_.Bind(5, cp.row_errors);
      checkpoint_.Bind(6, static_cast<int64_t>(cp.finished ? 1 : 0));
      checkpoint_.Bind(7, now);
      return db_->Step(checkpoint_).status();
    }();
    return Finish(st);
  }

 private:
  Status Finish(const Status& st) {
    if (st.ok()) return db_->Exec("COMMIT");
    (void)db_->Exec("ROLLBACK");
    return st;
  }

  const std::string path_, table_;
  std::unique_ptr<Db> db_;
  Statement insert_, insert_error_, checkpoint_;
  size_t values_ = 0;
};

class SqliteStore final : public PredictionStore {
 public:
  SqliteStore(std::string path, StoreTable table, bool writable)
      : path_(std::move(path)), table_(std::move(table)), writable_(writable) {}

  Status Open() {
    MutexLock l(&mu_);
    INFERD_ASSIGN_OR_RETURN(db_, Db::Open(path_, /*read_only=*/!writable_));
    if (writable_) INFERD_RETURN_IF_ERROR(db_->Exec("PRAGMA journal_mode = WAL"));
    return Status::OK();
  }

  Result<std::optional<StoredPrediction>> Lookup(const std::string& key) override {
    MutexLock l(&mu_);
    if (!lookup_.get()) {
      std::string sql = "SELECT model_name, model_version, predicted_at";
      for (const auto& v : table_.value_columns) sql += ", " + QuoteIdentifier(v);
      auto st = db_->Prepare(sql + " FROM " + QuoteIdentifier(table_.table) + " WHERE " +
                             QuoteIdentifier(table_.key_column) + " = ?");
      if (!st.ok()) {
        if (st.status().message().find("no such table") != std::string::npos) return std::optional<StoredPrediction>();
        return st.status();
      }
      lookup_ = std::move(st).value();
    }
    sqlite3_reset(lookup_.get());
    lookup_.Bind(1, key);
    INFERD_ASSIGN_OR_RETURN(bool row, db_->Step(lookup_));
    if (!row) return std::optional<StoredPrediction>();
    StoredPrediction p;
    p.model_name = CellText(lookup_.Column(0));
    p.model_version = CellText(lookup_.Column(1));
    const Cell at = lookup_.Column(2);
    p.predicted_at = std::holds_alternative<double>(at)    ? std::get<double>(at)
                     : std::holds_alternative<int64_t>(at) ? static_cast<double>(std::get<int64_t>(at))
                                                           : 0;
    for (size_t i = 0; i < table_.value_columns.size(); ++i)
      p.values.push_back(lookup_.Column(static_cast<int>(3 + i)));
    sqlite3_reset(lookup_.get());  // ends the read (a job may be writing)
    return std::optional<StoredPrediction>(std::move(p));
  }

  Status Write(const std::string& key, const std::string& model, const std::string& version,
               const std::vector<Cell>& values) override {
    if (!writable_) return Status::FailedPrecondition("the prediction store '" + path_ + "' is read-only");
    MutexLock l(&mu_);
    if (!write_.get()) {
      std::string sql = "INSERT OR REPLACE INTO " + QuoteIdentifier(table_.table) + " (" +
                        QuoteIdentifier(table_.key_column) + ", model_name, model_version, predicted_at";
      std::string params = "?, ?, ?, ?";
      for (const auto& v : table_.value_columns) {
        sql += ", " + QuoteIdentifier(v);
        params += ", ?";
      }
      sql += ") VALUES (" + params + ")";
      auto st = db_->Prepare(sql);
      if (!st.ok() && st.status().message().find("no such table") != std::string::npos) {
        // Written back before any job wrote the table: create it as a job would.
        INFERD_RETURN_IF_ERROR(db_->Exec(CreateTableSql(table_.table, table_.key_column, table_.value_columns)));
        st = db_->Prepare(sql);
      }
      if (!st.ok()) return st.status();
      write_ = std::move(st).value();
    }
    sqlite3_reset(write_.get());
    write_.Bind(1, key);
    write_.Bind(2, model);
    write_.Bind(3, version);
    write_.Bind(4, UnixNow());
    for (size_t i = 0; i < table_.value_columns.size(); ++i)
      write_.Bind(static_cast<int>(5 + i), i < values.size() ? values[i] : Cell{});
    Status st = db_->Step(write_).status();
    sqlite3_reset(write_.get());
    return st;
  }

 private:
  const std::string path_;
  const StoreTable table_;
  const bool writable_;
  Mutex mu_;
  std::unique_ptr<Db> db_ TSA_GUARDED_BY(mu_);
  Statement lookup_ TSA_GUARDED_BY(mu_);
  Statement write_ TSA_GUARDED_BY(mu_);
};

}  // namespace

Result<std::unique_ptr<PredictionStore>> OpenSqliteStore(const std::string& path, StoreTable table, bool writable) {
  auto s = std::make_unique<SqliteStore>(path, std::move(table), writable);
  INFERD_RETURN_IF_ERROR(s->Open());
  return std::unique_ptr<PredictionStore>(std::move(s));
}

Result<std::unique_ptr<RowSource>> OpenSqliteSource(const std::string& path, const std::string& query,
                                                    const std::string& order_by) {
  auto s = std::make_unique<SqliteSource>();
  INFERD_RETURN_IF_ERROR(s->Open(path, query, order_by));
  return std::unique_ptr<RowSource>(std::move(s));
}

Result<std::unique_ptr<PredictionSink>> OpenSqliteSink(const std::string& path, const std::string& table) {
  auto s = std::make_unique<SqliteSink>(path, table);
  INFERD_RETURN_IF_ERROR(s->Open());
  return std::unique_ptr<PredictionSink>(std::move(s));
}

}  // namespace inferd::jobs
