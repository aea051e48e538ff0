# Installs the built package into a scratch prefix, checks that no internal header was installed,
# then configures, builds and runs tests/install/consumer against that prefix alone.
# Usage: cmake -DBUILD_DIR=<build> -DSOURCE_DIR=<tests/install/consumer> -DWORK_DIR=<scratch>
#              -DGENERATOR=<generator> -P install_consumer.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()

# Only public headers: no kernel tables, CPU kernels or CUDA internals.
file(GLOB_RECURSE installed RELATIVE "${prefix}/include" "${prefix}/include/*")
list(LENGTH installed count)
if(count LESS 50)
  message(FATAL_ERROR "only ${count} headers were installed under ${prefix}/include")
endif()
foreach(h ${installed})
  if(h MATCHES "/kernels/|/cpu/|^lsformer/cuda/|dispatch\\.h$|core_kernels\\.h$|\\.cuh$")
    message(FATAL_ERROR "an internal header was installed: ${h}")
  endif()
  if(NOT h MATCHES "^lsformer/")
    message(FATAL_ERROR "a header was installed outside include/lsformer/: ${h}")
  endif()
endforeach()
message("installed ${count} public headers")

execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
                        -DCMAKE_PREFIX_PATH=${prefix} -DLSF_INCLUDE_ROOT=${prefix}/include -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer failed (${rc})")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer against the installed tree failed (${rc})")
endif()
execute_process(COMMAND "${WORK_DIR}/build/consumer" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "sum = 12")
  message(FATAL_ERROR "the consumer ran wrongly (${rc})")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
