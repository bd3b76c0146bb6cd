#include "jobs/jobs_config.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace inferd::jobs {
namespace {

Status BadConfig(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("jobs config: '" + field + "' " + why);
}

}  // namespace

Result<JobsConfig> ParseJobsConfig(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError()) {
    return Status::InvalidArgument(std::string("jobs config: malformed JSON at offset ") +
                                   std::to_string(doc.GetErrorOffset()) + ": " +
                                   rapidjson::GetParseError_En(doc.GetParseError()));
  }
  if (!doc.IsObject()) return Status::InvalidArgument("jobs config: must be a JSON object");
  JobsConfig c;
  for (auto m = doc.MemberBegin(); m != doc.MemberEnd(); ++m) {
    const std::string name = m->name.GetString();
    if (name == "connections") {
      if (!m->value.IsObject()) return BadConfig("connections", "must be an object");
      for (auto k = m->value.MemberBegin(); k != m->value.MemberEnd(); ++k) {
        const std::string cname = k->name.GetString();
        const std::string field = "connections." + cname;
        if (cname.empty() || cname.size() > kMaxNameBytes) return BadConfig(field, "needs a name of 1..256 bytes");
        const auto& v = k->value;
        if (!v.IsObject() || !v.HasMember("type") || !v["type"].IsString())
          return BadConfig(field, "must be an object with a \"type\"");
        Connection conn;
        const std::string type = v["type"].GetString();
        auto str = [&](const char* key) -> Result<std::string> {
          auto it = v.FindMember(key);
          if (it == v.MemberEnd()) return std::string();
          if (!it->value.IsString()) return BadConfig(field + "." + key, "must be a string");
          return std::string(it->value.GetString(), it->value.GetStringLength());
        };
        for (auto f = v.MemberBegin(); f != v.MemberEnd(); ++f) {
          const std::string fn = f->name.GetString();
          const bool redis_field = fn == "host" || fn == "port" || fn == "password" || fn == "db";
          if (fn != "type" && fn != "path" && fn != "conninfo" && !(type == "redis" && redis_field))
            return BadConfig(field + "." + fn, "is not a known field");
        }
        auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t dflt) -> Result<int64_t> {
          auto it = v.FindMember(key);
          if (it == v.MemberEnd()) return dflt;
          if (!it->value.IsInt64() || it->value.GetInt64() < lo || it->value.GetInt64() > hi)
            return BadConfig(field + "." + key,
                             "must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
          return it->value.GetInt64();
        };
        if (type == "sqlite") {
          conn.type = StoreType::kSqlite;
          INFERD_ASSIGN_OR_RETURN(conn.path, str("path"));
          if (conn.path.empty()) return BadConfig(field + ".path", "is required for an sqlite connection");
        } else if (type == "postgres") {
          conn.type = StoreType::kPostgres;
          INFERD_ASSIGN_OR_RETURN(conn.conninfo, str("conninfo"));
          if (conn.conninfo.empty()) return BadConfig(field + ".conninfo", "is required for a postgres connection");
        } else if (type == "redis") {
          conn.type = StoreType::kRedis;
          INFERD_ASSIGN_OR_RETURN(conn.host, str("host"));
          if (conn.host.empty()) conn.host = "127.0.0.1";
          INFERD_ASSIGN_OR_RETURN(int64_t port, integer("port", 1, 65535, 6379));
          INFERD_ASSIGN_OR_RETURN(int64_t db, integer("db", 0, 1 << 20, 0));
          conn.port = static_cast<int>(port);
          conn.db = static_cast<int>(db);
          INFERD_ASSIGN_OR_RETURN(conn.password, str("password"));
        } else {
          return BadConfig(field + ".type", "must be sqlite, postgres or redis");
        }
        c.connections.emplace(cname, std::move(conn));
      }
    } else if (name == "allowed_dirs") {
      if (!m->value.IsArray()) return BadConfig("allowed_dirs", "must be an array of directories");
      for (const auto& d : m->value.GetArray()) {
        if (!d.IsString() || d.GetStringLength() == 0)
          return BadConfig("allowed_dirs", "must be an array of directories");
        const std::string dir = d.GetString();
        if (dir[0] != '/') return BadConfig("allowed_dirs", "holds '" + dir + "', which is not an absolute path");
        char canon[PATH_MAX];
        if (!::realpath(dir.c_str(), canon))
          return BadConfig("allowed_dirs", "holds '" + dir + "', which does not exist");
        c.allowed_dirs.push_back(canon);
      }
    } else {
      return BadConfig(name, "is not a known field (connections, allowed_dirs)");
    }
  }
  return c;
}

Result<JobsConfig> LoadJobsConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read the jobs config '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseJobsConfig(ss.str());
}

}  // namespace inferd::jobs
