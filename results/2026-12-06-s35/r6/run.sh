#!/usr/bin/env bash
# results/2026-12-06-s35/r6/run.sh: kernels/NOTES.md v43's kernel as an experiment
# (tools/gpu/spf_bench.cu): 2:4 on mma.sp in the dense tensor-core GEMV's shape, metadata
# precomputed in lane order, against the compacting kernel (103), back to back on the four 8B
# linears: B = 1 at split 1 / 2 / 4, B = 2 and 8 at split 1 / 2; spf_bench0 uncapped (83
# registers, 3 blocks an SM), spf_bench4 capped for 4 (64 registers, 36 bytes of spills). Each
# run checks both kernels against the fp64 reference first (B <= 2). Then Nsight Compute on gate_up
# and o at B = 1.
# Built here: nvcc -O3 -std=c++17 -I. -gencode arch=compute_90,code=sm_90 -DSPF_MINB={0,4}
#   tools/gpu/spf_bench.cu build/gpu/libsparsed.a -o build/gpu/tools/spf_bench{0,4} -lcublas
#   -lcublasLt -lcusolver -lnccl -ldl -ljansson -lmicrohttpd -luv -lpcre2-8 -lunistring
# packed into results/tmp/bins.tar.xz; on the device (carry .debs, results/tmp):
#   bash results/2026-12-06-s35/r6/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_have
export AB_PREBUILT=1 AB_LIMIT_S=${AB_LIMIT_S:-300}
NEW_BIN=build/gpu/tools/spf_bench0
prebuilt_start
for shape in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
    for v in 0 4; do
        for sp in 1 2 4; do
            build/gpu/tools/spf_bench$v $shape 1 $sp 200 2>&1 | sed "s/^/v$v /" >>"$R/spf.txt"
        done
        for b in 2 8; do
            for sp in 1 2; do
                build/gpu/tools/spf_bench$v $shape $b $sp 200 2>&1 | sed "s/^/v$v /" >>"$R/spf.txt"
            done
        done
    done
done
ab_note "spf timings rc=$? $(ab_el) s"
i=0
for c in "28672 4096 1 1" "4096 4096 1 2"; do
    for k in spf_kernel c24; do
        i=$((i + 1))
        ab_have 20 "ncu $c $k" || break
        timeout 60 ncu --clock-control none --kernel-name regex:"$k" --launch-skip 3 --launch-count 1 \
            --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
            --section LaunchStats build/gpu/tools/spf_bench0 $c 5 >"$R/ncu-$i.txt" 2>&1
        ab_note "ncu $i ($c $k) rc=$? $(ab_el) s"
    done
done
ab_pack
cp "$R"/summary.txt "$R"/gpu.txt "$R"/spf.txt "$R"/ncu-*.txt "$OUT"/ 2>/dev/null
grep -v "^v. check" "$R/spf.txt"; grep -c "FAILED" "$R/spf.txt"; grep "check" "$R/spf.txt" | head -4
