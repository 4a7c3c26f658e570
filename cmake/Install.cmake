# cmake --install (docs/install.md). GNUInstallDirs layout; every path below is relative to the
# prefix, which is only known at install time (cmake --install --prefix, CPack's /usr): files that
# name installed paths (pkg-config files, the systemd unit, the deploy library) are written then,
# by collscope_install_configured.
include(CMakePackageConfigHelpers)

set(COLLSCOPE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/collscope" CACHE STRING
    "CMake package (collscopeConfig.cmake), relative to the prefix")
set(COLLSCOPE_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig" CACHE STRING
    "pkg-config files, relative to the prefix")
set(COLLSCOPE_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
    "The Python annotation package's parent folder, relative to the prefix (Debian's for /usr)")
set(COLLSCOPE_INSTALL_BASHCOMPDIR "${CMAKE_INSTALL_DATADIR}/bash-completion/completions" CACHE STRING
    "bash completions, relative to the prefix")
set(COLLSCOPE_INSTALL_ZSHCOMPDIR "${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions" CACHE STRING
    "zsh completions, relative to the prefix (Debian's; site-functions elsewhere)")
set(COLLSCOPE_INSTALL_SYSTEMDDIR "lib/systemd/system" CACHE STRING
    "systemd units, relative to the prefix")
set(COLLSCOPE_INSTALL_SYSUSERSDIR "lib/sysusers.d" CACHE STRING
    "systemd-sysusers files, relative to the prefix")
set(COLLSCOPE_INSTALL_DATADIR "${CMAKE_INSTALL_DATADIR}/collscope")
set(COLLSCOPE_INSTALL_PRIVATELIBDIR "${CMAKE_INSTALL_LIBDIR}/collscope")
# Not by default in sanitizer builds: they are for tests, never installed.
set(_cli_docs_default ${PROJECT_IS_TOP_LEVEL})
if(COLLSCOPE_SANITIZE OR COLLSCOPE_TSAN OR COLLSCOPE_FUZZ)
  set(_cli_docs_default OFF)
endif()
option(COLLSCOPE_CLI_DOCS "Generate man pages and shell completions from the built command's --help"
       ${_cli_docs_default})
if(CMAKE_CROSSCOMPILING)
  set(COLLSCOPE_CLI_DOCS OFF)  # the command cannot run here
endif()

