// What users send the jobs API and what a job reads: job specs (JSON), the
// operator's jobs config, and CSV records. A parsed spec must write back
// and re-parse to the same JSON; the CSV parser must always advance.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "jobs/job_spec.h"
#include "jobs/jobs_config.h"
#include "jobs/row_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto s = inferd::jobs::ParseJobSpec(text); s.ok()) {
    const std::string json = inferd::jobs::ToJson(*s);
    auto again = inferd::jobs::ParseJobSpec(json);
    if (!again.ok() || inferd::jobs::ToJson(*again) != json) std::abort();
  }
  (void)inferd::jobs::ParseJobsConfig(text);
  size_t pos = 0;
  std::vector<inferd::jobs::Cell> fields;
  for (int records = 0; pos < text.size(); ++records) {
    const size_t before = pos;
    auto r = inferd::jobs::ParseCsvRecord(text, &pos, &fields);
    if (r.ok() && !*r) break;
    if (r.ok() && pos <= before) std::abort();  // a record always consumes input
    if (!r.ok() && pos <= before) break;        // an error at the end stops
    if (records > 1 << 20) std::abort();
  }
  return 0;
}
