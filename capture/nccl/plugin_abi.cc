// The exported NCCL profiler entry points: ncclProfiler_v7, _v6, _v5 and _v4 (NCCL's loader takes
// the newest it knows: 2.31 v7, 2.29-2.30 v6, 2.28 v5).
//
// Contract: every function NCCL can call returns ncclSuccess and never lets an exception cross
// the C ABI (NCCL would treat a failure as "unload the plugin"; we prefer to degrade to doing
// nothing). These adapters only translate each version's descriptor into the version-neutral
// hot-path calls in plugin_core.h.
#include "capture/nccl/plugin_core.h"
#include "capture/nccl/profiler_abi.h"

namespace collscope::capture {
namespace {

collscope_coll_v4_t ToV4(const collscope_coll_v4_t& c) { return c; }
collscope_coll_v4_t ToV4(const collscope_coll_v5_t& c) {
  return collscope_coll_v4_t{c.seqNumber, c.func,      c.sendBuff, c.recvBuff, c.count, c.root,
                             c.datatype,  c.nChannels, c.nWarps,   c.algo,     c.proto};
}
collscope_coll_v4_t ToV4(const collscope_coll_v7_t& c) {
  return collscope_coll_v4_t{c.seqNumber, c.func,      c.sendBuff, c.recvBuff, c.count, c.root,
                             c.datatype,  c.nChannels, c.nWarps,   c.algo,     c.proto};
}
collscope_p2p_v4_t ToV4(const collscope_p2p_v4_t& p) { return p; }
collscope_p2p_v4_t ToV4(const collscope_p2p_v5_t& p) {
  return collscope_p2p_v4_t{p.func, p.buff, p.datatype, p.count, p.peer, p.nChannels};
}
collscope_p2p_v4_t ToV4(const collscope_p2p_v7_t& p) {
  return collscope_p2p_v4_t{p.func, p.buff, p.datatype, p.count, p.peer, p.nChannels};
}

// v7's userTag; older ABIs have none.
template <typename T>
uint64_t UserTag(const T& op) {
  if constexpr (requires { op.userTag; }) return op.userTag;
  return 0;
}

template <typename Descr>
collscope_ncclResult_t StartEventT(void* context, void** eHandle, Descr* d) noexcept {
  if (eHandle == nullptr) return collscope_ncclSuccess;
  *eHandle = nullptr;
  if (context == nullptr || d == nullptr) return collscope_ncclSuccess;
  try {
    auto* c = static_cast<CommCtx*>(context);
    switch (static_cast<uint64_t>(d->type)) {
      case collscope_ncclProfileColl: {
        const collscope_coll_v4_t coll = ToV4(d->coll);
        *eHandle = StartOp(c, false, &coll, nullptr, UserTag(d->coll));
        break;
      }
      case collscope_ncclProfileP2p: {
        const collscope_p2p_v4_t p2p = ToV4(d->p2p);
        *eHandle = StartOp(c, true, nullptr, &p2p, UserTag(d->p2p));
        break;
      }
      case collscope_ncclProfileKernelCh:
        *eHandle = StartKernelCh(c, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
        break;
      case collscope_ncclProfileProxyOp:
        *eHandle = StartProxyOp(c, d->parentObj, &d->proxyOp);
        break;
      case collscope_ncclProfileProxyStep:
        *eHandle = StartProxyStep(d->parentObj, d->proxyStep.step);
        break;
      default:
        // Group/API/CE events (created implicitly by NCCL, or sent by a newer core) and v7's
        // KernelPhase events (the plugin never asks for them: NCCL 2.31 pays for their
        // instrumentation, and RAS may turn them on job-wide): untracked, a null handle.
        break;
    }
  } catch (...) {
    *eHandle = nullptr;
  }
  return collscope_ncclSuccess;
}

collscope_ncclResult_t StopEventAbi(void* eHandle) noexcept {
  try {
    StopEvent(eHandle);
  } catch (...) {
  }
  return collscope_ncclSuccess;
}

collscope_ncclResult_t RecordEventStateAbi(void* eHandle, collscope_ncclProfilerEventState_t state,
                                           collscope_ncclProfilerEventStateArgs_t* args) noexcept {
  try {
    RecordEventState(eHandle, static_cast<int>(state), args);
  } catch (...) {
  }
  return collscope_ncclSuccess;
}

collscope_ncclResult_t InitV4(void** context, int* mask, const char* comm_name, uint64_t comm_hash,
                              int nnodes, int nranks, int rank,
                              collscope_ncclDebugLogger_t logfn) noexcept {
  return Runtime::CommInit(context, comm_hash, mask, comm_name, nnodes, nranks, rank, logfn);
}

collscope_ncclResult_t InitV5(void** context, uint64_t comm_id, int* mask, const char* comm_name,
                              int nnodes, int nranks, int rank,
                              collscope_ncclDebugLogger_t logfn) noexcept {
  return Runtime::CommInit(context, comm_id, mask, comm_name, nnodes, nranks, rank, logfn);
}

collscope_ncclResult_t FinalizeAbi(void* context) noexcept {
  return Runtime::CommFinalize(context);
}

collscope_ncclResult_t StartEventV4(void* context, void** eHandle,
                                    collscope_ncclProfilerEventDescr_v4_t* d) noexcept {
  return StartEventT(context, eHandle, d);
}
collscope_ncclResult_t StartEventV5(void* context, void** eHandle,
                                    collscope_ncclProfilerEventDescr_v5_t* d) noexcept {
  return StartEventT(context, eHandle, d);
}
collscope_ncclResult_t StartEventV6(void* context, void** eHandle,
                                    collscope_ncclProfilerEventDescr_v6_t* d) noexcept {
  return StartEventT(context, eHandle, d);
}

collscope_ncclResult_t StartEventV7(void* context, void** eHandle,
                                    collscope_ncclProfilerEventDescr_v7_t* d) noexcept {
  return StartEventT(context, eHandle, d);
}

// Runs at exit() (or dlclose): flush whatever completed if NCCL never finalized.
__attribute__((destructor)) void CollscopeAtExit() { Runtime::AtExit(); }

}  // namespace
}  // namespace collscope::capture

#define COLLSCOPE_EXPORT __attribute__((visibility("default")))

extern "C" {
COLLSCOPE_EXPORT collscope_ncclProfiler_v7_t ncclProfiler_v7 = {
    "collscope",
    collscope::capture::InitV5,
    collscope::capture::StartEventV7,
    collscope::capture::StopEventAbi,
    collscope::capture::RecordEventStateAbi,
    collscope::capture::FinalizeAbi,
};
COLLSCOPE_EXPORT collscope_ncclProfiler_v6_t ncclProfiler_v6 = {
    "collscope",
    collscope::capture::InitV5,
    collscope::capture::StartEventV6,
    collscope::capture::StopEventAbi,
    collscope::capture::RecordEventStateAbi,
    collscope::capture::FinalizeAbi,
};
COLLSCOPE_EXPORT collscope_ncclProfiler_v5_t ncclProfiler_v5 = {
    "collscope",
    collscope::capture::InitV5,
    collscope::capture::StartEventV5,
    collscope::capture::StopEventAbi,
    collscope::capture::RecordEventStateAbi,
    collscope::capture::FinalizeAbi,
};
COLLSCOPE_EXPORT collscope_ncclProfiler_v4_t ncclProfiler_v4 = {
    "collscope",
    collscope::capture::InitV4,
    collscope::capture::StartEventV4,
    collscope::capture::StopEventAbi,
    collscope::capture::RecordEventStateAbi,
    collscope::capture::FinalizeAbi,
};
}
