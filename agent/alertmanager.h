// Pushing alerts: to Alertmanager's API v2 (POST /api/v2/alerts), and to any webhook that takes a
// JSON document.
//
// Contract:
// * An AlertmanagerAlert is a plain description (labels, annotations, times), independent of the
//   diagnosis code that decides what fires. Alertmanager identifies an alert by its labels alone,
//   so the same labels must be posted again while it fires (without endsAt, Alertmanager resolves
//   an alert it has not heard of for resolve_timeout, 5 minutes by default) and to resolve it.
// * Resolving posts the same labels with endsAt = now; Alertmanager then stops listing the alert
//   as active and notifies receivers that ask for resolved alerts.
// * Every string is JSON-escaped: quotes, backslashes and control characters are escaped, and each
//   byte of an invalid UTF-8 sequence becomes the text \xHH (the convention of
//   capture/common/json_escape.h), so the document is always valid JSON and distinct values stay
//   distinct.
// * Times are given in microseconds since the Unix epoch, like every time in collscope, and sent
//   as RFC 3339 in UTC with milliseconds ("2023-11-14T22:13:20.123Z").
// * A status other than 2xx is an error whose message holds the code and the start of the body.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "agent/http_wire.h"
#include "core/status.h"

namespace collscope::agent {

struct AlertmanagerAlert {
  std::map<std::string, std::string> labels;       // identity: alertname and what makes it unique
  std::map<std::string, std::string> annotations;  // summary, description, runbook_url, ...
  std::optional<int64_t> starts_at_us;             // absent: when Alertmanager receives it
  std::optional<int64_t> ends_at_us;               // absent: firing for resolve_timeout
  std::string generator_url;                       // omitted when empty
};

std::string FormatRfc3339(int64_t unix_us);

// The body of POST /api/v2/alerts: a JSON array with one object per alert.
std::string AlertsToJson(std::span<const AlertmanagerAlert> alerts);

// `alertmanager_url` is where Alertmanager serves, e.g. http://127.0.0.1:9093 (a path prefix such
// as http://host/alertmanager is kept). Refuses, sending nothing, an alert without labels.
Status PostAlerts(std::string_view alertmanager_url, std::span<const AlertmanagerAlert> alerts,
                  int timeout_ms, const HttpHeaders& headers = {});

// Posts `alerts` with endsAt = `now_us`, whatever their ends_at_us says.
Status ResolveAlerts(std::string_view alertmanager_url, std::span<const AlertmanagerAlert> alerts,
                     int64_t now_us, int timeout_ms, const HttpHeaders& headers = {});

// POSTs `json` (a whole document, already serialized) as application/json.
Status PostWebhook(std::string_view url, std::string_view json, int timeout_ms,
                   const HttpHeaders& headers = {});

}  // namespace collscope::agent
