# Finds DuckDB: a system installation first, else the pinned npm-registry packages fetched into the
# build tree with the npm client (never committed). Defines the imported target duckdb::duckdb, and
# COLLSCOPE_DUCKDB_BUNDLED (TRUE when the fetched library must be installed beside collscope).
#
# Pinned (DuckDB 1.4.4, source id 6ddac802ff; the json and parquet extensions built in):
#   library, x86-64:  @duckdb/node-bindings-linux-x64@1.4.4-r.4   (libduckdb.so)
#   library, aarch64: @duckdb/node-bindings-linux-arm64@1.4.4-r.3 (libduckdb.so; the registry has no
#                     1.4.4-r.4 for arm64, and r.3 carries the same DuckDB release; its sha256 below
#                     was computed from the tarball whose sha512 matches the registry's integrity)
#   header:           duckdb@1.4.4 (package/src/duckdb/src/include/duckdb.h)
# A system DuckDB must be 1.4 or newer (below 2.0) with json and parquet: checked by running it
# (cmake/CheckDuckDB.cmake). COLLSCOPE_FORCE_FETCHED_DUCKDB=ON ignores a system one.

include(${CMAKE_CURRENT_LIST_DIR}/CheckDuckDB.cmake)
find_path(DUCKDB_SYSTEM_INCLUDE duckdb.h)
find_library(DUCKDB_SYSTEM_LIBRARY duckdb)
if(DUCKDB_SYSTEM_INCLUDE AND DUCKDB_SYSTEM_LIBRARY AND NOT COLLSCOPE_FORCE_FETCHED_DUCKDB)
  collscope_check_duckdb("${DUCKDB_SYSTEM_INCLUDE}" "${DUCKDB_SYSTEM_LIBRARY}")
  message(STATUS "DuckDB: system ${DUCKDB_SYSTEM_LIBRARY} (${COLLSCOPE_DUCKDB_VERSION})")
  add_library(duckdb::duckdb SHARED IMPORTED GLOBAL)
  set_target_properties(duckdb::duckdb PROPERTIES IMPORTED_LOCATION "${DUCKDB_SYSTEM_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${DUCKDB_SYSTEM_INCLUDE}")
  set(COLLSCOPE_DUCKDB_BUNDLED FALSE)
  return()
endif()

set(_dir "${CMAKE_BINARY_DIR}/_deps/duckdb")
string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _arch)
if(_arch MATCHES "^(x86_64|amd64)$")
  set(_lib_pkg "@duckdb/node-bindings-linux-x64@1.4.4-r.4")
  set(_lib_tgz "duckdb-node-bindings-linux-x64-1.4.4-r.4.tgz")
  set(_lib_sha256 "732fac4dc6b8f198870b9c4bb6ddf13544466daca00ad28ba2f1d80de5d7aa4b")
elseif(_arch MATCHES "^(aarch64|arm64)$")
  set(_lib_pkg "@duckdb/node-bindings-linux-arm64@1.4.4-r.3")
  set(_lib_tgz "duckdb-node-bindings-linux-arm64-1.4.4-r.3.tgz")
  set(_lib_sha256 "7a3b62c524849af848b2d4e278bad56324e20f5e8b1d3fe3acd324ead28e1e0c")
else()
  message(FATAL_ERROR "DuckDB: no pinned package for ${CMAKE_SYSTEM_PROCESSOR}; install DuckDB 1.4 "
                      "(duckdb.h and libduckdb.so where CMake finds them, e.g. -DCMAKE_PREFIX_PATH=...)")
endif()
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
if(NOT EXISTS "${_dir}/lib/libduckdb.so" OR NOT EXISTS "${_dir}/include/duckdb.h"
   OR NOT EXISTS "${_dir}/LICENSE")
  _collscope_npm_fetch("${_lib_pkg}" "${_lib_tgz}" "${_lib_sha256}")
  _collscope_npm_fetch("${_hdr_pkg}" "${_hdr_tgz}" "${_hdr_sha256}")
  file(MAKE_DIRECTORY "${_dir}/lib" "${_dir}/include")
  execute_process(COMMAND tar -xzf "${_lib_tgz}" -C lib --strip-components=1 package/libduckdb.so
                          package/LICENSE
                  WORKING_DIRECTORY "${_dir}" RESULT_VARIABLE _rc1)
  execute_process(COMMAND tar -xzf "${_hdr_tgz}" -C include --strip-components=5
                          package/src/duckdb/src/include/duckdb.h
                  WORKING_DIRECTORY "${_dir}" RESULT_VARIABLE _rc2)
  if(NOT _rc1 EQUAL 0 OR NOT _rc2 EQUAL 0)
    message(FATAL_ERROR "could not unpack the DuckDB packages in ${_dir}")
  endif()
  file(RENAME "${_dir}/lib/LICENSE" "${_dir}/LICENSE")  # DuckDB's MIT licence, installed with it
endif()
message(STATUS "DuckDB: fetched 1.4.4 (${_lib_pkg}) in ${_dir}")
add_library(duckdb::duckdb SHARED IMPORTED GLOBAL)
set_target_properties(duckdb::duckdb PROPERTIES IMPORTED_LOCATION "${_dir}/lib/libduckdb.so"
                      INTERFACE_INCLUDE_DIRECTORIES "${_dir}/include")
set(DUCKDB_FETCHED_LIBRARY_DIR "${_dir}/lib" CACHE INTERNAL "")
set(COLLSCOPE_DUCKDB_BUNDLED TRUE)
set(COLLSCOPE_DUCKDB_LICENSE "${_dir}/LICENSE")
