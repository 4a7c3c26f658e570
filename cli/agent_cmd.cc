// `collscope agent`: thin wrapper over agent/agent.h.
#include <csignal>
#include <cstdio>
#include <memory>

#include "agent/agent.h"
#include "cli/command.h"
#include "cli/output.h"

namespace collscope::cli {
namespace agent_cmd {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

// "5s", "2m", "1h", "7d" or plain seconds.
bool ParseSeconds(const std::string& text, double* out) {
  if (text.empty()) return false;
  double scale = 1;
  std::string number = text;
  switch (text.back()) {
    case 's':
      number.pop_back();
      break;
    case 'm':
      scale = 60;
      number.pop_back();
      break;
    case 'h':
      scale = 3600;
      number.pop_back();
      break;
    case 'd':
      scale = 86400;
      number.pop_back();
      break;
    default:
      break;
  }
  try {
    size_t used = 0;
    const double v = std::stod(number, &used);
    if (used != number.size() || !(v >= 0)) return false;
    *out = v * scale;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

struct Options {
  agent::AgentOptions agent;
  std::string interval = "5s", window = "5m", quiet = "60s", retention = "0", diagnose_every = "0",
              rescan = "10s";
};

int Run(Options o) {
  const std::pair<const std::string*, double*> durations[] = {
      {&o.interval, &o.agent.interval_s},
      {&o.window, &o.agent.window_s},
      {&o.quiet, &o.agent.quiet_s},
      {&o.retention, &o.agent.retention_s},
      {&o.diagnose_every, &o.agent.diagnose_every_s},
      {&o.rescan, &o.agent.rescan_s}};
  for (const auto& [text, value] : durations)
    if (!ParseSeconds(*text, value)) {
      std::fprintf(stderr, "collscope agent: '%s' is not a duration (5s, 2m, 1h, 7d)\n",
                   text->c_str());
      return 2;
    }
  auto a = agent::Agent::Create(o.agent);
  if (!a.ok()) return Fail("agent", a.status());
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  const std::string said = (*a)->Describe();
  std::fwrite(said.data(), 1, said.size(), stderr);
  (*a)->Run(g_stop);
  std::fprintf(stderr, "collscope agent: stopped\n");
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  o->agent.listen = "127.0.0.1:9464";
  CLI::App* cmd = app.add_subcommand(
      "agent",
      "Run beside a training job: watch its dump folders, ingest incrementally, diagnose a sliding "
      "window every tick, serve /metrics, /findings and /healthz, remote-write the metrics and "
      "raise and resolve alerts. Exits 0 on SIGTERM or SIGINT, 2 on a usage error.");
  cmd->add_option("--watch", o->agent.watch, "The job's dump folders or files")->required();
  cmd->add_option("--db", o->agent.db, "The agent's store (created if missing)")->required();
  cmd->add_option("--run", o->agent.run, "Run name in the store")->capture_default_str();
  cmd->add_option("--listen", o->agent.listen, "ADDRESS:PORT to serve on; '' serves nothing")
      ->capture_default_str();
  cmd->add_option(
      "--remote-write", o->agent.remote_write,
      "Prometheus remote-write URL (http://host:port/api/v1/write); repeat for more receivers");
  cmd->add_option("--alertmanager", o->agent.alertmanager,
                  "Alertmanager base URL (http://host:9093); repeat for each member of an HA cluster");
  cmd->add_option("--webhook", o->agent.webhook,
                  "URL that receives raised and resolved findings as JSON; repeat for more");
  cmd->add_option("--report-url", o->agent.report_url, "Link put in alerts (the job's report)");
  cmd->add_option("--job", o->agent.job,
                  "Value of the 'job' label on alerts and remote-written series");
  cmd->add_option("--interval", o->interval, "Time between ticks")->capture_default_str();
  cmd->add_option("--window", o->window, "Job time diagnosed each tick")->capture_default_str();
  cmd->add_option("--rescan", o->rescan,
                  "Walk the watched folders at least this often, events or not (files other hosts "
                  "write to a network "
                  "filesystem raise no inotify event); 0: only on events")
      ->capture_default_str();
  cmd->add_option("--diagnose-every", o->diagnose_every,
                  "Diagnose the window at most this often (0: the larger of the interval and a "
                  "tenth of the window)")
      ->capture_default_str();
  cmd->add_option("--quiet", o->quiet,
                  "No new records this long: diagnose through the newest (a hang shows)")
      ->capture_default_str();
  cmd->add_option("--resolve-after", o->agent.resolve_after,
                  "Ticks a finding must be gone before it resolves")
      ->capture_default_str();
  cmd->add_option("--retention", o->retention,
                  "Delete records, stack samples, kernel summaries and steps older than this much job "
                  "time, and the agent's own stack files left empty (0 keeps all)")
      ->capture_default_str();
  cmd->add_option("--memory-limit", o->agent.memory_limit, "The store's memory limit per tick")
      ->capture_default_str();
  cmd->add_option("--export-summaries", o->agent.export_summaries,
                  "Host agent: write what each tick ingests as record summaries (Parquet) under "
                  "this folder, for an aggregator agent watching it (docs/scale.md)");
  cmd->add_option("--ship-summaries", o->agent.ship_summaries,
                  "Host agent without a shared file system: PUT each summary written under "
                  "--export-summaries to this aggregator (http://host:port), deleting it once stored");
  cmd->add_option("--accept-summaries", o->agent.accept_summaries,
                  "Aggregator: store host agents' summary uploads (PUT /summaries/...) under this "
                  "folder, and watch it");
  cmd->add_option("--host", o->agent.hosts,
                  "Ingest only this host's files (<host>-pid*); repeat for several");
  cmd->add_flag("!--no-diagnose", o->agent.diagnose,
                "Ingest (and export) only: no window, metrics or alerts (a host agent)");
  cmd->add_option("--stacks-job", o->agent.stacks_job,
                  "When a hang finding first appears, sample the call stacks of this job's processes "
                  "on this host (SLURM_JOB_ID, TORCHELASTIC_RUN_ID or COLLSCOPE_JOB equal to it; "
                  "docs/stacks.md) and raise the finding with them");
  cmd->add_option("--stacks-burst", o->agent.stacks_burst_s, "Seconds of stack sampling (10 Hz) a new hang gets")
      ->capture_default_str()->check(CLI::Range(0.1, 60.0));
  cmd->add_option("--stacks-rate", o->agent.stacks_rate_hz,
                  "Always on: sample the --stacks-job processes' Python stacks at this rate (Hz), "
                  "stopping nothing, and store them (0: off)")
      ->capture_default_str()->check(CLI::Range(0.0, 100.0));
  cmd->add_option(
      "--stacks-steps-dir", o->agent.stacks_steps_dir,
      "Always on: where the annotation API writes the processes' step files (default: the first "
      "watched folder); their stack windows then end at step ends and name their steps");
  cmd->add_option("--ticks", o->agent.max_ticks, "Stop after this many ticks (0: until SIGTERM)")
      ->capture_default_str();
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace agent_cmd
}  // namespace collscope::cli
