#include "core/readers/ras.h"

#include <simdjson.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "core/input_files.h"
#include "core/line_reader.h"
#include "core/readers/text.h"

namespace collscope::readers {

int64_t RasRank::Launched(std::string_view func) const {
  for (const auto& [f, n] : launched)
    if (f == func) return n;
  return -1;
}

namespace {

using std::string_view;

void Unused(RasReport* r, const std::string& where, const std::string& why) {
  ++r->unused;
  if (r->unused_named.size() < kMaxRasUnusedNamed) r->unused_named.push_back(where + ": " + why);
}

// A non-negative decimal that fits in int64 (the whole of `s`).
bool ParseCount(string_view s, int64_t* v) {
  if (s.empty() || s.size() > 19) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && *v >= 0;
}

// A rank or size: a count under kMaxRasRanks.
bool ParseRank(string_view s, int* v) {
  int64_t n = 0;
  if (!ParseCount(s, &n) || n >= kMaxRasRanks) return false;
  *v = static_cast<int>(n);
  return true;
}

// Consumes `prefix` from *s.
bool Eat(string_view* s, string_view prefix) {
  if (!s->starts_with(prefix)) return false;
  s->remove_prefix(prefix.size());
  return true;
}

// The next space-separated token of *s.
string_view Token(string_view* s) {
  *s = Trim(*s);
  const size_t e = std::min(s->find(' '), s->size());
  string_view t = s->substr(0, e);
  s->remove_prefix(e);
  *s = Trim(*s);
  return t;
}

std::vector<string_view> Tokens(string_view s) {
  std::vector<string_view> out;
  while (!(s = Trim(s)).empty()) out.push_back(Token(&s));
  return out;
}

// "0x" and 16 hex digits, lower case: the text form prints %016lx, the JSON form 0x%lx.
bool NormHash(string_view s, std::string* out) {
  Eat(&s, "0x") || Eat(&s, "0X");
  if (s.empty() || s.size() > 16) return false;
  std::string h(16 - s.size(), '0');
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    h += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  *out = "0x" + h;
  return true;
}

// "5" or "5 (NVML 7)": the CUDA and, when it differs, the NVML device.
bool ParseGpu(string_view s, int* cuda, int* nvml) {
  s = Trim(s);
  const size_t paren = s.find(" (NVML ");
  if (paren == string_view::npos) {
    if (!ParseRank(s, cuda)) return false;
    *nvml = *cuda;
    return true;
  }
  string_view n = s.substr(paren + 7);
  if (!n.ends_with(")")) return false;
  n.remove_suffix(1);
  return ParseRank(s.substr(0, paren), cuda) && ParseRank(n, nvml);
}

// "GPU g managed by process P on node H" or "[process information not found]".
bool ParseProcessPart(string_view s, RasRank* r) {
  s = Trim(s);
  if (s == "[process information not found]") return true;
  if (!Eat(&s, "GPUs ") && !Eat(&s, "GPU(s) ") && !Eat(&s, "GPU ")) return false;
  const size_t m = s.find(" managed by process ");
  if (m == string_view::npos) return false;
  string_view rest = s.substr(m + 20);
  const size_t on = rest.find(" on node ");
  if (on == string_view::npos) return false;
  string_view host = Trim(rest.substr(on + 9));
  if (host.empty() || host.find(' ') != string_view::npos) return false;
  // A process with several GPUs lists them ("0,1"); the rank's own is the first.
  string_view gpu = s.substr(0, m);
  if (gpu.find(',') != string_view::npos) gpu = gpu.substr(0, gpu.find(','));
  if (!ParseGpu(gpu, &r->cuda_dev, &r->nvml_dev) || !ParseCount(rest.substr(0, on), &r->pid)) return false;
  r->host = Clip(host);
  return true;
}

// "Process P on node H managing GPU(s) L".
bool ParseProcessLine(string_view s, RasProcess* p) {
  if (!Eat(&s, "Process ")) return false;
  const size_t on = s.find(" on node ");
  if (on == string_view::npos || !ParseCount(s.substr(0, on), &p->pid)) return false;
  string_view rest = s.substr(on + 9);
  const size_t m = rest.find(" managing GPU");
  string_view host = m == string_view::npos ? rest : rest.substr(0, m);
  host = Trim(host);
  if (host.empty() || host.find(' ') != string_view::npos) return false;
  p->host = Clip(host);
  if (m != string_view::npos) {
    string_view g = rest.substr(m + 13);
    Eat(&g, "(s)") || Eat(&g, "s");
    p->gpus = Clip(Trim(g));
  }
  return true;
}

// "21", "21, 22", "3-5": the ranks an INCOMPLETE block lists.
bool ParseRankList(string_view s, std::vector<int>* out) {
  size_t total = 0;
  for (string_view part : Tokens(s)) {
    while (!part.empty()) {
      const size_t c = std::min(part.find(','), part.size());
      string_view item = part.substr(0, c);
      part.remove_prefix(std::min(part.size(), c + 1));
      if (item.empty()) continue;
      const size_t dash = item.find('-');
      int a = 0, b = 0;
      if (dash == string_view::npos) {
        if (!ParseRank(item, &a)) return false;
        b = a;
      } else if (!ParseRank(item.substr(0, dash), &a) || !ParseRank(item.substr(dash + 1), &b) || b < a) {
        return false;
      }
      total += static_cast<size_t>(b - a) + 1;
      if (total > static_cast<size_t>(kMaxRasRanks)) return false;
      for (int r = a; r <= b; ++r) out->push_back(r);
    }
  }
  return !out->empty();
}

// "N rank(s)" / "N ranks" / "1 rank" at the start of *s.
bool EatRankCount(string_view* s, int* n) {
  string_view t = *s;
  string_view num = Token(&t);
  if (!ParseRank(num, n)) return false;
  if (!Eat(&t, "rank(s) ") && !Eat(&t, "ranks ") && !Eat(&t, "rank ")) return false;
  *s = t;
  return true;
}

struct Group {
  int ranks_per_comm = -1;
  std::string status, errors;
};

class TextParser {
 public:
  TextParser(const std::string& path, RasReport* r) : path_(path), r_(r) {}

