#include "analysis/diagnose/finding_phases.h"

#include <algorithm>
#include <map>
#include <string>

namespace collscope::diagnose {

Status AddAnnotatedPhases(Store& store, int32_t run_id, const CommData& data, std::vector<Finding>* findings) {
  // Most runs carry no annotation (stock Inspector logs, the plugin without the annotation
  // library): one cheap look before any per-finding query.
  auto annotated = store.QueryInt(
      "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'record_annotations'");
  if (!annotated.ok()) return annotated.status();
  if (*annotated == 0) return Status::Ok();  // a store made before annotations were stored
  annotated = store.QueryInt("SELECT count(*) FROM (SELECT 1 FROM record_annotations WHERE run_id = " +
                             std::to_string(run_id) + " AND step IS NOT NULL LIMIT 1)");
  if (!annotated.ok()) return annotated.status();
  if (*annotated == 0) return Status::Ok();

  std::map<int, int64_t> process_of;
  for (const Proc& p : data.procs)
    if (p.global_rank >= 0 && p.process_id >= 0) process_of[p.global_rank] = p.process_id;
  const std::string start = RecordStartSql("r");
  for (Finding& f : *findings) {
    if (f.ranks.empty() || f.comms.empty() || f.detector.rfind("comm.", 0) != 0) continue;
    std::string procs, comms;
    for (int rank : f.ranks) {
      auto p = process_of.find(rank);
      if (p != process_of.end()) procs += (procs.empty() ? "" : ", ") + std::to_string(p->second);
    }
    for (const std::string& c : f.comms) comms += (comms.empty() ? "" : ", ") + SqlString(c);
    if (procs.empty()) continue;
    std::string where = "r.run_id = " + std::to_string(run_id) + " AND r.process_id IN (" + procs +
                        ") AND c.id IN (" + comms + ") AND a.step IS NOT NULL";
    if (f.end_us > f.start_us)
      where += " AND " + start + " BETWEEN " + std::to_string(f.start_us) + " AND " + std::to_string(f.end_us);
    auto rows = store.Query(
        "SELECT CASE WHEN a.phase IS NULL OR a.phase = '' THEN '(none)' ELSE left(a.phase, 64) END AS phase, "
        "count(*) AS n, min(a.step), max(a.step) "
        "FROM records r JOIN record_annotations a ON a.run_id = r.run_id AND a.file_id = r.file_id AND "
        "a.line = r.line JOIN operations o ON o.run_id = r.run_id AND o.op_id = r.op_id "
        "JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id WHERE " +
        where + " GROUP BY 1 ORDER BY n DESC, phase");
    if (!rows.ok()) return rows.status();
    if (rows->rows.empty()) continue;
    int64_t total = 0, lo = INT64_MAX, hi = INT64_MIN;
    for (const auto& row : rows->rows) {
      total += static_cast<int64_t>(std::stoll(*row[1]));
      lo = std::min(lo, static_cast<int64_t>(std::stoll(*row[2])));
      hi = std::max(hi, static_cast<int64_t>(std::stoll(*row[3])));
    }
    std::string phases;
    for (size_t i = 0; i < rows->rows.size() && i < 6; ++i) {
      const auto& row = rows->rows[i];
      phases += (i ? ", " : "") + *row[0] + " " +
                Fmt("%.0f", 100.0 * static_cast<double>(std::stoll(*row[1])) / static_cast<double>(total)) + "%";
    }
    if (rows->rows.size() > 6) phases += ", ...";
    const std::string steps = lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
    f.AddText("phases", phases);
    f.AddText("annotated_steps", steps);
    f.Add("annotated_records", static_cast<double>(total));
    const std::string& top = *rows->rows[0][0];
    const double share = static_cast<double>(std::stoll(*rows->rows[0][1])) / static_cast<double>(total);
    if (top != "(none)")
      f.summary += " Its collectives here ran in " + top + " (" + Fmt("%.0f", 100 * share) + "% of " +
                   std::to_string(total) + " annotated records, steps " + steps + ").";
  }
  return Status::Ok();
}

}  // namespace collscope::diagnose
