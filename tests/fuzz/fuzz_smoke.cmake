# fuzz_smoke.cmake - a short libFuzzer run on a copy of a seed corpus (the fuzz-smoke tests).
#
#   cmake -DFUZZER=path/fuzz_lz4 -DCORPUS=tests/fuzz/corpus/lz4 -DWORK=dir -DSECONDS=20 \
#         -P fuzz_smoke.cmake
#
# WORK is emptied, CORPUS copied into WORK/corpus (libFuzzer writes what it finds there,
# and the source corpus must only change by hand), and crash, leak and timeout inputs go
# to WORK/artifacts/. Fails when libFuzzer reports anything.
foreach(v FUZZER CORPUS WORK SECONDS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "fuzz_smoke.cmake: -D${v}= is missing")
  endif()
endforeach()
if(NOT IS_DIRECTORY "${CORPUS}")
  message(FATAL_ERROR "fuzz_smoke.cmake: no corpus ${CORPUS}")
endif()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/corpus" "${WORK}/artifacts")
file(COPY "${CORPUS}/" DESTINATION "${WORK}/corpus")

execute_process(
  COMMAND "${FUZZER}" -max_total_time=${SECONDS} -timeout=30 -rss_limit_mb=2048
    -print_final_stats=1 "-artifact_prefix=${WORK}/artifacts/" "${WORK}/corpus"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}); the input is in ${WORK}/artifacts/")
endif()
