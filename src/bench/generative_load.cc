#include "bench/generative_load.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "bench/stats.h"
#include "core/status.h"

namespace inferd::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

const char* const kWords[] = {"the",     "software", "license", "copy",   "free",    "program", "source", "code",
                              "you",     "may",      "work",    "terms",  "public",  "general", "any",    "under",
                              "version", "rights",   "modify",  "notice", "section", "covered", "object", "form"};

Result<int> Connect(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) {
    return Status::Unavailable("cannot resolve " + host);
  }
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) return Status::Unavailable("cannot connect to " + host + ":" + std::to_string(port));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

struct Streamed {
  std::string text;                       // the answer
  std::vector<Clock::time_point> chunks;  // arrival of each chunk with text
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// Reads one event-stream response (chunked transfer encoding) to the end.
Status ReadStream(int fd, bool chat, Streamed* out) {
  std::string buf, body, events;
  char tmp[16384];
  bool headers_done = false, chunked = false, done = false;
  size_t chunk_left = 0;
  auto handle_event = [&](std::string_view data) -> Status {
    if (data == "[DONE]") {
      done = true;
      return Status::OK();
    }
    rapidjson::Document d;
    d.Parse(data.data(), data.size());
    if (d.HasParseError() || !d.IsObject()) return Status::Internal("bad event: " + std::string(data.substr(0, 200)));
    if (d.HasMember("error")) return Status::Internal("stream error: " + std::string(data.substr(0, 300)));
    if (d.HasMember("usage") && d["usage"].IsObject()) {
      const auto& u = d["usage"];
      out->prompt_tokens = u["prompt_tokens"].GetInt64();
      out->completion_tokens = u["completion_tokens"].GetInt64();
      if (u.HasMember("prompt_tokens_details") && u["prompt_tokens_details"].IsObject()) {
        out->cached_tokens = u["prompt_tokens_details"]["cached_tokens"].GetInt64();
      }
    }
    if (d.HasMember("choices") && d["choices"].IsArray() && !d["choices"].Empty()) {
      const auto& c = d["choices"][0];
      const rapidjson::Value* t = nullptr;
      if (chat && c.HasMember("delta") && c["delta"].HasMember("content") && c["delta"]["content"].IsString()) {
        t = &c["delta"]["content"];
      } else if (!chat && c.HasMember("text") && c["text"].IsString()) {
        t = &c["text"];
      }
      if (t != nullptr && t->GetStringLength() > 0) {
        out->chunks.push_back(Clock::now());
        out->text.append(t->GetString(), t->GetStringLength());
      }
    }
    return Status::OK();
  };
  auto feed_body = [&](std::string_view b) -> Status {
    events.append(b);
    size_t pos;
    while ((pos = events.find("\n\n")) != std::string::npos) {
      std::string_view ev(events.data(), pos);
      if (ev.substr(0, 6) == "data: ") INFERD_RETURN_IF_ERROR(handle_event(ev.substr(6)));
      events.erase(0, pos + 2);
    }
    return Status::OK();
  };
  while (!done) {
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
    if (!headers_done) {
      const size_t end = buf.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      const std::string head = buf.substr(0, end);
      if (head.compare(0, 12, "HTTP/1.1 200") != 0) {
        return Status::Internal("status: " + head.substr(0, head.find("\r\n")) + " " + buf.substr(end + 4, 300));
      }
      std::string lower = head;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      chunked = lower.find("transfer-encoding: chunked") != std::string::npos;
      buf.erase(0, end + 4);
      headers_done = true;
    }
    if (!chunked) {
      INFERD_RETURN_IF_ERROR(feed_body(buf));
      buf.clear();
      continue;
    }
    while (!buf.empty()) {
      if (chunk_left == 0) {
        const size_t eol = buf.find("\r\n");
        if (eol == std::string::npos) break;
        chunk_left = std::stoul(buf.substr(0, eol), nullptr, 16);
        buf.erase(0, eol + 2);
        if (chunk_left == 0) {
          done = true;
          break;
        }
        chunk_left += 2;  // the chunk's trailing CRLF
      }
      const size_t take = std::min(chunk_left, buf.size());
      const size_t data = chunk_left > 2 ? std::min(take, chunk_left - 2) : 0;
      INFERD_RETURN_IF_ERROR(feed_body(std::string_view(buf).substr(0, data)));
      buf.erase(0, take);
      chunk_left -= take;
    }
  }
  if (!done) return Status::Internal("the stream ended early");
  return Status::OK();
}

std::string Json(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

struct Conversation {
  int index = 0;
  int turn = 0;
  std::vector<std::pair<std::string, std::string>> history;  // (role, content)
  std::vector<std::string> questions;
  std::vector<int> outputs;
  Clock::time_point due;
};

std::string Words(std::mt19937_64& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return s;
}

}  // namespace

Result<GenerativeReport> RunGenerativeLoad(const GenerativeLoadOptions& o) {
  if (o.num_requests < 1 || o.turns < 1 || o.concurrency < 1) return Status::InvalidArgument("nothing to run");
  std::mt19937_64 rng(o.seed);
  auto draw = [&](int mean, int spread) {
    return std::max(1, mean - spread + static_cast<int>(rng() % static_cast<uint64_t>(2 * spread + 1)));
  };
  std::vector<Conversation> convs(static_cast<size_t>(o.num_requests));
  const auto start = Clock::now();
  // Poisson arrivals: exponential gaps at the request rate (all at 0 without one).
  std::vector<double> arrivals(static_cast<size_t>(o.num_requests), 0.0);
  if (o.request_rate > 0) {
    std::exponential_distribution<double> gap(o.request_rate);
    double t = 0;
    for (auto& a : arrivals) a = (t += gap(rng));
  }
  for (size_t i = 0; i < convs.size(); ++i) {
    convs[i].index = static_cast<int>(i);
    for (int t = 0; t < o.turns; ++t) {
      // A marker first, so no two conversations share a prefix beyond the system prompt.
      std::string q = "[";
      q.append(std::to_string(i)).append(".").append(std::to_string(t)).append("] ");
      q.append(Words(rng, draw(o.prompt_words, o.prompt_spread)));
      convs[i].questions.push_back(std::move(q));
      convs[i].outputs.push_back(draw(o.output_tokens, o.output_spread));
    }
    convs[i].due = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i]));
  }
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Conversation*> ready;  // by due time (arrival order)
  for (auto& c : convs) ready.push_back(&c);
  int remaining = o.num_requests;
  GenerativeReport report;
  auto worker = [&] {
    while (true) {
      Conversation* c = nullptr;
      {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return !ready.empty() || remaining == 0; });
        if (ready.empty()) return;
        c = ready.front();
        ready.pop_front();
      }
      std::this_thread::sleep_until(c->due);  // the arrival schedule itself (open loop), not a wait for an event
      rapidjson::Document body(rapidjson::kObjectType);
      auto& a = body.GetAllocator();
      body.AddMember("model", rapidjson::Value(o.model.c_str(), a), a);
      const std::string& q = c->questions[static_cast<size_t>(c->turn)];
      if (o.chat) {
        rapidjson::Value msgs(rapidjson::kArrayType);
        auto add = [&](const std::string& role, const std::string& content) {
          rapidjson::Value m(rapidjson::kObjectType);
          m.AddMember("role", rapidjson::Value(role.c_str(), a), a);
          m.AddMember("content", rapidjson::Value(content.c_str(), a), a);
          msgs.PushBack(m, a);
        };
        if (!o.system_prompt.empty()) add("system", o.system_prompt);
        for (const auto& [role, content] : c->history) add(role, content);
        add("user", q);
        body.AddMember("messages", msgs, a);
      } else {
        body.AddMember("prompt", rapidjson::Value(q.c_str(), a), a);
      }
      body.AddMember("max_tokens", c->outputs[static_cast<size_t>(c->turn)], a);
      body.AddMember("ignore_eos", true, a);
      body.AddMember("temperature", 0.0, a);
      body.AddMember("stream", true, a);
      rapidjson::Value so(rapidjson::kObjectType);
      so.AddMember("include_usage", true, a);
      body.AddMember("stream_options", so, a);
      const std::string json = Json(body);
      const std::string path = o.chat ? "/v1/chat/completions" : "/v1/completions";
      std::ostringstream req;
      req << "POST " << path << " HTTP/1.1\r\nHost: " << o.host << "\r\nContent-Type: application/json\r\n"
          << "Content-Length: " << json.size() << "\r\nConnection: close\r\n\r\n"
          << json;
      const std::string wire = req.str();
      const auto scheduled = c->due;
      Streamed s;
      Status st;
      auto fd = Connect(o.host, o.port);
      if (!fd.ok()) {
        st = fd.status();
      } else {
        if (::send(*fd, wire.data(), wire.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(wire.size())) {
          st = Status::Unavailable("send failed");
        } else {
          st = ReadStream(*fd, o.chat, &s);
        }
        ::close(*fd);
      }
      const auto end = Clock::now();
      std::unique_lock<std::mutex> l(mu);
      if (!st.ok() || s.chunks.empty()) {
        ++report.failures;
        if (report.first_error.empty()) report.first_error = st.ok() ? "no tokens streamed" : st.message();
      } else {
        ++report.requests;
        const double ttft = Ms(s.chunks.front() - scheduled);
        const double e2e = Ms(end - scheduled);
        const double tpot = s.completion_tokens > 1 ? (e2e - ttft) / static_cast<double>(s.completion_tokens - 1) : 0;
        (c->turn == 0 ? report.ttft_ms : report.later_ttft_ms).push_back(ttft);
        report.e2e_ms.push_back(e2e);
        report.tpot_ms.push_back(tpot);
        for (size_t k = 1; k < s.chunks.size(); ++k) report.itl_ms.push_back(Ms(s.chunks[k] - s.chunks[k - 1]));
        report.input_tokens += s.prompt_tokens;
        report.output_tokens += s.completion_tokens;
        report.cached_tokens += s.cached_tokens;
        if ((o.slo_ttft_ms <= 0 || ttft <= o.slo_ttft_ms) && (o.slo_tpot_ms <= 0 || tpot <= o.slo_tpot_ms))
          ++report.good;
      }
      c->history.emplace_back("user", q);
      c->history.emplace_back("assistant", s.text);
      if (++c->turn < o.turns && st.ok()) {
        c->due = end;  // the next turn right after the answer
        ready.push_back(c);
      } else {
        --remaining;
      }
      cv.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < o.concurrency; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  report.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

namespace {

struct Row {
  const char* name;
  const std::vector<double>* values;
};

}  // namespace

std::string RenderGenerativeReport(const GenerativeReport& r, const std::string& label) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << (label.empty() ? "generative" : label) << ": " << r.requests << " requests (" << r.failures << " failed) in "
      << r.duration_s << " s; " << r.output_tokens_per_s() << " output tokens/s; input " << r.input_tokens
      << " tokens (" << r.cached_tokens << " from the prefix cache); goodput " << r.goodput() << " req/s\n";
  const Row rows[] = {{"TTFT ms", &r.ttft_ms},
                      {"TTFT later turns ms", &r.later_ttft_ms},
                      {"TPOT ms", &r.tpot_ms},
                      {"ITL ms", &r.itl_ms},
                      {"E2E ms", &r.e2e_ms}};
  for (const Row& row : rows) {
    if (row.values->empty()) continue;
    out << "  " << row.name << ": p50 " << Percentile(*row.values, 50) << "  p90 " << Percentile(*row.values, 90)
        << "  p99 " << Percentile(*row.values, 99) << "\n";
  }
  if (!r.first_error.empty()) out << "  first error: " << r.first_error << "\n";
  return out.str();
}

