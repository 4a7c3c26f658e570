// NCCL RAS MONITOR event logs (`ncclras -m [groups]`, NCCL 2.29+; ras.h has the contract): each
// event a RAS thread saw about a peer process, folded into the peer's last state.
#include <simdjson.h>

#include <cctype>
#include <charconv>
#include <deque>
#include <map>
#include <string>

#include "core/readers/ras.h"
#include "core/readers/text.h"

namespace collscope::readers {
namespace {

using std::string_view;

// What an event says about its peer: dead, in trouble, or fine again.
enum class Verdict { kDead, kTrouble, kFine, kNone, kUnknown };

Verdict VerdictOf(string_view event) {
  if (event == "PEER_DEAD" || event == "PEER_TIMEOUT_DEAD") return Verdict::kDead;
  if (event == "PEER_UNRESPONSIVE" || event == "PEER_SEND_STUCK" || event == "PEER_KEEPALIVE_TIMEOUT" ||
      event == "PEER_INIT_TIMEOUT" || event == "PEER_DISCONNECTED" || event == "PEER_RETRY")
    return Verdict::kTrouble;
  if (event == "PEER_RECOVERED" || event == "PEER_CONNECTED" || event == "PEER_NEW") return Verdict::kFine;
  if (event == "PEER_CONNECTING") return Verdict::kNone;
  return Verdict::kUnknown;
}

struct Peer {
  std::string host;  // node as NCCL prints it, or the socket address of an unknown peer
  int64_t pid = -1;
  std::string gpus;
  Verdict state = Verdict::kFine;
  std::deque<std::string> events;  // "2025-12-19 13:07:07 PEER_DEAD: details", the last kMaxEvents
};

constexpr size_t kMaxEvents = 8;

class Folder {
 public:
  explicit Folder(RasReport* r) : r_(r) {}

  void Unused(const std::string& where, const std::string& why) {
    ++r_->unused;
    if (r_->unused_named.size() < kMaxRasUnusedNamed) r_->unused_named.push_back(where + ": " + why);
  }

  void Event(const std::string& where, string_view time, string_view event, const std::string& host, int64_t pid,
             const std::string& gpus, string_view details) {
    ++r_->lines;
    const Verdict v = VerdictOf(event);
    if (v == Verdict::kUnknown) {
      Unused(where, "event " + Clip(event, 40) + " is not one collscope knows (NCCL 2.29's MONITOR events)");
      return;
    }
    if (host.empty()) return;  // an event about no peer says nothing about a process
    Peer& p = peers_[{host, pid}];
    if (p.host.empty()) order_.push_back({host, pid});
    p.host = host;
    p.pid = pid;
    if (!gpus.empty()) p.gpus = gpus;
    // Dead stays dead: a process that comes back is a new one (a new pid), or a reconnect that
    // only a later report could confirm.
    if (p.state != Verdict::kDead && v != Verdict::kNone) p.state = v;
    std::string text = Clip(time, 40) + " " + Clip(event, 40);
    if (!details.empty()) text += ": " + Clip(details);
    if (p.events.size() == kMaxEvents) p.events.pop_front();
    p.events.push_back(std::move(text));
    r_->timestamp = Clip(time, 40);  // the newest event's time
  }

  void Finish() {
    for (const auto& key : order_) {
      const Peer& p = peers_.at(key);
      if (p.state != Verdict::kDead && p.state != Verdict::kTrouble) continue;
      RasProcess& out = r_->processes.emplace_back();
      out.host = p.host;
      out.pid = p.pid;
      out.gpus = p.gpus;
      out.state = p.state == Verdict::kDead ? "dead" : "unresponsive";
      for (const std::string& e : p.events) out.events += (out.events.empty() ? "" : "; ") + e;
    }
  }

