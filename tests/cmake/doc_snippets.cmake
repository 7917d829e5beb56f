# The code blocks of a Markdown page, for the docs tests (tests/docs/CMakeLists.txt).
#
# Every ```cpp block of a checked page is compiled, and run where it says so. By default a block
# is a complete program: compiled, linked and run. A block that is something else says so in an
# HTML comment on the line just above its fence (invisible on GitHub):
#
#   <!-- snippet: name=<id> kind=program|namespace|function|class [run] [prelude=<p>]
#                 [uses=<id>,<id>...] -->
#   <!-- snippet: name=<id> skip: <why this block is not C++ that can compile> -->
#
#   program    a complete program (its own #includes and main); compiled, linked and run.
#   namespace  declarations at namespace scope; compiled and linked.
#   function   statements: the body of a function; compiled and linked, and run with `run`.
#   class      member declarations: the body of a struct; compiled.
#   skip       not compiled; the reason is required, and the test <page>.blocks counts it.
#
# All but `program` get `#include <servekit/servekit.hpp>` and, with prelude=<p>, the file
# tests/docs/prelude/<p>.hpp first: the names a fragment uses without showing them. Each block's
# uses= puts the code of earlier `namespace` and `function` blocks of the same page first (at
# namespace scope and at the top of the function body), so a block can go on from one the page
# showed before: the page is compiled as it reads. Each block's
# code is preceded by a #line directive, so the compiler's diagnostics name the page and its line.
# Blocks in other languages (sh, cmake, text, ...) are not C++ and are only counted; a fence with
# no language is an error (say `text`).
#
# Included: defines servekit_doc_scan(). Run as a script (cmake -DDOC=<page> -DNAME=<label>
# [-DEXPECT=<names>] -P doc_snippets.cmake): the test <page>.blocks, which scans the page as it is
# now, prints what it holds, and fails on a malformed marker or when the blocks differ from the
# ones this build tree was configured with (EXPECT: what configure found, name:kind pairs joined by commas).

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25) # before the function: it records the policies
endif()

# servekit_doc_scan(<page> <prefix>): sets, in the caller's scope,
#   <prefix>_BLOCKS        the indices 1..n of the ```cpp blocks
#   <prefix>_<i>_NAME, _KIND, _RUN (TRUE/FALSE), _PRELUDE, _REASON, _LINE (the first code line),
#   <prefix>_<i>_USES      the indices of the blocks named by uses=
#   <prefix>_<i>_CODE      the block's code
#   <prefix>_OTHER         one entry per non-C++ block, its language
#   <prefix>_ERRORS        messages, one per line; empty when the page is well-formed
function(servekit_doc_scan page prefix)
  file(READ "${page}" _text)
  get_filename_component(_page_name "${page}" NAME)
  set(_blocks)
  set(_other)
  set(_errors "")
  set(_names)
  set(_n 0)
  set(_line_no 0)
  set(_in_fence FALSE)
  set(_marker "")
  set(_marker_line 0)
  while(NOT _text STREQUAL "")
    string(FIND "${_text}" "\n" _eol)
    if(_eol EQUAL -1)
      set(_line "${_text}")
      set(_text "")
    else()
      string(SUBSTRING "${_text}" 0 ${_eol} _line)
      math(EXPR _next "${_eol} + 1")
      string(SUBSTRING "${_text}" ${_next} -1 _text)
    endif()
    math(EXPR _line_no "${_line_no} + 1")

    if(_in_fence)
      if("${_line}" MATCHES "^ *```[ \t]*$")
        set(_in_fence FALSE)
        if(_lang STREQUAL "cpp")
          set(${prefix}_${_n}_CODE "${_code}" PARENT_SCOPE)
        endif()
      else()
        string(APPEND _code "${_line}\n")
      endif()
      continue()
    endif()

    if("${_line}" MATCHES "^ *```([^ \t`]*)[ \t]*$")
      set(_lang "${CMAKE_MATCH_1}")
      set(_in_fence TRUE)
      set(_code "")
      if(_lang STREQUAL "")
        string(APPEND _errors "${_page_name}:${_line_no}: a code block without a language (say "
                              "cpp, sh, cmake or text)\n")
      endif()
      if(NOT _lang STREQUAL "cpp")
        if(NOT _marker STREQUAL "")
          string(APPEND _errors "${_page_name}:${_marker_line}: a snippet marker above a "
                                "`${_lang}` block: markers belong above ```cpp blocks\n")
        endif()
        list(APPEND _other "${_lang}")
        set(_marker "")
        continue()
      endif()

      math(EXPR _n "${_n} + 1")
      list(APPEND _blocks ${_n})
      math(EXPR _first "${_line_no} + 1")
      set(_name "cpp${_n}")
      set(_kind program)
      set(_run TRUE)
      set(_prelude "")
      set(_reason "")
      set(_uses "")
      if(NOT _marker STREQUAL "")
        set(_run FALSE)
        set(_options "${_marker}")
        if(_options MATCHES "^(.*)[ \t]skip:(.*)$")
          set(_options "${CMAKE_MATCH_1}")
          string(STRIP "${CMAKE_MATCH_2}" _reason)
          set(_kind skip)
          if(_reason STREQUAL "")
            string(APPEND _errors "${_page_name}:${_marker_line}: `skip:` needs a reason\n")
          endif()
        endif()
        separate_arguments(_options UNIX_COMMAND "${_options}")
        foreach(_option IN LISTS _options)
          if(_option MATCHES "^name=([A-Za-z0-9_-]+)$")
            set(_name "${CMAKE_MATCH_1}")
          elseif(_option MATCHES "^kind=(program|namespace|function|class)$" AND NOT _kind STREQUAL "skip")
            set(_kind "${CMAKE_MATCH_1}")
          elseif(_option STREQUAL "run")
            set(_run TRUE)
          elseif(_option MATCHES "^prelude=([A-Za-z0-9_-]+)$")
            set(_prelude "${CMAKE_MATCH_1}")
          elseif(_option MATCHES "^uses=([A-Za-z0-9_,-]+)$")
            string(REPLACE "," ";" _used_names "${CMAKE_MATCH_1}")
            foreach(_used IN LISTS _used_names)
              list(FIND _names "${_used}" _at)
              if(_at EQUAL -1)
                string(APPEND _errors "${_page_name}:${_marker_line}: uses=${_used}: no block "
                                      "above is named so\n")
                continue()
              endif()
              math(EXPR _at "${_at} + 1")
              if(NOT _kind_of_${_at} MATCHES "^(namespace|function)$")
                string(APPEND _errors "${_page_name}:${_marker_line}: uses=${_used}: only "
                                      "namespace and function blocks can be used\n")
              endif()
              list(APPEND _uses ${_at})
            endforeach()
          else()
            string(APPEND _errors "${_page_name}:${_marker_line}: unknown snippet option "
                                  "'${_option}'\n")
          endif()
        endforeach()
        if(_kind STREQUAL "program")
          set(_run TRUE)
        elseif(_kind STREQUAL "class" AND _run)
          string(APPEND _errors "${_page_name}:${_marker_line}: a `class` block cannot `run`\n")
        endif()
      endif()
      if(_name IN_LIST _names)
        string(APPEND _errors "${_page_name}:${_line_no}: a second block named '${_name}'\n")
      endif()
      list(APPEND _names "${_name}")
      set(_kind_of_${_n} "${_kind}")
      foreach(_field IN ITEMS NAME KIND RUN PRELUDE REASON USES)
        string(TOLOWER "_${_field}" _var)
        set(${prefix}_${_n}_${_field} "${${_var}}" PARENT_SCOPE)
      endforeach()
      set(${prefix}_${_n}_LINE ${_first} PARENT_SCOPE)
      set(_marker "")
      continue()
    endif()

    if("${_line}" MATCHES "^<!-- snippet:(.*)-->[ \t]*$")
      set(_marker " ${CMAKE_MATCH_1}")
      set(_marker_line ${_line_no})
    elseif(NOT _marker STREQUAL "")
      string(APPEND _errors "${_page_name}:${_marker_line}: a snippet marker must be the line just "
                            "above a ```cpp fence\n")
      set(_marker "")
    elseif("${_line}" MATCHES "<!-- *snippet")
      string(APPEND _errors "${_page_name}:${_line_no}: a malformed snippet marker (one line: "
                            "<!-- snippet: ... -->)\n")
    endif()
  endwhile()
  if(_in_fence)
    string(APPEND _errors "${_page_name}: the last code block is not closed\n")
  endif()
  set(${prefix}_BLOCKS "${_blocks}" PARENT_SCOPE)
  set(${prefix}_OTHER "${_other}" PARENT_SCOPE)
  set(${prefix}_ERRORS "${_errors}" PARENT_SCOPE)
