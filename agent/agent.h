// `collscope agent`: runs beside a training job. Every tick it
//  1. asks the folder watch whether anything changed (inotify; polling where unavailable),
//  2. ingests what grew into its store (every format `collscope ingest` reads, incrementally),
//  3. diagnoses a sliding window of job time and computes the job's metrics over it,
//  4. raises and resolves alerts (Alertmanager API v2, a webhook) as findings come and go,
//  5. publishes /metrics, /findings and /healthz, and remote-writes the same samples.
//
// The window ends at the job's frontier: the oldest of the processes' newest dump times, before
// which every process has written what it completed, so no collective looks half-joined just
// because one writer dumps later than another. When nothing new has arrived for `quiet_s`, the
// frontier moves to the newest record: a hung job stops writing, and its tail is what shows it.
//
// The agent keeps its store open between ticks (opening it costs more than a tick's work), and
// lets go of it when a reader waits: `collscope sql`, `report` and `diagnose --db` leave the
// store's WantedPath while they wait for its lock (core/store.h), and the agent closes the store
// within 50 ms between ticks and opens it again at the next tick. A restart resumes from the
// store: the ingest's progress and the active findings are kept there.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/finding_tracker.h"
#include "agent/job_metrics.h"
#include "agent/metrics.h"
#include "agent/watch.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::agent {

class HttpServer;
class RemoteWriter;

struct AgentOptions {
  std::vector<std::string> watch;         // folders (or files) of the job's dumps
  std::string db;                         // the agent's store
  std::string run = "live";               // run name in the store
  std::string listen;                     // "127.0.0.1:9464"; empty: serve nothing
  std::vector<std::string> remote_write;  // http://host:port/api/v1/write, each its own queue
  // Alertmanager base URLs (http://host:port, API v2 path appended): every member of an HA
  // cluster gets every alert, as Prometheus sends them; the cluster deduplicates.
  std::vector<std::string> alertmanager;
  std::vector<std::string> webhook;       // http://..., each gets raised and resolved findings
  std::string report_url;                 // linked from alerts
  std::string job;  // the `job` label value of alerts and remote-written series
  double interval_s = 5;
  double window_s = 300;        // job time diagnosed each tick
  double quiet_s = 60;          // no new records this long: diagnose through the newest record
  double diagnose_every_s = 0;  // diagnose at most this often; 0: max(interval, window / 10)
  double rescan_s =
      10;  // walk the watched folders at least this often (other hosts' writes raise no event)
  int resolve_after = 2;   // ticks a finding must be absent before it is resolved
  double retention_s = 0;  // delete records older than this (job time); 0 keeps everything
  std::string memory_limit = "512MB";  // DuckDB's, per tick
  double store_wait_s = 2;             // wait this long for a reader's lock, else skip the tick
  int ingest_threads = 1;
  int max_ticks = 0;  // stop after this many ticks (tests); 0 = until stopped
  // Host agent of a job past one machine (docs/scale.md): every tick, what was ingested is also
  // written as record summaries under this folder (core/readers/record_summary.h); empty: none.
  std::string export_summaries;
  // Where no shared file system joins the hosts (docs/scale.md): a host agent PUTs each summary it
  // wrote under export_summaries (its spool) to this aggregator (http://host:port), deleting it
  // once stored there and retrying the rest at the next tick; an aggregator accepts them into
  // accept_summaries (which it then watches) through its --listen server.
  std::string ship_summaries;
  std::string accept_summaries;
  // Ingest only these hosts' files (<host>-pid*: the Inspector's and the simulator's names) when a
  // watched folder holds several hosts'; empty: everything under the watched paths.
  std::vector<std::string> hosts;
  bool diagnose = true;  // false: ingest (and export) only, no window, metrics or alerts
  // The job's processes on this host (those whose SLURM_JOB_ID, TORCHELASTIC_RUN_ID or
  // COLLSCOPE_JOB is this; docs/stacks.md): when a hang finding first appears, their call stacks
  // are sampled for stacks_burst_s at 10 Hz (collscope stacks), stored, and the finding is raised
  // with what they say. Empty: never. Needs the right to trace them (same user, ptrace_scope).
  std::string stacks_job;
  double stacks_burst_s = 2;
  // Always on: the same processes' Python stacks sampled at this rate without stopping them
  // (collscope stacks --no-native) in sessions of stacks_session_s that list the processes anew,
  // folded per stacks_window_s; the files (under <db>.stacks/) are ingested like any watched
  // input. 0: off. Windows end at step ends instead and name their steps
  // (agent/stacks/step_windows.h) where the processes' step files are found: in stacks_steps_dir,
  // else in the first watched folder.
  double stacks_rate_hz = 0;
  std::string stacks_steps_dir;
  double stacks_window_s = 10;
  double stacks_session_s = 600;
};