  void Line(string_view raw, uint64_t n) {
    ++r_->lines;
    line_ = n;
    string_view s = raw;
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    const bool indented = !s.empty() && (s[0] == ' ' || s[0] == '\t');
    string_view t = Trim(s);
    if (t.empty()) return;
    if (t.find_first_not_of('=') == string_view::npos) return;
    if (!indented && Top(t)) return;
    if (!indented && (section_ == kErrors || section_ == kWarnings)) return BlockHeader(t);
    switch (section_) {
      case kPreamble:
        if (t.starts_with("CUDA runtime version")) return;
        break;
      case kJob:
        if (Job(t)) return;
        break;
      case kComms:
        if (Comms(t)) return;
        break;
      case kErrors:
      case kWarnings:
        if (BlockLine(t)) return;
        break;
    }
    Bad("not a line of a RAS report this collscope knows: \"" + Clip(t) + "\"");
  }

  void Finish() {
    // A rank missing from a communicator whose process RAS considers dead is dead.
    std::set<std::pair<std::string, int64_t>> dead;
    for (const RasProcess& p : r_->processes)
      if (p.state == "dead") dead.insert({p.host, p.pid});
    for (RasComm& c : r_->comms)
      for (RasRank& k : c.ranks)
        if (k.state == "missing" && dead.count({k.host, k.pid})) {
          k.state = "dead";
          k.detail = "its process is considered dead (unreachable via the RAS network)";
        }
  }

 private:
  enum Section { kPreamble, kJob, kComms, kErrors, kWarnings };
  enum Block { kNone, kJobIncomplete, kJobDead, kTimeout, kCommIncomplete, kCommError, kCommMismatch };

  void Bad(const std::string& why) { Unused(r_, path_ + ":" + std::to_string(line_), why); }

