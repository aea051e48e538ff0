# Joins the PTX files' kernel entries and block bounds with ptxas -v's register counts (used by
# check_launch_resources.sh; pass every .ptx file before the ptxas logs). Prints one line per
# kernel — status (ok / OVER), registers, block size (.maxntid, - when none), registers the block
# needs, spilled bytes (stores + loads), mangled name — and "kernels over spilling" on stderr.
# Exits 1 when the inputs do not match: no kernel at all, or a kernel ptxas compiled that no PTX
# declared (or the reverse), so that a change in either tool's output fails loudly instead of
# checking nothing.
FNR == 1 { ptx = (FILENAME ~ /\.ptx$/); cur = "" }

# PTX: ".visible .entry NAME(" or ".entry NAME(", parameters, then directives such as
# ".maxntid 256, 1, 1" before the body's "{".
ptx && /\.entry[ \t]/ {
  name = $0
  sub(/^.*\.entry[ \t]+/, "", name)
  sub(/\(.*$/, "", name)
  cur = name
  declared[cur] = 1
  next
}
ptx && cur != "" && /^[ \t]*\.maxntid/ {
  line = $0
  sub(/^[ \t]*\.maxntid[ \t]+/, "", line)
  n = split(line, dims, /[ \t]*,[ \t]*/)
  threads = 1
  for (i = 1; i <= n; i++) threads *= dims[i] + 0
  bound[cur] = threads
  next
}
ptx && /^[ \t]*\{/ { cur = ""; next }

# ptxas -v: "Compiling entry function 'NAME' for 'sm_90'", "N bytes stack frame, N bytes spill
# stores, N bytes spill loads", "Used N registers, …" (device functions are reported as
# "Function properties for NAME" without a "Compiling entry" line: only entries are counted).
!ptx && /Compiling entry function/ {
  name = $0
  sub(/^[^']*'/, "", name)
  sub(/'.*$/, "", name)
  cur = name
  compiled[cur] = 1
  next
}
!ptx && cur != "" && /bytes spill stores/ {
  line = $0
  stores = line; sub(/ bytes spill stores.*$/, "", stores); sub(/^.*, /, "", stores)
  loads = line; sub(/ bytes spill loads.*$/, "", loads); sub(/^.*stores, /, "", loads)
  spill[cur] = stores + loads
  next
}
!ptx && cur != "" && /Used [0-9]+ registers/ {
  line = $0
  sub(/^.*Used /, "", line)
  sub(/ registers.*$/, "", line)
  regs[cur] = line + 0
  next
}

END {
  kernels = 0; over = 0; spilling = 0; mismatch = ""
  for (k in declared)
    if (!(k in regs)) mismatch = mismatch "\n  in the PTX but without a ptxas register count: " k
  for (k in compiled)
    if (!(k in declared)) mismatch = mismatch "\n  compiled by ptxas but not declared in the PTX: " k
  for (k in regs) {
    kernels++
    threads = (k in bound) ? bound[k] : 1024
    per_warp = int((regs[k] * 32 + 255) / 256) * 256
    need = per_warp * int((threads + 31) / 32)
    state = need <= 65536 ? "ok" : "OVER"
    if (state == "OVER") over++
    spilled = (k in spill) ? spill[k] : 0
    if (spilled > 0) spilling++
    printf "%s\t%d\t%s\t%d\t%d\t%s\n", state, regs[k], (k in bound) ? bound[k] : "-", need, spilled, k
  }
  if (kernels == 0) { print "no kernel found in the PTX and ptxas output" > "/dev/stderr"; exit 1 }
  if (mismatch != "") { print "the PTX and ptxas output disagree:" mismatch > "/dev/stderr"; exit 1 }
  print kernels, over, spilling > "/dev/stderr"
}