endfunction()

# Script mode: the test <page>.blocks.
if(CMAKE_SCRIPT_MODE_FILE AND CMAKE_CURRENT_LIST_FILE STREQUAL CMAKE_SCRIPT_MODE_FILE)
  if(NOT DEFINED DOC OR NOT DEFINED NAME)
    message(FATAL_ERROR "doc_snippets.cmake: -DDOC=<page> -DNAME=<label> are required")
  endif()
  servekit_doc_scan("${DOC}" _doc)
  set(_found)
  set(_compiled 0)
  set(_run 0)
  set(_skipped 0)
  set(_report "")
  foreach(_i IN LISTS _doc_BLOCKS)
    list(APPEND _found "${_doc_${_i}_NAME}:${_doc_${_i}_KIND}")
    if(_doc_${_i}_KIND STREQUAL "skip")
      math(EXPR _skipped "${_skipped} + 1")
      string(APPEND _report "  line ${_doc_${_i}_LINE}: ${_doc_${_i}_NAME}: not compiled: "
                            "${_doc_${_i}_REASON}\n")
    else()
      math(EXPR _compiled "${_compiled} + 1")
      set(_what "compiled")
      if(_doc_${_i}_RUN)
        math(EXPR _run "${_run} + 1")
        set(_what "compiled and run")
      endif()
      string(APPEND _report "  line ${_doc_${_i}_LINE}: ${_doc_${_i}_NAME} "
                            "(${_doc_${_i}_KIND}): ${_what}\n")
    endif()
  endforeach()
  list(LENGTH _doc_BLOCKS _cpp)
  list(LENGTH _doc_OTHER _others)
  string(REPLACE ";" ", " _other_langs "${_doc_OTHER}")
  message("${NAME}: ${_cpp} C++ blocks: ${_compiled} compiled (${_run} of them run), ${_skipped} "
          "marked skip; not C++: ${_others} (${_other_langs})\n${_report}")
  if(NOT _doc_ERRORS STREQUAL "")
    message(FATAL_ERROR "${NAME}: malformed:\n${_doc_ERRORS}")
  endif()
  string(REPLACE ";" "," _found "${_found}")
  if(DEFINED EXPECT AND NOT "${_found}" STREQUAL "${EXPECT}")
    message(FATAL_ERROR "${NAME}: its C++ blocks changed since this build tree was configured "
                        "(now ${_found}, configured ${EXPECT}): re-run cmake, then the tests")
  endif()
endif()