  // Section headings.
  bool Top(string_view t) {
    if (t.starts_with("NCCL version ")) {
      string_view v = t.substr(13);
      r_->nccl_version = Clip(Token(&v), 40);
      section_ = kPreamble;
      return true;
    }
    if (t == "Job summary") { section_ = kJob; return true; }
    if (t.starts_with("Communicators...") || t == "Communicators") {
      section_ = kComms;
      const size_t open = t.find('(');
      if (open != string_view::npos) {
        string_view v = t.substr(open + 1);
        if (v.ends_with("s)")) v.remove_suffix(2);
        double d = 0;
        const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
        if (ec == std::errc() && p == v.data() + v.size() && d >= 0) r_->collection_s = d;
        else Bad("collection time not understood: \"" + Clip(t) + "\"");
      }
      return true;
    }
    if (t == "Errors") { section_ = kErrors; block_ = kNone; return true; }
    if (t == "Warnings") { section_ = kWarnings; block_ = kNone; return true; }
    return false;
  }

  bool Job(string_view t) {
    static const std::set<string_view> kWords = {"Nodes", "Processes", "GPUs", "per", "node", "process",
                                                 "(total)", "Process", "GPU", "Node"};
    std::vector<string_view> tok = Tokens(t);
    bool header = true, numeric = true;
    for (string_view w : tok) {
      if (!kWords.count(w)) header = false;
      int64_t v = 0;
      if (!ParseCount(w, &v) && !(w.find('-') != string_view::npos)) numeric = false;
    }
    if (header) {
      prev_header_ = last_header_;
      last_header_ = std::string(t);
      return true;
    }
    if (t == "The outlier node(s):" || t.starts_with("The outlier node")) return true;
    if (t.starts_with("Node ") && t.find(" running process") != string_view::npos) return true;
    if (!numeric) return false;
    std::vector<int64_t> v;
    for (string_view w : tok) {
      int64_t x = 0;
      v.push_back(ParseCount(w, &x) ? x : -1);
    }
    if (v.size() == 5 && v[0] >= 0 && v[3] >= 0) {
      r_->job_nodes = v[0];
      r_->job_processes = v[3];
    } else if (v.size() == 3 && v[0] >= 0 && v[1] >= 0 && last_header_.find("(total)") != std::string::npos &&
               prev_header_.starts_with("Nodes") && prev_header_.find("Processes") != std::string::npos) {
      r_->job_nodes = v[0];
      r_->job_processes = v[1];
    }
    return true;  // a breakdown row of a non-uniform job
  }

  bool Comms(string_view t) {
    if (t == "No communicator data collected!") return true;
    if (t.starts_with("Group ") || t.starts_with("# ")) return true;
    std::vector<string_view> tok = Tokens(t);
    if (tok.size() < 7) return false;
    int g = 0, per_comm = 0;
    if (!ParseRank(tok[0], &g) || !ParseRank(tok[4], &per_comm)) return false;
    Group& gr = groups_[g];
    gr.ranks_per_comm = per_comm;
    gr.status = Clip(tok[6], 20);
    gr.errors = tok.size() > 7 ? Clip(tok[7], 40) : "";
    return true;
  }

