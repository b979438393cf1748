# Writes atomr/common/version.hpp from version.hpp.in with the current git revision. Run at every
# build (target atomr_version) so `atomr --version` names the commit the binary was built from;
# configure_file leaves the header untouched when nothing changed, so nothing recompiles.
#   cmake -DSOURCE_DIR=... -DINPUT=... -DOUTPUT=... -DPROJECT_VERSION=... -DATOMR_HAVE_CUDA_BOOL=...
#         -DATOMR_HAVE_NCCL_BOOL=... -P atomr_version.cmake
execute_process(COMMAND git describe --always --dirty --tags WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE ATOMR_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT ATOMR_GIT_REVISION)
  set(ATOMR_GIT_REVISION unknown)
endif()
configure_file(${INPUT} ${OUTPUT} @ONLY)
