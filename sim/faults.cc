// Fault specifications: parsing of `key=value,...` strings and JSON scenario files, and checks.
#include <simdjson.h>

#include <charconv>
#include <cstdio>
#include <set>

#include "sim/internal.h"

namespace collscope::sim {

std::string_view FaultKindName(FaultKind k) {
  switch (k) {
    case FaultKind::kGpuStraggler: return "gpu_straggler";
    case FaultKind::kHostSlowdown: return "host_slowdown";
    case FaultKind::kNicDegrade: return "nic_degrade";
    case FaultKind::kLinkFlap: return "link_flap";
    case FaultKind::kHostStall: return "host_stall";
    case FaultKind::kPipelineBubble: return "pipeline_bubble";
    case FaultKind::kMaskedStraggler: return "masked_straggler";
    case FaultKind::kHang: return "hang";
    case FaultKind::kLinkDown: return "link_down";
    case FaultKind::kMismatch: return "mismatch";
    default: return "?";
  }
}

Status ParseFaultSpec(std::string_view text, FaultSpec* out) {
  out->kind.clear();
  out->params.clear();
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return Status::InvalidArgument("fault spec item '" + std::string(item) +
                                     "' is not key=value");
    std::string key(item.substr(0, eq)), value(item.substr(eq + 1));
    if (key == "kind") {
      out->kind = value;
    } else {
      out->params[key] = value;
    }
  }
  if (out->kind.empty())
    return Status::InvalidArgument("fault spec '" + std::string(text) + "' has no kind=");
  return Status::Ok();
}

Status LoadScenarioFile(const std::string& path, SimConfig* config) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  auto err = parser.load(path).get(root);
  if (err) {
    return Status::IOError("cannot read scenario " + path + ": " + simdjson::error_message(err));
  }
  simdjson::dom::array faults;
  if (root.is_array()) {
    faults = root.get_array().value_unsafe();
  } else {
    if (root["faults"].get_array().get(faults)) {
      return Status::Corruption("scenario " + path + " has no \"faults\" array");
    }
  }
  for (simdjson::dom::element f : faults) {
    simdjson::dom::object obj;
    if (f.get_object().get(obj)) {
      return Status::Corruption("scenario " + path + ": every fault must be an object");
    }
    FaultSpec spec;
    for (auto field : obj) {
      std::string key(field.key);
      std::string value;
      simdjson::dom::element v = field.value;
      if (v.is_string()) {
        value = std::string(v.get_string().value_unsafe());
      } else if (v.is_int64()) {
        value = std::to_string(v.get_int64().value_unsafe());
      } else if (v.is_uint64()) {
        value = std::to_string(v.get_uint64().value_unsafe());
      } else if (v.is_double()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", v.get_double().value_unsafe());
        value = buf;
      } else if (v.is_bool()) {
        value = v.get_bool().value_unsafe() ? "1" : "0";
      } else {
        return Status::Corruption("scenario " + path + ": value of '" + key + "' must be a number or string");
      }
      if (key == "kind") spec.kind = value; else spec.params[key] = value;
    }
    if (spec.kind.empty()) {
      return Status::Corruption("scenario " + path + ": a fault has no \"kind\"");
    }
    config->faults.push_back(std::move(spec));
  }
  return Status::Ok();
}

