# install() rules and the exported package: find_package(dtensor) -> dtensor::dtensor.
#
# Installed include layout (consumers include only <dtensor/...> paths):
#   <prefix>/include/dtensor/dtensor.h          the umbrella (forwards to dtensor/dtensor/dtensor.h)
#   <prefix>/include/dtensor/<layer>/<file>.h   every layer's public headers, e.g.
#                                               <dtensor/tensor/tensor.h>, <dtensor/nn/nn.h>
#   <prefix>/include/dtensor/dtensor/config.h   the generated build configuration
# The exported include directory is <prefix>/include only, so no top-level tensor/, ops/, nn/
# ... names reach a consumer's include path. The source tree keeps its short includes
# ("tensor/tensor.h"); the install step rewrites them in the installed copies to the
# "dtensor/<layer>/..." form (cmake/DtensorRewriteIncludes.cmake).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_dt_install_targets ${DTENSOR_LAYER_TARGETS} dtensor_all)
install(TARGETS ${_dt_install_targets} EXPORT dtensorTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(_dt_include_root ${CMAKE_INSTALL_INCLUDEDIR}/dtensor)
foreach(dir ${DTENSOR_LAYERS})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${_dt_include_root}/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/dtensor/config.h DESTINATION ${_dt_include_root}/dtensor)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/dtensor_umbrella.h DESTINATION ${_dt_include_root}
        RENAME dtensor.h)
# Rewrites '#include "<layer>/' to '#include "dtensor/<layer>/' in the installed headers.
install(CODE "set(DTENSOR_LAYERS \"${DTENSOR_LAYERS}\")
set(DTENSOR_INCLUDE_ROOT \"${_dt_include_root}\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/DtensorRewriteIncludes.cmake)

install(EXPORT dtensorTargets NAMESPACE dtensor:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
configure_package_config_file(cmake/dtensorConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dtensorConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dtensorConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dtensorConfig.cmake ${PROJECT_BINARY_DIR}/dtensorConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
