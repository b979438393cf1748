# atomr_add_test(<name> SOURCES <files...> [LIBS <targets...>] [RANKS <n...>] [LABELS <labels...>]
#                [TIMEOUT <seconds>] [ARGS <args...>])
#
# Builds test executable <name>. Without RANKS it is a one-process test on gtest_main. With RANKS it
# links the MPI-aware main (tests/support/mpi_gtest_main.cpp) and is registered once per rank count
# as <name>.np<n>, launched through FindMPI's MPIEXEC_* variables. Oversubscription is allowed (CI
# has 2 cores) and Open MPI's run-as-root override is added only when configuring as root.
# Tests labelled `gpu` are reported as skipped by CTest when they skip for want of a GPU.

set(ATOMR_MPIEXEC_FLAGS "" CACHE STRING "Extra flags for mpiexec in tests (after -n N)")
set(_atomr_mpiexec_extra ${ATOMR_MPIEXEC_FLAGS})
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpiexec_version ERROR_QUIET)
if(_mpiexec_version MATCHES "Open MPI|OpenRTE")
  list(APPEND _atomr_mpiexec_extra --oversubscribe --bind-to none)
  execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_uid STREQUAL "0")
    list(APPEND _atomr_mpiexec_extra --allow-run-as-root)
  endif()
endif()
# The full launch prefix, minus the rank count; also used by script-driven tests.
set(ATOMR_MPIEXEC_PREFIX ${MPIEXEC_EXECUTABLE} ${_atomr_mpiexec_extra} ${MPIEXEC_PREFLAGS})

function(atomr_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;RANKS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} atomr_warnings atomr_test_support atomr_allocator)
  if(T_RANKS)
    target_link_libraries(${name} PRIVATE atomr_mpi_gtest_main)
    foreach(n IN LISTS T_RANKS)
      set(test_name ${name}.np${n})
      add_test(NAME ${test_name}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${_atomr_mpiexec_extra} ${MPIEXEC_PREFLAGS}
                       $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
      list(APPEND registered ${test_name})
    endforeach()
  else()
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
    add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
    set(registered ${name})
  endif()
  set(env GTEST_COLOR=no)
  if(ATOMR_SANITIZE MATCHES "address")
    # Full unwinding at malloc, so suppressions can match frames below code without frame pointers.
    list(APPEND env "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/support/lsan.supp"
         "ASAN_OPTIONS=fast_unwind_on_malloc=0")
  endif()
  if(ATOMR_SANITIZE MATCHES "thread")
    list(APPEND env "TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1 suppressions=${PROJECT_SOURCE_DIR}/tests/support/tsan.supp")
  endif()
  set_tests_properties(${registered} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ENVIRONMENT "${env}")
  if("gpu" IN_LIST T_LABELS)
    set_tests_properties(${registered} PROPERTIES SKIP_REGULAR_EXPRESSION "no GPU: need [0-9]+ visible CUDA device")
  endif()
endfunction()

# atomr_add_run_test(<name> CMD <args...> [EXPECT_RC <rc|nonzero>] [MATCH <re...>] [NOMATCH <re...>]
#                    [COUNT <re=n...>] [ENV <VAR=value...>] [LABELS <labels...>] [TIMEOUT <s>])
# Registers a test that runs a whole program and checks its exit code and output (support/expect_run.cmake).
function(atomr_add_run_test name)
  cmake_parse_arguments(T "" "EXPECT_RC;TIMEOUT" "CMD;MATCH;NOMATCH;COUNT;ENV;LABELS" ${ARGN})
  if(NOT DEFINED T_EXPECT_RC)
    set(T_EXPECT_RC 0)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  # Lists travel through -D as @@-separated strings; expect_run turns them back into lists.
  foreach(v CMD MATCH NOMATCH COUNT ENV)
    string(REPLACE ";" "@@" ${v} "${T_${v}}")
  endforeach()
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=${CMD}" "-DEXPECT_RC=${T_EXPECT_RC}" "-DMATCH=${MATCH}"
                   "-DNOMATCH=${NOMATCH}" "-DCOUNT=${COUNT}" "-DENV=${ENV}" -P
                   ${PROJECT_SOURCE_DIR}/tests/support/expect_run.cmake)
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ENVIRONMENT "GTEST_COLOR=no")
endfunction()
