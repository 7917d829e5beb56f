# ctest example.models.up_to_date: are the model files committed in examples/models those
# make_models writes today? Runs `MAKE_MODELS --repository GENERATED` and compares every file it
# wrote with the same path under COMMITTED, byte for byte; names each one that differs or is
# missing, and the command that rewrites them.
#
#   cmake -DMAKE_MODELS=... -DGENERATED=<folder> -DCOMMITTED=<examples/models> -DWITH_ONNX=ON|OFF
#         -P compare_repository.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${GENERATED}")
execute_process(COMMAND "${MAKE_MODELS}" --repository "${GENERATED}" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "make_models --repository failed (${status})")
endif()

file(GLOB_RECURSE generated RELATIVE "${GENERATED}" "${GENERATED}/*")
# What make_models must have written; a file missing from this list fails the test as well.
set(expected image_classifier/1/model.pt image_preprocess/1/model.pt gru_sequence/1/model.pt
             tiny_lm/1/model.pt)
if(WITH_ONNX)
  list(APPEND expected image_classifier_onnx/1/model.onnx)
endif()
set(stale "")
foreach(file IN LISTS expected)
  if(NOT file IN_LIST generated)
    list(APPEND stale "${file} (make_models did not write it)")
  endif()
endforeach()
foreach(file IN LISTS generated)
  if(NOT EXISTS "${COMMITTED}/${file}")
    list(APPEND stale "${file} (not in examples/models)")
    continue()
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${GENERATED}/${file}"
                          "${COMMITTED}/${file}" RESULT_VARIABLE different)
  if(different)
    list(APPEND stale "${file} (differs)")
  endif()
endforeach()
if(stale)
  list(JOIN stale "\n  " stale_lines)
  message(FATAL_ERROR "examples/models is not what tests/libtorch/make_models.cpp writes:\n  "
                      "${stale_lines}\nRewrite them with scripts/make-example-models.sh.")
endif()
list(LENGTH generated count)
message(STATUS "examples/models: ${count} model files as make_models writes them")