  // A line that is no block header is counted and leaves the block as it was.
  void BlockHeader(string_view t) {
    if (t == "INCOMPLETE" || t == "DEAD" || t == "TIMEOUT" || t.starts_with("#")) {
      block_ = kNone;
      comm_ = nullptr;
    }
    if (t == "INCOMPLETE") { block_ = kJobIncomplete; return; }
    if (t == "DEAD") { block_ = kJobDead; return; }
    if (t == "TIMEOUT") { block_ = kTimeout; return; }
    // "#g-c (hash) KIND"
    std::vector<string_view> tok = Tokens(t);
    if (tok.size() == 3 && tok[0].starts_with("#") && tok[1].starts_with("(") && tok[1].ends_with(")")) {
      std::string hash;
      string_view label = tok[0];
      const size_t dash = label.find('-');
      int g = 0, c = 0;
      if (dash != string_view::npos && ParseRank(label.substr(1, dash - 1), &g) && ParseRank(label.substr(dash + 1), &c) &&
          NormHash(tok[1].substr(1, tok[1].size() - 2), &hash)) {
        comm_ = &Comm(std::string(label), hash, g);
        if (tok[2] == "INCOMPLETE") { block_ = kCommIncomplete; return; }
        if (tok[2] == "ERROR") { block_ = kCommError; return; }
        if (tok[2] == "MISMATCH") { block_ = kCommMismatch; func_.clear(); return; }
        comm_ = nullptr;
        return Bad("a communicator block of an unknown kind: \"" + Clip(t) + "\"");
      }
    }
    Bad("not a block this collscope knows: \"" + Clip(t) + "\"");
  }

  RasComm& Comm(const std::string& label, const std::string& hash, int g) {
    for (RasComm& c : r_->comms)
      if (c.label == label && c.hash == hash) return c;
    RasComm& c = r_->comms.emplace_back();
    c.label = label;
    c.hash = hash;
    auto it = groups_.find(g);
    if (it != groups_.end()) {
      c.size = it->second.ranks_per_comm;
      c.status = it->second.status;
      c.errors = it->second.errors;
    }
    return c;
  }

  // The named rank `r` of the current communicator (one entry per rank, whichever blocks name it).
  RasRank* Rank(int r) {
    if (comm_->size > 0 && r >= comm_->size) {
      Bad("rank " + std::to_string(r) + " outside its communicator of " + std::to_string(comm_->size) + " ranks");
      return nullptr;
    }
    for (RasRank& k : comm_->ranks)
      if (k.rank == r) return &k;
    RasRank& k = comm_->ranks.emplace_back();
    k.rank = r;
    return &k;
  }

  // "Rank R <what> -- <process part>" or without a process part: the rank and <what>.
  RasRank* RankLine(string_view t, string_view* what) {
    if (!Eat(&t, "Rank ")) return nullptr;
    string_view num = Token(&t);
    if (num.empty() || num.find_first_not_of("0123456789") != string_view::npos) return nullptr;
    RasRank tmp;
    string_view head = t, proc;
    if (t.starts_with("-- ")) {
      head = {};
      proc = t.substr(3);
    } else if (const size_t sep = t.find(" -- "); sep != string_view::npos) {
      head = t.substr(0, sep);
      proc = t.substr(sep + 4);
    }
    if (!proc.empty() && !ParseProcessPart(proc, &tmp)) return nullptr;
    *what = Trim(head);
    int r = 0;
    if (!ParseRank(num, &r)) {
      Bad("a rank number over " + std::to_string(kMaxRasRanks - 1) + ": \"" + Clip(num, 40) + "\"");
      return &dropped_;
    }
    RasRank* k = Rank(r);
    if (!k) return &dropped_;
    if (!tmp.host.empty()) {
      k->host = tmp.host;
      k->pid = tmp.pid;
      k->cuda_dev = tmp.cuda_dev;
      k->nvml_dev = tmp.nvml_dev;
    }
    return k;
  }

  static void SetLaunched(RasRank* k, const std::string& func, int64_t n) {
    for (auto& [f, v] : k->launched)
      if (f == func) { v = n; return; }
    k->launched.emplace_back(func, n);
  }

