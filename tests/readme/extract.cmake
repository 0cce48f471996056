# Included by tests/CMakeLists.txt at configure time: writes each ```cpp block of README_FILE to
# OUT_DIR/readme_example_<n>.cpp, its #include lines at file scope and the rest as the body of a function that
# sees the names of tests/readme/prelude.h, and lists the files in README_EXAMPLES.
file(READ ${README_FILE} text)
# Semicolons would split CMake's lists: held as a placeholder until the files are written.
string(REPLACE ";" "@SEMICOLON@" text "${text}")
string(REGEX MATCHALL "```cpp\n[^`]*```" blocks "${text}")
list(LENGTH blocks count)
if(count EQUAL 0)
  message(FATAL_ERROR "README has no ```cpp block: ${README_FILE}")
endif()
set(README_EXAMPLES)
set(index 0)
foreach(block IN LISTS blocks)
  string(REGEX REPLACE "^```cpp\n" "" block "${block}")
  string(REGEX REPLACE "```$" "" block "${block}")
  string(REGEX MATCHALL "#include[^\n]*\n" include_lines "${block}")
  string(REGEX REPLACE "#include[^\n]*\n" "" body "${block}")
  string(CONCAT includes ${include_lines})
  set(source "// Generated from README.md's C++ example ${index} by tests/readme/extract.cmake.\n"
             "#include \"${CMAKE_CURRENT_LIST_DIR}/prelude.h\"\n${includes}\n"
             "namespace readme {\nvoid example_${index}() {\n${body}}\n}  // namespace readme\n")
  string(CONCAT source ${source})
  string(REPLACE "@SEMICOLON@" ";" source "${source}")
  file(CONFIGURE OUTPUT ${OUT_DIR}/readme_example_${index}.cpp CONTENT "${source}" @ONLY)
  list(APPEND README_EXAMPLES ${OUT_DIR}/readme_example_${index}.cpp)
  math(EXPR index "${index} + 1")
endforeach()
