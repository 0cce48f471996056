# ctest `bench_names` (CPU): every benchmark, the GPU suites' included, is named op/impl/case..., impl is one
# of the known implementations, and every baseline has a `ragged` case of the same name to pair with, so a
# results table can always put the two side by side. Runs `ragged_bench --benchmark_list_tests`, which lists
# the GPU suites without needing a GPU.
#   cmake -DBENCH=<path of ragged_bench> [-DEXPECT=<regex>;<regex>...] -P check_names.cmake
# EXPECT: each regular expression must match at least one listed name (a matrix picked from the environment,
# such as RAGGED_BENCH_ATTENTION=targets, holds the cases it promises).
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${BENCH} --benchmark_list_tests
  OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ragged_bench --benchmark_list_tests failed (${rc}): ${errors}")
endif()
string(REPLACE "\n" ";" names "${listing}")
list(FILTER names EXCLUDE REGEX "^$")

# Baselines pair with `ragged`; `copy` is the plain copy of the same bytes the conversions are held against;
# `reference` is a CPU reference timed on its own (what runs without a GPU); `floor` is a kernel that does only
# what any implementation must (the RNN's step floors, bench/rnn_step_floor.h), one per `kind:` of a case.
set(baselines padded cub cublas torch copy)
set(known ragged reference floor ${baselines})
set(problems "")
set(ops "")
foreach(name IN LISTS names)
  if(NOT name MATCHES "^([a-z0-9_]+)/([a-z]+)/(.+)$")
    string(APPEND problems "\n  '${name}' is not op/impl/case")
    continue()
  endif()
  set(op ${CMAKE_MATCH_1})
  set(impl ${CMAKE_MATCH_2})
  set(rest ${CMAKE_MATCH_3})
  list(APPEND ops ${op})
  if(NOT impl IN_LIST known)
    string(APPEND problems "\n  '${name}': unknown implementation '${impl}'")
  elseif(impl IN_LIST baselines AND NOT "${op}/ragged/${rest}" IN_LIST names)
    string(APPEND problems "\n  '${name}' has no '${op}/ragged/${rest}' to pair with")
  endif()
endforeach()

# Each suite shows up (the GPU ones too: listing must not depend on a device).
list(REMOVE_DUPLICATES ops)
foreach(op ragged_to_padded padded_to_ragged segment_sum segment_max segment_argmax segment_softmax
           segment_softmax_backward rnn_lstm rnn_gru attention plan_batches)
  if(NOT op IN_LIST ops)
    string(APPEND problems "\n  no benchmark of '${op}' is listed")
  endif()
endforeach()

foreach(pattern IN LISTS EXPECT)
  set(matching ${names})
  list(FILTER matching INCLUDE REGEX "${pattern}")
  if(NOT matching)
    string(APPEND problems "\n  no benchmark matches '${pattern}'")
  endif()
endforeach()

list(LENGTH names count)
if(problems)
  message(FATAL_ERROR "${count} benchmarks listed; naming problems:${problems}")
endif()
message(STATUS "${count} benchmarks, all named op/impl/case with their pairs present")