namespace {

bool ToDouble(const std::string& s, double* v) {
  const char* b = s.data();
  auto r = std::from_chars(b, b + s.size(), *v);
  return r.ec == std::errc() && r.ptr == b + s.size();
}

// The spec's key=value parameters into `f` (and the texts resolved later: gpu, ops, comm).
Status ParseFaultParams(const FaultSpec& spec, const std::string& where, Fault* f, int* gpu,
                        std::string* mismatch_op_text, std::string* op_text,
                        std::string* comm_text) {
  for (const auto& entry : spec.params) {
    // Plain references, not structured bindings: lambdas below capture them (Clang 14 cannot).
    const auto& key = entry.first;
    const auto& value = entry.second;
    double v = 0;
    auto num = [&](double* dst) {
      if (!ToDouble(value, &v))
        return Status::InvalidArgument(where + ": '" + key + "' needs a number, got '" + value +
                                       "'");
      *dst = v;
      return Status::Ok();
    };
    auto integer = [&](auto* dst) {
      double d;
      COLLSCOPE_RETURN_IF_ERROR(num(&d));
      *dst = static_cast<std::remove_reference_t<decltype(*dst)>>(d);
      return Status::Ok();
    };
    Status ok = Status::Ok();
    if (key == "rank") ok = integer(&f->rank);
    else if (key == "host") ok = integer(&f->host);
    else if (key == "gpu") ok = integer(gpu);
    else if (key == "rail") ok = integer(&f->rail);
    else if (key == "stage") ok = integer(&f->stage);
    else if (key == "start_step") ok = integer(&f->start_step);
    else if (key == "end_step") ok = integer(&f->end_step);
    else if (key == "start_us") ok = num(&f->start_off_us);
    else if (key == "end_us") ok = num(&f->end_off_us);
    else if (key == "factor") ok = num(&f->factor);
    else if (key == "delay_us") ok = num(&f->delay_us);
    else if (key == "period_us") ok = num(&f->period_us);
    else if (key == "down_us") ok = num(&f->down_us);
    else if (key == "retry_us") ok = num(&f->retry_us);
    else if (key == "stall_us") ok = num(&f->stall_us);
    else if (key == "coll_sn") ok = integer(&f->coll_sn);
    else if (key == "size_factor") ok = num(&f->size_factor);
    else if (key == "issue_op") *mismatch_op_text = value;
    else if (key == "op") *op_text = value;
    else if (key == "comm") *comm_text = value;
    else if (key == "effect") {
      if (value == "hang") f->effect_hang = true;
      else if (value == "complete") f->effect_hang = false;
      else
        return Status::InvalidArgument(where + ": effect must be 'complete' or 'hang'");
    } else {
      return Status::InvalidArgument(where + ": unknown parameter '" + key + "'");
    }
    COLLSCOPE_RETURN_IF_ERROR(ok);
  }
  return Status::Ok();
}

// What each kind needs (its culprit, its window), and each kind's defaults.
Status CheckKindNeeds(const SimConfig& config, const FaultSpec& spec, const std::string& where,
                      Fault* f) {
  auto need = [&](bool cond, const char* msg) {
    return cond ? Status::Ok() : Status::InvalidArgument(where + ": " + msg);
  };
  switch (f->kind) {
    case FaultKind::kGpuStraggler:
    case FaultKind::kMaskedStraggler:
      COLLSCOPE_RETURN_IF_ERROR(need(f->rank >= 0, "needs rank= (or host= and gpu=)"));
      if (!spec.params.count("factor")) f->factor = 2.0;
      COLLSCOPE_RETURN_IF_ERROR(
          need(f->factor > 0, "factor must be > 0 (compute time multiplier)"));
      break;
    case FaultKind::kHostSlowdown:
      COLLSCOPE_RETURN_IF_ERROR(need(f->host >= 0, "needs host="));
      if (!spec.params.count("factor")) f->factor = 1.5;
      COLLSCOPE_RETURN_IF_ERROR(
          need(f->factor > 0, "factor must be > 0 (compute time multiplier)"));
      break;
    case FaultKind::kNicDegrade:
      COLLSCOPE_RETURN_IF_ERROR(need(f->host >= 0, "needs host="));
      if (!spec.params.count("factor")) f->factor = 0.25;
      COLLSCOPE_RETURN_IF_ERROR(
          need(f->factor > 0 && f->factor <= 1, "factor must be in (0, 1] (bandwidth multiplier)"));
      break;
    case FaultKind::kLinkFlap:
      COLLSCOPE_RETURN_IF_ERROR(need(f->host >= 0, "needs host="));
      if (f->period_us <= 0) f->period_us = 2e6;
      if (f->down_us <= 0) f->down_us = 50e3;
      if (!spec.params.count("retry_us")) f->retry_us = 20e3;
      COLLSCOPE_RETURN_IF_ERROR(need(f->down_us < f->period_us, "down_us must be < period_us"));
      break;
    case FaultKind::kHostStall:
      COLLSCOPE_RETURN_IF_ERROR(need(f->rank >= 0, "needs rank="));
      if (f->stall_us <= 0) f->stall_us = 5e6;
      break;
    case FaultKind::kPipelineBubble:
      COLLSCOPE_RETURN_IF_ERROR(need(config.parallel.pp > 1, "needs pp > 1"));
      COLLSCOPE_RETURN_IF_ERROR(need(f->stage >= 0, "needs stage="));
      if (f->delay_us <= 0) f->delay_us = 20e3;
      break;
    case FaultKind::kHang:
      COLLSCOPE_RETURN_IF_ERROR(need(f->rank >= 0, "needs rank="));
      if (!spec.params.count("comm")) f->comm_kind = CommKind::kDp;
      COLLSCOPE_RETURN_IF_ERROR(
          need(f->coll_sn >= 0 || f->start_step >= 0, "needs coll_sn= (with op=) or start_step="));
      COLLSCOPE_RETURN_IF_ERROR(need(f->coll_sn < 0 || f->has_op, "coll_sn= needs op="));
      break;
    case FaultKind::kLinkDown:
      COLLSCOPE_RETURN_IF_ERROR(need(f->host >= 0, "needs host="));
      COLLSCOPE_RETURN_IF_ERROR(
          need(f->start_step >= 0 || f->start_off_us >= 0, "needs start_step= or start_us="));
      break;
    case FaultKind::kMismatch:
      COLLSCOPE_RETURN_IF_ERROR(need(f->rank >= 0, "needs rank="));
      if (!spec.params.count("comm")) f->comm_kind = CommKind::kTp;
      COLLSCOPE_RETURN_IF_ERROR(
          need(f->coll_sn >= 0 || f->start_step >= 0, "needs coll_sn= (with op=) or start_step="));
      COLLSCOPE_RETURN_IF_ERROR(need(f->coll_sn < 0 || f->has_op, "coll_sn= needs op="));
      COLLSCOPE_RETURN_IF_ERROR(
          need(f->has_mismatch_op || f->size_factor != 1.0, "needs issue_op= or size_factor="));
      COLLSCOPE_RETURN_IF_ERROR(need(f->size_factor > 0, "size_factor must be > 0"));
      break;
    default: break;
  }
  return Status::Ok();
}

}  // namespace

