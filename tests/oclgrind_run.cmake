# Runs a test binary under Oclgrind and fails if Oclgrind reports anything.
#   cmake -DOCLGRIND=/usr/bin/oclgrind -DTEST=path/to/test -DLOG=out.log [-DARGS="a;b"] [-DCHECKS="a;b"] -P oclgrind_run.cmake
# CHECKS: Oclgrind's optional checks (default --data-races;--uninitialized; out-of-bounds
# accesses are always checked).
#
# Oclgrind exits with the program's status even when it found data races, uninitialised
# reads or out-of-bounds accesses, so the verdict comes from its log: with --log every
# diagnostic goes to that file, and a clean run leaves it empty.
#
# -cl-opt-disable: Oclgrind 21.10's uninitialised-value plugin does not know LLVM's `freeze`
# instruction (it stops with "Unsupported instruction: freeze") and crashes in
# Uninitialized::instructionExecuted on the optimised decode kernel.  Unoptimised code has
# neither problem and is checked as written.
foreach(v OCLGRIND TEST LOG)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "oclgrind_run.cmake: -D${v}= is required")
  endif()
endforeach()

# The interpreter is the only device under Oclgrind; no program cache (binaries built for
# another device must not be loaded, and a cache hit would skip the build being checked).
set(ENV{TDACL_CACHE} off)
unset(ENV{TDACL_DEVICE})
file(REMOVE ${LOG})
if(NOT DEFINED CHECKS)
  set(CHECKS --data-races --uninitialized)
endif()
execute_process(
  COMMAND ${OCLGRIND} ${CHECKS} --build-options -cl-opt-disable --log ${LOG} ${TEST} ${ARGS}
  RESULT_VARIABLE rc)

set(report "")
if(EXISTS ${LOG})
  file(READ ${LOG} report)
endif()
string(STRIP "${report}" report)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TEST} failed under Oclgrind (exit status ${rc})\n${report}")
endif()
if(NOT report STREQUAL "")
  string(LENGTH "${report}" n)
  if(n GREATER 20000)
    string(SUBSTRING "${report}" 0 20000 report)
    set(report "${report}\n... (truncated; full log in ${LOG})")
  endif()
  message(FATAL_ERROR "Oclgrind reported problems (log ${LOG}):\n${report}")
endif()
message(STATUS "Oclgrind: no errors")
