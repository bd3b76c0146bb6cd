// Batch prediction jobs over HTTP (inferd's extension; docs/batch.md). Management routes:
//   POST   /v2/jobs        body: a job spec (jobs/job_spec.h); 201 and the job's document
//   GET    /v2/jobs        {"jobs": [...]}, newest first
//   GET    /v2/jobs/{id}   the job: state, counts, rate, ETA, recent row errors
//   DELETE /v2/jobs/{id}   cancel it (it stops at its next commit); the job's document
#include "frontends/http/router.h"

namespace inferd::http {

bool HandleV2Jobs(InferenceServer* server, const Request& req, const std::vector<std::string>& parts,
                  const Responder& respond) {
  if (parts.size() < 2 || parts[1] != "jobs" || parts.size() > 3) return false;
  auto answer = [](int ok_status, const Result<std::string>& doc) {
    return doc.ok() ? JsonResponse(ok_status, *doc) : ErrorResponse(doc.status());
  };
  if (parts.size() == 2) {
    if (IsGet(req)) {
      respond(JsonResponse(200, server->admin().ListJobs()));
    } else if (req.method == "POST") {
      std::string body = req.body ? std::string(*req.body) : std::string();
      // Validation reads the source and may load the model: the admin thread.
      server->admin().Run([server, body = std::move(body), respond, answer](bool cancelled) {
        if (cancelled) return respond(ErrorResponse(Status::Unavailable("the server is shutting down")));
        respond(answer(201, server->admin().SubmitJob(body)));
      });
    } else {
      respond(MethodNotAllowed(req, "GET, HEAD, POST"));
    }
    return true;
  }
  const std::string& id = parts[2];
  if (IsGet(req)) {
    respond(answer(200, server->admin().GetJob(id)));
  } else if (req.method == "DELETE") {
    respond(answer(200, server->admin().CancelJob(id)));
  } else {
    respond(MethodNotAllowed(req, "GET, HEAD, DELETE"));
  }
  return true;
}

}  // namespace inferd::http
