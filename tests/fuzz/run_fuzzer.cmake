# ctest's fuzz.<stem>: a bounded libFuzzer run over a fresh copy of the seed corpus.
#   cmake -DFUZZER=<exe> -DSEEDS=<seed dir> -DWORK=<work dir> -DARTIFACTS=<dir>
#         -DARGS=<libFuzzer options, '|'-separated> -P run_fuzzer.cmake
# The copy starts from the seeds every run, so results do not depend on earlier runs, and
# libFuzzer adds what it finds to the copy, never to the source tree. A missing seed folder
# means an empty corpus.
foreach(_var IN ITEMS FUZZER SEEDS WORK ARTIFACTS)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${_var}=... is required")
  endif()
endforeach()

string(REPLACE "|" ";" ARGS "${ARGS}")

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}" "${ARTIFACTS}")
if(IS_DIRECTORY "${SEEDS}")
  file(GLOB _seed_files LIST_DIRECTORIES false "${SEEDS}/*")
  list(LENGTH _seed_files _seed_count)
  if(_seed_files)
    file(COPY ${_seed_files} DESTINATION "${WORK}")
  endif()
  message(STATUS "fuzz: ${_seed_count} seeds from ${SEEDS}")
else()
  message(STATUS "fuzz: no seed corpus at ${SEEDS}; starting from an empty corpus")
endif()

message(STATUS "fuzz: ${FUZZER} ${ARGS} ${WORK}")
execute_process(COMMAND "${FUZZER}" ${ARGS} "${WORK}" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "fuzz: ${FUZZER} failed (${_rc}); the input that failed is in ${ARTIFACTS}")
endif()
