// Hot-path event handlers. See plugin_core.h for the contract: no locks, no allocation, no
// system calls, bounded work per callback (Complete loops over at most kMaxChannels channels).
#include <time.h>

#include <bit>
#include <cstring>

#include "capture/nccl/plugin_core.h"

namespace collscope::capture {

uint64_t NowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// Proxy steps fire per network chunk; a few-ms resolution is plenty for "last progress" and
// costs a fraction of a precise read.
uint64_t CoarseNowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

constexpr auto kRelaxed = std::memory_order_relaxed;
// Fields the state writer snapshots are stored with release after the slot is claimed, so a
// reader that sees any of them also sees the claim and can detect a recycled slot (plain stores
// on x86; no fences, which ThreadSanitizer does not model).
constexpr auto kPublish = std::memory_order_release;

template <typename Pool>
auto* ClaimFree(Pool* pool, uint32_t size, std::atomic<uint32_t>* cursor) noexcept {
  // Round-robin start maximises the time before a slot is reused, which keeps any late event
  // for a finished op (a NCCL quirk we cannot rule out) away from a live op.
  const uint32_t start = cursor->fetch_add(1, kRelaxed);
  for (uint32_t i = 0; i < size; ++i) {
    auto* s = &(*pool)[(start + i) % size];
    uint32_t expected = kSlotFree;
    if (s->state.load(kRelaxed) == kSlotFree &&
        s->state.compare_exchange_strong(expected, kSlotClaimed, std::memory_order_acquire,
                                         kRelaxed)) {
      return s;
    }
  }
  return static_cast<decltype(&(*pool)[0])>(nullptr);
}

uint32_t NextSn(OpSlot* s) noexcept { return s->event_sn.fetch_add(1, kRelaxed) + 1; }

void Complete(OpSlot* s) noexcept {
  CommCtx* c = s->comm;
  const bool is_p2p = s->is_p2p.load(kRelaxed) != 0;
  const uint64_t start_ns = s->start_ns.load(kRelaxed);
  const uint64_t started = s->ch_started.load(kRelaxed);

  ChannelTiming timings[kMaxChannels];
  size_t n = 0;
  for (uint64_t bits = started; bits != 0; bits &= bits - 1) {
    const int id = std::countr_zero(bits);
    const ChannelRec& r = s->ch[id];
    ChannelTiming& t = timings[n++];
    t.channel_id = static_cast<uint8_t>(id);
    t.gpu_start = r.gpu_start;
    t.gpu_stop = r.gpu_stop;
    t.cpu_start_ns = r.cpu_start_ns;
    t.cpu_stop_ns = r.recorded ? r.cpu_record_ns : r.cpu_stop_ns;
  }
  ExecTiming et = ComputeExecTiming({timings, n}, start_ns, 0);
  uint64_t done_ns = et.kernel_stop_ns;
  if (et.source == TimingSource::kCollectiveCpu) {
    done_ns = NowNs();  // only the fallback needs the completion time
    et = ComputeExecTiming({timings, n}, start_ns, done_ns);
  }

  c->ops_completed.fetch_add(1, kRelaxed);
  if (done_ns != 0) c->last_activity_ns.store(done_ns, kRelaxed);

  const uint64_t bytes = s->msg_bytes.load(kRelaxed);
  bool keep = true;
  if (bytes < c->min_size_bytes) {
    c->below_min_size.fetch_add(1, kRelaxed);
    keep = false;
  } else if (c->sample_every > 1 &&
             c->sample_counter.fetch_add(1, kRelaxed) % c->sample_every != 0) {
    c->sampled_out.fetch_add(1, kRelaxed);
    keep = false;
  }
  if (keep) {
    BoundedRing<CompletedRecord>* ring = is_p2p ? c->p2p_ring.get() : c->coll_ring.get();
    ChannelTrace* traces = is_p2p ? c->p2p_traces.get() : c->coll_traces.get();
    const bool pushed = ring->TryPush([&](CompletedRecord& r, uint32_t idx) {
      r.is_p2p = is_p2p;
      r.func = static_cast<Func>(s->func.load(kRelaxed));
      r.source = et.source;
      r.n_channels = s->n_channels.load(kRelaxed);
      r.peer = s->peer.load(kRelaxed);
      r.sn = s->sn.load(kRelaxed);
      r.msg_bytes = bytes;
      r.user_tag = s->user_tag.load(kRelaxed);
      r.step = s->step.load(kRelaxed);
      r.micro_batch = s->micro_batch.load(kRelaxed);
      r.phase.w[0] = s->phase[0].load(kRelaxed);
      r.phase.w[1] = s->phase[1].load(kRelaxed);
      r.exec_us = et.exec_us;
      r.start_ns = start_ns;
      r.enqueue_ns = s->enqueue_ns.load(kRelaxed);
      r.kernel_start_ns = et.kernel_start_ns;
      r.kernel_stop_ns = et.kernel_stop_ns;
      r.ch_start_spread_us = et.ch_start_spread_us;
      r.ch_stop_spread_us = et.ch_stop_spread_us;
      r.algo.w[0] = s->algo[0].load(kRelaxed);
      r.algo.w[1] = s->algo[1].load(kRelaxed);
      r.proto.w[0] = s->proto[0].load(kRelaxed);
      r.proto.w[1] = s->proto[1].load(kRelaxed);
      r.start_sn = s->start_sn;
      r.stop_sn = s->stop_sn;
      r.n_traces = 0;
      if (traces != nullptr) {
        // Inspector lists channels 0..nChannels-1; we list the channels that actually ran.
        ChannelTrace* out = traces + static_cast<size_t>(idx) * kMaxChannels;
        for (size_t i = 0; i < n; ++i) {
          const ChannelRec& cr = s->ch[timings[i].channel_id];
          out[i] = ChannelTrace{cr.id,           cr.start_sn,    cr.stop_sn,      cr.record_sn,
                                cr.cpu_start_ns, cr.cpu_stop_ns, cr.cpu_record_ns};
        }
        r.n_traces = static_cast<uint8_t>(n);
      }
    });
    if (!pushed) (is_p2p ? c->p2p_dropped : c->coll_dropped).fetch_add(1, kRelaxed);
  }
  s->state.store(kSlotFree, std::memory_order_release);
}

void Release(OpSlot* s) noexcept {
  if (s->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) Complete(s);
}

}  // namespace