# collscope_install_configured(SOURCE DESTINATION [CONFIGURE] [RENAME name] [PERMISSIONS ...]
#                              [REPLACE old new ...])
# Installs SOURCE with, at install time, each `old` replaced by `new`, where `new` may name
# @PREFIX@ @BINDIR@ @LIBDIR@ @INCLUDEDIR@ @DATADIR@ @DOCDIR@ @PYTHONDIR@ (absolute installed paths)
# and @VERSION@. CONFIGURE: the whole file is a template of those @VARS@ (configure_file @ONLY).
# An `old` that is absent stops the install: the source changed under the rule.
function(collscope_install_configured src dest)
  cmake_parse_arguments(A "CONFIGURE" "RENAME" "PERMISSIONS;REPLACE" ${ARGN})
  get_filename_component(name "${src}" NAME)
  if(A_RENAME)
    set(name "${A_RENAME}")
  endif()
  if(NOT A_PERMISSIONS)
    set(A_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endif()
  set(tmp "${CMAKE_BINARY_DIR}/install-configured/${dest}/${name}")
  set(code "set(_src [==[${src}]==])\nset(_tmp [==[${tmp}]==])\n")
  foreach(pair PREFIX|. BINDIR|${CMAKE_INSTALL_BINDIR} LIBDIR|${CMAKE_INSTALL_LIBDIR}
               INCLUDEDIR|${CMAKE_INSTALL_INCLUDEDIR} DATADIR|${CMAKE_INSTALL_DATADIR}
               DOCDIR|${CMAKE_INSTALL_DOCDIR} PYTHONDIR|${COLLSCOPE_INSTALL_PYTHONDIR})
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 var)
    list(GET pair 1 rel)
    if(IS_ABSOLUTE "${rel}")
      string(APPEND code "set(${var} [==[${rel}]==])\n")
    elseif(rel STREQUAL ".")
      string(APPEND code "set(${var} \"\${CMAKE_INSTALL_PREFIX}\")\n")
    else()
      string(APPEND code "set(${var} \"\${CMAKE_INSTALL_PREFIX}/${rel}\")\n")
    endif()
  endforeach()
  string(APPEND code "set(VERSION [==[${PROJECT_VERSION}]==])\n"
                     "file(READ \"\${_src}\" _text)\n")
  set(reps ${A_REPLACE})
  list(LENGTH reps n)
  while(n GREATER 1)
    list(POP_FRONT reps old new)
    math(EXPR n "${n} - 2")
    string(APPEND code
      "string(FIND \"\${_text}\" [==[${old}]==] _at)\n"
      "if(_at EQUAL -1)\n"
      "  message(FATAL_ERROR \"${src}: [==[${old}]==] not found (update cmake/Install.cmake)\")\n"
      "endif()\n"
      "string(CONFIGURE [==[${new}]==] _new @ONLY)\n"
      "string(REPLACE [==[${old}]==] \"\${_new}\" _text \"\${_text}\")\n")
  endwhile()
  if(A_CONFIGURE)
    string(APPEND code "string(CONFIGURE \"\${_text}\" _text @ONLY)\n")
  endif()
  string(APPEND code
    "file(WRITE \"\${_tmp}\" \"\${_text}\")\n"
    "file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${dest}\" TYPE FILE FILES \"\${_tmp}\"\n"
    "     PERMISSIONS ${A_PERMISSIONS})\n")
  install(CODE "${code}")
endfunction()

