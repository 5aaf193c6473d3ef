#!/usr/bin/env bash
# One GPU-machine session's work for the kernels: validation, sanitizers,
# benchmarks, with everything written under OUTDIR. Run on the GPU machine
# from the repository root, with the bundle of scripts/device-bundle
# (qattn test_kernels_mma test_kernels_quant_gpu) unpacked:
#
#   scripts/device-bundle test_kernels_mma test_kernels_quant_gpu   # here
#   mkdir -p /tmp/q && tar -xJf .device/qattn.tar.xz -C /tmp/q          # there
#   export LD_LIBRARY_PATH=/tmp/q/lib PATH=/tmp/q/bin:$PATH
#   bash kernels/gpu_run.sh OUTDIR [STEP...]
#
# STEPs (default: all, in this order):
#   check     qattn gpu-check on every instance (random inputs and the
#             activation files in data/ when present; QATTN_CHECK_ARGS adds
#             options, e.g. --layers 2) -> OUTDIR/gpu_check.csv;
#             test_kernels_mma, test_kernels_quant_gpu; gpu-check of the wgmma
#             instances with QATTN_FUSE_Q=1 -> OUTDIR/gpu_check_fused_q.csv
#   sanitize  compute-sanitizer memcheck and racecheck on small cases of each
#             family (mma, wgmma with and without Q fused, portable attention,
#             fast and portable quant)
#   bench     qattn bench + kernels/bench_torch.py -> OUTDIR/attn_fwd_bench.csv;
#             test_kernels_quant_gpu --bench (quantization vs D2D copy)
#   decode    the decode family (not in the default list): test_kernels_decode_gpu,
#             its memcheck / racecheck (--quick), qattn decode-bench +
#             kernels/bench_torch_decode.py -> OUTDIR/decode_bench.csv
#   sparse    the sparse prefill (not in the default list): test_kernels_sparse_gpu,
#             its memcheck / racecheck (--quick), qattn sparse-bench +
#             kernels/bench_torch_matmul.py -> OUTDIR/sparse_prefill_bench.csv
#   quant     the quantization kernels alone (not in the default list):
#             test_kernels_quant_gpu, its memcheck / racecheck, --bench with
#             the streamed kernel (tiles per slice 2, 4, 8) and without it
#             (QATTN_QUANT_STREAM=0), and ncu's DRAM / L2 counters of the
#             streamed kernels
# Logs: OUTDIR/<step>.log. Prints a short table last.
set -uo pipefail
out=${1:?usage: kernels/gpu_run.sh OUTDIR [check|sanitize|bench]...}
shift
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(check sanitize bench)
mkdir -p "$out"
status=0
summary=()

# a test program, its last "N passed, M failed" line or its exit status in
# the summary (a crash shows there, not only in the log)
tprog() {
    local log rc
    log=$(mktemp)
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || status=1
    summary+=("$*${QATTN_MMA_SYNC:+ (QATTN_MMA_SYNC=$QATTN_MMA_SYNC)}: $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)$([ "$rc" -eq 0 ] || echo " EXIT $rc")")
    rm -f "$log"
}

