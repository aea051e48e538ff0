# The char-LM through the command line, on tools/testdata/tiny_text.txt with a tiny model:
# `lsf train` (data.task "lm"), `lsf eval` of its best checkpoint reproducing the test BPC printed
# at the end of training, `lsf eval` with the evaluation settings changed (and a shape change
# refused), `lsf generate` twice with one seed (the same text), and `lsf generate` on a ListOps
# checkpoint (refused). Usage:
#   cmake -DLSF=<lsf> -DCONFIG=<configs/lm/quick.json> -DLISTOPS=<configs/quickstart.json>
#         -DTEXT=<tiny_text.txt> -DOUT=<dir> -P lm_round_trip.cmake
file(REMOVE_RECURSE "${OUT}")
include("${CMAKE_CURRENT_LIST_DIR}/run_lsf.cmake")

run_lsf(0 train --config "${CONFIG}" --out "${OUT}/lm" --threads 1
        --set data.corpus=text --set "data.path=${TEXT}" --set data.eval_characters=0 --set data.eval_batch_size=1
        --set "model={\"dim\": 16, \"heads\": 2, \"layers\": 1, \"ffn_dim\": 32, \"block_length\": 8, \"memory_length\": 8, \"chunk_length\": 2, \"rank\": 1, \"window\": 4}"
        --set train.steps=6 --set train.batch_size=2 --set train.eval_every=3 --set train.eval_batches=0
        --set schedule.warmup_steps=2)
if(NOT out MATCHES "test (bpc [0-9.]+ \\([0-9,]+ characters;)")
  message(FATAL_ERROR "no test BPC in the training summary")
endif()
set(trained "${CMAKE_MATCH_1}")
run_lsf(0 eval --checkpoint "${OUT}/lm/best.safetensors" --split test)
if(NOT out MATCHES "test (bpc [0-9.]+ \\([0-9,]+ characters;)" OR NOT "${CMAKE_MATCH_1}" STREQUAL "${trained}")
  message(FATAL_ERROR "lsf eval printed '${CMAKE_MATCH_1}', training printed '${trained}'")
endif()
run_lsf(0 eval --checkpoint "${OUT}/lm/best.safetensors" --split dev --set data.eval_block_length=4 --set model.memory_length=16)
run_lsf(1 eval --checkpoint "${OUT}/lm/best.safetensors" --set model.dim=32)
if(NOT err MATCHES "model\\.dim 16 → 32")
  message(FATAL_ERROR "the shape change is not named")
endif()

run_lsf(0 generate --checkpoint "${OUT}/lm/best.safetensors" --prompt "It was " --tokens 30 --seed 3 --temperature 0.8)
set(first "${out}")
run_lsf(0 generate --checkpoint "${OUT}/lm/best.safetensors" --prompt "It was " --tokens 30 --seed 3 --temperature 0.8)
if(NOT "${out}" STREQUAL "${first}" OR NOT first MATCHES "^It was ")
  message(FATAL_ERROR "the same seed gave '${first}' and '${out}'")
endif()
string(LENGTH "${first}" length)
if(NOT length EQUAL 38)  # the prompt, 30 characters and a newline
  message(FATAL_ERROR "expected 38 characters of output, got ${length}")
endif()

# A checkpoint of another family.
run_lsf(0 train --config "${LISTOPS}" --out "${OUT}/listops" --threads 1
        --set "data.generate={\"enabled\": true, \"train\": 64, \"dev\": 8, \"test\": 8, \"min_length\": 8, \"max_length\": 20, \"max_depth\": 3, \"max_args\": 3}"
        --set "model={\"max_seq_len\": 32, \"dim\": 16, \"ffn_dim\": 16, \"window\": 4, \"rank\": 4, \"head_hidden\": 8}"
        --set train.steps=2 --set train.batch_size=8 --set schedule.warmup_steps=0 --set schedule.name=constant)
run_lsf(1 generate --checkpoint "${OUT}/listops/best.safetensors" --prompt "a")
if(NOT err MATCHES "task \"listops\".*character-level language model")
  message(FATAL_ERROR "generate on a ListOps checkpoint does not say why it refuses")
endif()
file(REMOVE_RECURSE "${OUT}")
