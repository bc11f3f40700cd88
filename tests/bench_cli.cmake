# tdacl-bench run the way a user runs it, checked from outside.  ctest calls
#   cmake -DBENCH=exe -DMODE=run -DARGS="--quick" -DWANT="gemm|attention:tra|..." -DOUT=dir -P bench_cli.cmake
#     runs BENCH ARGS --json --csv into OUT and wants exit 0; the JSON's schema tag; a row
#     for every WANT entry ("suite", "suite:name" or "attention-prefill|decode"); every
#     timed row with a positive median, enough samples and no failure note; as many CSV
#     rows; and the file loaded back (--load) and compared with itself: every timed row
#     matched, no regression.  The run's wall time is printed.
#   cmake -DBENCH=exe -DMODE=fail -DARGS="a|b" -DEXPECT_RC=n -DEXPECT_ERR=regex -P bench_cli.cmake
#     wants exit EXPECT_RC, stderr matching EXPECT_ERR, and no measuring first.
cmake_minimum_required(VERSION 3.19) # string(JSON)
# lists travel as '|'-separated strings: a ';' would split add_test's arguments
string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "|" ";" WANT "${WANT}")

if(MODE STREQUAL "fail")
  execute_process(COMMAND ${BENCH} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL EXPECT_RC OR NOT err MATCHES "${EXPECT_ERR}")
    message(FATAL_ERROR "tdacl-bench ${args}: exit ${rc} (wanted ${EXPECT_RC}), stderr must match "
                        "'${EXPECT_ERR}'\nstderr: ${err}\nstdout: ${out}")
  endif()
  # bad arguments are refused before the minutes of measuring, not after
  if(out MATCHES "total time")
    message(FATAL_ERROR "tdacl-bench ${args} measured before failing:\n${out}")
  endif()
  return()
endif()

if(NOT MODE STREQUAL "run")
  message(FATAL_ERROR "MODE must be run or fail")
endif()
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(json_path ${OUT}/run.json)
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${BENCH} ${args} --no-progress --json ${json_path} --csv ${OUT}/run.csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP t1 "%s")
math(EXPR seconds "${t1} - ${t0}")
message(STATUS "tdacl-bench ${args}: exit ${rc} after ${seconds} s\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tdacl-bench ${args} failed")
endif()

file(READ ${json_path} json)
string(JSON schema GET "${json}" schema)
if(NOT schema STREQUAL "tdacl-bench/1")
  message(FATAL_ERROR "schema is '${schema}'")
endif()
string(JSON nrows LENGTH "${json}" rows)
if(nrows EQUAL 0)
  message(FATAL_ERROR "no rows in ${json_path}")
endif()
math(EXPR last "${nrows} - 1")
set(seen "")
set(timed 0)
foreach(i RANGE ${last})
  string(JSON suite GET "${json}" rows ${i} suite)
  string(JSON name GET "${json}" rows ${i} name)
  if(suite STREQUAL "peak")
    string(JSON value GET "${json}" rows ${i} value)
    if(NOT value GREATER 0)
      message(FATAL_ERROR "peak row ${name} has value ${value}")
    endif()
    list(APPEND seen "peak:${name}")
    continue()
  endif()
  # a timed row: a positive median over at least the default 10 samples (forward rows on
  # a CPU take 3: each is a whole model pass), and no failure
  set(least 10)
  if(suite STREQUAL "forward")
    set(least 3)
  endif()
  string(JSON median GET "${json}" rows ${i} time_ms median)
  string(JSON nsamples LENGTH "${json}" rows ${i} time_ms samples)
  string(JSON note ERROR_VARIABLE no_note GET "${json}" rows ${i} note)
  if(no_note)
    set(note "")
  endif()
  if(NOT median GREATER 0 OR nsamples LESS least OR note MATCHES "^failed")
    message(FATAL_ERROR "row ${i} (${suite} ${name}): median ${median} ms over ${nsamples} samples; ${note}")
  endif()
  math(EXPR timed "${timed} + 1")
  list(APPEND seen "${suite}")
  if(suite STREQUAL "attention")
    string(JSON path GET "${json}" rows ${i} path)
    list(APPEND seen "attention:${name}" "attention-${path}")
  endif()
endforeach()
foreach(w IN LISTS WANT)
  if(NOT w IN_LIST seen)
    message(FATAL_ERROR "no ${w} row in ${json_path}")
  endif()
endforeach()
file(STRINGS ${OUT}/run.csv csv)
list(LENGTH csv ncsv)
math(EXPR ncsv "${ncsv} - 1")
if(NOT ncsv EQUAL nrows)
  message(FATAL_ERROR "the CSV has ${ncsv} rows, the JSON ${nrows}")
endif()

# bench_load_json reads the file back; each timed row matches itself at ratio 1
execute_process(COMMAND ${BENCH} --load ${json_path} --compare ${json_path}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n${timed} row\\(s\\) compared, 0 regression\\(s\\)")
  message(FATAL_ERROR "--load/--compare of the run: exit ${rc}, wanted ${timed} rows compared\n${out}${err}")
endif()
