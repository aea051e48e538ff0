# `lsf train` on a tiny generated ListOps run, then `lsf eval` on its best checkpoint for both
# splits: the accuracies must equal, digit for digit and count for count, those printed at the
# end of training. The run directory holds tb/'s event file and curves.svg, and `lsf plot` and
# `lsf report` draw the run, and `lsf info --model` describes the checkpoint's model. Usage: cmake -DLSF=<lsf> -DCONFIG=<quickstart.json> -DOUT=<dir> -P train_eval.cmake
file(REMOVE_RECURSE "${OUT}")
execute_process(
  COMMAND "${LSF}" train --config "${CONFIG}" --out "${OUT}" --threads 1
          --set "data.generate={\"enabled\": true, \"train\": 300, \"dev\": 40, \"test\": 40, \"min_length\": 8, \"max_length\": 30, \"max_depth\": 4, \"max_args\": 4}"
          --set "model={\"max_seq_len\": 32, \"dim\": 16, \"ffn_dim\": 32, \"window\": 4, \"rank\": 4, \"head_hidden\": 16}"
          --set train.steps=24 --set train.eval_every=8 --set train.batch_size=16 --set schedule.warmup_steps=4
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lsf train failed (${rc})")
endif()
foreach(split dev test)
  if(NOT out MATCHES "${split} accuracy +([0-9.]+%) \\(([0-9]+/[0-9]+);")
    message(FATAL_ERROR "no ${split} accuracy in the training summary")
  endif()
  set(trained "${CMAKE_MATCH_1} (${CMAKE_MATCH_2}")
  execute_process(COMMAND "${LSF}" eval --checkpoint "${OUT}/best.safetensors" --split ${split}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE eval_out ERROR_VARIABLE eval_err)
  message("${eval_out}${eval_err}")
  if(NOT rc EQUAL 0 OR NOT eval_out MATCHES "${split} accuracy +([0-9.]+%) \\(([0-9]+/[0-9]+);")
    message(FATAL_ERROR "lsf eval --split ${split} failed (${rc})")
  endif()
  if(NOT "${CMAKE_MATCH_1} (${CMAKE_MATCH_2}" STREQUAL "${trained}")
    message(FATAL_ERROR "lsf eval gives ${CMAKE_MATCH_1} (${CMAKE_MATCH_2}) on ${split}, training printed ${trained}")
  endif()
endforeach()
# lsf info --model on the checkpoint describes the model of the config stored in it.
execute_process(COMMAND "${LSF}" info --model "${OUT}/best.safetensors"
                RESULT_VARIABLE rc OUTPUT_VARIABLE info_out ERROR_VARIABLE info_err)
message("${info_out}${info_err}")
if(NOT rc EQUAL 0 OR NOT info_out MATCHES "LRA listops classifier \\(long_short attention, 2 layers, d 16, 10 classes\\)")
  message(FATAL_ERROR "lsf info --model on the checkpoint failed (${rc})")
endif()
file(GLOB events "${OUT}/tb/events.out.tfevents.*")
if(NOT events OR NOT EXISTS "${OUT}/curves.svg")
  message(FATAL_ERROR "the run directory lacks tb/events.out.tfevents.* or curves.svg")
endif()
execute_process(COMMAND "${LSF}" plot "${OUT}" --metric loss,accuracy --x time --out "${OUT}/plot.svg"
                RESULT_VARIABLE rc OUTPUT_VARIABLE plot_out ERROR_VARIABLE plot_err)
message("${plot_out}${plot_err}")
if(NOT rc EQUAL 0 OR NOT EXISTS "${OUT}/plot.svg")
  message(FATAL_ERROR "lsf plot failed (${rc})")
endif()
execute_process(COMMAND "${LSF}" report "${OUT}" RESULT_VARIABLE rc OUTPUT_VARIABLE report_out ERROR_VARIABLE report_err)
message("${report_out}${report_err}")
if(NOT rc EQUAL 0 OR NOT EXISTS "${OUT}/report.html")
  message(FATAL_ERROR "lsf report failed (${rc})")
endif()
file(REMOVE_RECURSE "${OUT}")
