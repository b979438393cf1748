# The malloc of atomr's own programs (the `atomr` command, the examples, the tests and probes).
# A message, a device operation or a collective request is allocated on one thread and freed on
# another (caller, router, device thread, completion waiter). glibc's malloc then takes the other
# thread's arena lock on most frees, and on a 2x H100 host those locks were contended (futex waits
# in the completion waiter); tcmalloc's per-thread caches move such memory in batches. A 4 B-4 MiB
# token fetch cost +7.5-10.4 us over the raw copy with glibc, +3.6-5.4 us with tcmalloc.
# Programs that link atomr themselves choose their own allocator (docs/guide/tuning.md).
set(ATOMR_ALLOCATOR AUTO CACHE STRING
    "malloc of atomr's programs: AUTO (tcmalloc where found, system malloc with sanitizers or fuzzing), tcmalloc, system")
set_property(CACHE ATOMR_ALLOCATOR PROPERTY STRINGS AUTO tcmalloc system)

add_library(atomr_allocator INTERFACE)
set(ATOMR_ALLOCATOR_USED system)
if(NOT ATOMR_ALLOCATOR STREQUAL "system")
  if(ATOMR_SANITIZE OR ATOMR_FUZZ)
    # The sanitizers bring their own malloc.
    if(ATOMR_ALLOCATOR STREQUAL "tcmalloc")
      message(FATAL_ERROR "ATOMR_ALLOCATOR=tcmalloc cannot be combined with ATOMR_SANITIZE or ATOMR_FUZZ")
    endif()
  else()
    # Debian's libtcmalloc-minimal4 ships only the versioned name; the -dev package adds the plain one.
    find_library(ATOMR_TCMALLOC_LIBRARY NAMES tcmalloc_minimal libtcmalloc_minimal.so.4)
    if(ATOMR_TCMALLOC_LIBRARY)
      # Nothing in atomr calls tcmalloc by name: without --no-as-needed the linker would drop it.
      target_link_libraries(atomr_allocator INTERFACE "-Wl,--push-state,--no-as-needed" ${ATOMR_TCMALLOC_LIBRARY}
                                                      "-Wl,--pop-state")
      set(ATOMR_ALLOCATOR_USED tcmalloc)
    elseif(ATOMR_ALLOCATOR STREQUAL "tcmalloc")
      message(FATAL_ERROR "ATOMR_ALLOCATOR=tcmalloc but libtcmalloc_minimal was not found "
                          "(Debian/Ubuntu: apt-get install libtcmalloc-minimal4)")
    else()
      message(STATUS "libtcmalloc_minimal not found: atomr's programs use the system malloc")
    endif()
  endif()
endif()