CommCtx::CommCtx(Runtime* runtime, CommIdentity id, const Config& cfg, bool is_active)
    : rt(runtime),
      ident(std::move(id)),
      active(is_active),
      verbose(cfg.verbose),
      proxy_events(cfg.proxy_events),
      min_size_bytes(cfg.min_size_bytes),
      sample_every(cfg.sample_every),
      pool_size(is_active ? cfg.inflight_pool_size : 0),
      proxy_pool_size(is_active && cfg.proxy_events ? cfg.proxy_pool_size : 0) {
  if (!active) return;
  slots = std::make_unique<OpSlot[]>(pool_size);
  for (uint32_t i = 0; i < pool_size; ++i) {
    OpSlot& s = slots[i];
    s.index = i;
    s.comm = this;
    for (int ch = 0; ch <= kMaxChannels; ++ch) {
      s.ch[ch].op = &s;
      s.ch[ch].id = static_cast<uint8_t>(ch);
      s.ch[ch].tracked = ch < kMaxChannels;
    }
  }
  if (proxy_pool_size > 0) {
    proxies = std::make_unique<ProxyEntry[]>(proxy_pool_size);
    for (uint32_t i = 0; i < proxy_pool_size; ++i) {
      proxies[i].comm = this;
      proxies[i].step.owner = &proxies[i];
    }
  }
  coll_ring = std::make_unique<BoundedRing<CompletedRecord>>(cfg.coll_ring_size);
  p2p_ring = std::make_unique<BoundedRing<CompletedRecord>>(cfg.p2p_ring_size);
  if (verbose) {
    coll_traces = std::make_unique<ChannelTrace[]>(size_t{cfg.coll_ring_size} * kMaxChannels);
    p2p_traces = std::make_unique<ChannelTrace[]>(size_t{cfg.p2p_ring_size} * kMaxChannels);
  }
}

