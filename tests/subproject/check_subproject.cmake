# ctest script: configure a parent project that adds ragged with add_subdirectory (tests/subproject). With the
# parent's CMAKE_CUDA_ARCHITECTURES at 75 (or "all", which holds older ones), configuring must fail and name
# RAGGED_CUDA_ARCHITECTURES; with RAGGED_CUDA_ARCHITECTURES=90 it must succeed, compile the library for sm_90 alone
# and leave the parent's own CUDA code at 75 (read from compile_commands.json, whatever the generator).
# Configure only: building the library again would take minutes.
file(REMOVE_RECURSE ${WORK_DIR})
function(configure build_dir architectures result_var output_var)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${SUBPROJECT_SOURCE_DIR} -B ${WORK_DIR}/${build_dir} -G ${GENERATOR}
            -DRAGGED_SOURCE_DIR=${RAGGED_SOURCE_DIR} -DCMAKE_CUDA_ARCHITECTURES=${architectures}
            -DCMAKE_EXPORT_COMPILE_COMMANDS=ON ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${result_var} ${rc} PARENT_SCOPE)
  set(${output_var} "${out}${err}" PARENT_SCOPE)
endfunction()

foreach(old 75 all)
  configure(old_${old} ${old} rc output)
  if(rc EQUAL 0)
    message(FATAL_ERROR "a parent with CMAKE_CUDA_ARCHITECTURES=${old} configured ragged without an error")
  endif()
  if(NOT output MATCHES "ragged needs CUDA architectures 80 or newer, and would build for"
     OR NOT output MATCHES "RAGGED_CUDA_ARCHITECTURES")
    message(FATAL_ERROR "configuring with architectures ${old} failed without naming them:\n${output}")
  endif()
endforeach()

configure(own 75 rc output -DRAGGED_CUDA_ARCHITECTURES=90)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "RAGGED_CUDA_ARCHITECTURES=90 under a parent at 75 did not configure:\n${output}")
endif()
file(READ ${WORK_DIR}/own/compile_commands.json commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
set(library_checked FALSE)
set(parent_checked FALSE)
foreach(i RANGE ${last})
  string(JSON file GET "${commands}" ${i} file)
  string(JSON command GET "${commands}" ${i} command)
  if(file MATCHES "kernels/offsets\\.cu$")
    if(NOT command MATCHES "compute_90" OR command MATCHES "compute_75")
      message(FATAL_ERROR "the library is not built for sm_90 alone: ${command}")
    endif()
    set(library_checked TRUE)
  elseif(file MATCHES "subproject/parent\\.cu$")
    if(NOT command MATCHES "compute_75" OR command MATCHES "compute_90")
      message(FATAL_ERROR "the parent's code is not left at sm_75: ${command}")
    endif()
    set(parent_checked TRUE)
  endif()
endforeach()
if(NOT library_checked OR NOT parent_checked)
  message(FATAL_ERROR "compile_commands.json lacks kernels/offsets.cu or parent.cu")
endif()
message(STATUS "subproject: 75 and all refused by name; RAGGED_CUDA_ARCHITECTURES=90 builds ragged for 90 alone")
