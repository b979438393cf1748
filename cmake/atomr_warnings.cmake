# Compile options for project code only (dependencies come in as SYSTEM includes through their
# imported targets): warnings on, and __FILE__ relative to the source tree so error messages read
# "src/local/x.cpp:40" rather than a build machine's absolute path.
add_library(atomr_warnings INTERFACE)
target_compile_options(atomr_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<AND:$<BOOL:${ATOMR_WERROR}>,$<COMPILE_LANGUAGE:CXX>>:-Werror>
  $<$<COMPILE_LANGUAGE:CXX>:-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>)
