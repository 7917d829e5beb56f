# cmake -DSOURCE=<file.cpp> -DCOMPILER=<c++> -DINCLUDES=<dir|dir...> [-DDEFINES=<d|d...>]
#       [-DPRELUDE=<header>] -P compile_fail.cmake
#
# Passes when compiling SOURCE fails AND the compiler's diagnostics match the regex on SOURCE's first
# line, `// expect: <regex>` (CMake regex syntax), AND every word on the lines after it,
# `// names: <word>...` (the step, tensor, model... at fault; one line or more), appears within
# the first 10 lines of the diagnostics, where a person reads them. A word may also appear spelled as characters,
# 'I', 'N', '0': clang 14 prints a name that way (and no other way it prints a computed name
# reads better; see docs/concepts.md, "Compile-time checks").
#
# It runs COMPILER on SOURCE alone (-fsyntax-only): the build's own compiler, and the second one
# whose diagnostics are checked too. A compile that succeeds fails the test whatever it prints.
cmake_minimum_required(VERSION 3.25)

foreach(_var IN ITEMS SOURCE COMPILER INCLUDES)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "compile_fail.cmake: -D${_var}=... is required")
  endif()
endforeach()

file(STRINGS "${SOURCE}" _header_lines LIMIT_COUNT 8)
list(GET _header_lines 0 _first_line)
if(NOT _first_line MATCHES "^// expect: (.+)$")
  message(FATAL_ERROR "${SOURCE}: the first line must be `// expect: <regex>`")
endif()
set(_expect "${CMAKE_MATCH_1}")
# The `// names:` lines right after it (a long list may take several).
set(_names)
list(SUBLIST _header_lines 1 -1 _header_lines)
foreach(_line IN LISTS _header_lines)
  if(NOT _line MATCHES "^// names: (.+)$")
    break()
  endif()
  separate_arguments(_line_names UNIX_COMMAND "${CMAKE_MATCH_1}")
  list(APPEND _names ${_line_names})
endforeach()
if(NOT _names)
  message(FATAL_ERROR "${SOURCE}: the second line must be `// names: <word>...`, the names the "
                      "diagnostic must show in its first 10 lines")
endif()

string(REPLACE "|" ";" _includes "${INCLUDES}")
string(REPLACE "|" ";" _defines "${DEFINES}")
list(TRANSFORM _includes PREPEND "-I")
list(FILTER _defines EXCLUDE REGEX "^$")
list(TRANSFORM _defines PREPEND "-D")
set(TARGET "${SOURCE} under ${COMPILER}")
# PRELUDE: a header of headers the source includes, included first (GCC uses its precompiled
# <header>.gch when there is a valid one).
set(_prelude)
if(PRELUDE)
  set(_prelude -include "${PRELUDE}")
endif()
execute_process(COMMAND "${COMPILER}" -std=c++20 -fsyntax-only ${_includes} ${_defines} ${_prelude}
                        "${SOURCE}"
                RESULT_VARIABLE _result OUTPUT_VARIABLE _output ERROR_VARIABLE _output)

if(_result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must fail with a diagnostic matching: ${_expect}\n"
                      "(${SOURCE})")
endif()

# The compiler's output, in which the test's own file name is replaced by <source> (so that a
# regex cannot match the file name).
set(_diagnostics "\n${_output}")
get_filename_component(_source_name "${SOURCE}" NAME)
string(REPLACE "${SOURCE}" "<source>" _diagnostics "${_diagnostics}")
string(REPLACE "${_source_name}" "<source>" _diagnostics "${_diagnostics}")

if(NOT _diagnostics MATCHES "${_expect}")
  message(FATAL_ERROR "${TARGET} failed to compile as expected, but no diagnostic matches: "
                      "${_expect}\n--- build output ---\n${_output}")
endif()

# The first 10 lines of the diagnostics (the leading newline added above is not one of them).
# Cut by position, not as a CMake list: diagnostics hold ';' and '['.
string(REGEX REPLACE "^\n+" "" _rest "${_diagnostics}")
set(_head "")
foreach(_line RANGE 1 10)
  string(FIND "${_rest}" "\n" _end)
  if(_end EQUAL -1)
    string(APPEND _head "${_rest}")
    break()
  endif()
  math(EXPR _next "${_end} + 1")
  string(SUBSTRING "${_rest}" 0 ${_next} _text)
  string(APPEND _head "${_text}")
  string(SUBSTRING "${_rest}" ${_next} -1 _rest)
endforeach()
foreach(_name IN LISTS _names)
  string(FIND "${_head}" "${_name}" _at)
  if(_at EQUAL -1)
    # 'I', 'N', '0': the name as a pack of characters.
    string(LENGTH "${_name}" _length)
    math(EXPR _last "${_length} - 1")
    set(_chars)
    foreach(_i RANGE 0 ${_last})
      string(SUBSTRING "${_name}" ${_i} 1 _char)
      list(APPEND _chars "'${_char}'")
    endforeach()
    string(JOIN ", " _spelled ${_chars})
    string(FIND "${_head}" "${_spelled}" _at)
  endif()
  if(_at EQUAL -1)
    message(FATAL_ERROR "${TARGET} failed to compile as expected, but its first 10 lines of "
                        "diagnostics do not name `${_name}`\n--- first 10 lines ---\n${_head}")
  endif()
endforeach()
message(STATUS "${TARGET} failed to compile as expected, with a diagnostic matching: ${_expect}, "
               "naming ${_names} in its first 10 lines")
