# cmake -DBUILD_DIR=<dir> -DTARGET=<target> -DWHERE=<page:line> [-DCONFIG=<cfg>] [-DRUN=<exe>]
#       -P doc_snippet_test.cmake
#
# One code block of a doc page (tests/docs/CMakeLists.txt): builds its target, which configure
# generated from the page (a page edited since then makes the build re-run cmake first, so the
# block built is the one on the page now), and with RUN runs the program, which must exit 0.
foreach(_var IN ITEMS BUILD_DIR TARGET WHERE)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "doc_snippet_test.cmake: -D${_var}=... is required")
  endif()
endforeach()

set(_config_args)
if(CONFIG)
  set(_config_args --config "${CONFIG}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" ${_config_args} --target "${TARGET}"
                RESULT_VARIABLE _result OUTPUT_VARIABLE _output ERROR_VARIABLE _output)
if(NOT _result EQUAL 0)
  message(FATAL_ERROR "the code block at ${WHERE} does not compile (target ${TARGET}); the "
                      "compiler names the page's lines:\n${_output}")
endif()

if(RUN)
  execute_process(COMMAND "${RUN}" RESULT_VARIABLE _result OUTPUT_VARIABLE _output
                  ERROR_VARIABLE _output TIMEOUT 60)
  if(NOT _result EQUAL 0)
    message(FATAL_ERROR "the code block at ${WHERE} compiles, but running it failed "
                        "(${_result}):\n${_output}")
  endif()
  message(STATUS "the code block at ${WHERE} compiles and runs:\n${_output}")
else()
  message(STATUS "the code block at ${WHERE} compiles")
endif()
