/* collscope step/phase annotation API (C ABI, libcollscope-annotate.so).
 *
 * A training loop calls these to say where steps and phases begin and end. A background writer
 * turns the calls into per-rank step/phase series in the dump directory, in the format of
 * docs/capture.md ("Step/phase series"), which `collscope ingest` stores in `steps` and
 * `step_phases`.
 *
 * Contract:
 * - Every call is lock-free, makes no system call and allocates nothing: it reads the clock (the
 *   vDSO, not a system call) and publishes one event into a fixed ring. When the ring is full the
 *   event is dropped and counted; the writer states the count in the file.
 * - Calls never fail the caller: they return 0 when the event was recorded and a negative value
 *   when it was dropped (ring full) or capture is off (COLLSCOPE_ENABLE=0, or the writer gave up on
 *   its directory after one warning on stderr).
 * - Calls may come from any thread. Phases nest per process; phase_end closes the innermost open
 *   phase of that name (or the innermost one when name is NULL).
 * - Names are copied (at most 47 bytes kept), so temporary strings are fine.
 * - Files: $COLLSCOPE_DUMP_DIR, else $NCCL_INSPECTOR_DUMP_DIR, else ./collscope-dump;
 *   <hostname>-pid<pid>.steps.jsonl, flushed every COLLSCOPE_STEPS_INTERVAL_MS (default 1000) and
 *   at exit (or collscope_flush).
 */
#ifndef COLLSCOPE_CAPTURE_ANNOTATE_COLLSCOPE_ANNOTATE_H_
#define COLLSCOPE_CAPTURE_ANNOTATE_COLLSCOPE_ANNOTATE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLLSCOPE_STEPS_FORMAT_VERSION 1

#if defined(__GNUC__)
#define COLLSCOPE_ANNOTATE_API __attribute__((visibility("default")))
#else
#define COLLSCOPE_ANNOTATE_API
#endif

/* A training step (iteration) begins / ends. Steps do not nest; a begin while a step is open ends
 * the open one first. */
COLLSCOPE_ANNOTATE_API int collscope_step_begin(int64_t step);
COLLSCOPE_ANNOTATE_API int collscope_step_end(void);

/* A named phase (forward, backward, optimizer, data, or any name) begins / ends. */
COLLSCOPE_ANNOTATE_API int collscope_phase_begin(const char* name);
COLLSCOPE_ANNOTATE_API int collscope_phase_end(const char* name);

/* The micro-batch now being processed (0-based). */
COLLSCOPE_ANNOTATE_API int collscope_micro_batch(int32_t index);

/* The process's place in the job. -1 means unknown; rank and world_size default to the launcher's
 * RANK / WORLD_SIZE (or OMPI_COMM_WORLD_*, SLURM_PROCID / SLURM_NTASKS, PMI_RANK / PMI_SIZE). */
COLLSCOPE_ANNOTATE_API int collscope_set_parallel(int32_t rank, int32_t world_size, int32_t dp_rank, int32_t dp_size,
                           int32_t tp_rank, int32_t tp_size, int32_t pp_rank, int32_t pp_size,
                           int32_t ep_rank, int32_t ep_size, int32_t cp_rank, int32_t cp_size);

/* GPU time of a phase of a step, measured afterwards (e.g. with CUDA events read one step later so
 * the stream is never synchronised). Adds to what that (step, phase) already has. */
COLLSCOPE_ANNOTATE_API int collscope_phase_gpu_time(int64_t step, const char* phase, double gpu_us);

/* The current step (-1 before the first), innermost phase (copied into buf, "" when none) and
 * micro-batch (-1 when unset), for in-process readers such as the NCCL profiler plugin. Lock-free;
 * returns 0, or -1 when a concurrent update made the snapshot inconsistent (try again). */
COLLSCOPE_ANNOTATE_API int collscope_annotate_current(int64_t* step, char* phase_buf, int32_t phase_buf_size,
                               int32_t* micro_batch);

/* The step that was current at `unix_ns` (CLOCK_REALTIME nanoseconds): the one whose
 * collscope_step_begin came last at or before it, among the last 1024 steps. For in-process readers
 * whose events arrive late, such as the CUPTI library's kernel records. Lock-free; returns 0, -1
 * when no step is known for that time (before the first, or older than the history). */
COLLSCOPE_ANNOTATE_API int collscope_annotate_step_at(int64_t unix_ns, int64_t* step);

/* Writes everything recorded so far and waits for it (this one does make system calls). */
COLLSCOPE_ANNOTATE_API int collscope_flush(void);

/* Events dropped because the ring was full, since the process started. */
COLLSCOPE_ANNOTATE_API uint64_t collscope_annotate_dropped(void);

#ifdef __cplusplus
}
#endif

#endif /* COLLSCOPE_CAPTURE_ANNOTATE_COLLSCOPE_ANNOTATE_H_ */
