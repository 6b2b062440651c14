# The installed package: headers, two shared libraries, the tools, and
# kilnConfig.cmake, so that a host program can
#
#   find_package(kiln REQUIRED)
#   target_link_libraries(app PRIVATE kiln::kiln)     # compiler + runtime
#   target_link_libraries(app PRIVATE kiln::runtime)  # deploy only
#
# kiln::runtime needs no LLVM or MLIR. kiln::kiln holds the compiler (its
# static libraries) and loads the system's libMLIR/libLLVM, found through
# its RUNPATH. Link one of the two, not both.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(kiln_runtime SHARED $<TARGET_OBJECTS:KilnRuntimeObjects>)
target_link_libraries(kiln_runtime PRIVATE KilnRuntimeObjects)
target_include_directories(kiln_runtime PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/runtime/include>)

add_library(kiln SHARED $<TARGET_OBJECTS:KilnJit>
  $<TARGET_OBJECTS:KilnRuntimeObjects>)
target_link_libraries(kiln PRIVATE KilnRuntimeObjects KilnCompiler)
target_include_directories(kiln PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/runtime/include>
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/jit/include>)

foreach(lib kiln kiln_runtime)
  target_include_directories(${lib} INTERFACE
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_target_properties(${lib} PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    INSTALL_RPATH_USE_LINK_PATH TRUE)
endforeach()
set_target_properties(kiln_runtime PROPERTIES EXPORT_NAME runtime)

install(TARGETS kiln kiln_runtime EXPORT kilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS kilnc kiln-run
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_target_properties(kilnc kiln-run PROPERTIES
  INSTALL_RPATH_USE_LINK_PATH TRUE)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/runtime/include/kiln
  ${CMAKE_SOURCE_DIR}/jit/include/kiln
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT kilnTargets NAMESPACE kiln::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${CMAKE_BINARY_DIR}/kilnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/kilnConfig.cmake
  ${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
