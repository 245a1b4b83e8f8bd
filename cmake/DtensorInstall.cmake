# install() rules and the exported package: find_package(dtensor) -> dtensor::dtensor.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_dt_install_targets ${DTENSOR_LAYER_TARGETS} dtensor_all)
install(TARGETS ${_dt_install_targets} EXPORT dtensorTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(dir ${DTENSOR_LAYERS})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dtensor/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/dtensor/config.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dtensor/dtensor)
install(EXPORT dtensorTargets NAMESPACE dtensor:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
configure_package_config_file(cmake/dtensorConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dtensorConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dtensorConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dtensorConfig.cmake ${PROJECT_BINARY_DIR}/dtensorConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
