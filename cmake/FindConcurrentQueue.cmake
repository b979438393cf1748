# FindConcurrentQueue: moodycamel::ConcurrentQueue (Debian: libconcurrentqueue-dev, header only).
# Defines concurrentqueue::concurrentqueue; include as <concurrentqueue/concurrentqueue.h>.
find_path(CONCURRENTQUEUE_INCLUDE_DIR concurrentqueue/concurrentqueue.h)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ConcurrentQueue REQUIRED_VARS CONCURRENTQUEUE_INCLUDE_DIR)
if(ConcurrentQueue_FOUND AND NOT TARGET concurrentqueue::concurrentqueue)
  add_library(concurrentqueue::concurrentqueue INTERFACE IMPORTED)
  set_target_properties(concurrentqueue::concurrentqueue PROPERTIES
                        INTERFACE_INCLUDE_DIRECTORIES "${CONCURRENTQUEUE_INCLUDE_DIR}")
endif()
mark_as_advanced(CONCURRENTQUEUE_INCLUDE_DIR)
