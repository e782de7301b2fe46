# Checks kvroute_tree_replay's interface and its routing rule on small
# inputs, and that kvroute_workload's output depends only on its seed, so
# that CI holds the tools benchmarks/README.md's figures come from to what
# that README says.
# Usage: cmake -DREPLAY=... -DWORKLOAD=... -DWORK_DIR=... -P replay_check.cmake

function(run_replay out_var)
  execute_process(COMMAND "${REPLAY}" ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kvroute_tree_replay ${ARGN}: exit ${rc}: ${err}")
  endif()
  foreach(field requests chars seconds chars_per_second affinity_routes matched_chars
                tree_nodes tree_bytes rss_bytes memcmp_seconds evicted_chars)
    string(JSON value ERROR_VARIABLE json_err GET "${out}" ${field})
    if(json_err)
      message(FATAL_ERROR "kvroute_tree_replay ${ARGN}: no \"${field}\" in ${out}")
    endif()
  endforeach()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

function(expect json field want)
  string(JSON got GET "${json}" ${field})
  if(NOT got EQUAL want)
    message(FATAL_ERROR "${field}: expected ${want}, got ${got} in ${json}")
  endif()
endfunction()

function(expect_exit want)
  execute_process(COMMAND "${REPLAY}" ${ARGN} OUTPUT_QUIET ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL want)
    message(FATAL_ERROR "kvroute_tree_replay ${ARGN}: expected exit ${want}, got ${rc}")
  endif()
endfunction()

# The rule, by hand: line 0 matches nothing (tenant 0 mod N); line 1 is
# line 0 again (rate 1 > 0.3: an affinity route); line 2 shares 1 of 4
# characters with the tree (0.25: not one), line 3 all of line 2.
set(small "${WORK_DIR}/replay_check_small.txt")
file(WRITE "${small}" "abcd\nabcd\nazzz\nazzz\n")
run_replay(out "${small}" --workers 3)
expect("${out}" requests 4)
expect("${out}" chars 16)
expect("${out}" affinity_routes 2)
expect("${out}" matched_chars 9)  # 0 + 4 + 1 + 4
expect("${out}" tree_nodes 4)     # the root, "a", "bcd", "zzz"
# Two threads share the tree: the same totals for requests and characters.
run_replay(out "${small}" --workers 3 --threads 2)
expect("${out}" requests 4)
expect("${out}" chars 16)

# --partition deals whole prefix groups (lines with the same first 24
# bytes) to the threads: the "abcd" lines to one thread, the "azzz" lines
# to the other. In one tree (in whichever order the threads go) that is
# the root, "a", "bcd" and "zzz"; with --private each thread's group in a
# tree of its own, each group's second line matching its first in full:
# two roots, two leaves, 8 characters matched.
run_replay(out "${small}" --workers 3 --threads 2 --partition)
expect("${out}" requests 4)
expect("${out}" chars 16)
expect("${out}" tree_nodes 4)
expect("${out}" partition_max_lines 2)
string(JSON part GET "${out}" partition)
if(NOT part)
  message(FATAL_ERROR "--partition: partition is off in ${out}")
endif()
run_replay(out "${small}" --workers 3 --threads 2 --partition --private)
expect("${out}" requests 4)  # the work split, not repeated
expect("${out}" chars 16)
expect("${out}" matched_chars 8)
expect("${out}" tree_nodes 4)
run_replay(out "${small}" --workers 3 --threads 2)
string(JSON part GET "${out}" partition)
expect("${out}" partition_max_lines 0)
if(part)
  message(FATAL_ERROR "partition is on without --partition: ${out}")
endif()

# --reads R reads every line in a tree built beforehand from the whole
# file: each line then matches in full (1 + 2 + ... + 5 = 15 characters a
# pass), with one tree or a tree per thread. Lines of different lengths:
# the replay fails when the threads' pass, its lines dealt i mod T, matches
# another total, which catches a thread reading another's lines.
set(lengths "${WORK_DIR}/replay_check_lengths.txt")
file(WRITE "${lengths}" "a\nbb\nccc\ndddd\neeeee\n")
foreach(threads 2 3)
  foreach(extra IN ITEMS "" "--private")
    run_replay(out "${lengths}" --threads ${threads} --reads 2 ${extra})
    expect("${out}" reads_rounds 2)
    expect("${out}" reads_matched_chars 15)
  endforeach()
endforeach()
# Five groups of one line on three threads: 2, 2 and 1 lines, each
# thread's in a tree of its own (three roots, five leaves).
run_replay(out "${lengths}" --threads 3 --partition --private)
expect("${out}" partition_max_lines 2)
expect("${out}" tree_nodes 8)

# "above 0.3" is strict: line 1 shares "abc", 3 of its 10 characters, with
# line 0 (0.3: not an affinity route); line 2 shares "abcd" (0.4: one).
set(strict "${WORK_DIR}/replay_check_strict.txt")
file(WRITE "${strict}" "abcdefghij\nabcxxxxxxx\nabcdyyyyyy\n")
run_replay(out "${strict}" --workers 1)
expect("${out}" affinity_routes 1)
expect("${out}" matched_chars 7)  # 0 + 3 + 4

# Lines that share nothing go to tenant (line number mod N), and every K-th
# line each tenant is evicted to M characters: files of 10-character lines
# with different first characters. The replay must end with `evicted`
# characters evicted and `kept` stored.
function(expect_eviction file workers every budget evicted kept)
  run_replay(out "${file}" --workers ${workers} --evict-every ${every} --max-size ${budget})
  expect("${out}" evicted_chars ${evicted})
  expect("${out}" tree_chars ${kept})
endfunction()
set(apart "${WORK_DIR}/replay_check_apart.txt")
file(WRITE "${apart}" "0123456789\nABCDEFGHIJ\nklmnopqrst\nKLMNOPQRST\n")
# 4 workers: one line each, 10 characters, within the budget of 10.
expect_eviction("${apart}" 4 4 10 0 40)
# 2 workers: lines 0 and 2 on tenant 0, 1 and 3 on tenant 1, 20 characters
# each; the eviction after line 3 takes each down to 10 (its older line).
expect_eviction("${apart}" 2 4 10 20 20)
# A budget of 0 evicts everything at every K-th line.
expect_eviction("${apart}" 1 1 0 40 0)
# Eviction after lines K-1, 2K-1, ... only: with K = 2 and three lines,
# after line 1 (both lines so far go: 20 > 5, then 10 > 5) and not after
# line 2, which stays.
set(three "${WORK_DIR}/replay_check_three.txt")
file(WRITE "${three}" "0123456789\nABCDEFGHIJ\nklmnopqrst\n")
expect_eviction("${three}" 1 2 5 20 10)

# A generated chat file: the same bytes for the same seed, and every
# option of the interface accepted.
set(chat "${WORK_DIR}/replay_check_chat.txt")
execute_process(COMMAND "${WORKLOAD}" chat -n 300 --seed 1 OUTPUT_FILE "${chat}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvroute_workload chat: exit ${rc}")
endif()
execute_process(COMMAND "${WORKLOAD}" chat -n 300 --seed 1 OUTPUT_VARIABLE again)
file(READ "${chat}" first)
if(NOT first STREQUAL again)
  message(FATAL_ERROR "kvroute_workload chat -n 300 --seed 1 gave two different files")
endif()
run_replay(out "${chat}")
expect("${out}" requests 300)
string(JSON affinity GET "${out}" affinity_routes)
if(affinity LESS 200)  # 48 conversations: most requests are a later turn
  message(FATAL_ERROR "chat: only ${affinity} affinity routes of 300")
endif()
# --scaling R: R rounds of a one-thread and a T-thread replay, and with
# them the fresh-memory reference, which obtains as many bytes as the
# one-thread replay's tree holds from the system (tree_reserved_bytes,
# the same in every one-thread replay of a file) through a new arena, on
# one thread and on T (the replay fails unless every block was had).
# Without --scaling the reference is not run.
run_replay(one "${chat}" --worker-thread)
string(JSON reserved GET "${one}" tree_reserved_bytes)
if(NOT reserved GREATER 0)
  message(FATAL_ERROR "chat: the tree holds no memory from the system: ${one}")
endif()
expect("${one}" fresh_memory_bytes 0)
foreach(extra IN ITEMS "" "--private" "--partition" "--partition;--private")
  run_replay(out "${chat}" --threads 2 --scaling 2 ${extra})
  expect("${out}" scaling_rounds 2)
  expect("${out}" fresh_memory_bytes ${reserved})
  foreach(field one_thread_seconds_median threads_seconds_median scaling_median
                fresh_memory_one_seconds_median fresh_memory_threads_seconds_median
                fresh_memory_scaling_median)
    string(JSON value GET "${out}" ${field})
    if(NOT value GREATER 0)
      message(FATAL_ERROR "--scaling 2 ${extra}: ${field} is ${value} in ${out}")
    endif()
  endforeach()
endforeach()
run_replay(out "${chat}" --workers 4 --evict-every 50 --max-size 20000 --threads 2)
expect("${out}" requests 300)
string(JSON evicted GET "${out}" evicted_chars)
if(evicted EQUAL 0)
  message(FATAL_ERROR "eviction to 20000 characters every 50 requests evicted nothing")
endif()

# Bad arguments: status 2; an unreadable file: status 1.
expect_exit(2)
expect_exit(2 "${small}" --workers 0)
expect_exit(2 "${small}" --evict-every 10)
expect_exit(2 "${small}" --threads x)
expect_exit(2 "${small}" --reads 0)
expect_exit(2 "${small}" --threads 2 --partition --reads 1)
expect_exit(2 "${small}" --threads 2 --partition --window 1)
expect_exit(1 "${WORK_DIR}/replay_check_missing.txt")
message(STATUS "kvroute_tree_replay and kvroute_workload keep their interface")