 private:
  RasReport* r_;
  std::map<std::pair<std::string, int64_t>, Peer> peers_;
  std::vector<std::pair<std::string, int64_t>> order_;
};

bool IsTimestamp(string_view s) {
  // YYYY-MM-DD HH:MM:SS
  if (s.size() != 19) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool digit = std::isdigit(static_cast<unsigned char>(c));
    if (i == 4 || i == 7 ? c != '-' : i == 10 ? c != ' ' : i == 13 || i == 16 ? c != ':' : !digit) return false;
  }
  return true;
}

// "[time] EVENT: Process <pid> on node <host> managing GPU(s) <list> <details>", or with a
// socket address instead of the process, or with details only.
void TextLine(string_view line, const std::string& where, Folder* f) {
  line = Trim(line);
  if (line.empty() || line.starts_with("RAS Monitor Mode") || line.find_first_not_of('=') == string_view::npos) return;
  if (line.size() < 22 || line[0] != '[' || line[20] != ']' || !IsTimestamp(line.substr(1, 19))) {
    f->Unused(where, "not a MONITOR event line (\"[YYYY-MM-DD HH:MM:SS] EVENT: ...\"): " + Clip(line, 60));
    return;
  }
  const string_view time = line.substr(1, 19);
  string_view rest = Trim(line.substr(21));
  const size_t colon = rest.find(':');
  if (colon == string_view::npos || !rest.starts_with("PEER_")) {
    f->Unused(where, "no EVENT: after the time: " + Clip(rest, 60));
    return;
  }
  const string_view event = rest.substr(0, colon);
  rest = Trim(rest.substr(colon + 1));
  std::string host, gpus;
  int64_t pid = -1;
  if (rest.starts_with("Process ")) {
    rest.remove_prefix(8);
    const size_t sp = rest.find(' ');
    const string_view pid_text = rest.substr(0, sp);
    const auto [p, ec] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
    if (ec != std::errc() || p != pid_text.data() + pid_text.size() || pid < 0 || sp == string_view::npos ||
        !rest.substr(sp).starts_with(" on node ")) {
      f->Unused(where, "a peer not as \"Process <pid> on node <host> managing GPU(s) <list>\": " + Clip(rest, 60));
      return;
    }
    rest.remove_prefix(sp + 9);
    const size_t host_end = rest.find(' ');
    host = Clip(rest.substr(0, host_end), 100);
    rest = host_end == string_view::npos ? string_view() : Trim(rest.substr(host_end));
    if (rest.starts_with("managing GPUs ") || rest.starts_with("managing GPU ")) {
      rest.remove_prefix(rest.starts_with("managing GPUs ") ? 14 : 13);
      size_t n = 0;
      while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == ',')) ++n;
      gpus = std::string(rest.substr(0, n));
      rest = Trim(rest.substr(n));
    }
  } else if (!rest.empty() && (std::isdigit(static_cast<unsigned char>(rest[0])) || rest[0] == '[')) {
    // An unknown peer: its socket address ("10.0.0.2<port>").
    const size_t sp = rest.find(' ');
    host = Clip(rest.substr(0, sp), 100);
    rest = sp == string_view::npos ? string_view() : Trim(rest.substr(sp));
  }
  f->Event(where, time, event, host, pid, gpus, rest);
}

// Concatenated pretty-printed objects (not JSONL): read as a stream of JSON values.
Status JsonEvents(string_view body, const std::string& path, Folder* f) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(body);
  simdjson::dom::document_stream stream;
  if (auto err = parser.parse_many(padded, padded.size() < 1000000 ? 1000000 : padded.size()).get(stream))
    return Status::Corruption(path + ": not a RAS MONITOR log: " + simdjson::error_message(err));
  size_t i = 0;
  for (auto it = stream.begin(); it != stream.end(); ++it, ++i) {
    const std::string where = path + ": event[" + std::to_string(i) + "]";
    simdjson::dom::element doc;
    if (auto err = (*it).get(doc)) {
      // details are inserted without escaping: a quote in one breaks that event (and the stream
      // from there on, which simdjson cannot resynchronise).
      f->Unused(where, std::string("JSON does not parse (") + simdjson::error_message(err) + "); the rest of the file is not read");
      break;
    }
    simdjson::dom::object o;
    string_view time, event, details;
    if (doc.get_object().get(o) || o["timestamp"].get_string().get(time) || o["event"].get_string().get(event)) {
      f->Unused(where, "not an event object with \"timestamp\" and \"event\" strings");
      continue;
    }
    if (o["details"].get_string().get(details)) details = {};
    std::string host, gpus;
    int64_t pid = -1;
    simdjson::dom::object peer;
    if (!o["peer"].get_object().get(peer)) {
      string_view h;
      if (!peer["host"].get_string().get(h)) host = Clip(h, 100);
      else if (!peer["addr"].get_string().get(h)) host = Clip(h, 100);
      int64_t p = -1;
      if (!peer["pid"].get_int64().get(p) && p >= 0) pid = p;
      simdjson::dom::array devs;
      if (!peer["cuda_devs"].get_array().get(devs))
        for (simdjson::dom::element d : devs) {
          int64_t g = 0;
          if (!d.get_int64().get(g)) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
        }
    }
    f->Event(where, time, event, host, pid, gpus, details);
  }
  return Status::Ok();
}

}  // namespace

Result<RasReport> ParseRasMonitorLog(string_view content, const std::string& path) {
  RasReport r;
  r.path = path;
  r.format = "monitor";
  if (content.size() > kMaxRasBytes)
    return Status::Corruption(path + ": not read: " + std::to_string(content.size()) + " bytes, over the " +
                         std::to_string(kMaxRasBytes >> 20) + " MiB a RAS log may have");
  string_view body = content;
  if (body.starts_with("\xEF\xBB\xBF")) body.remove_prefix(3);
  Folder f(&r);
  const size_t first = body.find_first_not_of(" \t\r\n");
  if (first != string_view::npos && body[first] == '{') {
    r.format = "monitor-json";
    COLLSCOPE_RETURN_IF_ERROR(JsonEvents(body, path, &f));
  } else {
    uint64_t n = 0;
    for (size_t b = 0; b < body.size();) {
      size_t e = body.find('\n', b);
      if (e == string_view::npos) e = body.size();
      TextLine(body.substr(b, e - b), path + ":" + std::to_string(++n), &f);
      b = e + 1;
    }
  }
  f.Finish();
  return r;
}

}  // namespace collscope::readers
