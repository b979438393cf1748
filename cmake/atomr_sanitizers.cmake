# ATOMR_SANITIZE=address,undefined (or thread, ...) instruments every C++ target of the build.
# UBSan findings abort (no recovery) so a test cannot pass over them. With ATOMR_FUZZ, the libraries
# are also instrumented for libFuzzer's coverage feedback; the tests and the CLI opt out
# (atomr_no_fuzz_coverage), being no fuzz target: clang 14 also fails to emit their coroutines with
# that instrumentation ("Cannot represent a difference across sections").
if(ATOMR_SANITIZE)
  if(ATOMR_HAVE_CUDA)
    message(FATAL_ERROR "ATOMR_SANITIZE needs a host-only build (-DATOMR_CUDA=OFF): nvcc cannot instrument")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${ATOMR_SANITIZE}> -fno-omit-frame-pointer
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=${ATOMR_SANITIZE})
endif()
if(ATOMR_FUZZ)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()

# In the calling directory: no libFuzzer coverage instrumentation (a fuzz target's own
# -fsanitize=fuzzer, added later, still turns it on for that target).
macro(atomr_no_fuzz_coverage)
  if(ATOMR_FUZZ)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize=fuzzer-no-link>)
  endif()
endmacro()