# --- The command, and DuckDB beside it when it is the fetched one (found through RUNPATH).
install(TARGETS collscope RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(COLLSCOPE_DUCKDB_BUNDLED)
  install(FILES "${DUCKDB_FETCHED_LIBRARY_DIR}/libduckdb.so" DESTINATION ${COLLSCOPE_INSTALL_PRIVATELIBDIR})
  install(FILES "${COLLSCOPE_DUCKDB_LICENSE}" DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME LICENSE.duckdb)
  file(RELATIVE_PATH _rel "/${CMAKE_INSTALL_BINDIR}" "/${COLLSCOPE_INSTALL_PRIVATELIBDIR}")
  set_target_properties(collscope PROPERTIES INSTALL_RPATH "$ORIGIN/${_rel}")
endif()

# --- The C ABIs: the annotation library with its header, the NCCL profiler plugin, the CUPTI library.
# Installed as <includedir>/collscope/collscope_annotate.h; the build tree gets the same layout so
# that a consumer includes <collscope/collscope_annotate.h> either way.
configure_file(${CMAKE_SOURCE_DIR}/capture/annotate/collscope_annotate.h
               ${CMAKE_BINARY_DIR}/include/collscope/collscope_annotate.h COPYONLY)
target_include_directories(collscope-annotate INTERFACE
  $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(collscope-annotate PROPERTIES EXPORT_NAME annotate
  PUBLIC_HEADER ${CMAKE_SOURCE_DIR}/capture/annotate/collscope_annotate.h)
add_library(collscope::annotate ALIAS collscope-annotate)
set(_c_abis collscope-annotate)
set(COLLSCOPE_COMPONENTS annotate)
if(TARGET nccl-profiler-collscope)
  set_target_properties(nccl-profiler-collscope PROPERTIES EXPORT_NAME nccl_profiler)
  add_library(collscope::nccl_profiler ALIAS nccl-profiler-collscope)
  list(APPEND _c_abis nccl-profiler-collscope)
  list(APPEND COLLSCOPE_COMPONENTS nccl_profiler)
endif()
if(TARGET collscope-cupti)
  set_target_properties(collscope-cupti PROPERTIES EXPORT_NAME cupti)
  add_library(collscope::cupti ALIAS collscope-cupti)
  list(APPEND _c_abis collscope-cupti)
  list(APPEND COLLSCOPE_COMPONENTS cupti)
endif()
install(TARGETS ${_c_abis} EXPORT collscopeTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/collscope)

# --- For embedders: find_package(collscope [COMPONENTS annotate nccl_profiler cupti]).
install(EXPORT collscopeTargets NAMESPACE collscope:: DESTINATION ${COLLSCOPE_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/collscopeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake-package/collscopeConfig.cmake
  INSTALL_DESTINATION ${COLLSCOPE_INSTALL_CMAKEDIR} PATH_VARS CMAKE_INSTALL_BINDIR)
# 0.x: a new minor version may change the ABIs.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake-package/collscopeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake-package/collscopeConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake-package/collscopeConfigVersion.cmake
        DESTINATION ${COLLSCOPE_INSTALL_CMAKEDIR})
collscope_install_configured(${CMAKE_CURRENT_LIST_DIR}/pkgconfig/collscope-annotate.pc.in
  ${COLLSCOPE_INSTALL_PKGCONFIGDIR} CONFIGURE RENAME collscope-annotate.pc)
if(TARGET nccl-profiler-collscope)
  collscope_install_configured(${CMAKE_CURRENT_LIST_DIR}/pkgconfig/nccl-profiler-collscope.pc.in
    ${COLLSCOPE_INSTALL_PKGCONFIGDIR} CONFIGURE RENAME nccl-profiler-collscope.pc)
endif()
if(TARGET collscope-cupti)
  collscope_install_configured(${CMAKE_CURRENT_LIST_DIR}/pkgconfig/collscope-cupti.pc.in
    ${COLLSCOPE_INSTALL_PKGCONFIGDIR} CONFIGURE RENAME collscope-cupti.pc)
endif()

# --- The Python package, with a link to the installed annotation library beside it (the package
# looks there first), so one copy of the library is loaded whichever way a process reaches it.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/collscope DESTINATION ${COLLSCOPE_INSTALL_PYTHONDIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
set(_py "${COLLSCOPE_INSTALL_PYTHONDIR}")
set(_lib "${CMAKE_INSTALL_LIBDIR}")
if(NOT IS_ABSOLUTE "${_py}")
  set(_py "/PREFIX/${_py}")
endif()
if(NOT IS_ABSOLUTE "${_lib}")
  set(_lib "/PREFIX/${_lib}")
endif()
file(RELATIVE_PATH _rel "${_py}/collscope" "${_lib}/libcollscope-annotate.so")
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/install-links)
file(CREATE_LINK "${_rel}" ${CMAKE_BINARY_DIR}/install-links/libcollscope-annotate.so SYMBOLIC)
install(FILES ${CMAKE_BINARY_DIR}/install-links/libcollscope-annotate.so
        DESTINATION ${COLLSCOPE_INSTALL_PYTHONDIR}/collscope)

# --- Docs, man pages and completions (generated from the built command's --help: cmake/CliDocs.cmake).
file(GLOB _docs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${CMAKE_CURRENT_LIST_DIR}/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
if(EXISTS "${COLLSCOPE_ECHARTS_JS}" AND EXISTS "${CMAKE_BINARY_DIR}/_deps/echarts/LICENSE")
  # The report embeds Apache ECharts.
  install(FILES ${CMAKE_BINARY_DIR}/_deps/echarts/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR}
          RENAME LICENSE.echarts)
endif()
install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        PATTERN "__pycache__" EXCLUDE)
if(COLLSCOPE_CLI_DOCS)
  set(_cli_docs ${CMAKE_BINARY_DIR}/cli-docs)
  add_custom_command(OUTPUT ${_cli_docs}/stamp
    COMMAND ${CMAKE_COMMAND} -DCOLLSCOPE=$<TARGET_FILE:collscope> -DOUT=${_cli_docs}
            -DVERSION=${PROJECT_VERSION} -DDOCDIR=${CMAKE_INSTALL_FULL_DOCDIR}
            -P ${CMAKE_CURRENT_LIST_DIR}/CliDocs.cmake
    DEPENDS collscope ${CMAKE_CURRENT_LIST_DIR}/CliDocs.cmake
    COMMENT "Man pages and completions from collscope --help" VERBATIM)
  add_custom_target(collscope_cli_docs ALL DEPENDS ${_cli_docs}/stamp)
  install(DIRECTORY ${_cli_docs}/man1 DESTINATION ${CMAKE_INSTALL_MANDIR})
  install(FILES ${_cli_docs}/bash/collscope DESTINATION ${COLLSCOPE_INSTALL_BASHCOMPDIR})
  install(FILES ${_cli_docs}/zsh/_collscope DESTINATION ${COLLSCOPE_INSTALL_ZSHCOMPDIR})
