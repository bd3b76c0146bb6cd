#include "jobs/postgres/pg_store.h"

#include <libpq-fe.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <set>

#include "core/mutex.h"
#include "jobs/sql_text.h"

namespace inferd::jobs {
namespace {

// The prediction table a sink writes (and a store's write-back creates).
std::string PgCreateTableSql(const std::string& table, const std::string& key, const std::vector<std::string>& values) {
  std::string sql = "CREATE TABLE IF NOT EXISTS " + QuoteIdentifier(table) + " (" + QuoteIdentifier(key) +
                    " TEXT PRIMARY KEY, model_name TEXT NOT NULL, model_version TEXT NOT NULL, "
                    "predicted_at DOUBLE PRECISION NOT NULL";
  for (const auto& v : values) sql += ", " + QuoteIdentifier(v) + " JSONB";
  return sql + ")";
}

// PostgreSQL type OIDs (pg_type.dat; stable across versions).
constexpr Oid kInt2 = 21, kInt4 = 23, kInt8 = 20, kFloat4 = 700, kFloat8 = 701, kNumeric = 1700, kJson = 114,
              kJsonb = 3802, kBool = 16, kInt2Array = 1005, kInt4Array = 1007, kInt8Array = 1016, kFloat4Array = 1021,
              kFloat8Array = 1022, kNumericArray = 1231;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

class PgConnection {
 public:
  ~PgConnection() {
    if (conn_) PQfinish(conn_);
  }
  Status Open(const std::string& name, const std::string& conninfo) {
    name_ = name;
    // A default connect timeout, so an unreachable server is an error, not a hang.
    std::string info = conninfo;
    if (info.find("connect_timeout") == std::string::npos) info += " connect_timeout=10";
    conn_ = PQconnectdb(info.c_str());
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK)
      return Status::InvalidArgument("cannot connect to PostgreSQL connection '" + name + "': " + Message());
    return Exec("SET client_min_messages = warning").status();
  }
  std::string Message() const {
    std::string m = conn_ ? PQerrorMessage(conn_) : "out of memory";
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
  }
  Result<PgResult> Exec(const std::string& sql) { return Exec(sql, {}); }
  Result<PgResult> Exec(const std::string& sql, const std::vector<const char*>& params) {
    PgResult r(params.empty() ? PQexec(conn_, sql.c_str())
                              : PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                                             params.data(), nullptr, nullptr, 0));
    const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      std::string msg = r ? PQresultErrorMessage(r.get()) : Message();
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      if (PQstatus(conn_) != CONNECTION_OK)
        return Status::Unavailable("PostgreSQL connection '" + name_ + "' was lost: " + msg);
      return Status::InvalidArgument("PostgreSQL connection '" + name_ + "': " + msg);
    }
    return r;
  }

 private:
  PGconn* conn_ = nullptr;
  std::string name_;
};

// "{1,2.5,NULL}" (a numeric array's text form) -> numbers; false for NULLs or nesting we do not read.
bool ParseNumericArray(const char* text, std::vector<double>* out) {
  const char* p = text;
  for (; *p; ++p) {
    if (*p == '{' || *p == '}' || *p == ',') continue;
    char* end = nullptr;
    const double v = std::strtod(p, &end);
    if (end == p) return false;  // NULL or something else
    out->push_back(v);
    p = end - 1;
  }
  return true;
}

