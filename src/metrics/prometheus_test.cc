#include "metrics/prometheus.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

TEST(Prometheus, HistogramIsCumulativeWithInf) {
  Histogram h({1, 10});
  h.Observe(0.5);
  h.Observe(5);
  h.Observe(50);
  PrometheusWriter w;
  w.Family("lat", "histogram", "latency");
  w.HistogramSamples("lat", {{"model", "a\"b"}}, h.Take());
  EXPECT_EQ(w.text(),
            "# HELP lat latency\n# TYPE lat histogram\n"
            "lat_bucket{model=\"a\\\"b\",le=\"1\"} 1\n"
            "lat_bucket{model=\"a\\\"b\",le=\"10\"} 2\n"
            "lat_bucket{model=\"a\\\"b\",le=\"+Inf\"} 3\n"
            "lat_sum{model=\"a\\\"b\"} 55.5\n"
            "lat_count{model=\"a\\\"b\"} 3\n");
}

}  // namespace
}  // namespace inferd