// What one tick did (for tests and the agent's own metrics).
struct TickReport {
  bool ran = false;       // false: the store was busy and the tick was skipped
  bool ingested = false;  // something changed and was ingested
  uint64_t records_stored = 0, lines_rejected = 0;
  bool diagnosed = false;
  uint64_t summary_files = 0, summary_bytes = 0;  // record summaries written this tick
  uint64_t summaries_shipped = 0;                 // ... and stored by the aggregator (ship_summaries)
  int64_t window_since_us = 0, window_until_us = 0;
  bool quiet = false;
  int findings = 0, raised = 0, resolved = 0;
  double seconds = 0;
  std::vector<std::string> not_stored;  // inputs named by the ingest as skipped or not stored
  int stack_processes = 0;  // processes whose stacks a new hang had sampled this tick
  std::string stacks_note;  // why a new hang's stacks were not sampled, or what was not
  std::string error;                    // a failed step, said on /healthz and in the log
};

class Agent {
 public:
  static Result<std::unique_ptr<Agent>> Create(const AgentOptions& options);
  ~Agent();

  TickReport Tick();
  // Ticks every interval until `stop` is set (SIGTERM) or max_ticks; then flushes remote-write.
  // Between ticks it lets go of the store when a reader waits for it (ReleaseStoreIfWanted).
  void Run(const std::atomic<bool>& stop);
  // Closes the store when a process waits for its lock (core/store.h WantedPath); the next tick
  // opens it again. True when it let go.
  bool ReleaseStoreIfWanted();

  // The bound port of the HTTP server (0 when not serving).
  int port() const;
  std::string MetricsText() const;
  std::string FindingsJson() const;
  // "ok" and 200, or why not and 503 (no tick yet, the last tick failed, or ticks are overdue).
  std::pair<int, std::string> Health() const;
  // What the agent reads and what it cannot use, one line each (said at start and on /healthz).
  std::string Describe() const;

 private:
  explicit Agent(const AgentOptions& options);
  Status Init();
  TickReport TickLocked();
  // The tick's steps. OpenStore: false when the store cannot be had this tick (a reader holds it,
  // or was just given it), the folders' changes then kept for the next. IngestChanged: the watched
  // folders' new data (the named hosts' files only, when hosts are named); false on an error.
  // ApplyRetention: deletes the rows older than retention_s, by each file's line cutoff.
  bool OpenStore(bool changed, TickReport* r);
  bool IngestChanged(Store& store, bool changed, TickReport* r);
  void ApplyRetention(Store& store, const std::string& rid, TickReport* r);
  void DeleteSpentStackFiles(Store& store, const std::string& rid, TickReport* r);
  // PUTs the spool's summaries to ship_summaries, oldest first, deleting each once stored there;
  // a file the aggregator refuses (4xx) stays and is skipped, any other failure stops the tick's
  // shipping (the rest wait for the next tick). Returns the number shipped.
  uint64_t ShipSummaries(std::string* error);
  std::vector<MetricFamily> OwnMetrics() const;
  double DiagnoseEvery() const;
  void Publish(std::vector<MetricFamily> families);
  void Alert(const FindingTracker::Changes& changes);
  // A hang finding not active before: sample the job's processes here, store their stacks, and add
  // their evidence to the findings before they are raised.
  void SampleStacksOnNewFinding(Store& store, std::vector<diagnose::Finding>* findings, TickReport* r);

  AgentOptions o_;
  FolderWatch watch_;
  FindingTracker tracker_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<Store> store_;  // kept open between ticks until a reader asks for it
  std::thread stacks_thread_;      // the always-on stack sampler (stacks_rate_hz)
  std::atomic<bool> stacks_stop_{false};
  void SampleStacksAlways();
  std::string StacksStepsDir() const;
  std::vector<std::unique_ptr<RemoteWriter>> remotes_;

  // State kept between ticks.
  int64_t newest_dump_us_ = 0;             // newest record dump time seen
  double last_new_records_s_ = 0;          // monotonic time records last arrived
  double last_diagnosed_s_ = 0;            // monotonic time of the last diagnosis
  double last_rescan_s_ = 0;               // monotonic time the folders were last walked
  std::map<std::string, double> phase_s_;  // tick wall time by phase
  bool last_quiet_ = false;
  std::vector<MetricFamily> job_metrics_;

  // Counters for the agent's own metrics.
  uint64_t ticks_ = 0, ticks_skipped_ = 0, errors_ = 0, records_ = 0, rejected_ = 0;
  uint64_t releases_ = 0;
  double released_s_ = -1e9;  // monotonic time the store was last let go of
  uint64_t alerts_sent_ = 0, alert_errors_ = 0, rows_deleted_ = 0, stack_files_deleted_ = 0;
  uint64_t summary_files_ = 0, summary_bytes_ = 0, summaries_shipped_ = 0, ship_errors_ = 0;
  std::atomic<uint64_t> summaries_accepted_{0}, summaries_refused_{0};  // the server thread's
  double last_tick_s_ = 0;
  size_t series_ = 0;
  TickReport last_;

  mutable std::mutex published_mu_;  // the server thread reads what a tick publishes
  std::string metrics_text_, findings_json_;
  std::pair<int, std::string> health_{503, "no tick yet\n"};
  double published_s_ = 0;  // monotonic time of the last publish
};

}  // namespace collscope::agent