class PostgresSource final : public RowSource {
 public:
  Status Open(const std::string& name, const std::string& conninfo, const std::string& query,
              const std::string& order_by) {
    INFERD_RETURN_IF_ERROR(conn_.Open(name, conninfo));
    const std::string q = StripQueryEnd(query);
    INFERD_RETURN_IF_ERROR(conn_.Exec("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    {
      // The columns, without reading rows.
      INFERD_ASSIGN_OR_RETURN(PgResult r, conn_.Exec("SELECT * FROM (\n" + q + "\n) AS inferd_source LIMIT 0"));
      for (int i = 0; i < PQnfields(r.get()); ++i) columns_.push_back(PQfname(r.get(), i));
    }
    bool has_key = false;
    for (const auto& c : columns_) has_key |= c == order_by;
    if (!has_key)
      return Status::InvalidArgument("job spec: 'key' names column '" + order_by +
                                     "', which the query does not return");
    {
      INFERD_ASSIGN_OR_RETURN(PgResult r, conn_.Exec("SELECT count(*) FROM (\n" + q + "\n) AS inferd_source"));
      if (PQntuples(r.get()) == 1) total_ = std::atoll(PQgetvalue(r.get(), 0, 0));
    }
    return conn_
        .Exec("DECLARE inferd_rows NO SCROLL CURSOR FOR SELECT * FROM (\n" + q + "\n) AS inferd_source ORDER BY " +
              QuoteIdentifier(order_by))
        .status();
  }

  const std::vector<std::string>& columns() const override { return columns_; }
  std::optional<int64_t> total_rows() const override { return total_; }

  Result<bool> Next(Row* row) override {
    if (!chunk_ || next_ >= PQntuples(chunk_.get())) {
      if (done_) return false;
      INFERD_ASSIGN_OR_RETURN(chunk_, conn_.Exec("FETCH 512 FROM inferd_rows"));
      next_ = 0;
      if (PQntuples(chunk_.get()) == 0) {
        done_ = true;
        return false;
      }
    }
    PGresult* r = chunk_.get();
    row->ordinal = ordinal_++;
    row->error.clear();
    row->cells.resize(columns_.size());
    for (int i = 0; i < static_cast<int>(columns_.size()); ++i) {
      Cell& cell = row->cells[static_cast<size_t>(i)];
      if (PQgetisnull(r, next_, i)) {
        cell = std::monostate{};
        continue;
      }
      const char* v = PQgetvalue(r, next_, i);
      switch (PQftype(r, i)) {
        case kInt2:
        case kInt4:
        case kInt8:
          cell = static_cast<int64_t>(std::atoll(v));
          break;
        case kFloat4:
        case kFloat8:
        case kNumeric:
          cell = std::strtod(v, nullptr);
          break;
        case kBool:
          cell = static_cast<int64_t>(v[0] == 't' ? 1 : 0);
          break;
        case kJson:
        case kJsonb:
          cell = JsonText{v};
          break;
        case kInt2Array:
        case kInt4Array:
        case kInt8Array:
        case kFloat4Array:
        case kFloat8Array:
        case kNumericArray: {
          NumberArray a;
          if (ParseNumericArray(v, &a.values))
            cell = std::move(a);
          else
            cell = std::string(v);  // NULL elements: the encoder reports the row
          break;
        }
        default:
          cell = std::string(v, static_cast<size_t>(PQgetlength(r, next_, i)));
      }
    }
    ++next_;
    return true;
  }

 private:
  PgConnection conn_;
  std::vector<std::string> columns_;
  std::optional<int64_t> total_;
  PgResult chunk_;
  int next_ = 0;
  bool done_ = false;
  int64_t ordinal_ = 0;
};

class PostgresSink final : public PredictionSink {
 public:
  PostgresSink(std::string table) : table_(std::move(table)) {}
  Status Open(const std::string& name, const std::string& conninfo) { return conn_.Open(name, conninfo); }

  Status Prepare(const SinkSchema& schema) override {
    if (table_.size() + 7 > 63)
      return Status::InvalidArgument("sink table '" + table_ +
                                     "': at most 56 bytes on PostgreSQL (its errors table adds '_errors')");
    std::set<std::string> names;
    std::vector<std::string> all = {schema.key_column};
    for (const char* r : kReservedColumns) all.push_back(r);
    for (const auto& v : schema.value_columns) all.push_back(v);
    for (const auto& n : all) {
      if (n.size() > 63)
        return Status::InvalidArgument("sink table '" + table_ + "': column '" + n + "' is longer than 63 bytes");
      if (!names.insert(n).second)
        return Status::InvalidArgument("sink table '" + table_ + "': column name '" + n + "' is used twice");
    }
    values_ = schema.value_columns.size();
    key_ = schema.key_column;
    value_columns_ = schema.value_columns;
    INFERD_ASSIGN_OR_RETURN(PgResult cols, conn_.Exec("SELECT column_name FROM information_schema.columns WHERE "
                                                      "table_schema = current_schema() AND table_name = $1",
                                                      {table_.c_str()}));
    std::set<std::string> existing;
    for (int i = 0; i < PQntuples(cols.get()); ++i) existing.insert(PQgetvalue(cols.get(), i, 0));
    if (existing.empty()) {
      INFERD_RETURN_IF_ERROR(conn_.Exec(PgCreateTableSql(table_, key_, value_columns_)).status());
    } else {
      for (const auto& n : all)
        if (!existing.count(n))
          return Status::InvalidArgument("sink table '" + table_ + "' exists without column '" + n + "'");
    }
    INFERD_RETURN_IF_ERROR(conn_
                               .Exec("CREATE TABLE IF NOT EXISTS " + QuoteIdentifier(table_ + "_errors") +
                                     " (job_id TEXT NOT NULL, row_ordinal BIGINT NOT NULL, key TEXT, message TEXT "
                                     "NOT NULL, PRIMARY KEY (job_id, row_ordinal))")
                               .status());
    return conn_
        .Exec(
            "CREATE TABLE IF NOT EXISTS inferd_job_checkpoints (job_id TEXT PRIMARY KEY, sink_table TEXT NOT NULL, "
            "rows_done BIGINT NOT NULL, rows_written BIGINT NOT NULL, row_errors BIGINT NOT NULL, finished "
            "BOOLEAN NOT NULL, updated_at DOUBLE PRECISION NOT NULL)")
        .status();
  }

