#include "agent/alertmanager.h"

#include <time.h>

#include <cstdio>
#include <vector>

#include "agent/http.h"
#include "capture/common/json_escape.h"

namespace collscope::agent {
namespace {

constexpr size_t kMaxErrorExcerptBytes = 300;

void AppendJsonObject(const std::map<std::string, std::string>& fields, std::string* out) {
  out->push_back('{');
  bool first = true;
  for (const auto& [name, value] : fields) {
    if (!first) out->push_back(',');
    first = false;
    capture::AppendEscapedJsonString(name, out);
    out->push_back(':');
    capture::AppendEscapedJsonString(value, out);
  }
  out->push_back('}');
}

Status PostJson(std::string_view url, std::string_view json, int timeout_ms,
                const HttpHeaders& headers) {
  HttpHeaders all = {{"Content-Type", "application/json"}};
  all.insert(all.end(), headers.begin(), headers.end());
  Result<HttpResponse> response = HttpRequest("POST", url, all, json, timeout_ms);
  if (!response.ok()) return response.status();
  if (response->status >= 200 && response->status < 300) return Status::Ok();
  std::string excerpt = response->body.substr(0, kMaxErrorExcerptBytes);
  while (!excerpt.empty() && (excerpt.back() == '\n' || excerpt.back() == ' ')) excerpt.pop_back();
  return Status::IOError("POST " + std::string(url) + ": HTTP " + std::to_string(response->status) +
                       ": " + excerpt);
}

std::string AlertsEndpoint(std::string_view alertmanager_url) {
  while (!alertmanager_url.empty() && alertmanager_url.back() == '/') {
    alertmanager_url.remove_suffix(1);
  }
  return std::string(alertmanager_url) + "/api/v2/alerts";
}

}  // namespace

std::string FormatRfc3339(int64_t unix_us) {
  // Floor division, so that a time before the epoch still has a millisecond part in [0, 999].
  const int64_t ms = unix_us / 1000 - (unix_us % 1000 < 0 ? 1 : 0);
  const int64_t seconds = ms / 1000 - (ms % 1000 < 0 ? 1 : 0);
  const time_t whole = static_cast<time_t>(seconds);
  tm utc{};
  gmtime_r(&whole, &utc);
  char text[48];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(ms - seconds * 1000));
  return text;
}

std::string AlertsToJson(std::span<const AlertmanagerAlert> alerts) {
  std::string out = "[";
  for (size_t i = 0; i < alerts.size(); ++i) {
    const AlertmanagerAlert& alert = alerts[i];
    if (i > 0) out.push_back(',');
    out += "{\"labels\":";
    AppendJsonObject(alert.labels, &out);
    out += ",\"annotations\":";
    AppendJsonObject(alert.annotations, &out);
    if (alert.starts_at_us) out += ",\"startsAt\":\"" + FormatRfc3339(*alert.starts_at_us) + "\"";
    if (alert.ends_at_us) out += ",\"endsAt\":\"" + FormatRfc3339(*alert.ends_at_us) + "\"";
    if (!alert.generator_url.empty()) {
      out += ",\"generatorURL\":";
      capture::AppendEscapedJsonString(alert.generator_url, &out);
    }
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

Status PostAlerts(std::string_view alertmanager_url, std::span<const AlertmanagerAlert> alerts,
                  int timeout_ms, const HttpHeaders& headers) {
  for (size_t i = 0; i < alerts.size(); ++i) {
    if (alerts[i].labels.empty()) {
      return Status::IOError("alert " + std::to_string(i) +
                           " has no labels (Alertmanager needs them)");
    }
  }
  if (alerts.empty()) return Status::Ok();
  return PostJson(AlertsEndpoint(alertmanager_url), AlertsToJson(alerts), timeout_ms, headers);
}

Status ResolveAlerts(std::string_view alertmanager_url, std::span<const AlertmanagerAlert> alerts,
                     int64_t now_us, int timeout_ms, const HttpHeaders& headers) {
  std::vector<AlertmanagerAlert> resolved(alerts.begin(), alerts.end());
  for (AlertmanagerAlert& alert : resolved) {
    alert.ends_at_us = now_us;
    // Alertmanager refuses an alert that ends before it starts.
    if (alert.starts_at_us && *alert.starts_at_us > now_us) alert.starts_at_us = now_us;
  }
  return PostAlerts(alertmanager_url, resolved, timeout_ms, headers);
}

Status PostWebhook(std::string_view url, std::string_view json, int timeout_ms,
                   const HttpHeaders& headers) {
  return PostJson(url, json, timeout_ms, headers);
}

}  // namespace collscope::agent
