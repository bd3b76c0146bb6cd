// `inferd serve`: load a model repository and serve it over HTTP.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "backends/backend.h"
#include "cli/commands.h"
#include "cli/observability_flags.h"
#include "cli/security_flags.h"
#include "cluster/cluster_options.h"
#include "cluster/etcd/etcd_store.h"
#include "console/console_handler.h"
#include "core/blas_core.h"
#include "core/byte_size.h"
#include "frontends/grpc/grpc_forwarder.h"
#include "frontends/grpc/grpc_server.h"
#include "frontends/http/http_forwarder.h"
#include "frontends/http/http_server.h"
#include "frontends/http/router.h"
#include "jobs/jobs_config.h"
#include "lifecycle/control_state_store.h"
#include "scheduler/scheduler_factory.h"
#include "server/file_reloader.h"
#include "server/forwarder.h"
#include "server/inference_server.h"
#include "server/server_options.h"

namespace inferd::cli {
namespace {

// The stop-signal pipe: a process-wide resource by nature (signal handlers
// cannot take arguments). The handler only writes to it (async-signal-safe).
int g_signal_pipe[2] = {-1, -1};

void OnStopSignal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

// Blocks until SIGINT or SIGTERM was taken (by any thread); returns which,
// or 0 once `done_fd` (when given) is readable. SIGHUP calls `on_hangup`
// (when given: credentials are re-read) and waits on. The signals are
// unblocked only inside ppoll, so this thread takes them there when no other
// thread can.
int WaitForStopSignal(const sigset_t& wait_mask, int done_fd = -1, const std::function<void()>& on_hangup = {}) {
  for (;;) {
    pollfd p[2] = {{g_signal_pipe[0], POLLIN, 0}, {done_fd, POLLIN, 0}};
    (void)ppoll(p, done_fd < 0 ? 1 : 2, nullptr, &wait_mask);  // EINTR when the handler ran here
    unsigned char b = 0;
    if (read(g_signal_pipe[0], &b, 1) == 1) {
      if (b != SIGHUP) return b;
      if (on_hangup) on_hangup();
      continue;
    }
    if (done_fd >= 0 && (p[1].revents & (POLLIN | POLLHUP))) return 0;
  }
}

// Every connection is a descriptor: the soft limit (often 1,024) would make
// accept() fail for everyone once that many clients idled, so it is raised
// to the hard limit; a warning when even that cannot hold the HTTP port's cap.
void RaiseOpenFilesLimit(size_t max_connections) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    const rlim_t before = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) {
      spdlog::debug("open files limit raised from {} to {}", before, lim.rlim_cur);
    } else {
      lim.rlim_cur = before;
    }
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < max_connections + 256) {
    spdlog::warn(
        "the open files limit ({}) is below --http-max-connections ({}) and what models and other ports "
        "need: connections beyond it fail to be accepted (raise it: ulimit -n, LimitNOFILE=)",
        lim.rlim_cur, max_connections);
  }
}

// A stop signal while the server starts (eager residency loads every model
// first: minutes for a large repository) abandons the start: the model
// loading finishes, no further one starts, and the server stops as after any
// stop signal. Kubernetes sends SIGTERM to a pod still starting when a
// rollout is undone or the node drains. Not thread-safe: the starting thread
// owns it.
class StartWatch {
 public:
  StartWatch(InferenceServer* server, const sigset_t& wait_mask) {
    if (pipe2(done_, O_CLOEXEC) != 0) return;  // no watch: a signal then waits for the start
    thread_ = std::thread([this, server, &wait_mask] {
      signal_ = WaitForStopSignal(wait_mask, done_[0]);
      if (signal_ != 0) server->AbandonStart();
    });
  }
  ~StartWatch() { (void)Finish(); }
  StartWatch(const StartWatch&) = delete;
  StartWatch& operator=(const StartWatch&) = delete;

  // Ends the watch; the signal taken during the start, or 0.
  int Finish() {
    if (thread_.joinable()) {
      close(done_[1]);
      thread_.join();
      close(done_[0]);
    }
    return signal_;
  }

 private:
  int done_[2] = {-1, -1};
  int signal_ = 0;  // written by the thread, read after the join
  std::thread thread_;
};