Status ResolveFaults(const SimConfig& config, int world, std::vector<Fault>* out) {
  out->clear();
  const int hosts = config.cluster.hosts;
  const int gph = config.cluster.gpus_per_host;
  for (size_t i = 0; i < config.faults.size(); ++i) {
    const FaultSpec& spec = config.faults[i];
    Fault f;
    f.spec = spec;
    bool found = false;
    for (int k = 0; k < static_cast<int>(FaultKind::kCount); ++k) {
      if (FaultKindName(static_cast<FaultKind>(k)) == spec.kind) {
        f.kind = static_cast<FaultKind>(k);
        found = true;
      }
    }
    const std::string where = "fault #" + std::to_string(i + 1) + " (" + spec.kind + ")";
    if (!found)
      return Status::InvalidArgument(
          where +
          ": unknown kind; expected one of gpu_straggler, host_slowdown, nic_degrade, "
          "link_flap, host_stall, pipeline_bubble, masked_straggler, hang, link_down, mismatch");
    int gpu = -1;
    std::string mismatch_op_text, op_text, comm_text;
    COLLSCOPE_RETURN_IF_ERROR(
        ParseFaultParams(spec, where, &f, &gpu, &mismatch_op_text, &op_text, &comm_text));
    if (!op_text.empty()) {
      if (!ParseOp(op_text, &f.op))
        return Status::InvalidArgument(where + ": unknown op '" + op_text + "'");
      f.has_op = true;
    }
    if (!mismatch_op_text.empty()) {
      if (!ParseOp(mismatch_op_text, &f.mismatch_op))
        return Status::InvalidArgument(where + ": unknown issue_op '" + mismatch_op_text + "'");
      f.has_mismatch_op = true;
    }
    if (!comm_text.empty() && !ParseCommKind(comm_text, &f.comm_kind))
      return Status::InvalidArgument(where + ": comm must be one of world, dp, cp, tp, pp, ep");
    if (gpu >= 0) {
      if (f.host < 0) return Status::InvalidArgument(where + ": gpu= needs host=");
      if (gpu >= gph) return Status::InvalidArgument(where + ": gpu out of range");
      f.rank = f.host * gph + gpu;
    }
    if (f.rank >= world)
      return Status::InvalidArgument(where + ": rank out of range (world " + std::to_string(world) +
                                     ")");
    if (f.host >= hosts)
      return Status::InvalidArgument(where + ": host out of range (" + std::to_string(hosts) +
                                     " hosts)");
    if (f.rail >= config.cluster.nics_per_host)
      return Status::InvalidArgument(where + ": rail out of range");
    if (f.stage >= config.parallel.pp)
      return Status::InvalidArgument(where + ": stage out of range");
    if (f.start_step >= 0 && f.end_step >= 0 && f.end_step <= f.start_step)
      return Status::InvalidArgument(where + ": end_step must be greater than start_step");
    if (f.start_off_us >= 0 && f.end_off_us >= 0 && f.end_off_us <= f.start_off_us)
      return Status::InvalidArgument(where + ": end_us must be greater than start_us");
    COLLSCOPE_RETURN_IF_ERROR(CheckKindNeeds(config, spec, where, &f));
    out->push_back(std::move(f));
  }
  return Status::Ok();
}

}  // namespace collscope::sim