run_check() {
    local data=()
    for f in data/*.h5; do [ -f "$f" ] && data+=(--data "$f"); done
    qattn gpu-check --out "$out/gpu_check.csv" "${data[@]}" ${QATTN_CHECK_ARGS:-} --verbose || status=1
    tprog test_kernels_mma
    echo "-- the same with the mma.sync instances (QATTN_MMA_SYNC=1; sm_90 takes wgmma by default)"
    QATTN_MMA_SYNC=1 tprog test_kernels_mma
    tprog test_kernels_quant_gpu
    echo "-- the wgmma instances with Q quantized by the attention kernel where it can (QATTN_FUSE_Q=1)"
    QATTN_FUSE_Q=1 qattn gpu-check --instance attn_fwd_wgmma --out "$out/gpu_check_fused_q.csv" --verbose || status=1
    echo "-- the persistent d = 64 baselines on 5 CTAs, so that the cases' tiles loop (QATTN_WG_PERSIST_CTAS=5)"
    QATTN_WG_PERSIST_CTAS=5 qattn gpu-check --instance attn_fwd_wgmma_d64_qk_ --out "$out/gpu_check_persist.csv" --verbose || status=1
    echo "-- the d = 128 baselines in ping-pong with every mask (QATTN_WG_PINGPONG=1; the rule: not with a window)"
    QATTN_WG_PINGPONG=1 qattn gpu-check --instance attn_fwd_wgmma_d128_qk_ --out "$out/gpu_check_pingpong.csv" --verbose || status=1
    summary+=("gpu-check: $(awk -F, 'NR > 1 { n++; p += $6 } END { printf "%d of %d instances pass", p, n }' "$out/gpu_check.csv")")
    summary+=("gpu-check, QATTN_FUSE_Q=1: $(awk -F, 'NR > 1 { n++; p += $6 } END { printf "%d of %d wgmma instances pass", p, n }' "$out/gpu_check_fused_q.csv")")
    summary+=("gpu-check, QATTN_WG_PINGPONG=1: $(awk -F, 'NR > 1 { n++; p += $6 } END { printf "%d of %d d = 128 instances pass", p, n }' "$out/gpu_check_pingpong.csv")")
    summary+=("gpu-check, QATTN_WG_PERSIST_CTAS=5: $(awk -F, 'NR > 1 { n++; p += $6 } END { printf "%d of %d d = 64 instances pass", p, n }' "$out/gpu_check_persist.csv")")
}

# one compute-sanitizer run, counted: san TOOL LABEL COMMAND... (variable
# assignments before the call reach COMMAND)
san() {
    local tool=$1 label=$2
    shift 2
    n=$((n + 1))
    if "$cs" --tool "$tool" --error-exitcode 99 "$@" >"$out/san_tmp.log" 2>&1; then
        echo "$tool $label: clean"
    else
        echo "$tool $label: ERRORS"
        bad=$((bad + 1))
        status=1
    fi
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Hazard|Invalid" "$out/san_tmp.log" | head -5
}

run_sanitize() {
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    local n=0 bad=0
    for tool in memcheck racecheck; do
        for inst in attn_fwd_wgmma_d128_qk attn_fwd_wgmma_d64_qk attn_fwd_wgmma_d128_kb64 attn_fwd_wgmma_d64_kb64 attn_fwd_mma_d128 attn_fwd_mma_d64 \
            attn_fwd_wgmma_d128_kb64_qk_int8_pv_e4m3_acc_fp32 attn_fwd_wgmma_d128_kb64_qk_int4_pv_e4m3_acc_fp32 \
            attn_fwd_portable_d128_qk_int8_pv_e4m3_acc_fp22 attn_fwd_portable_d64_qk_int4_pv_fp16_acc_fp16 \
            quant_fast_in_fp16 quant_portable_in_fp32 decode_mma_d128_cache_bf16 decode_mma_d128_cache_int8 \
            decode_mma_d128_cache_int4 decode_mma_d64_cache_e4m3 decode_portable_d128; do
            san "$tool" "$inst" qattn gpu-check --quick --instance "$inst"
        done
        # Q quantized inside the wgmma kernel (int8 Q: sage2-8b-sm90's and the CK layout's)
        for inst in attn_fwd_wgmma_d128_qk_int8 attn_fwd_wgmma_d64_kb64_qk_int8_pv_e4m3_acc_fp32; do
            QATTN_FUSE_Q=1 san "$tool" "$inst (QATTN_FUSE_Q=1)" qattn gpu-check --quick --instance "$inst"
        done
        # the persistent d = 64 baseline on 3 CTAs (its quick case's 4 tiles loop)
        QATTN_WG_PERSIST_CTAS=3 san "$tool" "attn_fwd_wgmma_d64_qk_bf16 (QATTN_WG_PERSIST_CTAS=3)" qattn gpu-check --quick --instance attn_fwd_wgmma_d64_qk_bf16
        # the d = 128 baseline's consumer warpgroups in ping-pong, every mask of the quick cases
        QATTN_WG_PINGPONG=1 san "$tool" "attn_fwd_wgmma_d128_qk_bf16 (QATTN_WG_PINGPONG=1)" qattn gpu-check --quick --instance attn_fwd_wgmma_d128_qk_bf16
        # the quantization kernels' own test
        san "$tool" "test_kernels_quant_gpu --small" test_kernels_quant_gpu --small
    done
    # the ping-pong's named barriers
    QATTN_WG_PINGPONG=1 san synccheck "attn_fwd_wgmma_d128_qk (QATTN_WG_PINGPONG=1)" qattn gpu-check --quick --instance attn_fwd_wgmma_d128_qk
    rm -f "$out/san_tmp.log"
    summary+=("compute-sanitizer: $((n - bad)) of $n runs clean")
}

run_decode() {
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    test_kernels_decode_gpu >"$out/decode_check.log" 2>&1 || status=1
    tail -3 "$out/decode_check.log"
    summary+=("decode check: $(tail -1 "$out/decode_check.log")")
    local n=0 bad=0
    for tool in memcheck racecheck; do
        san "$tool" "test_kernels_decode_gpu --quick" test_kernels_decode_gpu --quick
    done
    summary+=("decode compute-sanitizer: $((n - bad)) of $n runs clean")
    qattn decode-bench --out "$out/decode_raw.csv" ${QATTN_DECODE_BENCH_ARGS:-} || status=1
    python3 kernels/bench_torch_decode.py --in "$out/decode_raw.csv" --out "$out/decode_bench.csv" || status=1
}

run_sparse() {
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    test_kernels_sparse_gpu >"$out/sparse_check.log" 2>&1 || status=1
    grep -E "^case" "$out/sparse_check.log" | cut -c1-60,150-260
    tail -3 "$out/sparse_check.log"
    summary+=("sparse check: $(tail -1 "$out/sparse_check.log")")
    local n=0 bad=0
    for tool in memcheck racecheck; do
        san "$tool" "test_kernels_sparse_gpu --quick" test_kernels_sparse_gpu --quick
    done
    summary+=("sparse compute-sanitizer: $((n - bad)) of $n runs clean")
    qattn sparse-bench --out "$out/sparse_raw.csv" ${QATTN_SPARSE_BENCH_ARGS:-} || status=1
    python3 kernels/bench_torch_matmul.py --in "$out/sparse_raw.csv" --out "$out/sparse_prefill_bench.csv" || status=1
    rm -f "$out/sparse_raw.csv"
    summary+=("$(awk -F, 'NR > 1 && $3 == "bf16" && $4 == 128 && $5 == 2048 {
        printf "sparse bf16 h=128 topk=2048 n_kv=%d: %.1f TFLOPS = %.2f of torch matmul; ", $7, $10, $10 / $13 }' \
        "$out/sparse_prefill_bench.csv")")
}

run_quant() {
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    test_kernels_quant_gpu | tail -n 3 || status=1
    local n=0 bad=0
    for tool in memcheck racecheck; do
        san "$tool" "test_kernels_quant_gpu --small" test_kernels_quant_gpu --small
    done
    summary+=("test_kernels_quant_gpu: $(test_kernels_quant_gpu 2>&1 | tail -n 1); sanitizers: $((n - bad)) of $n clean")
    for tpr in 4 2 8; do
        echo "-- streamed kernel, $tpr tiles per slice"
        QATTN_QUANT_STREAM_TPR=$tpr test_kernels_quant_gpu --bench | grep -E "copy|quant_fast" || status=1
    done
    echo "-- without the streamed kernel (QATTN_QUANT_STREAM=0)"
    QATTN_QUANT_STREAM=0 test_kernels_quant_gpu --bench | grep -E "copy|quant_fast" || status=1
    summary+=("quant (streamed): $(test_kernels_quant_gpu --bench | grep quant_fast)")
    local ncu
    ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    if [ -x "$ncu" ]; then
        "$ncu" --kernel-name regex:qattn_qs_kernel --launch-skip 9 --launch-count 3 --section WarpStateStats \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
            test_kernels_quant_gpu --bench >"$out/ncu_quant.log" 2>&1 || echo "ncu failed (see ncu_quant.log)"
        grep -E "qattn_qs_kernel|duration|dram__|lts__|sm__|inst_executed|Stall|Warp Cycles|Active Warps" "$out/ncu_quant.log" | sed 's/  */ /g' | head -60
    fi
}

