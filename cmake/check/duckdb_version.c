/* cmake/CheckDuckDB.cmake: prints the library's version, then checks, with extension loading off as
 * collscope runs it (core/store.cc), that json and parquet are built in and loaded.
 * Exit 0: usable; 1: an extension is missing; 2: no database. */
#include <duckdb.h>
#include <stdio.h>

int main(void) {
  printf("version=%s\n", duckdb_library_version());
  duckdb_config config;
  duckdb_database db;
  duckdb_connection con;
  char* err = NULL;
  if (duckdb_create_config(&config) != DuckDBSuccess) return 2;
  duckdb_set_config(config, "autoinstall_known_extensions", "false");
  duckdb_set_config(config, "autoload_known_extensions", "false");
  if (duckdb_open_ext(NULL, &db, config, &err) != DuckDBSuccess) {
    printf("open: %s\n", err ? err : "failed");
    return 2;
  }
  duckdb_destroy_config(&config);
  if (duckdb_connect(db, &con) != DuckDBSuccess) return 2;
  duckdb_result result;
  int rc = 1;
  if (duckdb_query(con,
                   "SELECT count(*) FROM duckdb_extensions() "
                   "WHERE extension_name IN ('json', 'parquet') AND loaded",
                   &result) == DuckDBSuccess) {
    long long loaded = (long long)duckdb_value_int64(&result, 0, 0);
    if (loaded == 2) rc = 0;
    else printf("json and parquet: %lld of 2 built in and loaded\n", loaded);
  } else {
    printf("duckdb_extensions(): %s\n", duckdb_result_error(&result));
  }
  duckdb_destroy_result(&result);
  duckdb_disconnect(&con);
  duckdb_close(&db);
  return rc;
}
