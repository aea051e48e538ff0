# run_lsf(EXPECTED_RC args...): runs "${LSF}" with the arguments, prints its command line and
# output, fails the script when the exit status is not EXPECTED_RC, and leaves the output in
# `out` and `err` of the caller. Included by the `lsf` command-line tests (tools/*.cmake).
function(run_lsf expect_rc)
  execute_process(COMMAND "${LSF}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("lsf ${ARGN}\n${out}${err}")
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "lsf ${ARGN}: exit status ${rc}, expected ${expect_rc}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()
