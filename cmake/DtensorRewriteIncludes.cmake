# Install-time step (install(SCRIPT), see DtensorInstall.cmake): in the installed headers,
# '#include "<layer>/x.h"' becomes '#include "dtensor/<layer>/x.h"', so the package exports
# only <prefix>/include and consumers see only <dtensor/...> names. DTENSOR_LAYERS and
# DTENSOR_INCLUDE_ROOT are set by the install(CODE) just before this script.
set(_root "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${DTENSOR_INCLUDE_ROOT}")
if(IS_ABSOLUTE "${DTENSOR_INCLUDE_ROOT}")
  set(_root "$ENV{DESTDIR}${DTENSOR_INCLUDE_ROOT}")
endif()
list(JOIN DTENSOR_LAYERS "|" _layers)
foreach(layer ${DTENSOR_LAYERS})
  file(GLOB_RECURSE _headers "${_root}/${layer}/*.h" "${_root}/${layer}/*.cuh")
  foreach(h ${_headers})
    file(READ "${h}" _text)
    string(REGEX REPLACE "#include \"(${_layers})/" "#include \"dtensor/\\1/" _new "${_text}")
    if(NOT _new STREQUAL _text)
      file(WRITE "${h}" "${_new}")
    endif()
  endforeach()
endforeach()
