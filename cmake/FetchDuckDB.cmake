# Finds DuckDB: a system installation first, else the pinned npm-registry packages fetched into the
# build tree with the npm client (never committed). Defines the imported target duckdb::duckdb.
#
# Pinned pair (they link, and have the json and parquet extensions built in):
#   library: @duckdb/node-bindings-linux-x64@1.4.4-r.4 (libduckdb.so)
#   header:  duckdb@1.4.4 (package/src/duckdb/src/include/duckdb.h)

find_path(DUCKDB_SYSTEM_INCLUDE duckdb.h)
find_library(DUCKDB_SYSTEM_LIBRARY duckdb)
if(DUCKDB_SYSTEM_INCLUDE AND DUCKDB_SYSTEM_LIBRARY AND NOT COLLSCOPE_FORCE_FETCHED_DUCKDB)
  message(STATUS "DuckDB: system ${DUCKDB_SYSTEM_LIBRARY}")
  add_library(duckdb::duckdb SHARED IMPORTED GLOBAL)
  set_target_properties(duckdb::duckdb PROPERTIES IMPORTED_LOCATION "${DUCKDB_SYSTEM_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${DUCKDB_SYSTEM_INCLUDE}")
  return()
endif()

set(_dir "${CMAKE_BINARY_DIR}/_deps/duckdb")
set(_lib_pkg "@duckdb/node-bindings-linux-x64@1.4.4-r.4")
set(_lib_tgz "duckdb-node-bindings-linux-x64-1.4.4-r.4.tgz")
set(_lib_sha256 "732fac4dc6b8f198870b9c4bb6ddf13544466daca00ad28ba2f1d80de5d7aa4b")
set(_hdr_pkg "duckdb@1.4.4")
set(_hdr_tgz "duckdb-1.4.4.tgz")
set(_hdr_sha256 "5bb967dcbcd517670ba5f169f238fb9d6787e53752c60ebe24386169d76941ed")

function(_collscope_npm_fetch pkg tgz sha256)
  if(EXISTS "${_dir}/${tgz}")
    file(SHA256 "${_dir}/${tgz}" _have)
    if(_have STREQUAL sha256)
      return()
    endif()
  endif()
  find_program(NPM_EXECUTABLE npm REQUIRED)
  message(STATUS "DuckDB: fetching ${pkg} with npm")
  execute_process(COMMAND "${NPM_EXECUTABLE}" pack "${pkg}" --silent
                  WORKING_DIRECTORY "${_dir}" RESULT_VARIABLE _rc OUTPUT_QUIET)
  if(NOT _rc EQUAL 0 OR NOT EXISTS "${_dir}/${tgz}")
    message(FATAL_ERROR "npm pack ${pkg} failed (${_rc})")
  endif()
  file(SHA256 "${_dir}/${tgz}" _have)
  if(NOT _have STREQUAL sha256)
    message(FATAL_ERROR "${tgz}: sha256 ${_have}, expected ${sha256}")
  endif()
endfunction()

file(MAKE_DIRECTORY "${_dir}")
if(NOT EXISTS "${_dir}/lib/libduckdb.so" OR NOT EXISTS "${_dir}/include/duckdb.h")
  _collscope_npm_fetch("${_lib_pkg}" "${_lib_tgz}" "${_lib_sha256}")
  _collscope_npm_fetch("${_hdr_pkg}" "${_hdr_tgz}" "${_hdr_sha256}")
  file(MAKE_DIRECTORY "${_dir}/lib" "${_dir}/include")
  execute_process(COMMAND tar -xzf "${_lib_tgz}" -C lib --strip-components=1 package/libduckdb.so
                  WORKING_DIRECTORY "${_dir}" RESULT_VARIABLE _rc1)
  execute_process(COMMAND tar -xzf "${_hdr_tgz}" -C include --strip-components=5
                          package/src/duckdb/src/include/duckdb.h
                  WORKING_DIRECTORY "${_dir}" RESULT_VARIABLE _rc2)
  if(NOT _rc1 EQUAL 0 OR NOT _rc2 EQUAL 0)
    message(FATAL_ERROR "could not unpack the DuckDB packages in ${_dir}")
  endif()
endif()
message(STATUS "DuckDB: fetched 1.4.4 in ${_dir}")
add_library(duckdb::duckdb SHARED IMPORTED GLOBAL)
set_target_properties(duckdb::duckdb PROPERTIES IMPORTED_LOCATION "${_dir}/lib/libduckdb.so"
                      INTERFACE_INCLUDE_DIRECTORIES "${_dir}/include")
set(DUCKDB_FETCHED_LIBRARY_DIR "${_dir}/lib" CACHE INTERNAL "")
