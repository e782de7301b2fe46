# Warning flags for kvroute's own tests, benchmarks and examples. Never applied
# to the INTERFACE target: consumers choose their own flags.
function(kvroute_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      -Wall -Wextra -Wpedantic -Wconversion -Wshadow)
    if(KVROUTE_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()
