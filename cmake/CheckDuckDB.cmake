# collscope_check_duckdb(INCLUDE_DIR LIBRARY): checks a system DuckDB by building and running a
# program against it: the library's own version must be at least COLLSCOPE_DUCKDB_MIN_VERSION and
# below 2.0 (stores are written in 1.4's format; the C API and SQL used are 1.4's), and the json and
# parquet extensions must load without a download (collscope runs DuckDB with extensions locked).
# Sets COLLSCOPE_DUCKDB_VERSION; stops with a message saying what is wrong otherwise. Cross builds
# cannot run the program: the version is then taken on trust, with a warning.
set(COLLSCOPE_DUCKDB_MIN_VERSION 1.4.0)

function(collscope_check_duckdb include_dir library)
  if(CMAKE_CROSSCOMPILING)
    message(WARNING "DuckDB: cross build, ${library} not checked (need ${COLLSCOPE_DUCKDB_MIN_VERSION} <= version < 2.0)")
    set(COLLSCOPE_DUCKDB_VERSION "unchecked" PARENT_SCOPE)
    return()
  endif()
  try_run(_run_rc _compile_ok
          SOURCES "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/check/duckdb_version.c"
          CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${include_dir}"
          LINK_LIBRARIES "${library}"
          COMPILE_OUTPUT_VARIABLE _compile_out
          RUN_OUTPUT_VARIABLE _run_out)
  if(NOT _compile_ok)
    message(FATAL_ERROR "DuckDB: cannot build against ${library} with ${include_dir}/duckdb.h:\n${_compile_out}\n"
                        "Set -DCOLLSCOPE_FORCE_FETCHED_DUCKDB=ON to use the pinned 1.4.4 instead.")
  endif()
  string(STRIP "${_run_out}" _run_out)
  if(NOT _run_out MATCHES "^version=v?([0-9]+\\.[0-9]+\\.[0-9]+)")
    message(FATAL_ERROR "DuckDB: ${library} did not run (${_run_rc}): ${_run_out}\n"
                        "Set -DCOLLSCOPE_FORCE_FETCHED_DUCKDB=ON to use the pinned 1.4.4 instead.")
  endif()
  set(_version "${CMAKE_MATCH_1}")
  if(_version VERSION_LESS COLLSCOPE_DUCKDB_MIN_VERSION OR _version VERSION_GREATER_EQUAL 2.0)
    message(FATAL_ERROR "DuckDB: ${library} is ${_version}; collscope needs ${COLLSCOPE_DUCKDB_MIN_VERSION} <= version < 2.0. "
                        "Set -DCOLLSCOPE_FORCE_FETCHED_DUCKDB=ON to use the pinned 1.4.4 instead.")
  endif()
  if(NOT _run_rc EQUAL 0)
    message(FATAL_ERROR "DuckDB: ${library} (${_version}) lacks built-in extensions: ${_run_out}\n"
                        "Set -DCOLLSCOPE_FORCE_FETCHED_DUCKDB=ON to use the pinned 1.4.4 instead.")
  endif()
  set(COLLSCOPE_DUCKDB_VERSION "${_version}" PARENT_SCOPE)
endfunction()
