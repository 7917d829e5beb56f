# servekit_dev_flags: warnings, -Werror and sanitizers for servekit's own tests, examples and
# benchmarks. Link it PRIVATE next to servekit::servekit. It is never exported or installed, and
# the exported servekit target carries no warning flags.
#
# Third-party headers (Boost, fmt, nlohmann_json, GoogleTest, Google Benchmark) come from imported
# targets, whose include directories CMake passes as -isystem (or they live in /usr/include, an
# implicit system directory), so their warnings never trip -Werror. servekit's own headers are
# included with -I from its non-imported target, so they do get the warnings.

add_library(servekit_dev_flags INTERFACE)

set(_servekit_warnings
    -Wall
    -Wextra
    -Wpedantic
    -Wshadow
    -Wconversion
    -Wsign-conversion
    -Wold-style-cast
    -Wnon-virtual-dtor
    -Woverloaded-virtual
    -Werror)
target_compile_options(
  servekit_dev_flags
  INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:${_servekit_warnings}>"
            "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-fconcepts-diagnostics-depth=3>")
unset(_servekit_warnings)

# GCC collects its own garbage whenever its heap has grown by ggc-min-expand percent since the last
# collection, and not below ggc-min-heapsize KiB. Its defaults (100 %, 128 MiB) collect several
# times in each of our larger translation units (unity batches of tests: 1-3.5 GiB at their peak);
# these compile them 13 % faster (measured: a batch of runtime tests, 23.0 -> 20.0 s, three runs
# each) for about 35 % more memory at the peak. Set it empty on a machine with less than 4 GiB per
# build job.
set(SERVEKIT_GCC_GC_PARAMS "--param=ggc-min-expand=200;--param=ggc-min-heapsize=1048576"
    CACHE STRING "GCC's garbage-collector parameters for servekit's own targets (empty: GCC's defaults)")
if(SERVEKIT_GCC_GC_PARAMS)
  target_compile_options(
    servekit_dev_flags
    INTERFACE "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:${SERVEKIT_GCC_GC_PARAMS}>")
endif()

# .cu files of tests/examples are C++20 too. CMake 3.25 knows no cuda_std_20 for nvcc, so pass the
# flag itself there. (No warning flags for CUDA: nvcc would hand them to the host compiler unasked.)
if(SERVEKIT_CUDA_ENABLED)
  if("cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
    target_compile_features(servekit_dev_flags INTERFACE cuda_std_20)
  else()
    target_compile_options(servekit_dev_flags INTERFACE "$<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>")
  endif()
endif()

if(SERVEKIT_SANITIZE)
  if(NOT SERVEKIT_SANITIZE MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR
            "SERVEKIT_SANITIZE must be empty, 'address,undefined' or 'thread' (got '${SERVEKIT_SANITIZE}')")
  endif()
  set(_servekit_sanitize_flags -fsanitize=${SERVEKIT_SANITIZE} -fno-omit-frame-pointer
                               -fno-sanitize-recover=all)
  target_compile_options(servekit_dev_flags
                         INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:${_servekit_sanitize_flags}>")
  target_link_options(servekit_dev_flags INTERFACE ${_servekit_sanitize_flags})
  # GCC 12's -Wmaybe-uninitialized misfires inside libstdc++ (std::map in a std::optional) once
  # sanitizer instrumentation changes inlining; the unsanitized build keeps the warning.
  target_compile_options(
    servekit_dev_flags
    INTERFACE "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized>")
  # Boost.Asio's handlers use std::atomic_thread_fence, which g++ 12 warns TSan cannot see
  # (-Wtsan). Asio's strands and io_context synchronise through mutexes TSan does see, so the
  # warning (an error under -Werror) says nothing about our code.
  if(SERVEKIT_SANITIZE STREQUAL "thread")
    target_compile_options(
      servekit_dev_flags INTERFACE "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-tsan>")
  endif()
  unset(_servekit_sanitize_flags)
  message(STATUS "servekit: sanitizers on for tests/examples/bench: ${SERVEKIT_SANITIZE}")
endif()
