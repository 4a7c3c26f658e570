# One version: project(collscope VERSION x.y.z) in the top CMakeLists.txt. In a git checkout the
# description (`git describe --always --dirty`) is appended for `collscope --version`. The header is
# rewritten at every build by WriteVersion.cmake, only when its text changes (so only cli/main.cc
# recompiles, and only after a commit or a first edit); without git, or outside a checkout, the
# version stands alone.
set(COLLSCOPE_VERSION_HEADER "${CMAKE_BINARY_DIR}/generated/collscope/version.h")
set(_collscope_write_version
    ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DVERSION=${PROJECT_VERSION}
    -DOUTPUT=${COLLSCOPE_VERSION_HEADER} -P ${CMAKE_CURRENT_LIST_DIR}/WriteVersion.cmake)
execute_process(COMMAND ${_collscope_write_version})
add_custom_target(collscope_version COMMAND ${_collscope_write_version}
                  BYPRODUCTS ${COLLSCOPE_VERSION_HEADER} VERBATIM)
