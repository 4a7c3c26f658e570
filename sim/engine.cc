// The simulation engine: builds each pipeline stage's per-step program (1F1B schedule, TP/CP/EP
// collectives per layer, DP gradient synchronisation, optimizer), then executes all ranks with
// rendezvous semantics: a collective completes when its last member arrives; a point-to-point
// transfer when both sides have posted. Records stream to the writers step by step.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>

#include "sim/internal.h"
#include "sim/writers.h"

namespace collscope::sim {

namespace {

constexpr int kKinds = static_cast<int>(CommKind::kCount);
constexpr int kOps = static_cast<int>(Op::kCount);

enum class OpType : uint8_t { kCompute, kColl, kP2p };
enum Phase : uint8_t {
  kPhForward, kPhBackward, kPhTp, kPhCp, kPhEp, kPhPp, kPhDp, kPhOptimizer, kPhWorld, kPhStall,
  kPhCount
};
const char* const kPhaseNames[kPhCount] = {"forward", "backward", "tp_comm", "cp_comm",
                                           "ep_comm", "pp_p2p",   "dp_comm", "optimizer",
                                           "world_comm", "host_stall"};
enum Kernel : uint8_t { kKAttnFwd, kKMlpFwd, kKAttnBwd, kKMlpBwd, kKEmbed, kKLoss, kKOptim };
const char* const kKernelNames[] = {
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::bfloat16_t>, false, false, false, false, true, true, false>(Flash_fwd_params)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas",
    "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, "
    "128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, false, false, false, false, false, "
    "false>(Flash_bwd_params)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas",
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, "
    "unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
    "at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
    "at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned int, "
    "long)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
    "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, "
    "float, float, float, float, adamMode_t, float>(long, int volatile*, TensorListMetadata<4>, "
    "AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float)"};

struct ProgOp {
  OpType type = OpType::kCompute;
  Phase phase = kPhForward;
  CommKind kind = CommKind::kWorld;
  Op op = Op::kAllReduce;
  uint8_t dtype = 0;  // 0 bf16, 1 fp32
  uint8_t kernel = 0;
  int8_t send_dir = -1;  // 0: activation to next stage, 1: gradient to previous stage
  int8_t recv_dir = -1;  // 0: activation from previous stage, 1: gradient from next stage
  int16_t mb = 0;
  int64_t bytes = 0;  // Inspector size (collective) or transfer size (p2p)
  double base_us = 0; // compute
};

struct CollInst {
  int arrived = 0;
  double max_arrival = -kInf;
  double first_arrival = kInf;
  std::vector<double> arrival;
  std::vector<uint64_t> sn;
  std::vector<uint8_t> op;
  std::vector<int64_t> bytes;
  bool force_hang = false;
  uint64_t ordinal = 0;
};

struct PhaseAcc {
  double start = kInf;
  double dur = 0;
};

struct RankState {
  double t = 0;
  double step_start = 0;
  int cursor = 0;
  int parts_total = 0, parts_done = 0;
  double p2p_arrival = 0, p2p_end = 0;
  double fwd_start = kInf, bwd_start = kInf;
  int16_t cur_mb = -1;
  int seg_kind = -1, seg_mb = -1;
  double seg_start = 0, seg_end = 0;
  PhaseAcc phase[kPhCount];
};

struct Post {
  int rank;
  double t;
  int64_t bytes;
  bool is_send;
};

struct Channel {
  std::vector<Post> q;  // unmatched posts of one side, FIFO (head index)
  size_t head = 0;
};

class Engine {
 public:
  Engine(const SimConfig& config, Layout& layout, std::vector<Fault>& faults,
         InspectorWriter& insp, KinetoWriter& kineto, StepWriter& steps)
      : cfg_(config), L_(layout), faults_(faults), insp_(insp), kin_(kineto), steps_(steps) {
    const bool nt = config.mode == Mode::kNcclTests;
    using N = NoiseConfig;
    compute_sigma_ = config.noise.compute_sigma >= 0 ? config.noise.compute_sigma : N::kComputeSigma;
    comm_sigma_ = config.noise.comm_sigma >= 0 ? config.noise.comm_sigma : (nt ? N::kCommSigmaNcclTests : N::kCommSigma);
    cont_prob_ = config.noise.contention_prob >= 0 ? config.noise.contention_prob : (nt ? 0 : N::kContentionProb);
    cont_min_ = config.noise.contention_min >= 0 ? config.noise.contention_min : N::kContentionMin;
    rs_.resize(L_.world);
    gpu_speed_.resize(L_.world);
    for (int r = 0; r < L_.world; ++r)
      gpu_speed_[r] = LogNormal(Hash(cfg_.seed, 0x5BEEDULL, static_cast<uint64_t>(r), 0), config.noise.gpu_speed_sigma);
    inst_.resize(L_.comms.size());
    for (size_t c = 0; c < L_.comms.size(); ++c) {
      const size_t n = L_.comms[c].ranks.size();
      inst_[c].arrival.assign(n, 0);
      inst_[c].sn.assign(n, 0);
      inst_[c].op.assign(n, 0);
      inst_[c].bytes.assign(n, 0);
    }
    sn_.assign(static_cast<size_t>(L_.world) * kKinds * kOps, 0);
    channels_.resize(static_cast<size_t>(L_.world) * 2);
    healthy_bw_.resize(L_.comms.size());
    net_faulty_.assign(L_.comms.size(), 0);
    for (size_t c = 0; c < L_.comms.size(); ++c) {
      const CommInfo& ci = L_.comms[c];
      double lat = 0;
      healthy_bw_[c] = CommBandwidth(static_cast<int>(c), -1, 0, &lat, false);
      for (const Fault& f : faults_) {
        if (f.kind != FaultKind::kNicDegrade && f.kind != FaultKind::kLinkFlap &&
            f.kind != FaultKind::kLinkDown)
          continue;
        if (!ci.multi_host) continue;
        for (auto [h, rail] : ci.host_rails)
          if (h == f.host && (f.rail < 0 || f.rail == rail)) net_faulty_[c] = 1;
      }
    }
  }

  void Run();
  double job_end() const { return job_end_; }
  const std::vector<double>& step_start() const { return step_start_; }
  const std::vector<double>& step_end() const { return step_end_; }
  int steps_completed() const { return steps_completed_; }

 private:
  // ---- program construction
  void BuildPrograms();
  void AddLayerFwd(std::vector<ProgOp>* p, int mb);
  void AddLayerBwd(std::vector<ProgOp>* p, int mb);
  void AddComm(std::vector<ProgOp>* p, CommKind kind, Op op, int64_t bytes, Phase ph, int mb,
               uint8_t dtype = 0);
  void AddCompute(std::vector<ProgOp>* p, double flops, Phase ph, Kernel k, int mb);
  void AddP2p(std::vector<ProgOp>* p, int send_dir, int recv_dir, int64_t bytes, int mb);
  bool HasComm(CommKind kind) const;

