/* The peer of bench/ingest_vs_read_json.sh: a whole process that loads NCCL Inspector logs into a
 * table with DuckDB's read_json, as a DuckDB user would, linked against the same libduckdb as
 * collscope. It opens a fresh database file, runs one CREATE TABLE ... AS SELECT * FROM read_json,
 * closes the database (which checkpoints it, as the DuckDB CLI does on exit), and nothing else.
 *
 * Usage: read_json_peer DB GLOB [THREADS]   the timed load
 *          DB must not exist (the load is timed from an empty store); THREADS 0 or absent:
 *          DuckDB's default (every core).
 *        read_json_peer --count DB           untimed check, afterwards: prints the rows loaded and
 *          the rows holding a record object (coll_perf or p2p_perf), so the script can check
 *          that both sides loaded every record.
 * Exit status 0 on success, 1 on any DuckDB error (printed).
 *
 * Written in C against the C API so that nothing of collscope (its sandbox, its store) is in the
 * peer's path: the comparison is collscope against plain DuckDB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "duckdb.h"

/* Single quotes doubled: the glob is a SQL string literal. */
static char* SqlString(const char* s) {
  size_t n = strlen(s), quotes = 0;
  for (size_t i = 0; i < n; ++i) quotes += s[i] == '\'';
  char* out = malloc(n + quotes + 3);
  if (!out) return NULL;
  char* p = out;
  *p++ = '\'';
  for (size_t i = 0; i < n; ++i) {
    if (s[i] == '\'') *p++ = '\'';
    *p++ = s[i];
  }
  *p++ = '\'';
  *p = '\0';
  return out;
}

static int Run(duckdb_connection conn, const char* sql, int64_t* first_value) {
  duckdb_result r;
  if (duckdb_query(conn, sql, &r) != DuckDBSuccess) {
    fprintf(stderr, "read_json_peer: %s\n", duckdb_result_error(&r));
    duckdb_destroy_result(&r);
    return 0;
  }
  if (first_value) *first_value = duckdb_value_int64(&r, 0, 0);
  duckdb_destroy_result(&r);
  return 1;
}

static int Count(const char* path) {
  duckdb_database db = NULL;
  duckdb_connection conn = NULL;
  if (duckdb_open(path, &db) != DuckDBSuccess || duckdb_connect(db, &conn) != DuckDBSuccess) {
    fprintf(stderr, "read_json_peer: cannot open %s\n", path);
    return 1;
  }
  int64_t rows = 0, with_record = 0;
  int ok = Run(conn, "SELECT count(*) FROM t", &rows) &&
           Run(conn, "SELECT count(coll_perf) + count(p2p_perf) FROM t", &with_record);
  duckdb_disconnect(&conn);
  duckdb_close(&db);
  if (!ok) return 1;
  printf("%lld %lld\n", (long long)rows, (long long)with_record);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--count") == 0) return Count(argv[2]);
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s DB GLOB [THREADS] | --count DB\n", argv[0]);
    return 1;
  }
  struct stat st;
  if (stat(argv[1], &st) == 0) {
    fprintf(stderr, "read_json_peer: %s exists; the load is timed from an empty database\n", argv[1]);
    return 1;
  }
  duckdb_database db = NULL;
  duckdb_connection conn = NULL;
  if (duckdb_open(argv[1], &db) != DuckDBSuccess || duckdb_connect(db, &conn) != DuckDBSuccess) {
    fprintf(stderr, "read_json_peer: cannot open %s\n", argv[1]);
    return 1;
  }
  int ok = 1;
  if (argc == 4 && atoi(argv[3]) > 0) {
    char set[64];
    snprintf(set, sizeof set, "SET threads = %d", atoi(argv[3]));
    ok = Run(conn, set, NULL);
  }
  /* The plainest load that reads these files whole: DuckDB detects the schema (header, metadata,
   * coll_perf, p2p_perf structs) from a sample. Each Inspector line carries its record in
   * coll_perf or p2p_perf, so the counts of --count show that no record's object was dropped
   * for a schema detected without it (the script compares them with what ingest stored). */
  char* glob = SqlString(argv[2]);
  const char* head = "CREATE TABLE t AS SELECT * FROM read_json(";
  const char* tail = ", format = 'newline_delimited')";
  char* sql = glob ? malloc(strlen(head) + strlen(glob) + strlen(tail) + 1) : NULL;
  if (!sql) {
    fprintf(stderr, "read_json_peer: out of memory\n");
    return 1;
  }
  sprintf(sql, "%s%s%s", head, glob, tail);
  ok = ok && Run(conn, sql, NULL);
  free(sql);
  free(glob);
  duckdb_disconnect(&conn);
  duckdb_close(&db);
  return ok ? 0 : 1;
}
