// LSF_SIMD_CLONES: builds a function once per x86-64 level (AVX-512, AVX2, baseline SSE2) and
// lets the dynamic linker pick one at load time (GCC target_clones / ifunc). The library is
// compiled for baseline x86-64, so the hot, short, memory-bound kernels marked with it are
// what runs at full vector width on newer CPUs. Every loop a marked function runs must be
// inlined into it (templates and inline helpers are): a call out of a clone runs baseline code.
#pragma once

#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(__clang__)
#define LSF_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LSF_SIMD_CLONES
#endif
