# The Debian package (cpack -G DEB in the build folder; docs/install.md): everything cmake --install
# installs, under /usr. Runtime dependencies come from dpkg-shlibdeps (every ELF file's needed
# libraries, mapped to the Debian packages that provide them); the bundled DuckDB is collscope's
# own private library (/usr/lib/collscope), not a dependency.
set(CPACK_PACKAGE_NAME collscope)
set(CPACK_PACKAGE_VENDOR "collscope")
# Packagers set their own: -DCOLLSCOPE_PACKAGE_MAINTAINER="Name <address>".
set(COLLSCOPE_PACKAGE_MAINTAINER "collscope developers" CACHE STRING "The Debian package's Maintainer field")
set(CPACK_PACKAGE_CONTACT "${COLLSCOPE_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Observe and diagnose NCCL collective communication in large training jobs")
set(CPACK_PACKAGE_DESCRIPTION
"collscope finds which rank, host, link, communicator or kernel is at fault in collective
communication, and why. It ingests NCCL Inspector logs, PyTorch-profiler traces, step/phase
series, CUPTI kernel summaries and Flight Recorder dumps into a DuckDB store; diagnoses them;
and runs as a live agent beside a job. This package holds the collscope command, the NCCL
profiler plugin, the step/phase annotation library (C and Python) and the CUPTI library where
built, with man pages, shell completions, the Grafana dashboard and the systemd unit.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_RESOURCE_FILE_README ${CMAKE_SOURCE_DIR}/README.md)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
find_program(COLLSCOPE_DPKG_DEB dpkg-deb)
if(COLLSCOPE_DPKG_DEB)
  set(CPACK_GENERATOR DEB)
else()
  set(CPACK_GENERATOR TGZ)
endif()

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(COLLSCOPE_DUCKDB_BUNDLED)
  # Where dpkg-shlibdeps finds the bundled libduckdb.so (a path in the package's staging tree).
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "usr/${COLLSCOPE_INSTALL_PRIVATELIBDIR}")
endif()
# The Python package and its C library need python3 only to be used from Python; the agent's
# servers are optional.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3, prometheus, prometheus-alertmanager, grafana")
# License: stated in the control file's description and in /usr/share/doc/collscope/copyright.
string(APPEND CPACK_PACKAGE_DESCRIPTION "\n\nLicense: Apache-2.0 (/usr/share/doc/collscope/copyright).")
include(CPack)