  bool BlockLine(string_view t) {
    RasProcess p;
    string_view what;
    int n = 0;
    switch (block_) {
      case kNone:
        return false;
      case kJobIncomplete:
      case kJobDead:
        if (ParseProcessLine(t, &p)) {
          p.state = block_ == kJobDead ? "dead" : "missing";
          r_->processes.push_back(std::move(p));
          return true;
        }
        return t.starts_with("Missing communicator data from ") || t.find(" considered dead") != string_view::npos;
      case kTimeout: {
        string_view s = t;
        int64_t v = 0;
        if (Eat(&s, "Encountered ") && ParseCount(Token(&s), &v)) {
          r_->timeouts += v;
          return true;
        }
        return false;
      }
      case kCommIncomplete: {
        string_view s = t;
        if (Eat(&s, "Missing communicator data from ")) {
          if (!EatRankCount(&s, &n) && !ParseRank(Token(&s), &n)) return false;
          comm_->missing = n;
          return true;
        }
        if (Eat(&s, "The missing rank(s): ") || Eat(&s, "The missing ranks: ") || Eat(&s, "The missing rank: ")) {
          std::vector<int> ranks;
          if (!ParseRankList(s, &ranks)) return false;
          for (int r : ranks)
            if (RasRank* k = Rank(r)) Missing(k);
          return true;
        }
        if (RasRank* k = RankLine(t, &what)) {
          if (k != &dropped_) Missing(k);
          return true;
        }
        return false;
      }
      case kCommError: {
        string_view s = t;
        if (Eat(&s, "Initialization error(s) on ") || Eat(&s, "Initialization errors on ")) {
          error_kind_ = "init error";
          return EatRankCount(&s, &n) || ParseRank(Token(&s), &n);
        }
        if (Eat(&s, "Asynchronous error(s) on ") || Eat(&s, "Asynchronous errors on ")) {
          error_kind_ = "async error";
          return EatRankCount(&s, &n) || ParseRank(Token(&s), &n);
        }
        if (EatRankCount(&s, &n) && Eat(&s, "reported ")) {
          RasRank& g = comm_->ranks.emplace_back();
          g.n_ranks = n;
          g.state = "error";
          g.detail = Detail(s);
          return true;
        }
        if (RasRank* k = RankLine(t, &what)) {
          if (k == &dropped_) return true;
          if (!Eat(&what, "reported ")) return false;
          k->state = "error";
          k->detail = Detail(what);
          return true;
        }
        return false;
      }
      case kCommMismatch:
        return Mismatch(t);
    }
    return false;
  }

  std::string Detail(string_view s) const {
    return (error_kind_.empty() ? std::string() : error_kind_ + ": ") + Clip(Trim(s));
  }

  static void Missing(RasRank* k) {
    if (k->state == "ok") {
      k->state = "missing";
      k->detail = "no data from this rank in the report";
    }
  }

  bool Mismatch(string_view t) {
    string_view s = t;
    if (Eat(&s, "Communicator ranks have different ")) {
      if (s == "status") { func_ = "#status"; return true; }
      if (!s.ends_with(" operation counts")) return false;
      s.remove_suffix(17);
      if (s.empty() || s.size() > 40 || s.find(' ') != string_view::npos) return false;
      func_ = std::string(s);  // "AllReduce", ...; 2.24: "collective"
      return true;
    }
    if (func_.empty()) return false;
    int n = 0;
    string_view what;
    RasRank* k = nullptr;
    RasRank group;
    if (EatRankCount(&s, &n)) {
      group.n_ranks = n;
      what = s;
    } else if ((k = RankLine(t, &what)) == nullptr) {
      return false;
    }
    const bool dropped = k == &dropped_;
    RasRank* target = k ? k : &group;
    if (func_ == "#status") {
      if (!Eat(&what, "have status ") && !Eat(&what, "has status ")) return false;
      if (dropped) return true;
      if (target->state == "ok") target->state = Clip(Trim(what), 20);
      target->detail = "status " + Clip(Trim(what), 20);
    } else {
      int64_t op = 0;
      if (Eat(&what, "have launched up to operation ") || Eat(&what, "has launched up to operation ")) {
        if (!ParseCount(Trim(what), &op)) {
          Bad("an operation count that is no count below 2^63: \"" + Clip(t) + "\"");
          return true;
        }
      } else if (!(what == "have not launched any operations" || what == "has not launched any operations")) {
        return false;
      }
      if (dropped) return true;
      SetLaunched(target, func_, op);
    }
    if (!k) comm_->ranks.push_back(std::move(group));
    return true;
  }

