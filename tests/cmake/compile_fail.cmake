# cmake -DSOURCE=<file.cpp> -DBUILD_DIR=<dir> -DTARGET=<target> [-DCONFIG=<cfg>] -P compile_fail.cmake
#
# Passes when building TARGET fails AND the compiler's diagnostics match the regex on SOURCE's first
# line, `// expect: <regex>` (CMake regex syntax). A build that succeeds fails the test whatever it
# prints; ninja's progress lines and the echoed compile command are not searched, so a regex cannot
# match a file name there.
foreach(_var IN ITEMS SOURCE BUILD_DIR TARGET)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "compile_fail.cmake: -D${_var}=... is required")
  endif()
endforeach()

file(STRINGS "${SOURCE}" _first_line LIMIT_COUNT 1)
if(NOT _first_line MATCHES "^// expect: (.+)$")
  message(FATAL_ERROR "${SOURCE}: the first line must be `// expect: <regex>`")
endif()
set(_expect "${CMAKE_MATCH_1}")

set(_config_args)
if(CONFIG)
  set(_config_args --config "${CONFIG}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" ${_config_args} --target "${TARGET}"
                RESULT_VARIABLE _result OUTPUT_VARIABLE _output ERROR_VARIABLE _output)

if(_result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must fail with a diagnostic matching: ${_expect}\n"
                      "(${SOURCE})")
endif()

# Drop ninja's "[n/m] Building ..." lines, its "FAILED: <object>" line with the command line after
# it, and its closing "ninja: ..." line; what is left is the compiler's own output, in which the
# test's own file name is replaced by <source>.
set(_diagnostics "\n${_output}")
string(REGEX REPLACE "\n\\[[0-9]+/[0-9]+\\][^\n]*" "" _diagnostics "${_diagnostics}")
string(REGEX REPLACE "\nFAILED: [^\n]*\n[^\n]*" "" _diagnostics "${_diagnostics}")
string(REGEX REPLACE "\nninja: [^\n]*" "" _diagnostics "${_diagnostics}")
get_filename_component(_source_name "${SOURCE}" NAME)
string(REPLACE "${SOURCE}" "<source>" _diagnostics "${_diagnostics}")
string(REPLACE "${_source_name}" "<source>" _diagnostics "${_diagnostics}")

if(NOT _diagnostics MATCHES "${_expect}")
  message(FATAL_ERROR "${TARGET} failed to compile as expected, but no diagnostic matches: "
                      "${_expect}\n--- build output ---\n${_output}")
endif()
message(STATUS "${TARGET} failed to compile as expected, with a diagnostic matching: ${_expect}")
