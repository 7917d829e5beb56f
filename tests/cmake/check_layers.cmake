# Layer check: every `#include <servekit/...>` in include/servekit/<folder>/ (detail/ and impl/
# included) must name a folder that <folder> may include (docs/design.md, "Layers").
#
#   cmake -DROOT=<include dir> -P check_layers.cmake
#
# Fails, naming both files, on an include of a folder above (or beside) the including one, and on
# any folder missing from the table below: a new layer must be added here. The umbrella headers
# directly in include/servekit/ are exempt; an umbrella included from a folder counts as its layer.

cmake_minimum_required(VERSION 3.20)

if(NOT DEFINED ROOT)
  message(FATAL_ERROR "layer check: pass -DROOT=<include dir> (the folder holding servekit/)")
endif()
get_filename_component(ROOT "${ROOT}" ABSOLUTE)
if(NOT IS_DIRECTORY "${ROOT}/servekit")
  message(FATAL_ERROR "layer check: ${ROOT}/servekit is not a folder")
endif()

# Which folders each folder may include, besides itself. Lower layers first.
set(_layers core backend queue metrics state schedule cache runtime config ensemble repository http
            grpc cuda onnx libtorch)
set(_allow_core "")
set(_allow_backend core)
set(_allow_queue core)
set(_allow_metrics core)
set(_allow_state core)
set(_allow_schedule core backend queue state)
set(_allow_cache core metrics)
set(_allow_runtime core backend queue metrics state schedule cache)
set(_allow_config ${_allow_runtime} runtime)
set(_allow_ensemble ${_allow_runtime} runtime)
set(_allow_repository ${_allow_runtime} runtime config ensemble)
set(_allow_http ${_allow_repository} repository)
# The gRPC front end sits beside HTTP and reuses its transport-neutral pieces (readiness, the
# metadata's server name and extensions, the model-control options).
set(_allow_grpc ${_allow_http} http)
set(_allow_cuda core backend schedule state)
set(_allow_onnx ${_allow_runtime} runtime)
# A generative backend (libtorch/causal_lm.hpp) executes the iteration scheduler's step plans.
set(_allow_libtorch core backend schedule)

# The engine (servekit::servekit) needs only the standard library and header-only Boost; what the
# server tier uses (nlohmann-json, fmt, Boost.Beast and Asio, zlib) stays above it.
set(_engine_layers core backend queue metrics state schedule cache runtime ensemble cuda libtorch)
set(_server_only_includes "nlohmann/" "fmt/" "boost/beast" "boost/asio" "zlib.h")

# Shown paths start at the include dir's own name ("include/servekit/...").
get_filename_component(_shown_base "${ROOT}" DIRECTORY)

file(GLOB_RECURSE _files LIST_DIRECTORIES false "${ROOT}/servekit/*.hpp" "${ROOT}/servekit/*.ipp")
list(SORT _files)

set(_errors "")
set(_checked_files 0)
set(_checked_includes 0)
foreach(_file IN LISTS _files)
  file(RELATIVE_PATH _rel "${ROOT}/servekit" "${_file}")
  if(NOT _rel MATCHES "/")
    continue() # an umbrella header: exempt
  endif()
  file(RELATIVE_PATH _shown "${_shown_base}" "${_file}")
  string(REGEX REPLACE "/.*" "" _from "${_rel}")
  if(NOT _from IN_LIST _layers)
    string(APPEND _errors
           "layer check: ${_shown} is in folder '${_from}', which is not in the layer table of "
           "tests/cmake/check_layers.cmake (add the new layer there and to docs/design.md)\n")
    continue()
  endif()
  math(EXPR _checked_files "${_checked_files} + 1")
  if(_from IN_LIST _engine_layers)
    file(STRINGS "${_file}" _third_party REGEX "^[ \t]*#[ \t]*include[ \t]*<")
    foreach(_line IN LISTS _third_party)
      foreach(_prefix IN LISTS _server_only_includes)
        string(FIND "${_line}" "<${_prefix}" _at)
        if(_at GREATER -1)
          string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*" "" _what "${_line}")
          string(APPEND _errors
                 "layer check: ${_shown} (${_from}) includes ${_what}, which only the server tier "
                 "(config, repository, http: servekit::server) may use\n")
        endif()
      endforeach()
    endforeach()
  endif()
  file(STRINGS "${_file}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]servekit/")
  foreach(_line IN LISTS _lines)
    if(NOT _line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"](servekit/[^>\"]+)[>\"]")
      continue()
    endif()
    set(_target "${CMAKE_MATCH_1}")
    math(EXPR _checked_includes "${_checked_includes} + 1")
    if(_target MATCHES "^servekit/([^/]+)/")
      set(_to "${CMAKE_MATCH_1}")
    elseif(_target MATCHES "^servekit/([^/]+)\\.(hpp|ipp)$")
      set(_to "${CMAKE_MATCH_1}") # an umbrella: the layer it gathers
    else()
      set(_to "${_target}")
    endif()
    if(_to STREQUAL _from)
      continue()
    endif()
    if(NOT _to IN_LIST _layers)
      string(APPEND _errors
             "layer check: ${_shown} (${_from}) includes ${_target}, whose folder '${_to}' is not "
             "in the layer table of tests/cmake/check_layers.cmake (add the new layer there and "
             "to docs/design.md)\n")
    elseif(NOT _to IN_LIST _allow_${_from})
      if(_from IN_LIST _allow_${_to})
        set(_why "which is above it")
      else()
        set(_why "which it may not include")
      endif()
      string(REPLACE ";" ", " _may "${_allow_${_from}}")
      if(_may STREQUAL "")
        set(_may "nothing else")
      endif()
      string(APPEND _errors
             "layer check: ${_shown} (${_from}) includes ${_target} (${_to}), ${_why} "
             "(${_from} may include: ${_may})\n")
    endif()
  endforeach()
endforeach()

if(NOT _errors STREQUAL "")
  # message(NOTICE) does not wrap lines, so each finding stays one line to grep.
  message(NOTICE "${_errors}")
  string(REGEX MATCHALL "\n" _newlines "${_errors}")
  list(LENGTH _newlines _count)
  message(FATAL_ERROR "layer check: ${_count} finding(s), see above")
endif()
message(STATUS "layer check: ${_checked_includes} servekit includes in ${_checked_files} headers "
               "under ${ROOT}/servekit, all point down")
