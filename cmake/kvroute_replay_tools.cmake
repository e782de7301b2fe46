# kvroute_add_replay_tools(PREFIX): kvroute_tree_replay and kvroute_workload
# (benchmarks/*_main.cpp) as PREFIXtree_replay and PREFIXworkload. The bench
# preset builds them for measuring; the tests build them too, so that every
# CI leg checks their interface (tests/tools/replay_check.cmake).
function(kvroute_add_replay_tools prefix)
  find_package(Threads REQUIRED)
  foreach(tool IN ITEMS tree_replay workload)
    add_executable(${prefix}${tool} "${PROJECT_SOURCE_DIR}/benchmarks/${tool}_main.cpp")
    target_link_libraries(${prefix}${tool} PRIVATE kvroute::kvroute Threads::Threads)
    target_include_directories(${prefix}${tool} PRIVATE "${PROJECT_SOURCE_DIR}/benchmarks")
    kvroute_set_warnings(${prefix}${tool})
  endforeach()
endfunction()
