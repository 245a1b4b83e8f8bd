# install() rules and the exported package: find_package(dtensor) -> dtensor::dtensor.
#
# Installed include layout: the source tree's dtensor/ folder as it is, so in-tree and installed
# include names are the same ("dtensor/<layer>/x.h"; the umbrella is <dtensor/dtensor.h>):
#   <prefix>/include/dtensor/dtensor.h          the umbrella
#   <prefix>/include/dtensor/<layer>/<file>.h   every layer's headers, e.g.
#                                               <dtensor/tensor/tensor.h>, <dtensor/nn/nn.h>
#   <prefix>/include/dtensor/config.h           the generated build configuration
# Internal headers live in detail/ folders (dtensor/<layer>/detail/, dtensor/ops/common/detail/,
# dtensor/ops/<family>/detail/): they are not installed, and no public header includes one
# (tests/install/build_consumer.sh checks both on the installed tree).
# The exported include directory is <prefix>/include only.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_dt_install_targets ${DTENSOR_LAYER_TARGETS} dtensor_all)
install(TARGETS ${_dt_install_targets} EXPORT dtensorTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(_dt_include_root ${CMAKE_INSTALL_INCLUDEDIR}/dtensor)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/dtensor/ DESTINATION ${_dt_include_root}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh" PATTERN "detail" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/generated/dtensor/config.h DESTINATION ${_dt_include_root})

install(EXPORT dtensorTargets NAMESPACE dtensor:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
configure_package_config_file(cmake/dtensorConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dtensorConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dtensorConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dtensorConfig.cmake ${PROJECT_BINARY_DIR}/dtensorConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