  std::string path_;
  RasReport* r_;
  uint64_t line_ = 0;
  Section section_ = kPreamble;
  Block block_ = kNone;
  RasComm* comm_ = nullptr;
  std::string func_, error_kind_, last_header_, prev_header_;
  std::map<int, Group> groups_;
  RasRank dropped_;  // a rank line whose rank was refused (counted in unused): understood, not kept
};

// ---- JSON ----

class JsonParser {
 public:
  JsonParser(const std::string& path, RasReport* r) : path_(path), r_(r) {}

  Status Parse(string_view content) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(content);
    simdjson::dom::element doc;
    if (auto err = parser.parse(padded).get(doc))
      return Status::Corruption(path_ + ": not a RAS report: JSON does not parse (" + simdjson::error_message(err) + ")");
    simdjson::dom::object top;
    if (doc.get_object().get(top)) return Status::Corruption(path_ + ": not a RAS report: not a JSON object");
    string_view v;
    if (top["nccl_version"].get_string().get(v))
      return Status::Corruption(path_ + ": not a RAS report: no \"nccl_version\" string");
    r_->nccl_version = Clip(v, 40);
    simdjson::dom::array comms;
    if (top["communicators"].get_array().get(comms))
      return Status::Corruption(path_ + ": not a RAS report: no \"communicators\" array");
    if (!top["timestamp"].get_string().get(v)) r_->timestamp = Clip(v, 40);
    simdjson::dom::object ras;
    if (!top["ras"].get_object().get(ras)) {
      double d = 0;
      if (!ras["collection_time_sec"].get_double().get(d) && d >= 0) r_->collection_s = d;
      int64_t n = Int(ras, "timeouts_count", "ras.timeouts_count", 0);
      if (n > 0) r_->timeouts = n;
    }
    size_t i = 0;
    for (simdjson::dom::element c : comms) Comm(c, "communicators[" + std::to_string(i++) + "]");
    const int64_t declared = Int(top, "communicators_count", "communicators_count", -1);
    if (declared >= 0 && static_cast<size_t>(declared) != comms.size())
      Bad("communicators_count", "says " + std::to_string(declared) + " communicators, the array holds " +
                                     std::to_string(comms.size()));
    return Status::Ok();
  }

 private:
  void Bad(const std::string& where, const std::string& why) { Unused(r_, path_ + ": " + where, why); }

  // An integer field in [0, max] (or -1 allowed when `signed_ok`); `dflt` when absent, counted when wrong.
  int64_t Int(simdjson::dom::object o, const char* key, const std::string& where, int64_t dflt,
              int64_t max = INT64_MAX, bool minus_one_ok = false) {
    ++r_->lines;
    simdjson::dom::element e;
    if (o[key].get(e)) return dflt;
    int64_t v = 0;
    if (e.get_int64().get(v)) {
      Bad(where, "not an integer below 2^63");
      return dflt;
    }
    if ((v < 0 && !(minus_one_ok && v == -1)) || v > max) {
      Bad(where, "out of range: " + std::to_string(v));
      return dflt;
    }
    return v;
  }

  std::string Str(simdjson::dom::object o, const char* key, const std::string& where) {
    simdjson::dom::element e;
    if (o[key].get(e)) return {};
    string_view v;
    if (e.get_string().get(v)) {
      Bad(where, "not a string");
      return {};
    }
    return Clip(v, 80);
  }

  bool Flag(simdjson::dom::object o, const char* key, const std::string& where) {
    simdjson::dom::element e;
    if (o[key].get(e)) return false;
    bool b = false;
    if (e.get_bool().get(b)) Bad(where, "not a boolean");
    return b;
  }

  void Process(simdjson::dom::object o, const std::string& at, RasRank* k) {
    k->host = Str(o, "host", at + ".host");
    if (k->host == "unknown") k->host.clear();
    k->pid = Int(o, "pid", at + ".pid", -1, INT64_MAX, true);
    k->cuda_dev = static_cast<int>(Int(o, "cuda_dev", at + ".cuda_dev", -1, kMaxRasRanks, true));
    k->nvml_dev = static_cast<int>(Int(o, "nvml_dev", at + ".nvml_dev", -1, kMaxRasRanks, true));
  }