  Result<std::optional<Checkpoint>> ReadCheckpoint(const std::string& job_id) override {
    INFERD_ASSIGN_OR_RETURN(PgResult r, conn_.Exec("SELECT rows_done, rows_written, row_errors, finished FROM "
                                                   "inferd_job_checkpoints WHERE job_id = $1",
                                                   {job_id.c_str()}));
    if (PQntuples(r.get()) == 0) return std::optional<Checkpoint>();
    Checkpoint c;
    c.rows_done = std::atoll(PQgetvalue(r.get(), 0, 0));
    c.rows_written = std::atoll(PQgetvalue(r.get(), 0, 1));
    c.row_errors = std::atoll(PQgetvalue(r.get(), 0, 2));
    c.finished = PQgetvalue(r.get(), 0, 3)[0] == 't';
    return std::optional<Checkpoint>(c);
  }

  Status Reset(const std::string& job_id) override {
    INFERD_RETURN_IF_ERROR(conn_.Exec("BEGIN").status());
    Status st = conn_.Exec("DELETE FROM inferd_job_checkpoints WHERE job_id = $1", {job_id.c_str()}).status();
    if (st.ok())
      st = conn_.Exec("DELETE FROM " + QuoteIdentifier(table_ + "_errors") + " WHERE job_id = $1", {job_id.c_str()})
               .status();
    return Finish(st);
  }

  Status Commit(const std::string& job_id, const std::string& model, const std::vector<ResultRow>& rows,
                const std::vector<RowError>& errors, const Checkpoint& cp) override {
    INFERD_RETURN_IF_ERROR(conn_.Exec("BEGIN").status());
    Status st = WriteAll(job_id, model, rows, errors, cp);
    return Finish(st);
  }

