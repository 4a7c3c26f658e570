// NCCL profiler-plugin ABI, versions 4, 5 and 6, as seen from the plugin side.
//
// Contract: these declarations are written by collscope from the documented ABI facts
// (shared/reference/nccl-inspector.md §3); they are not NCCL's headers. Only member order, types
// and enum values matter for binary compatibility. The plugin must load in a process without
// CUDA headers or runtime, so the few NCCL core types the ABI needs (ncclResult_t, the logger
// signature) are redeclared here with NCCL's values under collscope-prefixed names.
//
// Layout facts this header relies on (all three versions):
//   * The event descriptor is {type; void* parentObj; int rank; union {...}}. v4's type is
//     uint8_t, v5/v6's is uint64_t; in both cases the union starts at offset 24 on LP64, and each
//     union member is laid out identically across versions (v5 only appends parentGroup to
//     coll/p2p and adds new members; v6 appends CE members).
//   * State arguments are a union; every member we read sits at offset 0.
#ifndef COLLSCOPE_CAPTURE_NCCL_PROFILER_ABI_H_
#define COLLSCOPE_CAPTURE_NCCL_PROFILER_ABI_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

// Same values as NCCL's ncclResult_t; an enum is int-sized on every ABI NCCL supports.
typedef enum {
  collscope_ncclSuccess = 0,
  collscope_ncclUnhandledCudaError = 1,
  collscope_ncclSystemError = 2,
  collscope_ncclInternalError = 3,
  collscope_ncclInvalidArgument = 4,
  collscope_ncclInvalidUsage = 5,
  collscope_ncclRemoteError = 6,
  collscope_ncclInProgress = 7,
} collscope_ncclResult_t;

typedef enum {
  COLLSCOPE_NCCL_LOG_NONE = 0,
  COLLSCOPE_NCCL_LOG_VERSION = 1,
  COLLSCOPE_NCCL_LOG_WARN = 2,
  COLLSCOPE_NCCL_LOG_INFO = 3,
  COLLSCOPE_NCCL_LOG_ABORT = 4,
  COLLSCOPE_NCCL_LOG_TRACE = 5,
} collscope_ncclDebugLogLevel;

// Subsystem flag NCCL uses for profiler messages (NCCL_DEBUG_SUBSYS=PROFILE).
#define COLLSCOPE_NCCL_SUBSYS_PROFILE 0x4000UL

typedef void (*collscope_ncclDebugLogger_t)(collscope_ncclDebugLogLevel level, unsigned long flags,
                                            const char* file, int line, const char* fmt, ...);

// Event type bits (activation mask and descriptor type).
enum {
  collscope_ncclProfileGroup = 1 << 0,
  collscope_ncclProfileColl = 1 << 1,
  collscope_ncclProfileP2p = 1 << 2,
  collscope_ncclProfileProxyOp = 1 << 3,
  collscope_ncclProfileProxyStep = 1 << 4,
  collscope_ncclProfileProxyCtrl = 1 << 5,
  collscope_ncclProfileKernelCh = 1 << 6,
  collscope_ncclProfileNetPlugin = 1 << 7,
  collscope_ncclProfileGroupApi = 1 << 8,
  collscope_ncclProfileCollApi = 1 << 9,
  collscope_ncclProfileP2pApi = 1 << 10,
  collscope_ncclProfileKernelLaunch = 1 << 11,
  collscope_ncclProfileCeColl = 1 << 12,
  collscope_ncclProfileCeSync = 1 << 13,
  collscope_ncclProfileCeBatch = 1 << 14,
};