  // ---- execution
  void RunStep(int step);
  void RunNcclTests();
  void Advance(int r);
  bool ArriveColl(int r, const ProgOp& op);
  void CompleteColl(int c, int arriving_rank);
  bool PostP2p(int r, const ProgOp& op);
  void MatchPart(const Post& send, const Post& recv, int dir);
  double ComputeFactor(int r, const ProgOp& op, double t);
  double CommBandwidth(int c, int step, double t, double* lat_us, bool with_faults);
  double LinkBandwidth(int a, int b, double t, double* lat_us);
  double NicFactor(int host, int rail, double t) const;
  double FlapDelay(int host, int rail, double start, double dur);
  bool LinkDead(int host, int rail, double start, double end, int* which);
  void AddPhase(int r, Phase ph, double start, double dur);
  void Segment(int r, int kind, int mb, double start, double end);
  void NcclKernel(int r, int comm, Op op, int64_t bytes, uint8_t dtype, double start, double end,
                  const CollCost& cost, int stream);
  // With proxy tracking: the ProxyOps of member `i`'s network transfers in one collective.
  void CollProxies(int c, int i, Op op, uint64_t sn, int64_t bytes, double start, double end);
  // One side's ProxyOp of a transfer between `me` and `other` when they are on different hosts:
  // posted at `op_start`, on the wire from `wire_start` (a send), done at `end`. A send spends
  // the rest waiting for its GPU or for the receiver's credit; a receive waits for the data.
  void SideProxy(int c, int me, int other, bool send, bool parent_p2p, int64_t parent_sn,
                 double bytes, double op_start, double wire_start, double end, uint64_t key);