struct ServeFlags {
  std::string repository;
  std::string control_state_dir;  // "" = DefaultStateDirectory(repository)
  std::string host = "0.0.0.0";
  int http_port = 8000;
  int metrics_port = 8002;
  bool allow_metrics = true;
  int http_threads = 1;
  int intra_op_threads = 0;                   // 0 = cores - http threads
  std::vector<std::string> model_parameters;  // KEY=VALUE
  size_t max_queue_size = 1024;
  size_t max_body_bytes = 64u << 20;
  size_t max_connections = 10000;
  size_t max_connections_per_client = 0;
  JsonLimits json_limits;
  int idle_timeout_ms = 60000;
  int read_timeout_ms = 30000;
  int shutdown_grace_ms = 30000;
  std::string control_mode = "none";
  double poll_secs = 15;
  std::vector<std::string> load_models;
  bool strict_readiness = false;
  bool exit_on_error = false;
  std::string cache_config;  // Triton's --cache-config local,size=N
  int64_t shadow_max_in_flight = 16;
  std::string jobs_config;
  int max_running_jobs = 2;
  int precomputed_lookup_threads = 2;
  SecurityFlags security;
  std::string log_level = "info";
  int http_spin_us = 100;
  std::string model_thread_scheduling = "batch";
  int http_cancel_check_ms = 100;
  std::string residency = "eager";
  std::string memory_budget;  // bytes or units; "" = none
  double min_residency_secs = 1;
  int load_threads = 2;
  int64_t index_at_start_limit = 10000;
  double load_wait_secs = 30;
  bool allow_grpc = true;
  grpcfe::GrpcServerOptions grpc;
  std::string cluster;  // etcd://HOST:PORT[,...]; "" = a single node
  std::string cluster_name = "default";
  std::string cluster_node_id;         // "" = <advertise host>:<HTTP port>
  std::string cluster_advertise_host;  // "" = --host, or the host name when --host is a wildcard
  int cluster_lease_ttl_secs = 5;
  int cluster_refresh_ms = 1000;
  double cluster_copy_rate = 50;
  ObservabilityFlags observability;
};

// The host name peers reach this node at: --cluster-advertise-host, else
// --host unless it is a wildcard address, else the machine's host name.
std::string AdvertiseHost(const ServeFlags& f) {
  if (!f.cluster_advertise_host.empty()) return f.cluster_advertise_host;
  if (f.host != "0.0.0.0" && f.host != "::" && f.host != "[::]") return f.host;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') return name;
  return "127.0.0.1";
}

// --cluster and its companions, checked before anything loads (exit 2 on a
// bad flag). The addresses are filled in once the front ends listen.
Result<cluster::ClusterOptions> ClusterOptionsFromFlags(const ServeFlags& f) {
  cluster::ClusterOptions o;
  auto endpoints = cluster::ParseClusterUrl(f.cluster);
  if (!endpoints.ok()) return endpoints.status();
  o.endpoints = std::move(*endpoints);
  o.name = f.cluster_name;
  o.lease_ttl = std::chrono::seconds(f.cluster_lease_ttl_secs);
  o.refresh = std::chrono::milliseconds(f.cluster_refresh_ms);
  o.copy_rate = f.cluster_copy_rate;
  const std::string host = AdvertiseHost(f);
  o.node_id = f.cluster_node_id.empty() ? host + ":" + std::to_string(f.http_port) : f.cluster_node_id;
  o.http_address = host + ":" + std::to_string(f.http_port == 0 ? 1 : f.http_port);  // checked again at Join
  if (Status st = cluster::CheckClusterOptions(o); !st.ok()) return st;
  if (f.cluster_node_id.empty() && f.http_port == 0)
    return Status::InvalidArgument(
        "--cluster with --http-port 0 needs --cluster-node-id (the id must not change "
        "between restarts)");
  return o;
}