// Event states (shared by all versions).
typedef enum {
  collscope_ncclProfilerProxyOpSendPosted = 0,
  collscope_ncclProfilerProxyOpSendRemFifoWait = 1,
  collscope_ncclProfilerProxyOpSendTransmitted = 2,
  collscope_ncclProfilerProxyOpSendDone = 3,
  collscope_ncclProfilerProxyOpRecvPosted = 4,
  collscope_ncclProfilerProxyOpRecvReceived = 5,
  collscope_ncclProfilerProxyOpRecvTransmitted = 6,
  collscope_ncclProfilerProxyOpRecvDone = 7,
  collscope_ncclProfilerProxyStepSendGPUWait = 8,
  collscope_ncclProfilerProxyStepSendWait = 9,
  collscope_ncclProfilerProxyStepRecvWait = 10,
  collscope_ncclProfilerProxyStepRecvFlushWait = 11,
  collscope_ncclProfilerProxyStepRecvGPUWait = 12,
  collscope_ncclProfilerProxyCtrlIdle = 13,
  collscope_ncclProfilerProxyCtrlActive = 14,
  collscope_ncclProfilerProxyCtrlSleep = 15,
  collscope_ncclProfilerProxyCtrlWakeup = 16,
  collscope_ncclProfilerProxyCtrlAppend = 17,
  collscope_ncclProfilerProxyCtrlAppendEnd = 18,
  collscope_ncclProfilerProxyOpInProgress_v4 = 19,
  collscope_ncclProfilerProxyStepSendPeerWait_v4 = 20,
  collscope_ncclProfilerNetPluginUpdate = 21,
  collscope_ncclProfilerKernelChStop = 22,
  collscope_ncclProfilerGroupApiState23 = 23,
  collscope_ncclProfilerGroupApiState24 = 24,
  collscope_ncclProfilerCeCollStart = 25,
  collscope_ncclProfilerCeCollComplete = 26,
  collscope_ncclProfilerCeSyncStart = 27,
  collscope_ncclProfilerCeSyncComplete = 28,
  collscope_ncclProfilerCeBatchStart = 29,
  collscope_ncclProfilerCeBatchComplete = 30,
} collscope_ncclProfilerEventState_t;

// ---- Union members shared by v4, v5 and v6 (identical layout in each version). ----

typedef struct {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
} collscope_coll_v4_t;

typedef struct {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
} collscope_p2p_v4_t;

typedef struct {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
} collscope_proxyOp_t;

typedef struct {
  int step;
} collscope_proxyStep_t;

typedef struct {
  uint8_t channelId;
  uint64_t pTimer;  // GPU globaltimer (ns) when the channel started.
} collscope_kernelCh_t;

typedef struct {
  int64_t id;
  void* data;
} collscope_netPlugin_t;

// ---- v4 ----

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    collscope_coll_v4_t coll;
    collscope_p2p_v4_t p2p;
    collscope_proxyOp_t proxyOp;
    collscope_proxyStep_t proxyStep;
    collscope_kernelCh_t kernelCh;
    collscope_netPlugin_t netPlugin;
  };
} collscope_ncclProfilerEventDescr_v4_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // GPU globaltimer (ns) when the channel stopped.
  } kernelCh;
} collscope_ncclProfilerEventStateArgs_t;

typedef struct {
  const char* name;
  collscope_ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName,
                                 uint64_t commHash, int nNodes, int nranks, int rank,
                                 collscope_ncclDebugLogger_t logfn);
  collscope_ncclResult_t (*startEvent)(void* context, void** eHandle,
                                       collscope_ncclProfilerEventDescr_v4_t* eDescr);
  collscope_ncclResult_t (*stopEvent)(void* eHandle);
  collscope_ncclResult_t (*recordEventState)(void* eHandle,
                                             collscope_ncclProfilerEventState_t eState,
                                             collscope_ncclProfilerEventStateArgs_t* eStateArgs);
  collscope_ncclResult_t (*finalize)(void* context);
} collscope_ncclProfiler_v4_t;

// ---- v5 (v6 shares the shape and adds CE union members) ----

typedef struct {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
  void* parentGroup;
} collscope_coll_v5_t;

typedef struct {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup;
} collscope_p2p_v5_t;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    collscope_coll_v5_t coll;
    collscope_p2p_v5_t p2p;
    collscope_proxyOp_t proxyOp;
    collscope_proxyStep_t proxyStep;
    collscope_kernelCh_t kernelCh;
    collscope_netPlugin_t netPlugin;
  };
} collscope_ncclProfilerEventDescr_v5_t;

// v6 appends copy-engine collective members. We never read them, but we declare them so the
// union's size matches what NCCL allocates (harmless either way: NCCL owns the storage).
typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    collscope_coll_v5_t coll;
    collscope_p2p_v5_t p2p;
    collscope_proxyOp_t proxyOp;
    collscope_proxyStep_t proxyStep;
    collscope_kernelCh_t kernelCh;
    collscope_netPlugin_t netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      int batchSize;
      int numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} collscope_ncclProfilerEventDescr_v6_t;

typedef struct {
  const char* name;
  collscope_ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask,
                                 const char* commName, int nNodes, int nranks, int rank,
                                 collscope_ncclDebugLogger_t logfn);
  collscope_ncclResult_t (*startEvent)(void* context, void** eHandle,
                                       collscope_ncclProfilerEventDescr_v5_t* eDescr);
  collscope_ncclResult_t (*stopEvent)(void* eHandle);
  collscope_ncclResult_t (*recordEventState)(void* eHandle,
                                             collscope_ncclProfilerEventState_t eState,
                                             collscope_ncclProfilerEventStateArgs_t* eStateArgs);
  collscope_ncclResult_t (*finalize)(void* context);
} collscope_ncclProfiler_v5_t;