  const SimConfig& cfg_;
  Layout& L_;
  std::vector<Fault>& faults_;
  InspectorWriter& insp_;
  KinetoWriter& kin_;
  StepWriter& steps_;
  double compute_sigma_, comm_sigma_, cont_prob_, cont_min_;
  std::vector<double> gpu_speed_;  // each GPU's static compute factor (NoiseConfig::gpu_speed_sigma)
  std::vector<std::vector<ProgOp>> programs_;  // per pipeline stage
  std::vector<RankState> rs_;
  std::vector<CollInst> inst_;
  std::vector<uint64_t> sn_;
  std::vector<Channel> channels_;  // per (sender rank, dir)
  std::vector<double> healthy_bw_;
  std::vector<uint8_t> net_faulty_;
  std::vector<int> stack_;
  int step_ = 0;
  bool kin_step_ = false;
  double job_end_ = 0;
  std::vector<double> step_start_, step_end_;
  int steps_completed_ = 0;
  std::vector<uint8_t> dtype_of_op_;
  int posting_rank_ = -1;
};

constexpr double kInitUs = 15e6;  // model construction and NCCL init before step 0

bool Engine::HasComm(CommKind kind) const {
  switch (kind) {
    case CommKind::kWorld: return L_.world > 1;
    case CommKind::kDp: return L_.dp > 1;
    case CommKind::kCp: return L_.cp > 1;
    case CommKind::kTp: return L_.tp > 1;
    case CommKind::kPp: return L_.pp > 1;
    case CommKind::kEp: return L_.ep > 1;
    default: return false;
  }
}

void Engine::AddComm(std::vector<ProgOp>* p, CommKind kind, Op op, int64_t bytes, Phase ph,
                     int mb, uint8_t dtype) {
  if (!HasComm(kind) || bytes <= 0) return;
  ProgOp o;
  o.type = OpType::kColl;
  o.kind = kind;
  o.op = op;
  o.bytes = bytes;
  o.phase = ph;
  o.mb = static_cast<int16_t>(mb);
  o.dtype = dtype;
  p->push_back(o);
}

void Engine::AddCompute(std::vector<ProgOp>* p, double flops, Phase ph, Kernel k, int mb) {
  ProgOp o;
  o.type = OpType::kCompute;
  o.phase = ph;
  o.kernel = k;
  o.mb = static_cast<int16_t>(mb);
  o.base_us = flops / (cfg_.cluster.gpu_tflops * 1e12 * cfg_.cluster.mfu) * 1e6 + 4.0;
  p->push_back(o);
}

void Engine::AddP2p(std::vector<ProgOp>* p, int send_dir, int recv_dir, int64_t bytes, int mb) {
  if (send_dir < 0 && recv_dir < 0) return;
  ProgOp o;
  o.type = OpType::kP2p;
  o.kind = CommKind::kPp;
  o.phase = kPhPp;
  o.send_dir = static_cast<int8_t>(send_dir);
  o.recv_dir = static_cast<int8_t>(recv_dir);
  o.bytes = bytes;
  o.mb = static_cast<int16_t>(mb);
  p->push_back(o);
}

void Engine::BuildPrograms() {
  const WorkloadConfig& w = cfg_.workload;
  const double H = static_cast<double>(w.hidden);
  const double tokens = static_cast<double>(w.micro_batch_size) * w.seq_len / L_.cp;
  const double tp = L_.tp;
  const int64_t act_bytes = static_cast<int64_t>(tokens * H * 2);  // bf16 activations
  const int64_t tp_ar = act_bytes;
  const int64_t tp_sp = act_bytes / L_.tp;  // per-rank AG/RS size with sequence parallelism
  const int64_t cp_kv = static_cast<int64_t>(2 * tokens * H * 2 / tp);
  const int64_t ep_peer = static_cast<int64_t>(tokens * H * 2 * w.moe_topk / L_.ep /
                                               (w.sequence_parallel ? tp : 1.0));
  const int64_t p2p_bytes = w.sequence_parallel ? tp_sp : act_bytes;
  const double attn_f = (2 * 4 * H * H * tokens + 4 * tokens * w.seq_len * H) / tp;
  const double mlp_f = 2 * 8 * H * H * tokens / tp * (L_.ep > 1 ? w.moe_topk : 1);
  programs_.assign(L_.pp, {});
  const int M = static_cast<int>(w.micro_batches);
  for (int p = 0; p < L_.pp; ++p) {
    std::vector<ProgOp>& prog = programs_[p];
    const int64_t layers_here =
        w.layers / L_.pp + (p >= L_.pp - w.layers % L_.pp ? 1 : 0);
    const bool first = p == 0, last = p == L_.pp - 1;
    auto fwd = [&](int mb) {
      if (first) AddCompute(&prog, tokens * H * 8, kPhForward, kKEmbed, mb);
      for (int64_t l = 0; l < layers_here; ++l) {
        AddComm(&prog, CommKind::kCp, Op::kAllGather, cp_kv, kPhCp, mb);
        if (w.sequence_parallel) AddComm(&prog, CommKind::kTp, Op::kAllGather, tp_sp, kPhTp, mb);
        AddCompute(&prog, attn_f, kPhForward, kKAttnFwd, mb);
        if (w.sequence_parallel) AddComm(&prog, CommKind::kTp, Op::kReduceScatter, tp_sp, kPhTp, mb);
        else AddComm(&prog, CommKind::kTp, Op::kAllReduce, tp_ar, kPhTp, mb);
        AddComm(&prog, CommKind::kEp, Op::kAlltoAll, ep_peer, kPhEp, mb);
        if (w.sequence_parallel) AddComm(&prog, CommKind::kTp, Op::kAllGather, tp_sp, kPhTp, mb);
        AddCompute(&prog, mlp_f, kPhForward, kKMlpFwd, mb);
        AddComm(&prog, CommKind::kEp, Op::kAlltoAll, ep_peer, kPhEp, mb);
        if (w.sequence_parallel) AddComm(&prog, CommKind::kTp, Op::kReduceScatter, tp_sp, kPhTp, mb);
        else AddComm(&prog, CommKind::kTp, Op::kAllReduce, tp_ar, kPhTp, mb);
      }
      if (last) AddCompute(&prog, 2 * tokens * H * w.vocab / tp, kPhForward, kKLoss, mb);
    };
    auto bwd = [&](int mb) {
      if (last) AddCompute(&prog, 4 * tokens * H * w.vocab / tp, kPhBackward, kKLoss, mb);
      for (int64_t l = 0; l < layers_here; ++l) {
        if (w.sequence_parallel) AddComm(&prog, CommKind::kTp, Op::kAllGather, tp_sp, kPhTp, mb);
        AddComm(&prog, CommKind::kEp, Op::kAlltoAll, ep_peer, kPhEp, mb);
        AddCompute(&prog, 2 * mlp_f, kPhBackward, kKMlpBwd, mb);
        AddComm(&prog, CommKind::kEp, Op::kAlltoAll, ep_peer, kPhEp, mb);
        if (w.sequence_parallel) AddComm(&prog, CommKind::kTp, Op::kReduceScatter, tp_sp, kPhTp, mb);
        else AddComm(&prog, CommKind::kTp, Op::kAllReduce, tp_ar, kPhTp, mb);
        if (w.sequence_parallel) AddComm(&prog, CommKind::kTp, Op::kAllGather, tp_sp, kPhTp, mb);
        AddCompute(&prog, 2 * attn_f, kPhBackward, kKAttnBwd, mb);
        if (w.sequence_parallel) AddComm(&prog, CommKind::kTp, Op::kReduceScatter, tp_sp, kPhTp, mb);
        else AddComm(&prog, CommKind::kTp, Op::kAllReduce, tp_ar, kPhTp, mb);
        AddComm(&prog, CommKind::kCp, Op::kReduceScatter, cp_kv, kPhCp, mb);
      }
      if (first) AddCompute(&prog, tokens * H * 8, kPhBackward, kKEmbed, mb);
    };
    const int has_prev = first ? -1 : 0;
    const int warm = std::min(L_.pp - p - 1, M);
    const int rem = M - warm;
    for (int i = 0; i < warm; ++i) {
      AddP2p(&prog, -1, first ? -1 : 0, p2p_bytes, i);
      fwd(i);
      AddP2p(&prog, last ? -1 : 0, -1, p2p_bytes, i);
    }
    if (rem > 0) AddP2p(&prog, -1, has_prev, p2p_bytes, warm);
    for (int i = 0; i < rem; ++i) {
      fwd(warm + i);
      AddP2p(&prog, last ? -1 : 0, last ? -1 : 1, p2p_bytes, warm + i);
      bwd(i);
      if (i == rem - 1) AddP2p(&prog, first ? -1 : 1, -1, p2p_bytes, i);
      else AddP2p(&prog, first ? -1 : 1, first ? -1 : 0, p2p_bytes, i);
    }
    for (int i = 0; i < warm; ++i) {
      AddP2p(&prog, -1, last ? -1 : 1, p2p_bytes, rem + i);
      bwd(rem + i);
      AddP2p(&prog, first ? -1 : 1, -1, p2p_bytes, rem + i);
    }
    // Gradient synchronisation over DP, optimizer, parameter all-gather (distributed optimizer).
    double params = 12 * H * H * static_cast<double>(layers_here) / tp;
    if (L_.ep > 1) params += 8 * H * H * static_cast<double>(layers_here) * (w.moe_topk - 1) / tp;
    if (first || last) params += H * static_cast<double>(w.vocab) / tp;
    const double bucket = std::max(1.0, w.bucket_mparams * 1e6);
    const int nb = std::max(1, static_cast<int>(std::ceil(params / bucket)));
    std::vector<int64_t> bucket_params;
    double left = params;
    for (int b = 0; b < nb; ++b) {
      const double n = std::min(bucket, left);
      left -= n;
      bucket_params.push_back(static_cast<int64_t>(n));
    }
    const bool zero = w.sharding == Sharding::kZero;
    for (int64_t bp : bucket_params) {
      if (zero) AddComm(&prog, CommKind::kDp, Op::kReduceScatter, bp * 4 / L_.dp, kPhDp, -1, 1);
      else AddComm(&prog, CommKind::kDp, Op::kAllReduce, bp * 4, kPhDp, -1, 1);
    }
    {
      ProgOp o;
      o.type = OpType::kCompute;
      o.phase = kPhOptimizer;
      o.kernel = kKOptim;
      o.mb = -1;
      const double local = zero ? params / L_.dp : params;
      o.base_us = 300.0 + local * 16.0 / 2.0e12 * 1e6 * 2.0;  // Adam: read+write 16 B/param
      prog.push_back(o);
    }
    if (zero)
      for (int64_t bp : bucket_params)
        AddComm(&prog, CommKind::kDp, Op::kAllGather, bp * 2 / L_.dp, kPhDp, -1, 0);
    AddComm(&prog, CommKind::kWorld, Op::kAllReduce, w.world_allreduce_bytes, kPhWorld, -1, 1);
  }
}

// ------------------------------------------------------------------------------------------------
// Network model

double Engine::NicFactor(int host, int rail, double t) const {
  double f = 1.0;
  for (const Fault& ft : faults_) {
    if (ft.kind != FaultKind::kNicDegrade || ft.host != host) continue;
    if (ft.rail >= 0 && ft.rail != rail) continue;
    if (!ft.Active(step_, t)) continue;
    f *= ft.factor;
  }
  return f;
}

double Engine::CommBandwidth(int c, int step, double t, double* lat_us, bool with_faults) {
  (void)step;
  const CommInfo& ci = L_.comms[c];
  const ClusterConfig& cl = cfg_.cluster;
  if (!ci.multi_host) {
    *lat_us = cl.nvlink_latency_us;
    return cl.nvlink_gbs;
  }
  *lat_us = cl.net_latency_us;
  if (!with_faults && c < static_cast<int>(healthy_bw_.size()) && healthy_bw_[c] > 0)
    return healthy_bw_[c];
  // Per host: the rails its members use, in parallel; the slowest host bounds the ring.
  double bw = kInf;
  size_t i = 0;
  while (i < ci.host_rails.size()) {
    const int h = ci.host_rails[i].first;
    double sum = 0;
    for (; i < ci.host_rails.size() && ci.host_rails[i].first == h; ++i)
      sum += cl.nic_gbs * (with_faults ? NicFactor(h, ci.host_rails[i].second, t) : 1.0);
    bw = std::min(bw, sum);
  }
  if (ci.max_per_host > 1) bw = std::min(bw, cl.nvlink_gbs);
  return bw;
}

double Engine::LinkBandwidth(int a, int b, double t, double* lat_us) {
  const RankInfo& ra = L_.ranks[a];
  const RankInfo& rb = L_.ranks[b];
  const ClusterConfig& cl = cfg_.cluster;
  if (ra.host == rb.host) {
    *lat_us = cl.nvlink_latency_us;
    return cl.nvlink_gbs;
  }
  *lat_us = cl.net_latency_us;
  const double fa = NicFactor(ra.host, ra.rail, t), fb = NicFactor(rb.host, rb.rail, t);
  if (fa < 1.0 || fb < 1.0) {
    for (Fault& f : faults_) {
      if (f.kind != FaultKind::kNicDegrade || !f.Active(step_, t)) continue;
      if ((f.host == ra.host && (f.rail < 0 || f.rail == ra.rail)) ||
          (f.host == rb.host && (f.rail < 0 || f.rail == rb.rail)))
        f.Touch(t);
    }
  }
  return cl.nic_gbs * std::min(fa, fb);
}

double Engine::FlapDelay(int host, int rail, double start, double dur) {
  double extra = 0;
  if (!std::isfinite(start) || !std::isfinite(dur)) return 0;
  for (Fault& f : faults_) {
    if (f.kind != FaultKind::kLinkFlap || f.host != host) continue;
    if (f.rail >= 0 && f.rail != rail) continue;
    if (!f.Active(step_, start)) continue;
    const double phase = std::floor(Uniform(Hash(cfg_.seed, 0xF1A9ULL, f.host)) * f.period_us);
    double s = start, remaining = dur, e = 0;
    for (int guard = 0; guard < 64; ++guard) {
      const double a = phase + std::floor((s - phase) / f.period_us) * f.period_us;
      if (s < a + f.down_us) {  // the link is down: wait for it, then the transport retries
        const double resume = a + f.down_us + f.retry_us;
        e += resume - s;
        s = resume;
        continue;
      }
      const double next_down = a + f.period_us;
      if (s + remaining <= next_down) break;
      remaining -= next_down - s;
      s = next_down;
    }
    if (e > 0) f.Touch(start);
    extra += e;
  }
  return extra;
}

bool Engine::LinkDead(int host, int rail, double /*start*/, double end, int* which) {
  for (size_t i = 0; i < faults_.size(); ++i) {
    Fault& f = faults_[i];
    if (f.kind != FaultKind::kLinkDown || f.host != host) continue;
    if (f.rail >= 0 && f.rail != rail) continue;
    if (end > f.down_at_us) {  // the link dies during (or before) this transfer and stays dead
      *which = static_cast<int>(i);
      if (!f.triggered) {
        f.Touch(f.down_at_us);
        f.resolved_step = step_;
      }
      return true;
    }
  }
  return false;
}

// Bytes each member sends to its ring neighbour: NCCL's ring moves 2(n-1)/n of the buffer for
// AllReduce, (n-1)/n of it for AllGather and ReduceScatter (whose Inspector size is one rank's
// share, so n-1 shares), and the buffer once for Broadcast and Reduce.
double RingEdgeBytes(Op op, int n, int64_t bytes) {
  const double b = static_cast<double>(bytes), k = static_cast<double>(n - 1);
  switch (op) {
    case Op::kAllReduce: return 2.0 * k / n * b;
    case Op::kAllGather:
    case Op::kReduceScatter: return k * b;
    default: return b;
  }
}

void Engine::SideProxy(int c, int me, int other, bool send, bool parent_p2p, int64_t parent_sn,
                       double bytes, double op_start, double wire_start, double end, uint64_t key) {
  const RankInfo& a = L_.ranks[me];
  const RankInfo& b = L_.ranks[other];
  if (a.host == b.host || parent_sn < 0 || !std::isfinite(end)) return;
  const int kind = static_cast<int>(L_.comms[c].kind);
  const double total = end - op_start;
  InspectorWriter::ProxyTransfer t{b.comm_rank[kind], send, parent_p2p,
                                   static_cast<uint64_t>(parent_sn), std::llround(bytes),
                                   op_start, end, 0, 0, 0};
  if (send) {
    // The wire runs at the slower NIC of the two ends; an outage of either end's link stalls it.
    const double bw = cfg_.cluster.nic_gbs *
                      std::min(NicFactor(a.host, a.rail, wire_start), NicFactor(b.host, b.rail, wire_start));
    double wire = bytes / (bw * 1e3) * LogNormal(key, comm_sigma_ * 0.5);
    wire += std::max(FlapDelay(a.host, a.rail, wire_start, wire), FlapDelay(b.host, b.rail, wire_start, wire));
    t.wire_us = std::clamp(wire, 0.0, std::max(0.0, end - wire_start));
    const double credit = std::max(0.0, wire_start - op_start);
    const double rest = std::max(0.0, total - credit - t.wire_us);
    const double u = Uniform(Mix(key ^ 0x51DEULL));
    t.wait_a_us = rest * u;
    t.wait_b_us = credit + rest * (1.0 - u);
  } else {
    t.wait_a_us = std::min(1.0, total);
    t.wait_b_us = std::min(2.0, std::max(0.0, total - t.wait_a_us));
    t.wire_us = std::max(0.0, total - t.wait_a_us - t.wait_b_us);
  }
  insp_.AddProxy(me, c, t);
}

void Engine::CollProxies(int c, int i, Op op, uint64_t sn, int64_t bytes, double start, double end) {
  if (!insp_.proxy()) return;
  const CommInfo& ci = L_.comms[c];
  const int n = static_cast<int>(ci.ranks.size());
  if (!ci.multi_host || n < 2 || bytes < cfg_.inspector.min_size_bytes) return;
  // The ring: a member sends to the next one and receives from the previous one.
  const int me = ci.ranks[i], next = ci.ranks[(i + 1) % n], prev = ci.ranks[(i + n - 1) % n];
  // Members that share a host cross to the next host over as many rails at once (NCCL's
  // channels): each cross-host transfer carries that share of the ring's bytes.
  const int rails = std::clamp(ci.max_per_host, 1, std::max(1, cfg_.cluster.nics_per_host));
  const double edge = RingEdgeBytes(op, n, bytes) / rails;
  const int64_t parent = static_cast<int64_t>(sn);
  SideProxy(c, me, next, true, false, parent, edge, start, start, end,
            Hash(cfg_.seed, 0x9A0ULL, static_cast<uint64_t>(c) << 32 | static_cast<uint64_t>(me),
                 static_cast<uint64_t>(start * 8)));
  SideProxy(c, me, prev, false, false, parent, edge, start, start, end, 0);
}

// ------------------------------------------------------------------------------------------------
// Execution

double Engine::ComputeFactor(int r, const ProgOp& op, double t) {
  const RankInfo& ri = L_.ranks[r];
  double f = 1.0;
  for (Fault& ft : faults_) {
    switch (ft.kind) {
      case FaultKind::kGpuStraggler:
        if (ft.rank == r && ft.Active(step_, t)) { f *= ft.factor; ft.Touch(t); }
        break;
      case FaultKind::kMaskedStraggler:
        if (ft.rank == r && op.phase == kPhBackward && ft.Active(step_, t)) {
          f *= ft.factor;
          ft.Touch(t);
        }
        break;
      case FaultKind::kHostSlowdown:
        if (ft.host == ri.host && ft.Active(step_, t)) { f *= ft.factor; ft.Touch(t); }
        break;
      default: break;
    }
  }
  return f;
}

void Engine::AddPhase(int r, enum Phase ph, double start, double dur) {
  if (!std::isfinite(start) || !std::isfinite(dur)) return;
  PhaseAcc& a = rs_[r].phase[ph];
  if (start < a.start) a.start = start;
  a.dur += dur;
}

// Kineto user annotations: consecutive operations of one kind and micro-batch form one range.
enum SegKind { kSegContinue = -2, kSegFwd = 0, kSegBwd, kSegPp, kSegDp, kSegOpt, kSegWorld };
const char* const kSegNames[] = {"forward_step", "backward_step", "pipeline_p2p",
                                 "grad_sync", "optimizer_step", "logging_allreduce"};

void Engine::Segment(int r, int kind, int mb, double start, double end) {
  if (!kin_step_) return;
  RankState& st = rs_[r];
  if (kind == kSegContinue) {
    if (st.seg_kind == kSegFwd || st.seg_kind == kSegBwd) {
      st.seg_end = std::max(st.seg_end, end);
      return;
    }
    kind = kSegFwd;
  }
  if (kind != st.seg_kind || mb != st.seg_mb || kind < 0) {
    if (st.seg_kind >= 0 && std::isfinite(st.seg_start) && std::isfinite(st.seg_end)) {
      kin_.Annotation(r, kSegNames[st.seg_kind], st.seg_start, st.seg_end - st.seg_start, true);
    }
    st.seg_kind = kind;
    st.seg_mb = mb;
    st.seg_start = start;
    st.seg_end = end;
    return;
  }
  st.seg_end = std::max(st.seg_end, end);
}

void Engine::NcclKernel(int r, int comm, Op op, int64_t bytes, uint8_t dtype, double start,
                        double end, const CollCost& cost, int stream) {
  if (!kin_step_ || !std::isfinite(end)) return;
  const CommInfo& ci = L_.comms[comm];
  const char* dt = dtype ? "f32" : "bf16";
  std::string name;
  std::string coll;
  int64_t in_n = 0, out_n = 0;
  const int64_t esz = dtype ? 4 : 2;
  const int64_t n = static_cast<int64_t>(ci.ranks.size());
  switch (op) {
    case Op::kAllReduce:
      name = std::string("ncclDevKernel_AllReduce_Sum_") + dt + "_";
      coll = "allreduce"; in_n = out_n = bytes / esz;
      break;
    case Op::kAllGather:
      name = "ncclDevKernel_AllGather_";
      coll = "_allgather_base"; in_n = bytes / esz; out_n = in_n * n;
      break;
    case Op::kReduceScatter:
      name = std::string("ncclDevKernel_ReduceScatter_Sum_") + dt + "_";
      coll = "_reduce_scatter_base"; out_n = bytes / esz; in_n = out_n * n;
      break;
    default:
      name = "ncclDevKernel_SendRecv";
      coll = op == Op::kAlltoAll ? "all_to_all" : (op == Op::kSend ? "send" : "recv");
      in_n = out_n = bytes / esz * (op == Op::kAlltoAll ? n : 1);
      break;
  }
  if (op == Op::kAllReduce || op == Op::kAllGather || op == Op::kReduceScatter) {
    name += std::string(AlgoName(cost.algo)) + "_" + std::string(ProtoName(cost.proto));
  }
  name += "(ncclDevKernelArgsStorage<4096ul>)";
  std::string args = "\"Collective name\": \"" + coll + "\", \"In msg nelems\": " +
                     std::to_string(in_n) + ", \"Out msg nelems\": " + std::to_string(out_n) +
                     ", \"Group size\": " + std::to_string(n) + ", \"dtype\": \"" +
                     (dtype ? "Float" : "BFloat16") +
                     "\", \"In split size\": \"[]\", \"Out split size\": \"[]\", "
                     "\"Process Group Name\": \"" + std::to_string(ci.pg_index) +
                     "\", \"Process Group Description\": \"" + ci.name +
                     "\", \"Process Group Ranks\": \"[";
  for (size_t i = 0; i < ci.ranks.size(); ++i) {
    if (i) args += ", ";
    args += std::to_string(ci.ranks[i]);
  }
  args += "]\"";
  kin_.Kernel(r, name, stream, start, end - start, args);
}

int StreamOf(CommKind k) { return 20 + 4 * static_cast<int>(k); }

bool Engine::ArriveColl(int r, const ProgOp& op) {
  const RankInfo& ri = L_.ranks[r];
  const int kind = static_cast<int>(op.kind);
  const int c = ri.comm[kind];
  if (c < 0) return true;  // size-1 group: nothing issued
  CollInst& in = inst_[c];
  const int cr = ri.comm_rank[kind];
  RankState& st = rs_[r];
  double t = st.t;
  Op issued = op.op;
  int64_t bytes = op.bytes;
  uint64_t* counter = &sn_[(static_cast<size_t>(r) * kKinds + kind) * kOps + static_cast<int>(op.op)];
  for (Fault& f : faults_) {
    if ((f.kind != FaultKind::kHang && f.kind != FaultKind::kMismatch) || f.rank != r ||
        f.comm_kind != op.kind || f.triggered)
      continue;
    bool hit;
    if (f.coll_sn >= 0) hit = op.op == f.op && *counter == static_cast<uint64_t>(f.coll_sn);
    else hit = step_ >= f.start_step && (!f.has_op || f.op == op.op);
    if (!hit) continue;
    f.Touch(t);
    f.resolved_sn = static_cast<int64_t>(*counter);
    f.resolved_op = op.op;
    f.resolved_step = step_;
    f.gt_comms = {c};
    if (f.kind == FaultKind::kHang) {
      t = kInf;  // never arrives
    } else {
      if (f.has_mismatch_op) issued = f.mismatch_op;
      bytes = static_cast<int64_t>(std::llround(static_cast<double>(bytes) * f.size_factor));
      if (f.effect_hang) in.force_hang = true;
      counter = &sn_[(static_cast<size_t>(r) * kKinds + kind) * kOps + static_cast<int>(issued)];
    }
  }
  in.arrival[cr] = t;
  in.sn[cr] = (*counter)++;
  in.op[cr] = static_cast<uint8_t>(issued);
  in.bytes[cr] = bytes;
  in.max_arrival = std::max(in.max_arrival, t);
  in.first_arrival = std::min(in.first_arrival, t);
  if (++in.arrived < static_cast<int>(L_.comms[c].ranks.size())) return false;
  CompleteColl(c, r);
  return true;
}

void Engine::CompleteColl(int c, int arriving_rank) {
  CollInst& in = inst_[c];
  const CommInfo& ci = L_.comms[c];
  const int n = static_cast<int>(ci.ranks.size());
  const int kind = static_cast<int>(ci.kind);
  // Find the op of the program (the majority's op; the first member's unless it is mismatched).
  const int r0 = ci.ranks[0];
  const ProgOp& pop = programs_[L_.ranks[r0].pp][rs_[r0].cursor];
  const Op op = pop.op;
  const int64_t bytes = pop.bytes;
  const double start = in.max_arrival;
  double end = kInf;
  CollCost cost;
  double lat = 0;
  const double bw0 = CommBandwidth(c, step_, start, &lat, false);
  cost = CollectiveCost(op, n, bytes, bw0, lat, ci.multi_host);
  if (std::isfinite(start) && !in.force_hang) {
    double bw = bw0;
    if (net_faulty_[c]) {
      bw = CommBandwidth(c, step_, start, &lat, true);
      cost = CollectiveCost(op, n, bytes, bw, lat, ci.multi_host);
      if (bw < bw0) {
        for (Fault& f : faults_)
          if (f.kind == FaultKind::kNicDegrade && f.Active(step_, start))
            for (auto [h, rail] : ci.host_rails)
              if (h == f.host && (f.rail < 0 || f.rail == rail)) f.Touch(start);
      }
    }
    const uint64_t key = Hash(cfg_.seed, 0xC011ULL, static_cast<uint64_t>(c), in.ordinal);
    double dur = cost.time_us * LogNormal(key, comm_sigma_);
    if (cont_prob_ > 0 && Uniform(Mix(key ^ 0xABCDULL)) < cont_prob_ && ci.kind != CommKind::kWorld) {
      const double f = cont_min_ + (1.0 - cont_min_) * Uniform(Mix(key ^ 0x1234ULL));
      dur /= f;
    }
    if (net_faulty_[c]) {
      double flap = 0;
      int dead = -1;
      for (auto [h, rail] : ci.host_rails) {
        flap = std::max(flap, FlapDelay(h, rail, start, dur));
        if (dead < 0) LinkDead(h, rail, start, start + dur, &dead);
      }
      dur += flap;
      if (dead >= 0) {
        Fault& f = faults_[dead];
        if (f.gt_comms.empty()) f.gt_comms.push_back(c);
        dur = kInf;
      }
    }
    end = start + dur;
  }
  // Records and wake-ups.
  const int stream = StreamOf(ci.kind);
  for (int i = 0; i < n; ++i) {
    const int m = ci.ranks[i];
    const double arr = in.arrival[i];
    const double my_end = std::isfinite(end)
                              ? end + std::floor(Uniform(Hash(cfg_.seed, 0xE1ULL, c, in.ordinal * 131 + i)) * 3.0)
                              : kInf;
    const Op mop = static_cast<Op>(in.op[i]);
    if (std::isfinite(my_end) && std::isfinite(arr)) {
      if (op == Op::kAlltoAll) {
        // PyTorch issues all_to_all as grouped ncclSend/ncclRecv: the Inspector sees p2p records.
        const int64_t per_peer = in.bytes[i];
        for (int j = 0; j < n; ++j) {
          if (j == i) continue;
          const int64_t send_sn = insp_.AddP2p(m, c, Op::kSend, j, per_peer, arr, my_end);
          const int64_t recv_sn = insp_.AddP2p(m, c, Op::kRecv, j, per_peer, arr, my_end);
          // The pairs are exchanged at once: every proxy op spans the whole exchange.
          const double bytes_d = static_cast<double>(per_peer);
          const int peer = ci.ranks[j];
          if (send_sn >= 0)
            SideProxy(c, m, peer, true, true, send_sn, bytes_d, start, start, my_end,
                      Hash(cfg_.seed, 0x9A2AULL, c, in.ordinal * 4099 + i * 64 + j));
          if (recv_sn >= 0)
            SideProxy(c, m, peer, false, true, recv_sn, bytes_d, start, start, my_end, 0);
        }
      } else {
        insp_.AddColl(m, c, mop, in.sn[i], in.bytes[i], arr, my_end, cost.channels);
        CollProxies(c, i, mop, in.sn[i], in.bytes[i], start, my_end);
      }
      const ProgOp& mp = programs_[L_.ranks[m].pp][rs_[m].cursor];
      AddPhase(m, mp.phase, arr, my_end - arr);
      if (kin_step_) {
        const int seg = mp.phase == kPhDp ? kSegDp : mp.phase == kPhWorld ? kSegWorld : kSegContinue;
        Segment(m, seg, mp.mb, arr, my_end);
      }
      NcclKernel(m, c, mop, in.bytes[i], mp.dtype, arr, my_end, cost, stream);
    } else if (std::isfinite(arr)) {
      // Entered, never completes: the plugin's in-flight list keeps it until the job dies.
      if (op == Op::kAlltoAll) {
        for (int j = 0; j < n; ++j) {
          if (j == i) continue;
          insp_.AddInflight(m, c, Op::kSend, 0, j, in.bytes[i], arr, 1, cost);
          insp_.AddInflight(m, c, Op::kRecv, 0, j, in.bytes[i], arr, 1, cost);
        }
      } else {
        insp_.AddInflight(m, c, mop, in.sn[i], -1, in.bytes[i], arr, cost.channels, cost);
      }
    }
    RankState& st = rs_[m];
    st.t = my_end;
    st.cursor++;
    if (m != arriving_rank) stack_.push_back(m);
  }
  (void)kind;
  in.arrived = 0;
  in.max_arrival = -kInf;
  in.first_arrival = kInf;
  in.force_hang = false;
  in.ordinal++;
}

bool Engine::PostP2p(int r, const ProgOp& op) {
  RankState& st = rs_[r];
  const RankInfo& ri = L_.ranks[r];
  double t = st.t;
  // Pipeline-bubble amplification: the stage's activation sends leave late.
  if (op.send_dir == 0) {
    for (Fault& f : faults_) {
      if (f.kind == FaultKind::kPipelineBubble && f.stage == ri.pp && f.Active(step_, t)) {
        AddPhase(r, kPhStall, t, f.delay_us);
        f.Touch(t);
        t += f.delay_us;
      }
    }
  }
  posting_rank_ = r;
  st.p2p_arrival = t;
  st.p2p_end = t;
  st.parts_total = (op.send_dir >= 0) + (op.recv_dir >= 0);
  st.parts_done = 0;
  const int pp_stride = L_.tp * L_.cp * L_.dp;
  if (op.send_dir >= 0) {
    Channel& ch = channels_[static_cast<size_t>(r) * 2 + op.send_dir];
    Post me{r, t, op.bytes, true};
    if (ch.head < ch.q.size() && !ch.q[ch.head].is_send) {
      Post other = ch.q[ch.head++];
      if (ch.head == ch.q.size()) { ch.q.clear(); ch.head = 0; }
      MatchPart(me, other, op.send_dir);
    } else {
      ch.q.push_back(me);
    }
  }
  if (op.recv_dir >= 0) {
    const int sender = op.recv_dir == 0 ? r - pp_stride : r + pp_stride;
    Channel& ch = channels_[static_cast<size_t>(sender) * 2 + op.recv_dir];
    Post me{r, t, op.bytes, false};
    if (ch.head < ch.q.size() && ch.q[ch.head].is_send) {
      Post other = ch.q[ch.head++];
      if (ch.head == ch.q.size()) { ch.q.clear(); ch.head = 0; }
      MatchPart(other, me, op.recv_dir);
    } else {
      ch.q.push_back(me);
    }
  }
  if (st.parts_done < st.parts_total) return false;
  st.t = st.p2p_end;
  st.cursor++;
  return true;
}

void Engine::MatchPart(const Post& send, const Post& recv, int dir) {
  (void)dir;
  const double start = std::max(send.t, recv.t);
  double end = kInf;
  const int c = L_.ranks[send.rank].comm[static_cast<int>(CommKind::kPp)];
  CollCost cost;
  if (std::isfinite(start)) {
    double lat = 0;
    const double bw = LinkBandwidth(send.rank, recv.rank, start, &lat);
    cost = CollectiveCost(Op::kSend, 2, send.bytes, bw, lat, false);
    double dur = cost.time_us *
                 LogNormal(Hash(cfg_.seed, 0x9292ULL, static_cast<uint64_t>(send.rank),
                                static_cast<uint64_t>(start * 8)), comm_sigma_);
    const RankInfo& a = L_.ranks[send.rank];
    const RankInfo& b = L_.ranks[recv.rank];
    if (a.host != b.host) {
      double flap = std::max(FlapDelay(a.host, a.rail, start, dur), FlapDelay(b.host, b.rail, start, dur));
      dur += flap;
      int dead = -1;
      if (LinkDead(a.host, a.rail, start, start + dur, &dead) ||
          LinkDead(b.host, b.rail, start, start + dur, &dead)) {
        if (faults_[dead].gt_comms.empty()) faults_[dead].gt_comms.push_back(c);
        dur = kInf;
      }
    }
    end = start + dur;
  }
  const RankInfo& si = L_.ranks[send.rank];
  const RankInfo& ri = L_.ranks[recv.rank];
  const int k = static_cast<int>(CommKind::kPp);
  const int64_t send_sn = insp_.AddP2p(send.rank, c, Op::kSend, ri.comm_rank[k], send.bytes, send.t, end);
  const int64_t recv_sn = insp_.AddP2p(recv.rank, c, Op::kRecv, si.comm_rank[k], send.bytes, recv.t, end);
  if (insp_.proxy()) {
    const double b = static_cast<double>(send.bytes);
    SideProxy(c, send.rank, recv.rank, true, true, send_sn, b, send.t, start, end,
              Hash(cfg_.seed, 0x9A1ULL, static_cast<uint64_t>(send.rank), static_cast<uint64_t>(start * 8)));
    SideProxy(c, recv.rank, send.rank, false, true, recv_sn, b, recv.t, start, end, 0);
  }
  if (!std::isfinite(end)) {
    // A side that posted but whose transfer never completes stays in flight.
    if (std::isfinite(send.t)) insp_.AddInflight(send.rank, c, Op::kSend, 0, ri.comm_rank[k], send.bytes, send.t, 1, cost);
    if (std::isfinite(recv.t)) insp_.AddInflight(recv.rank, c, Op::kRecv, 0, si.comm_rank[k], send.bytes, recv.t, 1, cost);
  }
  for (const Post* p : {&send, &recv}) {
    RankState& st = rs_[p->rank];
    st.parts_done++;
    st.p2p_end = std::max(st.p2p_end, end);
    AddPhase(p->rank, kPhPp, p->t, end - p->t);
    if (kin_step_) Segment(p->rank, kSegPp, -1, p->t, end);
    if (kin_step_) NcclKernel(p->rank, c, p->is_send ? Op::kSend : Op::kRecv, send.bytes, 0, p->t,
                              end, cost, StreamOf(CommKind::kPp));
    if (st.parts_done == st.parts_total && p->rank != posting_rank_) {
      st.t = st.p2p_end;
      st.cursor++;
      stack_.push_back(p->rank);
    }
  }
}

void Engine::Advance(int r) {
  RankState& st = rs_[r];
  const std::vector<ProgOp>& prog = programs_[L_.ranks[r].pp];
  while (st.cursor < static_cast<int>(prog.size())) {
    const ProgOp& op = prog[st.cursor];
    if (op.mb != st.cur_mb && op.mb >= 0) st.cur_mb = op.mb;
    switch (op.type) {
      case OpType::kCompute: {
        double t = st.t;
        if (std::isfinite(t)) {
          // Host-side stall (e.g. JIT compilation): a long gap with sparse kernel launches.
          for (Fault& f : faults_) {
            if (f.kind == FaultKind::kHostStall && f.rank == r && !f.triggered &&
                op.phase == kPhBackward && f.Active(step_, t)) {
              f.Touch(t);
              f.Touch(t + f.stall_us);
              AddPhase(r, kPhStall, t, f.stall_us);
              if (kin_step_) {
                const int sparse = 12;
                for (int i = 0; i < sparse; ++i) {
                  kin_.Kernel(r,
                              "void at::native::vectorized_elementwise_kernel<4, "
                              "at::native::FillFunctor<c10::BFloat16>, "
                              "at::detail::Array<char*, 1> >(int, "
                              "at::native::FillFunctor<c10::BFloat16>, "
                              "at::detail::Array<char*, 1>)",
                              7, t + f.stall_us * (i + 0.5) / sparse, 3.0, "");
                }
              }
              t += f.stall_us;
            }
          }
          const double dur = op.base_us * ComputeFactor(r, op, t) * gpu_speed_[r] *
                             LogNormal(Hash(cfg_.seed, 0xC0ULL, static_cast<uint64_t>(r),
                                            static_cast<uint64_t>(step_) * 1000003 + st.cursor),
                                       compute_sigma_);
          AddPhase(r, op.phase, t, dur);
          if (kin_step_) {
            kin_.Kernel(r, kKernelNames[op.kernel], 7, t, dur, "");
            Segment(r, op.phase == kPhForward ? kSegFwd : op.phase == kPhBackward ? kSegBwd : kSegOpt,
                    op.mb, t, t + dur);
          }
          if (op.phase == kPhForward && op.mb >= 0 && !std::isfinite(st.fwd_start)) st.fwd_start = t;
          if (op.phase == kPhBackward && op.mb >= 0 && !std::isfinite(st.bwd_start)) st.bwd_start = t;
          t += dur;
        }
        st.t = t;
        st.cursor++;
        break;
      }
      case OpType::kColl:
        if (!HasComm(op.kind)) { st.cursor++; break; }
        if (!ArriveColl(r, op)) return;
        break;
      case OpType::kP2p:
        if (!PostP2p(r, op)) return;
        break;
    }
  }
}

void Engine::RunStep(int step) {
  step_ = step;
  kin_step_ = kin_.enabled() && kin_.StepOn(step);
  kin_.SetStep(step);
  double smin = kInf;
  for (int r = 0; r < L_.world; ++r) {
    RankState& st = rs_[r];
    if (std::isfinite(st.t)) {
      const double gap = cfg_.workload.step_gap_us *
                         LogNormal(Hash(cfg_.seed, 0x57E9ULL, r, step), 0.03);
      st.t += step == 0 ? 0 : gap;
    }
    st.step_start = st.t;
    st.cursor = 0;
    st.cur_mb = -1;
    st.fwd_start = st.bwd_start = kInf;
    st.seg_kind = -1;
    st.seg_mb = -1;
    for (auto& a : st.phase) a = PhaseAcc{};
    smin = std::min(smin, st.t);
  }
  step_start_.push_back(smin);
  for (Fault& f : faults_) {
    if (f.kind != FaultKind::kLinkDown) continue;
    if (f.start_off_us >= 0) f.down_at_us = std::min(f.down_at_us, f.start_off_us);
    if (f.start_step == step && std::isfinite(smin))
      f.down_at_us = std::min(f.down_at_us, smin + std::max(0.0, f.delay_us));
  }
  stack_.clear();
  for (int r = L_.world - 1; r >= 0; --r) stack_.push_back(r);
  while (!stack_.empty()) {
    const int r = stack_.back();
    stack_.pop_back();
    Advance(r);
  }
  double smax = -kInf;
  bool all_finite = true;
  for (int r = 0; r < L_.world; ++r) {
    RankState& st = rs_[r];
    if (st.cursor < static_cast<int>(programs_[L_.ranks[r].pp].size())) {
      // Blocked forever on a peer that never arrives (e.g. behind a hang).
      st.t = kInf;
    }
    if (std::isfinite(st.t)) smax = std::max(smax, st.t);
    else all_finite = false;
    if (std::isfinite(st.step_start)) {
      if (std::isfinite(st.t)) {
        if (kin_step_) {
          Segment(r, -1, -1, 0, 0);  // close the last range
          st.seg_kind = -1;
          kin_.Annotation(r, "ProfilerStep#" + std::to_string(step), st.step_start,
                          st.t - st.step_start, false);
        }
      }
      if (steps_.enabled() && std::isfinite(st.t)) {
        std::vector<StepWriter::Phase> phases;
        for (int p = 0; p < kPhCount; ++p) phases.push_back({kPhaseNames[p], st.phase[p].start, st.phase[p].dur});
        steps_.Step(r, step, st.step_start, st.t - st.step_start, phases);
      }
    }
    insp_.Advance(r, st.t);
  }
  step_end_.push_back(smax);
  if (all_finite) steps_completed_ = step + 1;
}

void Engine::Run() {
  if (cfg_.mode == Mode::kNcclTests) {
    RunNcclTests();
    return;
  }
  BuildPrograms();
  for (int r = 0; r < L_.world; ++r) rs_[r].t = kInitUs;
  double last_finite = kInitUs;
  bool hung = false;
  for (int s = 0; s < cfg_.workload.steps; ++s) {
    // A stop request ends the run between steps (Simulate reports it, writes no ground truth).
    if (cfg_.cancel && cfg_.cancel->load(std::memory_order_relaxed)) break;
    RunStep(s);
    for (int r = 0; r < L_.world; ++r)
      if (std::isfinite(rs_[r].t)) last_finite = std::max(last_finite, rs_[r].t);
    bool any_finite = false;
    for (int r = 0; r < L_.world && !any_finite; ++r) any_finite = std::isfinite(rs_[r].t);
    if (steps_completed_ < s + 1) hung = true;
    if (!any_finite) break;
  }
  // A hang ends with the watchdog timeout; a healthy job tears down a few seconds after its last
  // step (long enough for the dump thread to write its last pass).
  job_end_ = hung ? last_finite + cfg_.hang_timeout_s * 1e6
                  : last_finite + std::max(5e6, 2.5 * cfg_.inspector.dump_interval_us);
}

// nccl-tests-like sweep: every rank runs each op over the world communicator, sizes from
// min_bytes to max_bytes, `warmup` + 2 * `iters` (out-of-place then in-place) back to back.
void Engine::RunNcclTests() {
  const NcclTestsConfig& nt = cfg_.nccl_tests;
  const int c = 0;  // world communicator
  const CommInfo& ci = L_.comms[c];
  const int n = static_cast<int>(ci.ranks.size());
  std::vector<double> t(L_.world, kInitUs);
  FILE* out = nullptr;
  std::string text;
  step_ = 0;
  for (Op op : nt.ops) {
    const std::string opname = op == Op::kAllReduce       ? "all_reduce"
                               : op == Op::kAllGather     ? "all_gather"
                               : op == Op::kReduceScatter ? "reduce_scatter"
                               : op == Op::kBroadcast     ? "broadcast"
                                                          : "reduce";
    text += "# nccl-tests version 2.19.6 nccl-headers=23003 nccl-library=23003\n";
    text += "# Collective test starting: " + opname + "_perf\n";
    text += "# nThread 1 nGpus 1 minBytes " + std::to_string(nt.min_bytes) + " maxBytes " +
            std::to_string(nt.max_bytes) + " step: " + std::to_string(nt.factor) +
            "(factor) warmup iters: " + std::to_string(nt.warmup) + " iters: " +
            std::to_string(nt.iters) + " agg iters: 1 validation: 0 graph: 0\n#\n";
    text += "# Using devices\n";
    for (int r = 0; r < L_.world; ++r) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "#  Rank %2d Group  0 Pid %6lld on %10s device %2d [%04x:%02x:%02x] NVIDIA H100 80GB HBM3\n",
                    r, static_cast<long long>(L_.ranks[r].pid),
                    L_.hostnames[L_.ranks[r].host].c_str(), L_.ranks[r].local, 0,
                    0x18 + 0x10 * L_.ranks[r].local, 0);
      text += buf;
    }
    text += "#\n#                                                              out-of-place                       in-place          \n";
    text += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
    text += "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
    double bus_sum = 0;
    int bus_n = 0;
    for (int64_t size = nt.min_bytes; size <= nt.max_bytes; size *= std::max<int64_t>(nt.factor, 2)) {
      int64_t count = size / 4;
      int64_t insp_bytes = size;
      if (op == Op::kAllGather || op == Op::kReduceScatter) {
        count = size / 4 / n;
        insp_bytes = count * 4;
      }
      if (count <= 0) continue;
      double tsum[2] = {0, 0};
      for (int it = 0; it < nt.warmup + 2 * nt.iters; ++it) {
        double start = -kInf;
        for (int r = 0; r < L_.world; ++r) {
          t[r] += 2.0 + 2.0 * Uniform(Hash(cfg_.seed, 0x7E57ULL, r, inst_[c].ordinal));
          start = std::max(start, t[r]);
        }
        double lat = 0;
        double bw = CommBandwidth(c, 0, start, &lat, net_faulty_[c] != 0);
        CollCost cost = CollectiveCost(op, n, insp_bytes, bw, lat, ci.multi_host);
        const uint64_t key = Hash(cfg_.seed, 0xC011ULL, static_cast<uint64_t>(c), inst_[c].ordinal);
        double dur = cost.time_us * LogNormal(key, comm_sigma_);
        if (net_faulty_[c])
          for (auto [h, rail] : ci.host_rails) dur += FlapDelay(h, rail, start, dur);
        const double end = start + dur;
        const uint64_t sn = sn_[static_cast<size_t>(0) * kOps + static_cast<int>(op)]++;
        double per_iter = 0;
        for (int i = 0; i < n; ++i) {
          const int m = ci.ranks[i];
          const double my_end = end + std::floor(Uniform(Hash(cfg_.seed, 0xE1ULL, c, inst_[c].ordinal * 131 + i)) * 3.0);
          insp_.AddColl(m, c, op, sn, insp_bytes, t[m], my_end, cost.channels);
          per_iter += my_end - t[m];
          t[m] = my_end;
        }
        per_iter /= n;
        if (it >= nt.warmup) tsum[(it - nt.warmup) / nt.iters] += per_iter;
        inst_[c].ordinal++;
      }
      // nccl-tests "size" is the total size; "count" is per rank for AG/RS.
      char line[512];
      std::string cols;
      for (int half = 0; half < 2; ++half) {
        const double tus = tsum[half] / nt.iters;
        double algbw = 0, busbw = 0;
        const double total = static_cast<double>(op == Op::kAllGather || op == Op::kReduceScatter ? insp_bytes * n : insp_bytes);
        algbw = total / 1e9 / (tus / 1e6);
        const double nn = n;
        busbw = algbw * (op == Op::kAllReduce ? 2 * (nn - 1) / nn
                         : (op == Op::kAllGather || op == Op::kReduceScatter) ? (nn - 1) / nn : 1.0);
        if (half == 0) { bus_sum += busbw; ++bus_n; }
        auto fit = [](double v, int width) {
          char b[32];
          for (int prec = 2; prec >= 0; --prec) {
            std::snprintf(b, sizeof b, "%.*f", prec, v);
            if (static_cast<int>(std::strlen(b)) <= width) return std::string(b);
          }
          std::snprintf(b, sizeof b, "%.0e", v);
          return std::string(b);
        };
        std::snprintf(line, sizeof line, "  %7s  %6s  %6s  %6s", fit(tus, 7).c_str(),
                      fit(algbw, 6).c_str(), fit(busbw, 6).c_str(), "N/A");
        cols += line;
      }
      const int64_t total_size = op == Op::kAllGather || op == Op::kReduceScatter ? insp_bytes * n : insp_bytes;
      std::snprintf(line, sizeof line, "%12lld  %12lld  %8s  %6s  %6s", static_cast<long long>(total_size),
                    static_cast<long long>(count), "float",
                    op == Op::kAllGather ? "none" : "sum", "-1");
      text += line + cols + "\n";
      for (int r = 0; r < L_.world; ++r) insp_.Advance(r, t[r]);
      for (int r = 0; r < L_.world; ++r) t[r] += 50.0;
    }
    text += "# Out of bounds values : 0 OK\n";
    char buf[128];
    std::snprintf(buf, sizeof buf, "# Avg bus bandwidth    : %g \n#\n", bus_n ? bus_sum / bus_n : 0.0);
    text += buf;
    text += "# Collective test concluded: " + opname + "_perf\n\n";
  }
  double last = 0;
  for (double x : t) last = std::max(last, x);
  step_start_.push_back(kInitUs);
  step_end_.push_back(last);
  steps_completed_ = 1;
  job_end_ = last + std::max(5e6, 2.5 * cfg_.inspector.dump_interval_us);
  const std::string path = cfg_.output.dir + "/nccl-tests.out";
  out = std::fopen(path.c_str(), "wb");
  if (out) {
    std::fwrite(text.data(), 1, text.size(), out);
    std::fclose(out);
  }
}

}  // namespace

// Runs the engine; defined here so the Engine type stays internal.
int RunEngine(const SimConfig& config, Layout& layout, std::vector<Fault>& faults,
              InspectorWriter& insp, KinetoWriter& kineto, StepWriter& steps, double* job_end,
              std::vector<double>* step_start, std::vector<double>* step_end, int* completed) {
  auto engine = std::make_unique<Engine>(config, layout, faults, insp, kineto, steps);
  engine->Run();
  *job_end = engine->job_end();
  *step_start = engine->step_start();
  *step_end = engine->step_end();
  *completed = engine->steps_completed();
  return 0;
}

}  // namespace collscope::sim