void* StartOp(CommCtx* c, bool is_p2p, const collscope_coll_v4_t* coll,
              const collscope_p2p_v4_t* p2p, uint64_t user_tag) noexcept {
  if (c == nullptr || !c->active || c->rt->disabled()) return nullptr;
  if (is_p2p ? p2p == nullptr : coll == nullptr) return nullptr;
  OpSlot* s = ClaimFree(&c->slots, c->pool_size, &c->alloc_cursor);
  if (s == nullptr) {
    // No free in-flight slot: the op is invisible to us, so its record is a drop.
    c->untracked.fetch_add(1, kRelaxed);
    (is_p2p ? c->p2p_dropped : c->coll_dropped).fetch_add(1, kRelaxed);
    return nullptr;
  }
  const uint64_t now = NowNs();
  uint8_t nch;
  PackedName algo, proto;
  if (is_p2p) {
    s->func.store(static_cast<uint8_t>(ParseFunc(p2p->func)), kPublish);
    s->msg_bytes.store(p2p->count * DatatypeSize(p2p->datatype), kPublish);
    s->peer.store(p2p->peer, kPublish);
    s->sn.store(c->p2p_sn.fetch_add(1, kRelaxed), kPublish);
    nch = p2p->nChannels;
  } else {
    s->func.store(static_cast<uint8_t>(ParseFunc(coll->func)), kPublish);
    s->msg_bytes.store(coll->count * DatatypeSize(coll->datatype), kPublish);
    s->peer.store(-1, kPublish);
    s->sn.store(coll->seqNumber, kPublish);
    nch = coll->nChannels;
    algo = PackName(coll->algo);
    proto = PackName(coll->proto);
  }
  s->user_tag.store(user_tag, kPublish);
  int64_t step = -1;
  int32_t micro_batch = -1;
  PackedName packed_phase;
  // Without the annotation library (most jobs) this costs one branch.
  if (c->annotate_current != nullptr) {
    char phase[16] = {};
    if (c->annotate_current(&step, phase, sizeof phase, &micro_batch) == 0) packed_phase = PackName(phase);
    else step = -1, micro_batch = -1;  // a step change raced the read: say nothing
  }
  s->step.store(step, kPublish);
  s->micro_batch.store(micro_batch, kPublish);
  s->phase[0].store(packed_phase.w[0], kPublish);
  s->phase[1].store(packed_phase.w[1], kPublish);
  s->is_p2p.store(is_p2p ? 1 : 0, kPublish);
  s->n_channels.store(nch, kPublish);
  s->algo[0].store(algo.w[0], kPublish);
  s->algo[1].store(algo.w[1], kPublish);
  s->proto[0].store(proto.w[0], kPublish);
  s->proto[1].store(proto.w[1], kPublish);
  s->start_ns.store(now, kPublish);
  s->enqueue_ns.store(0, kPublish);
  s->ch_started.store(0, kPublish);
  s->ch_stopped.store(0, kPublish);
  s->first_ch_start_ns.store(0, kRelaxed);
  s->pending.store(static_cast<int32_t>(nch) + 1, kPublish);
  s->event_sn.store(0, kPublish);
  s->stop_sn = 0;
  s->start_sn = c->verbose ? NextSn(s) : 0;
  s->gen.fetch_add(1, kRelaxed);
  s->state.store(kSlotBusy, std::memory_order_release);
  c->ops_started.fetch_add(1, kRelaxed);
  c->last_activity_ns.store(now, kRelaxed);
  return s;
}

