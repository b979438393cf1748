# ATOMR_SANITIZE=address,undefined (or thread, ...) instruments every C++ target of the build.
# UBSan findings abort (no recovery) so a test cannot pass over them. With ATOMR_FUZZ, the code is
# also instrumented for libFuzzer's coverage feedback.
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
