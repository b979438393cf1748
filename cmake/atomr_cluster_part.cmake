# atomr_cluster_part(<name> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
# A static library atomr_cluster_<name> of the cluster layer: sources in the calling folder, its
# headers under ./include (atomr/cluster/*.hpp are installed; atomr/cluster/<subsystem>/ are the
# subsystem's internals, visible to the targets that link it, never installed).
function(atomr_cluster_part name)
  cmake_parse_arguments(PART "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target atomr_cluster_${name})
  add_library(${target} STATIC ${PART_SOURCES})
  set_target_properties(${target} PROPERTIES EXPORT_NAME cluster_${name})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                                $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  endif()
  target_link_libraries(${target} PUBLIC ${PART_DEPS} PRIVATE $<BUILD_INTERFACE:atomr_warnings> ${PART_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY ATOMR_CLUSTER_PARTS ${target})
  set_property(GLOBAL APPEND PROPERTY ATOMR_CLUSTER_INCLUDE_DIRS ${CMAKE_CURRENT_SOURCE_DIR}/include)
endfunction()
