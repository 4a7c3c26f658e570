// Orchestration: checks the configuration, builds the layout, runs the engine with the writers,
// and writes ground_truth.json.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

#include "capture/common/json_escape.h"
#include "sim/internal.h"
#include "sim/writers.h"

namespace collscope::sim {

int RunEngine(const SimConfig& config, Layout& layout, std::vector<Fault>& faults,
              InspectorWriter& insp, KinetoWriter& kineto, StepWriter& steps, double* job_end,
              std::vector<double>* step_start, std::vector<double>* step_end, int* completed);

namespace {

Status MakeDirs(const std::string& path) {
  std::string cur;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    cur = path.substr(0, next);
    pos = next + 1;
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST)
      return Status::IOError("cannot create directory " + cur + ": " + std::strerror(errno));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::IOError(path + " is not a directory");
  return Status::Ok();
}

void AppendIntList(std::string* o, const std::vector<int>& v) {
  o->push_back('[');
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) o->push_back(',');
    AppendI64(o, v[i]);
  }
  o->push_back(']');
}

// Every setting of `config` checked, and the layout and faults it makes (one pass: a 10,240-GPU
// layout is not built twice).
Status CheckConfig(const SimConfig& config, Layout* layout, std::vector<Fault>* faults) {
  COLLSCOPE_RETURN_IF_ERROR(BuildLayout(config, layout));
  COLLSCOPE_RETURN_IF_ERROR(ResolveFaults(config, layout->world, faults));
  const WorkloadConfig& w = config.workload;
  if (w.hidden < 1 || w.layers < 1 || w.seq_len < 1 || w.micro_batch_size < 1 ||
      w.micro_batches < 1 || w.vocab < 1 || w.steps < 1)
    return Status::InvalidArgument(
        "hidden, layers, seq-len, micro-batch-size, micro-batches, vocab and steps must be >= 1");
  if (w.layers < config.parallel.pp) return Status::InvalidArgument("layers must be >= pp");
  if (w.seq_len % config.parallel.cp != 0)
    return Status::InvalidArgument("seq-len must be divisible by cp");
  if (config.inspector.flavor != "2.29" && config.inspector.flavor != "2.30")
    return Status::InvalidArgument("inspector flavor must be 2.29 or 2.30");
  if (config.inspector.dump_interval_us < 1)
    return Status::InvalidArgument("dump interval must be >= 1 us");
  if (config.output.dir.empty()) return Status::InvalidArgument("no output directory");
  if (config.mode == Mode::kNcclTests) {
    const NcclTestsConfig& nt = config.nccl_tests;
    if (nt.min_bytes < 1 || nt.max_bytes < nt.min_bytes || nt.factor < 2 || nt.iters < 1 ||
        nt.warmup < 0)
      return Status::InvalidArgument(
          "nccl-tests sweep: need 1 <= min-bytes <= max-bytes, factor >= 2, iters >= 1");
    for (const Fault& f : *faults) {
      if (f.kind != FaultKind::kNicDegrade && f.kind != FaultKind::kLinkFlap)
        return Status::InvalidArgument(
            "--mode nccl-tests supports only nic_degrade and link_flap faults");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateConfig(const SimConfig& config) {
  Layout layout;
  std::vector<Fault> faults;
  return CheckConfig(config, &layout, &faults);
}

namespace {

// Whom the ground truth names for a fault: its culprit ranks, their hosts, and the communicators
// it touches.
struct FaultScope {
  std::set<int> ranks, hosts, comms;
};

FaultScope ScopeOf(const Fault& f, const Layout& layout) {
  FaultScope scope;
  std::set<int>& ranks = scope.ranks;
  std::set<int>& hosts = scope.hosts;
  std::set<int>& comms = scope.comms;
  auto add_rank = [&](int r) {
    ranks.insert(r);
    hosts.insert(layout.ranks[r].host);
  };
  switch (f.kind) {
    case FaultKind::kGpuStraggler:
    case FaultKind::kMaskedStraggler:
    case FaultKind::kHostStall:
      add_rank(f.rank);
      for (int k = 0; k < static_cast<int>(CommKind::kCount); ++k)
        if (layout.ranks[f.rank].comm[k] >= 0) comms.insert(layout.ranks[f.rank].comm[k]);
      break;
    case FaultKind::kHang:
    case FaultKind::kMismatch:
      add_rank(f.rank);
      for (int c : f.gt_comms) comms.insert(c);
      if (f.gt_comms.empty()) {
        const int c = layout.ranks[f.rank].comm[static_cast<int>(f.comm_kind)];
        if (c >= 0) comms.insert(c);
      }
      break;
    case FaultKind::kHostSlowdown:
      hosts.insert(f.host);
      for (int r = 0; r < layout.world; ++r)
        if (layout.ranks[r].host == f.host) {
          ranks.insert(r);
          for (int k = 0; k < static_cast<int>(CommKind::kCount); ++k)
            if (layout.ranks[r].comm[k] >= 0) comms.insert(layout.ranks[r].comm[k]);
        }
      break;
    case FaultKind::kNicDegrade:
    case FaultKind::kLinkFlap:
    case FaultKind::kLinkDown:
      hosts.insert(f.host);
      for (int r = 0; r < layout.world; ++r)
        if (layout.ranks[r].host == f.host && (f.rail < 0 || layout.ranks[r].rail == f.rail))
          ranks.insert(r);
      for (size_t c = 0; c < layout.comms.size(); ++c) {
        const CommInfo& ci = layout.comms[c];
        if (!ci.multi_host) continue;
        for (auto [h, rail] : ci.host_rails)
          if (h == f.host && (f.rail < 0 || f.rail == rail)) { comms.insert(static_cast<int>(c)); break; }
      }
      if (f.kind == FaultKind::kLinkDown && !f.gt_comms.empty()) {
        comms.clear();
        for (int c : f.gt_comms) comms.insert(c);
      }
      break;
    case FaultKind::kPipelineBubble:
      for (int r = 0; r < layout.world; ++r)
        if (layout.ranks[r].pp == f.stage) {
          add_rank(r);
          const int c = layout.ranks[r].comm[static_cast<int>(CommKind::kPp)];
          if (c >= 0) comms.insert(c);
        }
      break;
    default: break;
  }
  return scope;
}

// The run as the engine left it: when the job and each step ended, and how many steps completed.
struct RunTimes {
  double job_end = 0;
  std::vector<double> step_start, step_end;
  int completed = 0;
};

// A fault's window, in microseconds since the simulated clock's zero: its steps, its time window, or
// the whole job; hangs, mismatches, link failures and stalls from when they triggered.
std::pair<double, double> WindowOf(const Fault& f, const RunTimes& run) {
  const std::vector<double>& step_start = run.step_start;
  const std::vector<double>& step_end = run.step_end;
  const double job_end = run.job_end;
  const double first_step = step_start.empty() ? 0 : step_start.front();
  double start = kInf, end = job_end;
  if (f.HasStepWindow() && !step_start.empty()) {
    const int s0 = std::max(0, f.start_step);
    start = s0 < static_cast<int>(step_start.size()) ? step_start[s0] : job_end;
    if (f.end_step >= 0 && f.end_step - 1 < static_cast<int>(step_end.size()) &&
        std::isfinite(step_end[f.end_step - 1]))
      end = step_end[f.end_step - 1];
  } else if (f.HasTimeWindow()) {
    start = std::max(0.0, f.start_off_us);
    if (f.end_off_us >= 0) end = std::min(job_end, f.end_off_us);
  } else {
    start = first_step;
  }
  switch (f.kind) {
    case FaultKind::kHang:
    case FaultKind::kMismatch:
    case FaultKind::kLinkDown:
      if (f.triggered) start = f.first_us;
      end = (f.kind == FaultKind::kMismatch && !f.effect_hang && f.triggered) ? f.first_us : job_end;
      break;
    case FaultKind::kHostStall:
      if (f.triggered) { start = f.first_us; end = f.last_us; }
      break;
    default: break;
  }
  if (!std::isfinite(start)) start = job_end;
  if (end < start) end = start;
  return {start, end};
}

// One fault of the ground truth's "faults" array.
void AppendFault(std::string* out, size_t i, const Fault& f, const Layout& layout, const RunTimes& run,
                 double t0) {
  std::string& o = *out;
  auto wall = [t0](double t) { return static_cast<int64_t>(std::llround(t0 + t)); };
  const auto [ranks, hosts, comms] = ScopeOf(f, layout);
  const auto [start, end] = WindowOf(f, run);
  if (i) o += ",";
  o += "\n{\"id\":" + std::to_string(i) + ",\"kind\":\"" + std::string(FaultKindName(f.kind)) +
       "\",\"triggered\":" + (f.triggered ? "true" : "false") + ",\"hosts\":[";
  bool first = true;
  for (int h : hosts) {
    if (!first) o += ",";
    first = false;
    o += capture::JsonQuoted(layout.hostnames[h]);
  }
  o += "],\"host_indexes\":";
  AppendIntList(&o, std::vector<int>(hosts.begin(), hosts.end()));
  o += ",\"ranks\":";
  AppendIntList(&o, std::vector<int>(ranks.begin(), ranks.end()));
  o += ",\"comms\":[";
  first = true;
  for (int c : comms) {
    if (!first) o += ",";
    first = false;
    o += capture::JsonQuoted(layout.comms[c].id_text);
  }
  o += "],\"start_us\":" + std::to_string(wall(start)) + ",\"end_us\":" + std::to_string(wall(end));
  if (f.start_step >= 0) o += ",\"start_step\":" + std::to_string(f.start_step);
  if (f.end_step >= 0) o += ",\"end_step\":" + std::to_string(f.end_step);
  o += ",\"params\":{";
  first = true;
  for (const auto& [k, v] : f.spec.params) {
    if (!first) o += ",";
    first = false;
    o += capture::JsonQuoted(k) + ":" + capture::JsonQuoted(v);
  }
  o += "}";
  if (f.kind == FaultKind::kHang || f.kind == FaultKind::kMismatch) {
    o += ",\"resolved\":{\"comm_kind\":\"" + std::string(CommKindName(f.comm_kind)) + "\"";
    if (f.triggered) {
      o += ",\"op\":\"" + std::string(OpName(f.resolved_op)) + "\",\"coll_sn\":" +
           std::to_string(f.resolved_sn) + ",\"step\":" + std::to_string(f.resolved_step);
      if (f.kind == FaultKind::kMismatch) {
        o += ",\"issued_op\":\"" +
             std::string(OpName(f.has_mismatch_op ? f.mismatch_op : f.resolved_op)) + "\"";
        o += ",\"effect\":\"" + std::string(f.effect_hang ? "hang" : "complete") + "\"";
      }
    }
    o += "}";
  }
  if (f.kind == FaultKind::kLinkDown && f.triggered) {
    o += ",\"resolved\":{\"step\":" + std::to_string(f.resolved_step) + "}";
  }
  o += "}";
}

// The ground truth's layout: hosts with their clock offsets, ranks with their files, communicators.
void AppendLayout(std::string* out, const Layout& layout, const InspectorWriter& insp, bool state_files) {
  std::string& o = *out;
  o += "\"hosts\":[";
  for (int h = 0; h < layout.hosts; ++h) {
    if (h) o += ",";
    o += "\n{\"host\":" + std::to_string(h) + ",\"hostname\":" + capture::JsonQuoted(layout.hostnames[h]) +
         ",\"clock_offset_us\":" + std::to_string(static_cast<int64_t>(layout.clock_offset_us[h])) +
         "}";
  }
  o += "],\n\"ranks\":[";
  for (int r = 0; r < layout.world; ++r) {
    const RankInfo& ri = layout.ranks[r];
    if (r) o += ",";
    o += "\n{\"rank\":" + std::to_string(r) + ",\"host\":" + std::to_string(ri.host) +
         ",\"hostname\":" + capture::JsonQuoted(layout.hostnames[ri.host]) +
         ",\"pid\":" + std::to_string(ri.pid) + ",\"local_rank\":" + std::to_string(ri.local) +
         ",\"rail\":" + std::to_string(ri.rail) + ",\"tp\":" + std::to_string(ri.tp) +
         ",\"cp\":" + std::to_string(ri.cp) + ",\"dp\":" + std::to_string(ri.dp) +
         ",\"pp\":" + std::to_string(ri.pp) + ",\"ep\":" + std::to_string(ri.ep) +
         ",\"inspector_file\":" + capture::JsonQuoted(insp.LinesOf(r) ? insp.FileName(r) : "") +
         ",\"inspector_lines\":" + std::to_string(insp.LinesOf(r)) +
         ",\"inflight_file\":" + capture::JsonQuoted(state_files ? insp.StateFileName(r) : "") + "}";
  }
  o += "],\n\"comms\":[";
  for (size_t c = 0; c < layout.comms.size(); ++c) {
    const CommInfo& ci = layout.comms[c];
    if (c) o += ",";
    o += "\n{\"id\":" + capture::JsonQuoted(ci.id_text) + ",\"name\":" + capture::JsonQuoted(ci.name) +
         ",\"kind\":\"" + std::string(CommKindName(ci.kind)) +
         "\",\"pg_name\":\"" + std::to_string(ci.pg_index) + "\",\"n_ranks\":" +
         std::to_string(ci.ranks.size()) + ",\"nnodes\":" + std::to_string(ci.hosts.size()) +
         ",\"ranks\":";
    AppendIntList(&o, ci.ranks);
    o += "}";
  }
  o += "]\n}\n";
}

// ground_truth.json: the job, what was written where, the steps, the faults with their culprits and
// windows, and the layout.
std::string GroundTruthJson(const SimConfig& config, const Layout& layout, const std::vector<Fault>& faults,
                            const InspectorWriter& insp, const KinetoWriter& kineto, const StepWriter& steps,
                            bool state_files, const RunTimes& run) {
  const double job_end = run.job_end;
  const std::vector<double>& step_start = run.step_start;
  const std::vector<double>& step_end = run.step_end;
  const int completed = run.completed;
  const double t0 = static_cast<double>(config.start_time_us);
  auto wall = [t0](double t) { return static_cast<int64_t>(std::llround(t0 + t)); };
  std::string o;
  o.reserve(1 << 20);
  o += "{\n\"format\":\"collscope-sim-ground-truth\",\n\"version\":1,\n";
  o += "\"seed\":" + std::to_string(config.seed) + ",\n";
  o += "\"mode\":\"" + std::string(config.mode == Mode::kNcclTests ? "nccl-tests" : "training") +
       "\",\n";
  o += "\"job\":{\"start_us\":" + std::to_string(config.start_time_us) +
       ",\"end_us\":" + std::to_string(wall(job_end)) +
       ",\"world\":" + std::to_string(layout.world) + ",\"hosts\":" + std::to_string(layout.hosts) +
       ",\"gpus_per_host\":" + std::to_string(layout.gpus_per_host) +
       ",\"nics_per_host\":" + std::to_string(config.cluster.nics_per_host) +
       ",\"tp\":" + std::to_string(layout.tp) + ",\"pp\":" + std::to_string(layout.pp) +
       ",\"dp\":" + std::to_string(layout.dp) + ",\"cp\":" + std::to_string(layout.cp) +
       ",\"ep\":" + std::to_string(layout.ep) +
       ",\"steps\":" + std::to_string(config.mode == Mode::kTraining ? config.workload.steps : 0) +
       ",\"steps_completed\":" + std::to_string(config.mode == Mode::kTraining ? completed : 0) +
       ",\"hidden\":" + std::to_string(config.workload.hidden) +
       ",\"layers\":" + std::to_string(config.workload.layers) +
       ",\"seq_len\":" + std::to_string(config.workload.seq_len) +
       ",\"micro_batches\":" + std::to_string(config.workload.micro_batches) +
       ",\"sharding\":\"" + (config.workload.sharding == Sharding::kZero ? "zero" : "ddp") +
       "\",\"sequence_parallel\":" + (config.workload.sequence_parallel ? "true" : "false") +
       ",\"nvlink_gbs\":";
  AppendFixed3(&o, config.cluster.nvlink_gbs);
  o += ",\"nic_gbs\":";
  AppendFixed3(&o, config.cluster.nic_gbs);
  o += "},\n\"inspector\":{\"dir\":\"nccl-inspector\",\"flavor\":\"" + config.inspector.flavor +
       "\",\"dump_interval_us\":" + std::to_string(config.inspector.dump_interval_us) +
       ",\"verbose\":" + (config.inspector.verbose ? "true" : "false") +
       ",\"p2p\":" + (config.inspector.p2p && config.inspector.flavor != "2.29" ? "true" : "false") +
       ",\"proxy\":" + (config.inspector.proxy && config.inspector.flavor != "2.29" ? "true" : "false") +
       ",\"min_size_bytes\":" + std::to_string(config.inspector.min_size_bytes) +
       ",\"coll_records\":" + std::to_string(insp.coll_written()) +
       ",\"p2p_records\":" + std::to_string(insp.p2p_written()) +
       ",\"dropped_records\":" + std::to_string(insp.dropped()) +
       ",\"filtered_small_records\":" + std::to_string(insp.filtered()) + "},\n";
  o += "\"outputs\":{\"kineto_dir\":" + std::string(kineto.traces() ? "\"kineto\"" : "null") +
       ",\"kernel_summaries_dir\":" + std::string(kineto.summaries() ? "\"kernels\"" : "null") +
       ",\"steps_dir\":" + std::string(steps.enabled() ? "\"steps\"" : "null") +
       ",\"nccl_tests_out\":" +
       (config.mode == Mode::kNcclTests ? std::string("\"nccl-tests.out\"") : std::string("null")) +
       ",\"inflight_state\":" + (state_files ? "true" : "false") + "},\n";
  // Steps (training): global start (earliest rank) and end (latest rank).
  o += "\"steps\":[";
  if (config.mode == Mode::kTraining) {
    for (size_t s = 0; s < step_start.size(); ++s) {
      if (s) o += ",";
      o += "\n{\"step\":" + std::to_string(s) + ",\"start_us\":" +
           (std::isfinite(step_start[s]) ? std::to_string(wall(step_start[s])) : "null") +
           ",\"end_us\":" +
           (std::isfinite(step_end[s]) && s < static_cast<size_t>(completed)
                ? std::to_string(wall(step_end[s]))
                : "null") +
           "}";
    }
  }
  o += "],\n";

  o += "\"faults\":[";
  for (size_t i = 0; i < faults.size(); ++i) AppendFault(&o, i, faults[i], layout, run, t0);
  o += "],\n";
  AppendLayout(&o, layout, insp, state_files);
  return o;
}

}  // namespace

Status Simulate(const SimConfig& config, SimStats* stats) {
  SimStats local;
  if (!stats) stats = &local;
  Layout layout;
  std::vector<Fault> faults;
  COLLSCOPE_RETURN_IF_ERROR(CheckConfig(config, &layout, &faults));
  const std::string& dir = config.output.dir;
  const std::string insp_dir = dir + "/nccl-inspector";
  const std::string kin_dir = dir + "/kineto";
  COLLSCOPE_RETURN_IF_ERROR(MakeDirs(insp_dir));
  InspectorWriter insp(config, layout, insp_dir);
  const std::string kernels_dir = dir + "/kernels";
  KinetoWriter kineto(config, layout, kin_dir, kernels_dir);
  if (kineto.traces()) COLLSCOPE_RETURN_IF_ERROR(MakeDirs(kin_dir));
  if (kineto.summaries()) COLLSCOPE_RETURN_IF_ERROR(MakeDirs(kernels_dir));
  const std::string steps_dir = dir + "/steps";
  StepWriter steps(config, layout, steps_dir);
  if (steps.enabled()) COLLSCOPE_RETURN_IF_ERROR(MakeDirs(steps_dir));
  RunTimes run;
  RunEngine(config, layout, faults, insp, kineto, steps, &run.job_end, &run.step_start, &run.step_end,
            &run.completed);
  if (config.cancel && config.cancel->load()) {
    stats->stopped = true;
    return Status::Ok();
  }
  COLLSCOPE_RETURN_IF_ERROR(steps.Finish());
  COLLSCOPE_RETURN_IF_ERROR(insp.Finish(run.job_end));
  const bool state_files = config.output.inflight_state && config.mode == Mode::kTraining;
  if (state_files) COLLSCOPE_RETURN_IF_ERROR(insp.WriteStateFiles(run.job_end));
  COLLSCOPE_RETURN_IF_ERROR(kineto.Finish());

  const std::string o = GroundTruthJson(config, layout, faults, insp, kineto, steps, state_files, run);
  const std::string gt_path = dir + "/ground_truth.json";
  FILE* g = std::fopen(gt_path.c_str(), "wb");
  if (!g) return Status::IOError("cannot open " + gt_path + ": " + std::strerror(errno));
  std::fwrite(o.data(), 1, o.size(), g);
  if (std::fclose(g) != 0) return Status::IOError("cannot write " + gt_path);

  stats->coll_records = insp.coll_written();
  stats->p2p_records = insp.p2p_written();
  stats->dropped_records = insp.dropped();
  stats->inspector_bytes = insp.bytes_written();
  uint64_t files = 0;
  for (int r = 0; r < layout.world; ++r) files += insp.LinesOf(r) ? 1 : 0;
  stats->inspector_files = files;
  stats->world = layout.world;
  stats->steps_completed = run.completed;
  stats->job_duration_s = run.job_end / 1e6;
  return Status::Ok();
}

}  // namespace collscope::sim
