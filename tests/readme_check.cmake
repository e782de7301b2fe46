# Checks that the README's first C++ code block is examples/quickstart.cpp,
# which CI compiles and runs, so the README's example cannot rot.
# Usage: cmake -DSOURCE_DIR=... -P readme_check.cmake
file(READ "${SOURCE_DIR}/README.md" readme)
file(READ "${SOURCE_DIR}/examples/quickstart.cpp" example)
string(FIND "${readme}" "```cpp\n" start)
if(start EQUAL -1)
  message(FATAL_ERROR "README.md has no ```cpp block")
endif()
math(EXPR start "${start} + 7")
string(SUBSTRING "${readme}" ${start} -1 rest)
string(FIND "${rest}" "```" stop)
string(SUBSTRING "${rest}" 0 ${stop} block)
if(NOT block STREQUAL example)
  message(FATAL_ERROR "README.md's first ```cpp block differs from examples/quickstart.cpp")
endif()
message(STATUS "README example matches examples/quickstart.cpp")
