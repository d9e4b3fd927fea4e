// GET /metrics: llm_get_stats and the server's own counters in Prometheus'
// text exposition format (version 0.0.4).
#pragma once

#include <string>

#include "engine.h"

namespace server {

// Content-Type of the exposition format.
inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// Every metric with its # HELP and # TYPE lines. Monotonic figures are
// counters named *_total; figures that go up and down are gauges. `model`
// labels the llmrt_info metric. Empty when llm_get_stats fails.
std::string PrometheusMetrics(const Engine& engine, const std::string& model);

}  // namespace server