typedef struct {
  const char* name;
  collscope_ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask,
                                 const char* commName, int nNodes, int nranks, int rank,
                                 collscope_ncclDebugLogger_t logfn);
  collscope_ncclResult_t (*startEvent)(void* context, void** eHandle,
                                       collscope_ncclProfilerEventDescr_v6_t* eDescr);
  collscope_ncclResult_t (*stopEvent)(void* eHandle);
  collscope_ncclResult_t (*recordEventState)(void* eHandle,
                                             collscope_ncclProfilerEventState_t eState,
                                             collscope_ncclProfilerEventStateArgs_t* eStateArgs);
  collscope_ncclResult_t (*finalize)(void* context);
} collscope_ncclProfiler_v6_t;

// ---- v7 (NCCL 2.31): userTag appended to collApi, p2pApi, coll, p2p and ceColl; kernelVariant and
// isSymColl appended to coll; a KernelPhase event (bit 1 << 15, state 31). Appended fields change
// the union's size: a v7 descriptor is never read as a v6 one. ----

enum { collscope_ncclProfileKernelPhase = 1 << 15 };
enum { collscope_ncclProfilerKernelPhaseStop = 31 };

typedef struct {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
  void* parentGroup;
  const char* kernelVariant;  // symmetric-memory kernels: the variant (algo is then its name)
  bool isSymColl;
  uint64_t userTag;           // ncclCollConfig_t::userProfilerTag; 0 = untagged
} collscope_coll_v7_t;

typedef struct {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup;
  uint64_t userTag;
} collscope_p2p_v7_t;

typedef struct {
  uint8_t channelId;
  uint8_t phaseId;  // 0 initial_sync, 1 compute, 2 final_sync
  const char* phaseName;
  uint64_t pTimer;  // GPU globaltimer (ns) at the phase's start; its stop comes as a state
} collscope_kernelPhase_t;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    collscope_coll_v7_t coll;
    collscope_p2p_v7_t p2p;
    collscope_proxyOp_t proxyOp;
    collscope_proxyStep_t proxyStep;
    collscope_kernelCh_t kernelCh;
    collscope_netPlugin_t netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      int batchSize;
      int numBatches;
      uint32_t ceSeqNum;
      void* stream;
      uint64_t userTag;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
    collscope_kernelPhase_t kernelPhase;
  };
} collscope_ncclProfilerEventDescr_v7_t;

typedef struct {
  const char* name;
  collscope_ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask,
                                 const char* commName, int nNodes, int nranks, int rank,
                                 collscope_ncclDebugLogger_t logfn);
  collscope_ncclResult_t (*startEvent)(void* context, void** eHandle,
                                       collscope_ncclProfilerEventDescr_v7_t* eDescr);
  collscope_ncclResult_t (*stopEvent)(void* eHandle);
  collscope_ncclResult_t (*recordEventState)(void* eHandle,
                                             collscope_ncclProfilerEventState_t eState,
                                             collscope_ncclProfilerEventStateArgs_t* eStateArgs);
  collscope_ncclResult_t (*finalize)(void* context);
} collscope_ncclProfiler_v7_t;

#ifdef __cplusplus
}  // extern "C"
#endif

#ifdef __cplusplus
// Offsets every version must agree on; a mistake here would silently misread NCCL's memory.
static_assert(offsetof(collscope_ncclProfilerEventDescr_v4_t, coll) == 24);
static_assert(offsetof(collscope_ncclProfilerEventDescr_v5_t, coll) == 24);
static_assert(offsetof(collscope_ncclProfilerEventDescr_v6_t, coll) == 24);
static_assert(offsetof(collscope_ncclProfilerEventDescr_v7_t, coll) == 24);
static_assert(offsetof(collscope_coll_v7_t, parentGroup) == offsetof(collscope_coll_v5_t, parentGroup));
static_assert(offsetof(collscope_p2p_v7_t, parentGroup) == offsetof(collscope_p2p_v5_t, parentGroup));
static_assert(offsetof(collscope_coll_v4_t, nChannels) == offsetof(collscope_coll_v5_t, nChannels));
static_assert(offsetof(collscope_coll_v4_t, proto) == offsetof(collscope_coll_v5_t, proto));
static_assert(offsetof(collscope_p2p_v4_t, nChannels) == offsetof(collscope_p2p_v5_t, nChannels));
static_assert(offsetof(collscope_kernelCh_t, pTimer) == 8);
#endif

#endif  // COLLSCOPE_CAPTURE_NCCL_PROFILER_ABI_H_