 private:
  Status WriteAll(const std::string& job_id, const std::string& model, const std::vector<ResultRow>& rows,
                  const std::vector<RowError>& errors, const Checkpoint& cp) {
    const std::string now = std::to_string(UnixNow());
    // Multi-row upserts, within PostgreSQL's 65,535 parameters per statement.
    const size_t per_row = 4 + values_;
    const size_t chunk = std::max<size_t>(1, 60000 / per_row);
    std::string update =
        "model_name = EXCLUDED.model_name, model_version = EXCLUDED.model_version, "
        "predicted_at = EXCLUDED.predicted_at";
    for (const auto& v : value_columns_) update += ", " + QuoteIdentifier(v) + " = EXCLUDED." + QuoteIdentifier(v);
    std::string head = "INSERT INTO " + QuoteIdentifier(table_) + " (" + QuoteIdentifier(key_) +
                       ", model_name, model_version, predicted_at";
    for (const auto& v : value_columns_) head += ", " + QuoteIdentifier(v);
    head += ") VALUES ";
    for (size_t start = 0; start < rows.size(); start += chunk) {
      const size_t end = std::min(rows.size(), start + chunk);
      std::vector<std::string> texts;
      texts.reserve((end - start) * per_row);
      std::string sql = head;
      int p = 0;
      for (size_t i = start; i < end; ++i) {
        const ResultRow& r = rows[i];
        auto param = [&](const char* cast) {
          sql += '$';
          sql += std::to_string(++p);
          sql += cast;
        };
        sql += i == start ? "(" : ", (";
        param(", ");
        param(", ");
        param(", ");
        param("::double precision");
        texts.push_back(r.key);
        texts.push_back(model);
        texts.push_back(r.model_version);
        texts.push_back(now);
        for (size_t k = 0; k < values_; ++k) {
          sql += ", ";
          param("::jsonb");
          texts.push_back(k < r.values.size() ? CellJson(r.values[k]) : "null");
        }
        sql += ")";
      }
      sql += " ON CONFLICT (" + QuoteIdentifier(key_) + ") DO UPDATE SET " + update;
      std::vector<const char*> params;
      for (const auto& t : texts) params.push_back(t.c_str());
      INFERD_RETURN_IF_ERROR(conn_.Exec(sql, params).status());
    }
    for (const auto& e : errors) {
      const std::string ordinal = std::to_string(e.ordinal);
      INFERD_RETURN_IF_ERROR(conn_
                                 .Exec("INSERT INTO " + QuoteIdentifier(table_ + "_errors") +
                                           " (job_id, row_ordinal, key, message) VALUES ($1, $2, $3, $4) ON CONFLICT "
                                           "(job_id, row_ordinal) DO UPDATE SET key = EXCLUDED.key, message = "
                                           "EXCLUDED.message",
                                       {job_id.c_str(), ordinal.c_str(), e.key.c_str(), e.message.c_str()})
                                 .status());
    }
    const std::string done = std::to_string(cp.rows_done), written = std::to_string(cp.rows_written),
                      errs = std::to_string(cp.row_errors);
    return conn_
        .Exec(
            "INSERT INTO inferd_job_checkpoints (job_id, sink_table, rows_done, rows_written, row_errors, finished, "
            "updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (job_id) DO UPDATE SET sink_table = "
            "EXCLUDED.sink_table, rows_done = EXCLUDED.rows_done, rows_written = EXCLUDED.rows_written, row_errors "
            "= EXCLUDED.row_errors, finished = EXCLUDED.finished, updated_at = EXCLUDED.updated_at",
            {job_id.c_str(), table_.c_str(), done.c_str(), written.c_str(), errs.c_str(), cp.finished ? "t" : "f",
             now.c_str()})
        .status();
  }

  Status Finish(const Status& st) {
    if (st.ok()) return conn_.Exec("COMMIT").status();
    (void)conn_.Exec("ROLLBACK");
    return st;
  }

  PgConnection conn_;
  const std::string table_;
  std::string key_;
  std::vector<std::string> value_columns_;
  size_t values_ = 0;
};

class PostgresStore final : public PredictionStore {
 public:
  PostgresStore(std::string name, std::string conninfo, StoreTable table)
      : name_(std::move(name)), conninfo_(std::move(conninfo)), table_(std::move(table)) {}

  Result<std::optional<StoredPrediction>> Lookup(const std::string& key) override {
    MutexLock l(&mu_);
    INFERD_RETURN_IF_ERROR(Connect());
    std::string sql = "SELECT model_name, model_version, predicted_at";
    for (const auto& v : table_.value_columns) sql += ", " + QuoteIdentifier(v) + "::text";
    sql += " FROM " + QuoteIdentifier(table_.table) + " WHERE " + QuoteIdentifier(table_.key_column) + " = $1";
    auto r = conn_->Exec(sql, {key.c_str()});
    if (!r.ok()) {
      if (r.status().code() != StatusCode::kUnavailable &&
          r.status().message().find("relation \"" + table_.table + "\" does not exist") != std::string::npos)
        return std::optional<StoredPrediction>();  // no table yet
      return Lost(r.status());
    }
    PGresult* res = r->get();
    if (PQntuples(res) == 0) return std::optional<StoredPrediction>();
    StoredPrediction p;
    p.model_name = PQgetvalue(res, 0, 0);
    p.model_version = PQgetvalue(res, 0, 1);
    p.predicted_at = std::strtod(PQgetvalue(res, 0, 2), nullptr);
    for (size_t i = 0; i < table_.value_columns.size(); ++i) {
      const int col = static_cast<int>(3 + i);
      if (PQgetisnull(res, 0, col))
        p.values.emplace_back(std::monostate{});
      else
        p.values.emplace_back(JsonText{PQgetvalue(res, 0, col)});  // JSONB as text
    }
    return std::optional<StoredPrediction>(std::move(p));
  }

