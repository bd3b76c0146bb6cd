#include "jobs/job_stores.h"

#include <climits>
#include <cstdlib>

#include "jobs/postgres/pg_store.h"
#include "jobs/redis/redis_store.h"
#include "jobs/sqlite/sqlite_store.h"

namespace inferd::jobs {
namespace {

// realpath(3) of an existing path; nullopt when it does not resolve.
std::optional<std::string> Canonical(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

bool Within(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

}  // namespace

Result<std::string> JobStores::ResolvePath(const std::string& path, bool must_exist) const {
  if (path.empty()) return Status::InvalidArgument("job spec: an empty path");
  if (config_.unrestricted) return path;
  if (config_.allowed_dirs.empty())
    return Status::PermissionDenied(
        "job spec: file paths are not allowed on this server (no allowed_dirs in its jobs config)");
  // No '..' component, whatever the directories would make of it.
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0)
      return Status::PermissionDenied("job spec: path '" + path + "' contains '..'");
    start = end + 1;
  }
  const std::string abs = path[0] == '/' ? path : config_.allowed_dirs.front() + "/" + path;
  // The file (a source) or its directory (a sink, which may not exist yet)
  // must resolve, symlinks followed, inside an allowed directory.
  std::optional<std::string> real = Canonical(abs);
  if (!real && must_exist) return Status::InvalidArgument("job spec: file '" + path + "' does not exist");
  if (!real) {
    const size_t slash = abs.rfind('/');
    const std::string dir = abs.substr(0, slash == 0 ? 1 : slash);
    auto real_dir = Canonical(dir);
    if (!real_dir) return Status::InvalidArgument("job spec: the directory of '" + path + "' does not exist");
    real = *real_dir + (real_dir->back() == '/' ? "" : "/") + abs.substr(slash + 1);
  }
  for (const auto& dir : config_.allowed_dirs)
    if (Within(*real, dir)) return *real;
  return Status::PermissionDenied("job spec: path '" + path +
                                  "' is outside the directories this server allows for jobs");
}

Result<const Connection*> JobStores::Named(const std::string& name, StoreType type, const char* what) const {
  auto it = config_.connections.find(name);
  if (it == config_.connections.end())
    return Status::PermissionDenied(std::string("job spec: ") + what + " names connection '" + name +
                                    "', which this server's jobs config does not define");
  if (it->second.type != type)
    return Status::InvalidArgument(std::string("job spec: ") + what + " connection '" + name + "' is a " +
                                   std::string(StoreTypeName(it->second.type)) + " connection, not " +
                                   std::string(StoreTypeName(type)));
  return &it->second;
}

Status JobStores::Check(const JobSpec& spec) const {
  const auto& src = spec.source;
  if (!src.connection.empty()) {
    INFERD_RETURN_IF_ERROR(Named(src.connection, src.type, "'source'").status());
  } else {
    INFERD_RETURN_IF_ERROR(ResolvePath(src.path, /*must_exist=*/true).status());
  }
  const auto& sink = spec.sink;
  if (!sink.connection.empty()) {
    INFERD_RETURN_IF_ERROR(Named(sink.connection, sink.type, "'sink'").status());
  } else {
    INFERD_RETURN_IF_ERROR(ResolvePath(sink.path, /*must_exist=*/false).status());
  }
  return Status::OK();
}

Result<std::string> JobStores::SqlitePath(const std::string& connection, const std::string& path, const char* what,
                                          bool must_exist) const {
  if (connection.empty()) return ResolvePath(path, must_exist);
  INFERD_ASSIGN_OR_RETURN(const Connection* c, Named(connection, StoreType::kSqlite, what));
  return c->path;
}

Result<std::unique_ptr<RowSource>> JobStores::OpenSource(const JobSpec& spec) const {
  const auto& src = spec.source;
  switch (src.type) {
    case StoreType::kCsv: {
      INFERD_ASSIGN_OR_RETURN(std::string path, ResolvePath(src.path, true));
      return OpenCsvSource(path);
    }
    case StoreType::kJsonl: {
      INFERD_ASSIGN_OR_RETURN(std::string path, ResolvePath(src.path, true));
      return OpenJsonlSource(path);
    }
    case StoreType::kSqlite: {
      INFERD_ASSIGN_OR_RETURN(std::string path, SqlitePath(src.connection, src.path, "'source'", true));
      return OpenSqliteSource(path, src.query, spec.key);
    }
    case StoreType::kPostgres: {
      INFERD_ASSIGN_OR_RETURN(const Connection* c, Named(src.connection, StoreType::kPostgres, "'source'"));
      return OpenPostgresSource(src.connection, c->conninfo, src.query, spec.key);
    }
    case StoreType::kRedis:
      break;
  }
  return Status::Internal("job spec: unknown source type");
}

Result<std::unique_ptr<PredictionSink>> JobStores::OpenSink(const JobSpec& spec) const {
  const auto& sink = spec.sink;
  switch (sink.type) {
    case StoreType::kCsv: {
      INFERD_ASSIGN_OR_RETURN(std::string path, ResolvePath(sink.path, false));
      return OpenCsvSink(path);
    }
    case StoreType::kJsonl: {
      INFERD_ASSIGN_OR_RETURN(std::string path, ResolvePath(sink.path, false));
      return OpenJsonlSink(path);
    }
    case StoreType::kSqlite: {
      INFERD_ASSIGN_OR_RETURN(std::string path, SqlitePath(sink.connection, sink.path, "'sink'", false));
      return OpenSqliteSink(path, sink.table);
    }
    case StoreType::kPostgres: {
      INFERD_ASSIGN_OR_RETURN(const Connection* c, Named(sink.connection, StoreType::kPostgres, "'sink'"));
      return OpenPostgresSink(sink.connection, c->conninfo, sink.table);
    }
    case StoreType::kRedis: {
      INFERD_ASSIGN_OR_RETURN(const Connection* c, Named(sink.connection, StoreType::kRedis, "'sink'"));
      return OpenRedisSink(RedisEndpointOf(sink.connection, *c), sink.table);
    }
  }
  return Status::Internal("job spec: unknown sink type");
}

Status JobStores::CheckStore(const std::string& connection, const std::string& table) const {
  auto it = config_.connections.find(connection);
  if (it == config_.connections.end())
    return Status::InvalidArgument("precomputed.connection '" + connection +
                                   "' is not a connection of the server's jobs config (--jobs-config)");
  if (it->second.type != StoreType::kSqlite && it->second.type != StoreType::kPostgres &&
      it->second.type != StoreType::kRedis)
    return Status::InvalidArgument("precomputed.connection '" + connection + "' is a " +
                                   std::string(StoreTypeName(it->second.type)) +
                                   " connection; a prediction store is sqlite, postgres or redis");
  if (!IsSqlIdentifier(table))
    return Status::InvalidArgument("precomputed.table '" + table +
                                   "' is not a table name (letters, digits and '_', at most 63 bytes)");
  return Status::OK();
}

Result<std::unique_ptr<PredictionStore>> JobStores::OpenStore(const std::string& connection, StoreTable table,
                                                              bool writable) const {
  auto it = config_.connections.find(connection);
  if (it == config_.connections.end())
    return Status::InvalidArgument("connection '" + connection + "' is not in the jobs config");
  if (it->second.type == StoreType::kPostgres)
    return OpenPostgresStore(connection, it->second.conninfo, std::move(table));
  if (it->second.type == StoreType::kSqlite) return OpenSqliteStore(it->second.path, std::move(table), writable);
  if (it->second.type == StoreType::kRedis)
    return OpenRedisStore(RedisEndpointOf(connection, it->second), std::move(table));
  return Status::InvalidArgument("connection '" + connection + "' is not sqlite, postgres or redis");
}

}  // namespace inferd::jobs