void* StartKernelCh(CommCtx* c, void* parent, uint8_t channel_id, uint64_t ptimer) noexcept {
  // No disabled() check: an op already in flight must be able to complete and free its slot.
  if (c == nullptr || parent == nullptr) return nullptr;
  if (static_cast<HandleHeader*>(parent)->kind != HandleKind::kOp) return nullptr;
  auto* s = static_cast<OpSlot*>(parent);
  if (s->state.load(std::memory_order_acquire) != kSlotBusy) return nullptr;
  const int nch = s->n_channels.load(kRelaxed);
  ChannelRec* r;
  bool first = false;
  if (channel_id < kMaxChannels) {
    const uint64_t bit = uint64_t{1} << channel_id;
    const uint64_t prev = s->ch_started.fetch_or(bit, kRelaxed);
    first = prev == 0;
    // A duplicate channel, or more channels than announced, would break the completion count.
    if ((prev & bit) != 0) return nullptr;
    if (std::popcount(prev) >= nch) {
      // Take our bit back: Complete must only read channels started for this op.
      s->ch_started.fetch_and(~bit, kRelaxed);
      return nullptr;
    }
    r = &s->ch[channel_id];
  } else {
    r = &s->ch[kMaxChannels];
  }
  if (r->tracked) {
    r->gpu_start = ptimer;
    r->gpu_stop = 0;
    r->recorded = false;
    r->cpu_stop_ns = 0;
    r->cpu_record_ns = 0;
    if (first || ptimer == 0 || c->verbose) {
      r->cpu_start_ns = NowNs();
      if (first) s->first_ch_start_ns.store(r->cpu_start_ns, kRelaxed);
    } else {
      r->cpu_start_ns = 0;
    }
    if (c->verbose) {
      r->start_sn = NextSn(s);
      r->stop_sn = 0;
      r->record_sn = 0;
    }
  }
  return r;
}

void* StartProxyOp(CommCtx* c, void* parent, const collscope_proxyOp_t* d) noexcept {
  if (c == nullptr || d == nullptr || c->proxy_pool_size == 0 || c->rt->disabled()) {
    return nullptr;
  }
  // With PXN a proxy op can belong to another process; its parent pointer is not ours.
  if (static_cast<uint32_t>(d->pid) != c->rt->pid()) return nullptr;
  OpSlot* s = nullptr;
  if (parent != nullptr && static_cast<HandleHeader*>(parent)->kind == HandleKind::kOp) {
    s = static_cast<OpSlot*>(parent);
  }
  ProxyEntry* e = ClaimFree(&c->proxies, c->proxy_pool_size, &c->proxy_cursor);
  if (e == nullptr) {
    c->proxy_untracked.fetch_add(1, kRelaxed);
    return nullptr;
  }
  e->op_index.store(s != nullptr ? static_cast<int32_t>(s->index) : -1, kPublish);
  e->op_gen.store(s != nullptr ? s->gen.load(kRelaxed) : 0, kPublish);
  e->channel.store(d->channelId, kPublish);
  e->peer.store(d->peer, kPublish);
  e->n_steps.store(d->nSteps, kPublish);
  e->is_send.store(d->isSend, kPublish);
  e->steps_started.store(0, kPublish);
  e->steps_done.store(0, kPublish);
  e->last_state.store(-1, kPublish);
  e->trans_bytes.store(0, kPublish);
  e->last_update_ns.store(CoarseNowNs(), kPublish);
  e->gen.fetch_add(1, kRelaxed);
  e->state.store(kSlotBusy, std::memory_order_release);
  return e;
}

void* StartProxyStep(void* parent, int step) noexcept {
  if (parent == nullptr || static_cast<HandleHeader*>(parent)->kind != HandleKind::kProxyOp) {
    return nullptr;
  }
  auto* e = static_cast<ProxyEntry*>(parent);
  // One proxy thread drives a proxy op, so load+store is enough for a monotonic maximum.
  if (step + 1 > e->steps_started.load(kRelaxed)) e->steps_started.store(step + 1, kRelaxed);
  e->last_update_ns.store(CoarseNowNs(), kRelaxed);
  return &e->step;
}

