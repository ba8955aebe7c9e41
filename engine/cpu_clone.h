/* cpu_clone: SD_CPU_MULTIVERSION, for the CPU backend's hot loops (engine/cpu_ops.c's matmul and
 * dot product, engine/cpu_backend.c's attention). The build targets x86-64-v2 (SSE4.2), so a loop
 * left to the compiler gets 4-wide vectors; these get an AVX2 clone too. Helpers such a function
 * calls must be inlined into it (always_inline), or they stay baseline code. */
#ifndef SD_CPU_CLONE_H
#define SD_CPU_CLONE_H

/* An AVX2 clone beside the baseline one, picked once at load time (ifunc); every call in a process
 * uses the same one, so results stay reproducible within a run (and the same bits: the sources use
 * no FMA contraction under -std=c11, so each lane sums alike). Not under the sanitizers: GCC
 * instruments the generated resolver, which ld.so runs while relocating the executable, before the
 * sanitizer runtime has set up its thread state — under TSan its __tsan_func_entry call segfaults
 * before main (every TSan binary died at start-up, rc 139). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) &&     \
    !defined(__SANITIZE_THREAD__)
#define SD_CPU_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define SD_CPU_MULTIVERSION
#endif

#endif
