# `lsf attention` on a tiny trained ListOps run: an SVG map of each layer (well formed: one svg
# element, balanced groups and text elements, the three long-short panels and the query strip
# named), a PNG through Cairo, and out-of-range --layer / --head / --index / --query values
# refused with the valid range. Usage: cmake -DLSF=<lsf> -DCONFIG=<quickstart.json> -DOUT=<dir> -P attention_map.cmake
file(REMOVE_RECURSE "${OUT}")
include("${CMAKE_CURRENT_LIST_DIR}/run_lsf.cmake")

run_lsf(0 train --config "${CONFIG}" --out "${OUT}/run" --threads 1
        --set "data.generate={\"enabled\": true, \"train\": 200, \"dev\": 20, \"test\": 20, \"min_length\": 8, \"max_length\": 30, \"max_depth\": 4, \"max_args\": 4}"
        --set "model={\"max_seq_len\": 32, \"dim\": 16, \"ffn_dim\": 32, \"window\": 4, \"rank\": 4, \"head_hidden\": 16}"
        --set train.steps=8 --set train.eval_every=8 --set train.batch_size=16 --set schedule.warmup_steps=2)
set(ckpt "${OUT}/run/best.safetensors")
foreach(layer 0 1)
  run_lsf(0 attention --checkpoint "${ckpt}" --split dev --index 3 --layer ${layer} --head 1 --out "${OUT}/attn${layer}.svg")
  file(READ "${OUT}/attn${layer}.svg" svg)
  if(NOT svg MATCHES "^<\\?xml version=\"1.0\" encoding=\"UTF-8\"\\?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"" OR NOT svg MATCHES "</svg>\n$")
    message(FATAL_ERROR "attn${layer}.svg is not one complete SVG document")
  endif()
  foreach(tag g text)
    string(REGEX MATCHALL "<${tag}[ >]" opened "${svg}")
    string(REGEX MATCHALL "</${tag}>" closed "${svg}")
    list(LENGTH opened n_open)
    list(LENGTH closed n_closed)
    if(NOT n_open EQUAL n_closed OR n_open EQUAL 0)
      message(FATAL_ERROR "attn${layer}.svg: ${n_open} <${tag}> but ${n_closed} </${tag}>")
    endif()
  endforeach()
  foreach(part "Layer ${layer} \\(model\\.transformer_${layer}\\.mha\\), head 1" "window \\(w = 4, span 8\\)"
               "4 projection slots" "P: what each slot pools" "query [0-9]+: its attention over the keys"
               "listops dev example 3")
    if(NOT svg MATCHES "${part}")
      message(FATAL_ERROR "attn${layer}.svg lacks '${part}'")
    endif()
  endforeach()
endforeach()
run_lsf(0 attention --checkpoint "${ckpt}" --split test --out "${OUT}/attn.png")
file(READ "${OUT}/attn.png" png LIMIT 8 HEX)
if(NOT png STREQUAL "89504e470d0a1a0a")
  message(FATAL_ERROR "attn.png is not a PNG file")
endif()
foreach(case "--layer;2;--layer 2 is out of range: the model has 2 attention layers \\(0: model\\.transformer_0\\.mha, 1: model\\.transformer_1\\.mha\\)"
             "--head;2;--head 2 is out of range: layer 0 \\(model\\.transformer_0\\.mha\\) has 2 heads \\(0\\.\\.1\\)"
             "--index;20;example index 20 is out of range for the dev split \\(0\\.\\.19\\)"
             "--query;99;--query 99 is out of range: this example has [0-9]+ queries")
  list(GET case 0 flag)
  list(GET case 1 value)
  list(GET case 2 expected)
  run_lsf(1 attention --checkpoint "${ckpt}" ${flag} ${value} --out "${OUT}/bad.svg")
  if(NOT err MATCHES "${expected}")
    message(FATAL_ERROR "lsf attention ${flag} ${value}: the error does not say '${expected}'")
  endif()
endforeach()
file(REMOVE_RECURSE "${OUT}")