run_bench() {
    qattn bench --schemes sage2-8b-sm90,sage2-8b,sage2-4b,fa3-fp8,sage1-b,sage1-vb,ck-i8fp8bf16,ck-i4fp8bf16,ck-fp8bf16,fp16,bf16 --out "$out/attn_fwd_bench.raw.csv" || { status=1; return; }
    python3 kernels/bench_torch.py --in "$out/attn_fwd_bench.raw.csv" --out "$out/attn_fwd_bench.csv" || status=1
    rm -f "$out/attn_fwd_bench.raw.csv"
    echo "-- the mma.sync kernel for d=128 (QATTN_MMA_SYNC=1), for comparison"
    QATTN_MMA_SYNC=1 qattn bench --schemes sage2-8b-sm90 --dims 128 --n 8192 --causal 0 || status=1
    test_kernels_quant_gpu --bench || status=1
    summary+=("$(awk -F, 'NR > 1 && $4 == "sage2-8b-sm90" && $5 == 128 && $6 == 0 && $7 == 8192 && $12 != "" {
        printf "sage2-8b-sm90 d=128 N=8192 non-causal: kernel %.1f TOPS = %.2fx flash, e2e %.1f = %.2fx flash; quant %.2f of copy (bytes floor), %.2f (on the kernels traffic)",
               $10, $10 / $12, $11, $11 / $12, $17 / $18, $20 / $18 }' "$out/attn_fwd_bench.csv")")
}

for s in "${steps[@]}"; do
    case "$s" in
    check | sanitize | bench | quant | decode | sparse)
        echo "== $s" >&2
        "run_$s" > >(tee "$out/$s.log") 2>&1
        ;;
    *) echo "kernels/gpu_run.sh: unknown step '$s'" >&2; exit 2 ;;
    esac
done
echo
echo "== summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), $(date -u +%F))"
for l in "${summary[@]}"; do echo "  $l"; done
exit $status
