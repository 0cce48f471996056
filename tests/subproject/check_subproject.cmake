# ctest script: configure a parent project that adds ragged with add_subdirectory (tests/subproject). With the
# parent's CMAKE_CUDA_ARCHITECTURES at 75, configuring must fail and name RAGGED_CUDA_ARCHITECTURES; with
# RAGGED_CUDA_ARCHITECTURES=90 it must succeed and give the library sm_90 while the parent keeps 75.
# Configure only: building the library again would take minutes.
file(REMOVE_RECURSE ${WORK_DIR})
function(configure build_dir result_var output_var)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${SUBPROJECT_SOURCE_DIR} -B ${WORK_DIR}/${build_dir} -G ${GENERATOR}
            -DRAGGED_SOURCE_DIR=${RAGGED_SOURCE_DIR} -DCMAKE_CUDA_ARCHITECTURES=75 ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${result_var} ${rc} PARENT_SCOPE)
  set(${output_var} "${out}${err}" PARENT_SCOPE)
endfunction()

configure(old rc output)
if(rc EQUAL 0)
  message(FATAL_ERROR "a parent with CMAKE_CUDA_ARCHITECTURES=75 configured ragged without an error")
endif()
if(NOT output MATCHES "ragged needs CUDA architectures 80 or newer, and would build for '75'"
   OR NOT output MATCHES "RAGGED_CUDA_ARCHITECTURES")
  message(FATAL_ERROR "configuring with architecture 75 failed without naming it:\n${output}")
endif()

configure(own rc output -DRAGGED_CUDA_ARCHITECTURES=90)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "RAGGED_CUDA_ARCHITECTURES=90 under a parent at 75 did not configure:\n${output}")
endif()
# The generated build must compile the library for sm_90 only, and the parent's own code for 75.
file(READ ${WORK_DIR}/own/build.ninja ninja)
string(REGEX MATCH "kernels/offsets\\.cu\\.o:[^\n]*\n([^\n]*\n)*[ ]*FLAGS = [^\n]*" offsets_rule "${ninja}")
if(NOT offsets_rule MATCHES "arch=compute_90" OR offsets_rule MATCHES "compute_75")
  message(FATAL_ERROR "the library is not built for sm_90 alone:\n${offsets_rule}")
endif()
message(STATUS "subproject: architecture 75 refused by name; RAGGED_CUDA_ARCHITECTURES=90 configures")