endif()

# --- The Grafana dashboard and the deployment recipes (docs/deploy.md), with the installed paths
# in place of deploy/install.sh's /opt/collscope.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/agent/dashboards/ DESTINATION ${COLLSCOPE_INSTALL_DATADIR}/dashboards
        FILES_MATCHING PATTERN "*.json")
collscope_install_configured(${CMAKE_SOURCE_DIR}/deploy/systemd/collscope-agent.service
  ${COLLSCOPE_INSTALL_SYSTEMDDIR}
  REPLACE "ExecStart=/opt/collscope/bin/collscope " "ExecStart=@BINDIR@/collscope "
          "Documentation=file:///opt/collscope/share/collscope/deploy.md" "Documentation=man:collscope-agent(1) file://@DOCDIR@/deploy.md")
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/collscope.sysusers
        DESTINATION ${COLLSCOPE_INSTALL_SYSUSERSDIR} RENAME collscope.conf)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/collscope-agent.env.example
        DESTINATION ${COLLSCOPE_INSTALL_DATADIR}/systemd)
collscope_install_configured(${CMAKE_SOURCE_DIR}/deploy/lib/collscope-lib.sh ${COLLSCOPE_INSTALL_DATADIR}
  REPLACE [[${COLLSCOPE_PREFIX:-/opt/collscope}]] [[${COLLSCOPE_PREFIX:-@PREFIX@}]]
          [[${COLLSCOPE_LIBDIR:-$prefix/lib}]] [[${COLLSCOPE_LIBDIR:-@LIBDIR@}]]
          [[${COLLSCOPE_PYTHONDIR:-$prefix/python}]] [[${COLLSCOPE_PYTHONDIR:-@PYTHONDIR@}]])
install(PROGRAMS ${CMAKE_SOURCE_DIR}/deploy/torchrun/collscope-torchrun.sh
        DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME collscope-torchrun)
install(PROGRAMS ${CMAKE_SOURCE_DIR}/deploy/slurm/prolog.sh ${CMAKE_SOURCE_DIR}/deploy/slurm/epilog.sh
        DESTINATION ${COLLSCOPE_INSTALL_DATADIR}/slurm)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/slurm/collscope.sbatch
              ${CMAKE_SOURCE_DIR}/deploy/slurm/collscope-slurm.conf.example
        DESTINATION ${COLLSCOPE_INSTALL_DATADIR}/slurm)
file(GLOB _k8s CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/deploy/kubernetes/*.yaml)
install(FILES ${_k8s} DESTINATION ${COLLSCOPE_INSTALL_DATADIR}/kubernetes)

# The packaging test (tests/packaging_test.sh): a staged install, the installed command on the
# example job, find_package and pkg-config consumers, and the .deb built and listed. Release builds
# only (the sanitizer builds would only repeat it, slower).
if(BUILD_TESTING AND NOT COLLSCOPE_SANITIZE AND NOT COLLSCOPE_TSAN AND NOT COLLSCOPE_FUZZ AND COLLSCOPE_CLI_DOCS)
  add_test(NAME packaging_test
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/packaging_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
  set_tests_properties(packaging_test PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 COST 45)
endif()