  // The rank field, or false (counted) when it is absent or outside the communicator.
  bool RankOf(simdjson::dom::object o, const std::string& at, int size, RasRank* k) {
    const int64_t r = Int(o, "rank", at + ".rank", -1, kMaxRasRanks - 1);
    if (r < 0) {
      if (o["rank"].error()) Bad(at, "no rank");
      return false;
    }
    if (size >= 0 && r >= size) {
      Bad(at + ".rank", "rank " + std::to_string(r) + " outside its communicator of " + std::to_string(size) + " ranks");
      return false;
    }
    k->rank = static_cast<int>(r);
    return true;
  }

  static std::string ResultName(int64_t v) {
    switch (v) {
      case 1: return "unhandled cuda error";
      case 2: return "system error";
      case 3: return "internal error";
      case 4: return "invalid argument";
      case 5: return "invalid usage";
      case 6: return "remote error";
      case 7: return "in progress";
      default: return "ncclResult " + std::to_string(v);
    }
  }

  void Comm(simdjson::dom::element e, const std::string& at) {
    simdjson::dom::object o;
    if (e.get_object().get(o)) return Bad(at, "not an object");
    RasComm c;
    if (!NormHash(Str(o, "hash", at + ".hash"), &c.hash)) return Bad(at + ".hash", "no communicator hash");
    c.size = static_cast<int>(Int(o, "size", at + ".size", -1, kMaxRasRanks));
    c.ranks_reported = static_cast<int>(Int(o, "ranks_count", at + ".ranks_count", -1, kMaxRasRanks));
    c.missing = static_cast<int>(Int(o, "missing_ranks_count", at + ".missing_ranks_count", -1, kMaxRasRanks));
    simdjson::dom::array ranks;
    if (!o["ranks"].get_array().get(ranks)) {
      size_t i = 0;
      for (simdjson::dom::element re : ranks) {
        const std::string rat = at + ".ranks[" + std::to_string(i++) + "]";
        simdjson::dom::object ro;
        if (re.get_object().get(ro)) { Bad(rat, "not an object"); continue; }
        RasRank k;
        if (!RankOf(ro, rat, c.size, &k)) continue;
        Process(ro, rat, &k);
        simdjson::dom::object st;
        if (!ro["status"].get_object().get(st)) {
          const int64_t init = Int(st, "init_state", rat + ".status.init_state", 0);
          const int64_t async = Int(st, "async_error", rat + ".status.async_error", 0);
          const bool fin = Flag(st, "finalize_called", rat + ".status.finalize_called");
          const bool destroy = Flag(st, "destroy_flag", rat + ".status.destroy_flag");
          const bool abort = Flag(st, "abort_flag", rat + ".status.abort_flag");
          if (init != 0 && init != 7) k.state = "error", k.detail = "init error: " + ResultName(init);
          else if (async != 0 && async != 7) k.state = "error", k.detail = "async error: " + ResultName(async);
          else if (abort) k.state = "ABORT", k.detail = "status ABORT";
          else if (fin || destroy) k.state = "FINALIZE", k.detail = "status FINALIZE";
          else if (init == 7) k.state = "INIT", k.detail = "status INIT";
        } else if (!ro["status"].error()) {
          Bad(rat + ".status", "not an object");
        }
        simdjson::dom::object counts;
        if (!ro["collective_counts"].get_object().get(counts)) {
          for (auto [key, val] : counts) {
            ++r_->lines;
            int64_t n = 0;
            if (key.empty() || key.size() > 40) { Bad(rat + ".collective_counts", "a function name of " + std::to_string(key.size()) + " bytes"); continue; }
            if (val.get_int64().get(n) || n < 0) {
              Bad(rat + ".collective_counts." + Clip(key, 40), "not a count below 2^63");
              continue;
            }
            k.launched.emplace_back(Clip(key, 40), n);
          }
        } else if (!ro["collective_counts"].error()) {
          Bad(rat + ".collective_counts", "not an object");
        }
        c.ranks.push_back(std::move(k));
      }
    } else if (!o["ranks"].error()) {
      Bad(at + ".ranks", "not an array");
    }
    simdjson::dom::array missing;
    if (!o["missing_ranks"].get_array().get(missing)) {
      size_t i = 0;
      for (simdjson::dom::element me : missing) {
        const std::string mat = at + ".missing_ranks[" + std::to_string(i++) + "]";
        simdjson::dom::object mo;
        if (me.get_object().get(mo)) { Bad(mat, "not an object"); continue; }
        RasRank k;
        if (!RankOf(mo, mat, c.size, &k)) continue;
        Process(mo, mat, &k);
        simdjson::dom::object st;
        bool dead = false, unresponsive = false;
        if (!mo["status"].get_object().get(st)) {
          dead = Flag(st, "considered_dead", mat + ".status.considered_dead");
          unresponsive = Flag(st, "unresponsive", mat + ".status.unresponsive");
        }
        k.state = dead ? "dead" : unresponsive ? "unresponsive" : "missing";
        k.detail = dead           ? "its process is considered dead (unreachable via the RAS network)"
                   : unresponsive ? "its process does not respond to RAS"
                                  : "no data from this rank in the report";
        c.ranks.push_back(std::move(k));
      }
    } else if (!o["missing_ranks"].error()) {
      Bad(at + ".missing_ranks", "not an array");
    }
    r_->comms.push_back(std::move(c));
  }

