# Install rules and the exported package: an outside project does
#   find_package(atomr REQUIRED)  and  target_link_libraries(app PRIVATE atomr::atomr)
set(ATOMR_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/atomr")

set_target_properties(atomr PROPERTIES EXPORT_NAME atomr)
get_property(cluster_parts GLOBAL PROPERTY ATOMR_CLUSTER_PARTS)
install(TARGETS atomr atomr_common atomr_serialization atomr_local atomr_cluster ${cluster_parts}
        EXPORT atomr-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS atomr_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(lib common serialization local cluster)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/src/${lib}/include/" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
# The cluster's public headers are atomr/cluster/*.hpp in each subsystem; a subsystem's internals
# (atomr/cluster/<subsystem>/*.hpp) stay in the source tree.
get_property(cluster_includes GLOBAL PROPERTY ATOMR_CLUSTER_INCLUDE_DIRS)
foreach(dir ${cluster_includes})
  file(GLOB headers "${dir}/atomr/cluster/*.hpp")
  install(FILES ${headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/atomr/cluster)
endforeach()
install(DIRECTORY "${PROJECT_BINARY_DIR}/generated/include/" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(PROGRAMS "${PROJECT_SOURCE_DIR}/launch/atomr-launch" "${PROJECT_SOURCE_DIR}/launch/atomr-report"
        DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT atomr-targets NAMESPACE atomr:: DESTINATION ${ATOMR_CMAKE_DIR})
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/atomrConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/atomrConfig.cmake" INSTALL_DESTINATION ${ATOMR_CMAKE_DIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/atomrConfigVersion.cmake" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/atomrConfig.cmake" "${PROJECT_BINARY_DIR}/atomrConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindHwloc.cmake" "${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindConcurrentQueue.cmake"
        DESTINATION ${ATOMR_CMAKE_DIR})
