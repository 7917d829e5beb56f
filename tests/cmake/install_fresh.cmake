# cmake -DBUILD_DIR=<dir> -DPREFIX=<dir> [-DCONFIG=<cfg>] -P install_fresh.cmake
# Installs BUILD_DIR into an emptied PREFIX, so files a previous run installed cannot hide a
# missing one.
foreach(_var IN ITEMS BUILD_DIR PREFIX)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "install_fresh.cmake: -D${_var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${PREFIX}")
set(_config_args)
if(CONFIG)
  set(_config_args --config "${CONFIG}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${_config_args}
                RESULT_VARIABLE _result)
if(NOT _result EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed (${_result})")
endif()