  std::string path_;
  RasReport* r_;
};

}  // namespace

Result<RasReport> ParseRasReport(string_view content, const std::string& path) {
  RasReport r;
  r.path = path;
  if (content.size() > kMaxRasBytes)
    return Status::Corruption(path + ": not read: " + std::to_string(content.size()) + " bytes, over the " +
                         std::to_string(kMaxRasBytes >> 20) + " MiB a RAS report may have");
  if (LooksLikeRasMonitorLog(content.substr(0, size_t{1} << 20))) return ParseRasMonitorLog(content, path);
  if (!LooksLikeRasReport(content.substr(0, size_t{1} << 20)))
    return Status::Corruption(path + ": not a RAS report (no \"NCCL version\" line and Communicators section, "
                                "nor a JSON object with nccl_version and communicators, nor a MONITOR log)");
  string_view body = content;
  if (body.starts_with("\xEF\xBB\xBF")) body.remove_prefix(3);
  const size_t first = body.find_first_not_of(" \t\r\n");
  if (first != string_view::npos && body[first] == '{') {
    r.format = "json";
    JsonParser p(path, &r);
    COLLSCOPE_RETURN_IF_ERROR(p.Parse(body));
    return r;
  }
  r.format = "text";
  TextParser p(path, &r);
  uint64_t n = 0;
  size_t b = 0;
  while (b < body.size()) {
    size_t e = body.find('\n', b);
    if (e == string_view::npos) e = body.size();
    p.Line(body.substr(b, e - b), ++n);
    b = e + 1;
  }
  p.Finish();
  return r;
}

Result<RasReport> ReadRasReport(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status::IOError(path + ": cannot read: " + ec.message());
  const std::string limit = " over the " + std::to_string(kMaxRasBytes >> 20) + " MiB a RAS report may have";
  if (size > kMaxRasBytes) return Status::Corruption(path + ": not read: " + std::to_string(size) + " bytes," + limit);
  bool whole = true;
  Result<std::string> content = ReadPrefix(path, kMaxRasBytes, &whole);
  if (!content.ok()) return content.status();
  // (A gzip file can hold far more than its size says.)
  if (!whole) return Status::Corruption(path + ": not read: its decompressed content is" + limit);
  return ParseRasReport(*content, path);
}

}  // namespace collscope::readers