std::string GenerativeReportJson(const GenerativeReport& r, const std::string& label) {
  std::ostringstream out;
  out << "{\"label\":\"" << label << "\",\"requests\":" << r.requests << ",\"failures\":" << r.failures
      << ",\"duration_s\":" << r.duration_s << ",\"input_tokens\":" << r.input_tokens
      << ",\"cached_tokens\":" << r.cached_tokens << ",\"output_tokens\":" << r.output_tokens
      << ",\"output_tokens_per_s\":" << r.output_tokens_per_s() << ",\"goodput\":" << r.goodput();
  const Row rows[] = {{"ttft_ms", &r.ttft_ms},
                      {"later_ttft_ms", &r.later_ttft_ms},
                      {"tpot_ms", &r.tpot_ms},
                      {"itl_ms", &r.itl_ms},
                      {"e2e_ms", &r.e2e_ms}};
  for (const Row& row : rows) {
    out << ",\"" << row.name << "\":{\"p50\":" << Percentile(*row.values, 50) << ",\"p90\":"
        << Percentile(*row.values, 90) << ",\"p99\":" << Percentile(*row.values, 99) << ",\"mean\":"
        << (row.values->empty() ? 0.0 : [&] {
             double s = 0;
             for (double v : *row.values) s += v;
             return s / static_cast<double>(row.values->size());
           }())
        << "}";
  }
  out << "}";
  return out.str();
}

}  // namespace inferd::bench