int Serve(const ServeFlags& f) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("inferd"));
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  // SIGINT/SIGTERM: a handler writes the signal to a pipe that this thread
  // waits on. Blocking them and calling sigwait is not enough: OpenBLAS
  // starts its thread pool while libraries load, before main, with the
  // signals unblocked, so a signal sent before this thread waited went to
  // such a thread and its default action killed the process (seen as exit
  // -15 when a SIGTERM followed the start closely). A handler runs on
  // whichever thread takes the signal. The threads started below inherit the
  // blocked mask, so only OpenBLAS's threads and this thread's ppoll take them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // re-read credentials (docs/security.md)
  sigset_t wait_mask;
  pthread_sigmask(SIG_BLOCK, &signals, &wait_mask);
  sigdelset(&wait_mask, SIGINT);
  sigdelset(&wait_mask, SIGTERM);
  sigdelset(&wait_mask, SIGHUP);
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    spdlog::critical("cannot create the signal pipe: {}", strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  RaiseOpenFilesLimit(f.max_connections);

  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  BackendRegistry backends;
  if (Status st = RegisterBuiltinBackends(&backends); !st.ok()) {
    spdlog::critical("cannot register backends: {}", st.message());
    return 1;
  }
  SteadyClock clock;

  // Kept for the server's life (so.schedulers points at it).
  const SchedulerFactory schedulers = SchedulerFactory::WithBuiltins(f.model_thread_scheduling == "batch");
  ServerOptions so;
  so.schedulers = &schedulers;
  so.model_repository = f.repository;
  so.control_state_dir = f.control_state_dir.empty()
                             ? DefaultStateDirectory(f.repository, std::getenv("XDG_STATE_HOME"), std::getenv("HOME"))
                             : f.control_state_dir;
  so.control_mode = f.control_mode == "explicit" ? ModelControlMode::kExplicit
                    : f.control_mode == "poll"   ? ModelControlMode::kPoll
                                                 : ModelControlMode::kNone;
  so.poll_interval = std::chrono::milliseconds(static_cast<int64_t>(f.poll_secs * 1000));
  so.startup_models = f.load_models;
  so.default_max_queue_size = f.max_queue_size;
  so.default_intra_op_threads = f.intra_op_threads > 0 ? f.intra_op_threads : std::max(1, cores - f.http_threads);
  for (const std::string& kv : f.model_parameters) {
    const size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos) {
      spdlog::critical("--model-parameter '{}': expected KEY=VALUE", kv);
      return 2;
    }
    so.default_parameters[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!f.cache_config.empty()) {
    // Triton's form: local,size=<bytes> (inferd also takes "512MiB" style sizes).
    const std::string& c = f.cache_config;
    const size_t at = c.find("size=");
    auto bytes = at == std::string::npos ? Result<uint64_t>(Status::InvalidArgument("no size="))
                                         : ParseByteSize(std::string_view(c).substr(at + 5));
    if (c.rfind("local", 0) != 0 || !bytes.ok()) {
      spdlog::critical(
          "--cache-config '{}': expected local,size=<bytes> (e.g. local,size=1073741824 or "
          "local,size=256MiB)",
          c);
      return 2;
    }
    so.response_cache_bytes = *bytes;
  }
  so.shadow_max_in_flight = f.shadow_max_in_flight;
  if (!f.jobs_config.empty()) {
    auto jobs = jobs::LoadJobsConfig(f.jobs_config);
    if (!jobs.ok()) {
      spdlog::critical("--jobs-config: {}", jobs.status().message());
      return 2;
    }
    so.jobs_config = std::move(jobs).value();
    spdlog::info("batch jobs: {} named connections, {} allowed directories", so.jobs_config.connections.size(),
                 so.jobs_config.allowed_dirs.size());
  }
  so.max_running_jobs = f.max_running_jobs;
  so.precomputed_lookup_threads = f.precomputed_lookup_threads;
  so.strict_readiness = f.strict_readiness;
  so.exit_on_error = f.exit_on_error;
  so.front_end.json_limits = f.json_limits;
  auto access = BuildAccessPolicy(f.security, &clock);
  if (!access.ok()) {
    spdlog::critical("{}", access.status().message());
    return 2;
  }
  so.front_end.access = *access;
  auto tls = TlsFromFlags(f.security);
  if (!tls.ok()) {
    spdlog::critical("{}", tls.status().message());
    return 2;
  }
  so.residency = f.residency == "on-demand" ? Residency::kOnDemand : Residency::kEager;
  if (!f.memory_budget.empty()) {
    auto budget = ParseByteSize(f.memory_budget);
    if (!budget.ok()) {
      spdlog::critical("--memory-budget: {}", budget.status().message());
      return 2;
    }
    if (so.residency != Residency::kOnDemand) {
      spdlog::critical("--memory-budget needs --model-residency on-demand (eager models are never evicted)");
      return 2;
    }
    so.memory_budget_bytes = *budget;
  }
  so.min_residency = std::chrono::milliseconds(static_cast<int64_t>(f.min_residency_secs * 1000));
  so.model_load_threads = f.load_threads;
  so.index_at_start_limit = static_cast<size_t>(f.index_at_start_limit);
  so.load_wait = std::chrono::milliseconds(static_cast<int64_t>(f.load_wait_secs * 1000));
  if (so.residency == Residency::kOnDemand) {
    spdlog::info("on-demand residency: memory budget {}, minimum residency {} s, {} load threads",
                 so.memory_budget_bytes ? FormatBytes(so.memory_budget_bytes) : std::string("none"),
                 f.min_residency_secs, f.load_threads);
  }
  std::unique_ptr<cluster::EtcdStore> etcd;
  // Requests for models other nodes hold: each over the protocol it came in.
  std::unique_ptr<http::HttpForwarder> http_forwarder;
  std::unique_ptr<grpcfe::GrpcForwarder> grpc_forwarder;
  std::unique_ptr<ProtocolForwarder> forwarder;
  if (!f.cluster.empty()) {
    auto co = ClusterOptionsFromFlags(f);
    if (!co.ok()) {
      spdlog::critical("{}", co.status().message());
      return 2;
    }
    etcd = std::make_unique<cluster::EtcdStore>(co->endpoints, co->store_timeout);
    so.cluster = std::move(*co);
    so.cluster_store = etcd.get();
    http_forwarder = std::make_unique<http::HttpForwarder>();
    if (tls->http_peers.enabled) {
      if (Status st = http_forwarder->SetTls(tls->http_peers); !st.ok()) {
        spdlog::critical("TLS toward the cluster's peers: {}", st.message());
        return 2;
      }
    }
    grpcfe::GrpcForwarderOptions gfo;
    gfo.max_message_bytes = f.grpc.max_message_bytes;
    gfo.tls = tls->grpc_peers;
    gfo.tls_refresh_secs = tls->grpc.refresh_secs;
    for (const auto& [protocol, peers] : {std::pair{"HTTP", tls->http_peers}, std::pair{"gRPC", tls->grpc_peers}}) {
      if (!peers.enabled) continue;
      spdlog::info("cluster forwarding over TLS ({}): peers' certificates checked against {}", protocol,
                   peers.ca_file.empty() ? "the system's CAs" : peers.ca_file);
    }
    grpc_forwarder = std::make_unique<grpcfe::GrpcForwarder>(gfo);
    forwarder = std::make_unique<ProtocolForwarder>(http_forwarder.get(), grpc_forwarder.get());
    so.forwarder = forwarder.get();
  }
  if (Status st = ApplyObservabilityFlags(f.observability, &clock, &so); !st.ok()) {
    spdlog::critical("{}", st.message());
    return 2;
  }
  const std::string blas = BlasCoreName();
  spdlog::info("inferd 0.1.0: {} cores, {} HTTP threads, default intra-op threads {}{}", cores, f.http_threads,
               so.default_intra_op_threads, blas.empty() ? "" : ", OpenBLAS kernels " + blas);

  InferenceServer server(so, &backends, &clock);
  StartWatch start_watch(&server, wait_mask);
  const Status started = server.Start();
  if (const int sig = start_watch.Finish(); sig != 0) {
    spdlog::info("received {}, shutting down: during start-up, before the APIs opened", strsignal(sig));
    server.Shutdown();
    spdlog::info("stopped");
    return 0;
  }
  if (!started.ok()) {
    spdlog::critical("cannot start: {}", started.message());
    return 1;
  }

  http::HttpServerOptions ho;
  ho.host = f.host;
  ho.port = static_cast<uint16_t>(f.http_port);
  ho.threads = f.http_threads;
  ho.max_body_bytes = f.max_body_bytes;
  ho.max_connections = f.max_connections;
  ho.max_connections_per_client = f.max_connections_per_client;
  ho.idle_timeout = std::chrono::milliseconds(f.idle_timeout_ms);
  ho.read_timeout = std::chrono::milliseconds(f.read_timeout_ms);
  ho.idle_spin = std::chrono::microseconds(f.http_spin_us);
  ho.cancel_check = std::chrono::milliseconds(f.http_cancel_check_ms);
  ho.on_client_gone = [&server] { server.CountClientCancellation(); };
  const tracing::RequestObserver* observer = so.observer.get();
  ho.client_address = observer != nullptr && observer->access_log() != nullptr;
  ho.tls = tls->http;
  ho.handshake_timeout = std::chrono::milliseconds(f.security.tls_handshake_timeout_ms);
  // The web console (docs/console.md): its routes in front of the API's, its charts' ticks on a thread of their own.
  std::unique_ptr<console::LiveStats> live;
  http::Handler api_handler = http::MakeApiHandler(&server, observer);
  if (f.observability.console) {
    console::LiveOptions lo;
    lo.history = f.observability.console_history_secs;
    lo.max_series = f.observability.console_max_models;
    live = std::make_unique<console::LiveStats>(lo, [&server] {
      auto stats = server.GetStatistics("", "");
      return stats.ok() ? std::move(*stats) : std::vector<ModelStatsSnapshot>();
    });
    live->Start();
    console::ConsoleParts cp;
    cp.server = &server;
    cp.live = live.get();
    cp.traces = observer != nullptr ? observer->traces() : nullptr;
    api_handler = console::MakeConsoleHandler(cp, std::move(api_handler));
  }
  http::HttpServer api(ho, std::move(api_handler));
  if (Status st = api.Start(); !st.ok()) {
    spdlog::critical("{}", st.message());
    return 1;
  }
  spdlog::info("HTTP service listening on {}:{}", f.host, api.port());
  if (live) {
    const bool any = f.host == "0.0.0.0" || f.host == "::" || f.host.empty();
    spdlog::info("web console at {}://{}:{}/console/", tls->http.enabled() ? "https" : "http",
                 any ? std::string("localhost") : f.host, api.port());
  }

  std::unique_ptr<grpcfe::GrpcServer> grpc;
  if (f.allow_grpc) {
    grpcfe::GrpcServerOptions go = f.grpc;
    go.host = f.host;
    go.observer = observer;
    go.tls = tls->grpc;
    go.io_threads = f.http_threads;
    grpc = std::make_unique<grpcfe::GrpcServer>(go, &server);
    if (Status st = grpc->Start(); !st.ok()) {
      spdlog::critical("{}", st.message());
      return 1;
    }
    spdlog::info("gRPC service listening on {}:{} ({})", f.host, grpc->port(), grpc->transport());
  }

  std::unique_ptr<http::HttpServer> metrics;
  if (f.allow_metrics) {
    http::HttpServerOptions mo = ho;
    mo.port = static_cast<uint16_t>(f.metrics_port);
    mo.threads = 1;
    mo.on_client_gone = nullptr;
    metrics = std::make_unique<http::HttpServer>(mo, http::MakeMetricsHandler(&server));
    if (Status st = metrics->Start(); !st.ok()) {
      spdlog::critical("{}", st.message());
      return 1;
    }
    spdlog::info("Metrics service listening on {}:{}", f.host, metrics->port());
  }

  if (etcd) {
    // Join only now: peers route here once both APIs answer.
    const std::string host = AdvertiseHost(f);
    if (Status st = server.admin().JoinCluster(host + ":" + std::to_string(api.port()),
                                               grpc ? host + ":" + std::to_string(grpc->port()) : std::string());
        !st.ok()) {
      spdlog::critical("cannot join the cluster: {}", st.message());
      server.Shutdown();
      return 2;
    }
  }

  // Credentials re-read when their files change or on SIGHUP (docs/security.md).
  std::vector<FileReloader::Source> reloadable;
  if (tls->http.enabled()) {
    std::vector<std::string> files = {tls->http.cert_file, tls->http.key_file};
    if (!tls->http.client_ca_file.empty()) files.push_back(tls->http.client_ca_file);
    if (const std::string& ca = tls->http_peers.ca_file;
        http_forwarder && !ca.empty() && std::find(files.begin(), files.end(), ca) == files.end()) {
      files.push_back(ca);
    }
    reloadable.push_back({"the HTTP TLS certificate " + tls->http.cert_file, files,
                          [&api, &metrics, &http_forwarder, peers = tls->http_peers] {
                            Status st = api.ReloadTls();
                            if (st.ok() && metrics) st = metrics->ReloadTls();
                            if (st.ok() && http_forwarder) st = http_forwarder->SetTls(peers);
                            return st;
                          }});
  }
  if (*access && !f.security.auth_tokens_file.empty()) {
    reloadable.push_back({"the tokens file " + f.security.auth_tokens_file,
                          {f.security.auth_tokens_file},
                          [policy = *access] { return policy->Reload(); }});
  }
  std::unique_ptr<FileReloader> reloader;
  if (!reloadable.empty()) {
    reloader = std::make_unique<FileReloader>(std::move(reloadable),
                                              std::chrono::milliseconds(f.security.reload_check_ms), &clock);
  }
  const int sig = WaitForStopSignal(wait_mask, -1, [&reloader] {
    if (reloader) {
      spdlog::info("received SIGHUP: re-reading credentials");
      reloader->ReloadAll();
    } else {
      spdlog::info("received SIGHUP: no credentials files to re-read");
    }
  });
  if (reloader) reloader->Stop();
  spdlog::info("received {}, shutting down: no new connections, finishing in-flight requests", strsignal(sig));
  const std::chrono::milliseconds grace(f.shutdown_grace_ms);
  api.StopAccepting();
  if (grpc) grpc->StopAccepting(grace);  // open streams end once their requests are answered
  if (live) live->Stop();
  server.Shutdown();  // answers everything already accepted
  api.Stop(grace);
  if (grpc) grpc->Stop(grace);
  // After the front ends: their forwarded requests are answered.
  if (http_forwarder) http_forwarder->Stop();
  if (grpc_forwarder) grpc_forwarder->Stop();
  if (metrics) metrics->Stop(std::chrono::milliseconds(0));
  // Last: the spans and lines of the requests answered above go out.
  if (observer && observer->traces()) observer->traces()->Stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, std::function<int()>* run) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the models of a model repository");
  cmd->add_option("--model-repository", flags->repository, "Triton-layout model repository directory")->required();
  cmd->add_option("--control-state-dir", flags->control_state_dir,
                  "Where run-time control state (version labels, default-version history) persists; the "
                  "repository is only read (default: $XDG_STATE_HOME/inferd/repositories/<repository path>, "
                  "else ~/.local/state/inferd/...)");
  cmd->add_option("--host", flags->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--http-port", flags->http_port, "HTTP port (KServe v2 + TF Serving REST); 0 = any free port")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--metrics-port", flags->metrics_port, "Prometheus metrics port; 0 = any free port")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--allow-grpc", flags->allow_grpc, "Serve the KServe v2 gRPC API on --grpc-port")
      ->capture_default_str();
  cmd->add_option("--grpc-port", flags->grpc.port,
                  "gRPC port (KServe v2 GRPCInferenceService + grpc.health.v1); "
                  "0 = any free port")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-max-message-bytes", flags->grpc.max_message_bytes,
                  "Largest gRPC message received or sent (RESOURCE_EXHAUSTED beyond)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1024}, size_t{INT32_MAX}));
  cmd->add_option("--grpc-keepalive-time-ms", flags->grpc.keepalive_time_ms,
                  "Send a keepalive ping on a gRPC connection idle this long")
      ->capture_default_str()
      ->check(CLI::Range(1, INT32_MAX));
  cmd->add_option("--grpc-keepalive-timeout-ms", flags->grpc.keepalive_timeout_ms,
                  "Close the connection when a keepalive ping is not answered within this long")
      ->capture_default_str()
      ->check(CLI::Range(1, INT32_MAX));
  cmd->add_option("--grpc-keepalive-permit-without-calls", flags->grpc.keepalive_permit_without_calls,
                  "Send keepalive pings, and accept client pings, on connections without calls")
      ->capture_default_str();
  cmd->add_option("--grpc-http2-max-pings-without-data", flags->grpc.http2_max_pings_without_data,
                  "Pings the server sends without data before it must send data (0 = no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0, INT32_MAX));
  cmd->add_option("--grpc-http2-min-recv-ping-interval-without-data-ms",
                  flags->grpc.http2_min_recv_ping_interval_without_data_ms,
                  "Client pings closer together than this (without data) count as strikes")
      ->capture_default_str()
      ->check(CLI::Range(0, INT32_MAX));
  cmd->add_option("--grpc-http2-max-ping-strikes", flags->grpc.http2_max_ping_strikes,
                  "Bad client pings tolerated before the connection is closed (0 = no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0, INT32_MAX));
  cmd->add_option("--grpc-max-concurrent-streams", flags->grpc.max_concurrent_streams,
                  "Calls one gRPC connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a client "
                  "opening more waits for one to end (0 = no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0, INT32_MAX));
  cmd->add_option("--grpc-stream-max-in-flight", flags->grpc.max_stream_in_flight,
                  "ModelStreamInfer: a stream stops reading requests while this many of its requests are "
                  "unanswered or unsent")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  cmd->add_option("--grpc-own-http2", flags->grpc.own_http2,
                  "A plain gRPC port speaks inferd's own HTTP/2 (ModelInfer served on --http-threads I/O threads; the "
                  "other methods by gRPC's server in the process); false: gRPC's server listens itself. With TLS "
                  "the port is always gRPC's server's")
      ->capture_default_str();
  cmd->add_option("--allow-metrics", flags->allow_metrics, "Serve /metrics on the metrics port")->capture_default_str();
  cmd->add_option("--http-threads", flags->http_threads, "HTTP I/O threads (model code never runs on them)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--intra-op-threads", flags->intra_op_threads,
                  "Default intra-op threads per model instance for models without INTRA_OP_THREAD_COUNT "
                  "(0 = cores minus HTTP threads, at least 1)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--cache-config", flags->cache_config,
                  "The response cache for models with response_cache { enable: true }: local,size=<bytes> "
                  "(Triton's form; an LRU within that many bytes)");
  cmd->add_option("--jobs-config", flags->jobs_config,
                  "Batch jobs: named connections and allowed directories (JSON; docs/batch.md). Without it, "
                  "POST /v2/jobs refuses every source and sink");
  cmd->add_option("--max-running-jobs", flags->max_running_jobs, "Batch jobs running at once (more wait queued)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--precomputed-lookup-threads", flags->precomputed_lookup_threads,
                  "Hybrid serving: threads that look up precomputed answers and write online ones back, each with "
                  "its own connection per table (docs/hybrid.md)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--shadow-max-in-flight", flags->shadow_max_in_flight,
                  "Shadow traffic: the most mirrored requests one shadow version runs or queues at once; beyond it "
                  "requests are not mirrored (inferd_shadow_requests_total{outcome=\"skipped\"})")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--model-parameter", flags->model_parameters,
                  "KEY=VALUE: a config parameter every model gets unless its config.pbtxt sets it (repeatable; "
                  "e.g. OPTIMIZE_FOR_INFERENCE=false)");
  cmd->add_option("--max-queue-size", flags->max_queue_size,
                  "Queue bound per model when its config sets no max_queue_size; beyond it requests get 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  cmd->add_option("--http-max-body-bytes", flags->max_body_bytes,
                  "Largest request body accepted, also after decompression (413 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--http-max-connections", flags->max_connections,
                  "Connections the HTTP port holds open at once; more are closed as they arrive (the open ones stay "
                  "served; idle ones leave within --http-idle-timeout-ms). The open-files limit is raised to fit")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1000000}));
  cmd->add_option("--http-max-connections-per-client", flags->max_connections_per_client,
                  "Connections one client address may hold open on the HTTP port; its further ones are closed as "
                  "they arrive, other clients are served (0 = no cap: behind a load balancer or proxy, clients "
                  "share its address)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1000000}));
  cmd->add_option("--json-max-depth", flags->json_limits.max_depth,
                  "Arrays and objects a JSON request body may nest; deeper is refused (400)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{2}, size_t{100000}));
  cmd->add_option("--json-max-elements", flags->json_limits.max_elements,
                  "Values (numbers, strings, arrays, objects) a JSON request body may hold; more is refused (413) "
                  "before the document grows past them")
      ->capture_default_str()
      ->check(CLI::Range(size_t{16}, size_t{1} << 32));
  cmd->add_option("--http-idle-timeout-ms", flags->idle_timeout_ms,
                  "Close a connection that sends no complete request header for this long")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400000));
  cmd->add_option("--http-read-timeout-ms", flags->read_timeout_ms,
                  "Close a connection whose request body does not arrive within this long after its header")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400000));
  cmd->add_option("--shutdown-grace-ms", flags->shutdown_grace_ms,
                  "On SIGINT/SIGTERM, wait at most this long for in-flight responses to be written")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600000));
  cmd->add_option("--model-control-mode", flags->control_mode,
                  "none: load every model at start, load/unload calls fail; poll: like none, then rescan the "
                  "repository every --repository-poll-secs (new/changed models and versions load, removed ones "
                  "unload); explicit: load only --load-model models and what load/unload calls ask for")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "poll", "explicit"}));
  cmd->add_option("--repository-poll-secs", flags->poll_secs,
                  "With poll control: seconds between repository rescans (0 = never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--load-model", flags->load_models,
                  "With explicit (or poll) control: a model to load at start ('*' = all); repeatable");
  cmd->add_option("--model-residency", flags->residency,
                  "eager: models load as the control mode says and stay; on-demand: every repository model is "
                  "indexed at start (in the background past --startup-index-limit) and loads on its first request "
                  "(pinned models load at start), idle ones are evicted least-recently-used first to stay within "
                  "--memory-budget")
      ->capture_default_str()
      ->check(CLI::IsMember({"eager", "on-demand"}));
  cmd->add_option("--memory-budget", flags->memory_budget,
                  "With on-demand residency: bytes all loaded models may hold, e.g. 2GiB, 512MiB, 300MB or a "
                  "plain byte count (default: no budget)");
  cmd->add_option("--model-min-residency-secs", flags->min_residency_secs,
                  "With on-demand residency: a model is not evicted before it has been loaded this long")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--model-load-threads", flags->load_threads,
                  "With on-demand residency: models loading at the same time for waiting requests")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--startup-index-limit", flags->index_at_start_limit,
                  "With on-demand residency: a repository of more models than this is indexed (each config read) "
                  "in the background once the server is ready; up to this many, before")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  cmd->add_option("--model-load-wait-secs", flags->load_wait_secs,
                  "With on-demand residency: longest a request waits for its model to load (a smaller request "
                  "'timeout' parameter wins); then 503")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0));
  AddSecurityFlags(cmd, &flags->security);
  AddObservabilityFlags(cmd, &flags->observability);
  cmd->add_option("--exit-on-error", flags->exit_on_error,
                  "Do not start (exit 1) when a model or version of the start-up set fails to load")
      ->capture_default_str();
  cmd->add_option("--strict-readiness", flags->strict_readiness,
                  "Report /v2/health/ready only when every model in the repository is READY")
      ->capture_default_str();
  cmd->add_option("--http-idle-spin-us", flags->http_spin_us,
                  "An idle HTTP thread polls this long for ready work before blocking in epoll, yielding the core "
                  "between polls: a response finished by a model worker (on another core, or on this one while it "
                  "yields) is then written without a thread wake-up (0 = never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--model-thread-scheduling", flags->model_thread_scheduling,
                  "batch: model worker threads run as SCHED_BATCH -- woken by the HTTP/gRPC thread that queued a "
                  "request, they do not preempt it, so it reads the other ready requests first and the worker starts "
                  "with a batch (one context switch per batch, not per request, on a shared core); normal: the OS "
                  "default")
      ->capture_default_str()
      ->check(CLI::IsMember({"batch", "normal"}));
  cmd->add_option("--http-cancel-check-ms", flags->http_cancel_check_ms,
                  "How often connections whose request has been in flight this long are checked for a client "
                  "that hung up; its request, if still queued, is cancelled (0 = never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600000));
  cmd->add_option("--cluster", flags->cluster,
                  "Join a cluster of inferd nodes that share this model repository, registered in etcd: "
                  "etcd://HOST:PORT[,HOST:PORT...] (docs/cluster.md)");
  cmd->add_option("--cluster-name", flags->cluster_name,
                  "The cluster's name: nodes with the same etcd and name form one cluster (keys under "
                  "/inferd/<name>/)")
      ->capture_default_str();
  cmd->add_option("--cluster-node-id", flags->cluster_node_id,
                  "This node's id in the cluster, stable across restarts (default: <advertise host>:<HTTP port>)");
  cmd->add_option("--cluster-advertise-host", flags->cluster_advertise_host,
                  "The host name or address peers reach this node at (default: --host, or the machine's host "
                  "name when --host is a wildcard)");
  cmd->add_option("--cluster-lease-ttl-secs", flags->cluster_lease_ttl_secs,
                  "A node that stops renewing its lease (crashed, cut off) leaves the cluster this long after")
      ->capture_default_str()
      ->check(CLI::Range(2, 600));
  cmd->add_option("--cluster-refresh-ms", flags->cluster_refresh_ms,
                  "How often a node renews its lease, publishes its models and load, and reads the cluster's "
                  "members (at most a third of the lease TTL)")
      ->capture_default_str()
      ->check(CLI::Range(10, 200000));
  cmd->add_option("--cluster-copy-rate", flags->cluster_copy_rate,
                  "Requests per second one copy of a model serves before the model gets another copy (beyond "
                  "two, up to one per node); a surplus copy is released when the rate falls (0 = two copies at "
                  "most by rate)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--log-level", flags->log_level, "trace|debug|info|warn|error|critical|off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  cmd->callback([flags, run] { *run = [flags] { return Serve(*flags); }; });
}

}  // namespace inferd::cli