  Status Write(const std::string& key, const std::string& model, const std::string& version,
               const std::vector<Cell>& values) override {
    MutexLock l(&mu_);
    INFERD_RETURN_IF_ERROR(Connect());
    if (!table_ready_) {  // written back before any job wrote the table: create it as a job would
      auto created = conn_->Exec(PgCreateTableSql(table_.table, table_.key_column, table_.value_columns));
      if (!created.ok()) return Lost(created.status());
      table_ready_ = true;
    }
    std::string sql = "INSERT INTO " + QuoteIdentifier(table_.table) + " (" + QuoteIdentifier(table_.key_column) +
                      ", model_name, model_version, predicted_at";
    std::string params = "$1, $2, $3, $4::double precision";
    std::string update =
        "model_name = EXCLUDED.model_name, model_version = EXCLUDED.model_version, "
        "predicted_at = EXCLUDED.predicted_at";
    std::vector<std::string> texts = {key, model, version, std::to_string(UnixNow())};
    for (size_t i = 0; i < table_.value_columns.size(); ++i) {
      const std::string& v = table_.value_columns[i];
      sql += ", " + QuoteIdentifier(v);
      params += ", $" + std::to_string(5 + i) + "::jsonb";
      update += ", " + QuoteIdentifier(v) + " = EXCLUDED." + QuoteIdentifier(v);
      texts.push_back(i < values.size() ? CellJson(values[i]) : "null");
    }
    sql += ") VALUES (" + params + ") ON CONFLICT (" + QuoteIdentifier(table_.key_column) + ") DO UPDATE SET " + update;
    std::vector<const char*> ps;
    for (const auto& t : texts) ps.push_back(t.c_str());
    auto r = conn_->Exec(sql, ps);
    if (!r.ok()) return Lost(r.status());
    return Status::OK();
  }

 private:
  // A connection, opened (again) when there is none and the last attempt is
  // older than the reconnect interval.
  Status Connect() TSA_REQUIRES(mu_) {
    if (conn_) return Status::OK();
    const auto now = std::chrono::steady_clock::now();
    if (attempted_ && now - *attempted_ < table_.reconnect_interval)
      return Status::Unavailable("PostgreSQL connection '" + name_ + "' is down: " + last_error_);
    attempted_ = now;
    auto c = std::make_unique<PgConnection>();
    if (Status st = c->Open(name_, conninfo_); !st.ok()) {
      last_error_ = st.message();
      return Status::Unavailable(st.message());
    }
    conn_ = std::move(c);
    return Status::OK();
  }
  // Drops a connection that broke (the next call reconnects).
  Status Lost(const Status& st) TSA_REQUIRES(mu_) {
    if (st.code() == StatusCode::kUnavailable) {
      conn_.reset();
      table_ready_ = false;
      last_error_ = st.message();
    }
    return st;
  }

  const std::string name_, conninfo_;
  const StoreTable table_;
  Mutex mu_;
  std::unique_ptr<PgConnection> conn_ TSA_GUARDED_BY(mu_);
  bool table_ready_ TSA_GUARDED_BY(mu_) = false;  // CREATE TABLE IF NOT EXISTS ran on conn_
  std::optional<std::chrono::steady_clock::time_point> attempted_ TSA_GUARDED_BY(mu_);
  std::string last_error_ TSA_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<PredictionStore> OpenPostgresStore(const std::string& name, const std::string& conninfo,
                                                   StoreTable table) {
  return std::make_unique<PostgresStore>(name, conninfo, std::move(table));
}

Result<std::unique_ptr<RowSource>> OpenPostgresSource(const std::string& name, const std::string& conninfo,
                                                      const std::string& query, const std::string& order_by) {
  auto s = std::make_unique<PostgresSource>();
  INFERD_RETURN_IF_ERROR(s->Open(name, conninfo, query, order_by));
  return std::unique_ptr<RowSource>(std::move(s));
}

Result<std::unique_ptr<PredictionSink>> OpenPostgresSink(const std::string& name, const std::string& conninfo,
                                                         const std::string& table) {
  auto s = std::make_unique<PostgresSink>(table);
  INFERD_RETURN_IF_ERROR(s->Open(name, conninfo));
  return std::unique_ptr<PredictionSink>(std::move(s));
}

}  // namespace inferd::jobs