void StopEvent(void* handle) noexcept {
  if (handle == nullptr) return;
  switch (static_cast<HandleHeader*>(handle)->kind) {
    case HandleKind::kOp: {
      auto* s = static_cast<OpSlot*>(handle);
      if (s->comm->verbose) s->stop_sn = NextSn(s);
      s->enqueue_ns.store(NowNs(), kRelaxed);
      Release(s);
      break;
    }
    case HandleKind::kChannel: {
      auto* r = static_cast<ChannelRec*>(handle);
      OpSlot* s = r->op;
      if (r->tracked) {
        const bool verbose = s->comm->verbose;
        // The record-state time already marks the stop; a second clock read buys nothing
        // unless the verbose trace wants both.
        if (verbose || !r->recorded) r->cpu_stop_ns = NowNs();
        if (verbose) r->stop_sn = NextSn(s);
        const uint64_t bit = uint64_t{1} << r->id;
        if ((s->ch_stopped.load(kRelaxed) & bit) == 0) s->ch_stopped.fetch_or(bit, kRelaxed);
      }
      Release(s);
      break;
    }
    case HandleKind::kProxyOp: {
      auto* e = static_cast<ProxyEntry*>(handle);
      e->state.store(kSlotFree, std::memory_order_release);
      break;
    }
    case HandleKind::kProxyStep: {
      auto* e = static_cast<ProxyEntry::StepHandle*>(handle)->owner;
      e->steps_done.fetch_add(1, kRelaxed);
      break;
    }
  }
}

void RecordEventState(void* handle, int state,
                      const collscope_ncclProfilerEventStateArgs_t* args) noexcept {
  if (handle == nullptr) return;
  switch (static_cast<HandleHeader*>(handle)->kind) {
    case HandleKind::kChannel: {
      if (state != collscope_ncclProfilerKernelChStop) return;
      auto* r = static_cast<ChannelRec*>(handle);
      if (!r->tracked) return;
      OpSlot* s = r->op;
      const uint64_t bit = uint64_t{1} << r->id;
      const uint64_t stopped = s->ch_stopped.fetch_or(bit, kRelaxed) | bit;
      const bool last = std::popcount(stopped) >= s->n_channels.load(kRelaxed);
      r->gpu_stop = args != nullptr ? args->kernelCh.pTimer : 0;
      r->recorded = true;
      const bool no_gpu = r->gpu_stop == 0 || r->gpu_start == 0;
      if (last || no_gpu || s->comm->verbose) {
        r->cpu_record_ns = NowNs();
        // A channel that turns out to lack GPU timers needs a CPU start for the kernel_cpu
        // fallback; the op's first channel start is the closest we have.
        if (no_gpu && r->cpu_start_ns == 0) {
          r->cpu_start_ns = s->first_ch_start_ns.load(kRelaxed);
        }
      }
      if (s->comm->verbose) r->record_sn = NextSn(s);
      break;
    }
    case HandleKind::kProxyOp: {
      auto* e = static_cast<ProxyEntry*>(handle);
      e->last_state.store(state, kRelaxed);
      e->last_update_ns.store(CoarseNowNs(), kRelaxed);
      break;
    }
    case HandleKind::kProxyStep: {
      auto* e = static_cast<ProxyEntry::StepHandle*>(handle)->owner;
      e->last_state.store(state, kRelaxed);
      if (args != nullptr) e->trans_bytes.store(args->proxyStep.transSize, kRelaxed);
      e->last_update_ns.store(CoarseNowNs(), kRelaxed);
      break;
    }
    case HandleKind::kOp:
      break;
  }
}

}  // namespace collscope::capture
