#!/usr/bin/env bash
# qattn gpu-check and qattn bench, their whole logic on the CPU: the qattn
# program linked against the host simulation of the portable kernels
# (qattn_sim). Checks the CSV contracts, that the portable instances agree
# with the emulation (in the simulation they are bit-exact: max_err 0), the
# scheme every instance is checked with, and the bad inputs (exit status 2,
# one line on stderr, no output file left behind).
#
# usage: bash tests/gpu_sim_cli.sh /path/to/qattn_sim SCRATCHDIR
set -u
source "$(dirname "$0")/lib.sh"
lib_init "$@"

# ---- gpu-check --list: every instance is reached by a scheme ----
if "$Q" gpu-check --list >"$S/list.txt" 2>"$ERR"; then ok "gpu-check --list"; else bad "gpu-check --list: $(cat "$ERR")"; fi
check "gpu-check --list: one line per instance" \
    test "$(wc -l <"$S/list.txt")" -eq "$("$Q" kernels | grep -vc '^backend')"
check "gpu-check --list: sage2-8b checks the int8/e4m3/fp22 instance" \
    grep -qE '^attn_fwd_portable_d64_qk_int8_pv_e4m3_acc_fp22 +sage2-8b$' "$S/list.txt"
check "gpu-check --list: no instance without a scheme" bash -c "! grep -q 'NO SCHEME' '$S/list.txt'"

# ---- gpu-check on two instances (quick cases), CSV contract ----
for inst in attn_fwd_portable_d64_qk_int8_pv_e4m3_acc_fp22 attn_fwd_portable_d64_qk_fp16_pv_fp16_acc_fp32; do
    csv=$S/gc_$inst.csv
    if "$Q" gpu-check --quick --instance "$inst" --out "$csv" >"$OUT" 2>"$ERR"; then
        ok "gpu-check $inst: exit 0"
    else
        bad "gpu-check $inst: exit $?: $(tail -c 400 "$ERR")"
    fi
    check "gpu-check $inst: header" \
        test "$(head -n 1 "$csv" 2>/dev/null)" = \
        "device,date,instance,cases,max_err,pass,path,head_dim,scheme,min_cos,max_dlse,max_cos_gap,skipped"
    check "gpu-check $inst: one row, 2 cases, pass, bit-exact in the simulation" \
        awk -F, -v i="$inst" 'NR == 2 && $3 == i && $4 == 2 && $5 + 0 == 0 && $6 == 1 && $2 ~ /^20[0-9][0-9]-[01][0-9]-[0-3][0-9]$/ { n++ }
                              END { exit !(n == 1 && NR == 2) }' "$csv"
done
# a quantization instance inside the plans of the four schemes (both quick cases each)
csv=$S/gc_quant.csv
if "$Q" gpu-check --quick --instance quant_fast_in_bf16 --out "$csv" >"$OUT" 2>"$ERR"; then
    ok "gpu-check quant_fast_in_bf16: exit 0"
else
    bad "gpu-check quant_fast_in_bf16: $(tail -c 400 "$ERR")"
fi
check "gpu-check quant_fast_in_bf16: 4 cases pass" \
    awk -F, 'NR == 2 && $3 == "quant_fast_in_bf16" && $4 == 4 && $6 == 1 { n++ } END { exit !(n == 1) }' "$csv"

# a decode instance on its quick cases: bit-exact with the split-KV emulation in the simulation
csv=$S/gc_decode.csv
if "$Q" gpu-check --quick --instance decode_portable_d64 --out "$csv" >"$OUT" 2>"$ERR"; then
    ok "gpu-check decode_portable_d64: exit 0"
else
    bad "gpu-check decode_portable_d64: $(tail -c 400 "$ERR")"
fi
check "gpu-check decode_portable_d64: 7 cases pass (2 of them HND), bit-exact" \
    awk -F, 'NR == 2 && $3 == "decode_portable_d64" && $4 == 7 && $5 == 0 && $6 == 1 { n++ } END { exit !(n == 1) }' "$csv"

# the sparse prefill's portable instance on its quick cases: bit-exact with qattn_emu_sparse
csv=$S/gc_sparse.csv
if "$Q" gpu-check --quick --instance sparse_portable --out "$csv" >"$OUT" 2>"$ERR"; then
    ok "gpu-check sparse_portable: exit 0"
else
    bad "gpu-check sparse_portable: $(tail -c 400 "$ERR")"
fi
check "gpu-check sparse_portable: 8 quick cases of every variant pass, bit-exact" \
    awk -F, 'NR == 2 && $3 == "sparse_portable" && $4 == 8 && $5 == 0 && $6 == 1 && $9 ~ /bf16/ && $9 ~ /prepass/ &&
             $9 ~ /fused/ { n++ } END { exit !(n == 1) }' "$csv"

# ---- sparse-bench: CSV contract on a tiny problem ----
csv=$S/sparse.csv
if "$Q" sparse-bench --heads 16 --topk 64 --nkv 1024 --nq 2 --portable-nq 2 --reps 1 --out "$csv" >"$OUT" 2>"$ERR"
then ok "sparse-bench: exit 0"; else bad "sparse-bench: $(tail -c 400 "$ERR")"; fi
check "sparse-bench: header" test "$(head -n 1 "$csv" 2>/dev/null | cut -d, -f1-11)" = \
    "device,date,variant,h,topk,n_q,n_kv,page,us,tflops,kv_gbs"
check "sparse-bench: one row a variant, positive times, the instance named" \
    awk -F, 'NR > 1 && $4 == 16 && $5 == 64 && $6 == 2 && $7 == 1024 && $8 == 64 && $9 > 0 && $11 > 0 &&
             $12 == "sparse_portable" { v[$3]++ } END { exit !(v["bf16"] == 1 && v["prepass"] == 1 &&
             v["fused"] == 1 && NR == 4) }' "$csv"

# ---- decode-bench: CSV contract on a tiny cache ----
csv=$S/decode.csv
if "$Q" decode-bench --caches bf16,int8@token --shapes 300:1:1 --reps 1 --copy-mib 1 --out "$csv" >"$OUT" 2>"$ERR"; then
    ok "decode-bench: exit 0"
else
    bad "decode-bench: $(tail -c 400 "$ERR")"
fi
check "decode-bench: header" test "$(head -n 1 "$csv" 2>/dev/null | cut -d, -f1-13)" = \
    "device,date,kernel,cache,sk,batch,hq,hkv,num_splits,us,kv_gbs,copy_gbs,us_torch"
check "decode-bench: per cache the plan's splits (> 1) and num_splits 1, positive times" \
    awk -F, 'NR > 1 && $5 == 300 && $6 == 1 && $7 == 8 && $8 == 1 && $10 > 0 && $11 > 0 {
                 n++; if ($9 > 1 && $14 > 0 && $15 > 0) s++; if ($9 == 1 && $14 == "" && $15 == "" && NF == 17) u++ }
             END { exit !(n == 4 && s == 2 && u == 2 && NR == 5) }' "$csv"
check "decode-bench: us_combine, us_split, page_order and kv_layout after us_torch" \
    test "$(head -n 1 "$csv" 2>/dev/null | cut -d, -f14-)" = "us_combine,us_split,page_order,kv_layout"
check "decode-bench: pages shuffled, NHD by default" awk -F, 'NR > 1 && ($16 != "shuffled" || $17 != "nhd") { exit 1 }' "$csv"
csv=$S/decode_sorted.csv
if "$Q" decode-bench --caches bf16 --shapes 300:2:1 --reps 1 --copy-mib 1 --page-order sorted --out "$csv" \
    >"$OUT" 2>"$ERR"; then ok "decode-bench --page-order sorted: exit 0"; else bad "decode-bench sorted: $(tail -c 400 "$ERR")"; fi
check "decode-bench --page-order sorted: the column says so" \
    awk -F, 'NR > 1 { n++; if ($16 != "sorted" || $10 <= 0) exit 1 } END { exit !(n == 2) }' "$csv"
csv=$S/decode_splits.csv
if "$Q" decode-bench --caches bf16 --shapes 300:2:1 --reps 1 --copy-mib 1 --splits 1,1 --out "$csv" \
    >"$OUT" 2>"$ERR"; then ok "decode-bench --splits: exit 0"; else bad "decode-bench --splits: $(tail -c 400 "$ERR")"; fi
check "decode-bench --splits 1,1: a row for each count once (the plan's and 1)" \
    awk -F, 'NR > 1 { n++; if (seen[$9]++ || $10 <= 0) exit 1 } END { exit !(n == 2 && seen[1] == 1) }' "$csv"
csv=$S/decode_hnd.csv
if "$Q" decode-bench --caches int8@token --shapes 300:2:2 --reps 1 --copy-mib 1 --kv-layout hnd --out "$csv" \
    >"$OUT" 2>"$ERR"; then ok "decode-bench --kv-layout hnd: exit 0"; else bad "decode-bench hnd: $(tail -c 400 "$ERR")"; fi
check "decode-bench --kv-layout hnd: the column says so" \
    awk -F, 'NR > 1 { n++; if ($17 != "hnd" || $10 <= 0) exit 1 } END { exit !(n >= 1) }' "$csv"
expect_err "decode-bench --kv-layout nhw" "unknown layout 'nhw'" "$S/decode_bad.csv" \
    "$Q" decode-bench --kv-layout nhw --out "$S/decode_bad.csv"
expect_err "decode-bench --stamps without the timeline build" "write no timeline" "$S/decode_stamps.csv" \
    "$Q" decode-bench --stamps "$S/decode_stamps.csv" --shapes 300:1:1

# ---- bench: CSV contract on a tiny problem ----
csv=$S/bench.csv
if "$Q" bench --schemes sage2-8b,fp16 --n 128 --dims 64 --causal 1 --tokens 128 --heads 2 --reps 1 \
    --out "$csv" >"$OUT" 2>"$ERR"; then ok "bench: exit 0"; else bad "bench: $(tail -c 400 "$ERR")"; fi
check "bench: header" test "$(head -n 1 "$csv" 2>/dev/null | cut -d, -f1-13)" = \
    "device,date,kernel,scheme,head_dim,causal,n,batch,heads,tops_kernel,tops_e2e,tops_torch_flash,tops_torch_cudnn"
check "bench: two rows with positive times, the quantized one with a quant kernel" \
    awk -F, 'NR > 1 && $5 == 64 && $6 == 1 && $7 == 128 && $8 == 1 && $9 == 2 && $14 > 0 && $15 > 0 {
                 n++; if ($4 == "sage2-8b" && $16 > 0 && $19 ~ /^quant_/) q++ }
             END { exit !(n == 2 && q == 1 && NR == 3) }' "$csv"

# ---- bad inputs: exit 2, one line, no output file ----
expect_err "gpu-check: unknown option" "unknown option" "" "$Q" gpu-check --bogus
expect_err "gpu-check: no instance matches" "no instance matches" "" "$Q" gpu-check --instance nosuchkernel --out "$S/x1.csv"
check "gpu-check: no instance matches: no file" test ! -e "$S/x1.csv"
expect_err "gpu-check: missing data file" "missing.h5" "" "$Q" gpu-check --data "$S/missing.h5" --out "$S/x2.csv"
check "gpu-check: missing data file: no file" test ! -e "$S/x2.csv"
printf 'not an HDF5 file\n' >"$S/bad.h5"
expect_err "gpu-check: not HDF5" "bad.h5" "" "$Q" gpu-check --data "$S/bad.h5" --out "$S/x3.csv"
check "gpu-check: not HDF5: no file" test ! -e "$S/x3.csv"
expect_err "gpu-check: bad --layers" "--layers" "" "$Q" gpu-check --layers 0
expect_err "bench: unknown scheme" "nosuchscheme" "" "$Q" bench --schemes sage2-8b,nosuchscheme --out "$S/x4.csv"
check "bench: unknown scheme: no file" test ! -e "$S/x4.csv"
expect_err "bench: bad --n" "bad value" "" "$Q" bench --n 128,x --out "$S/x5.csv"
expect_err "bench: bad --causal" "bad value" "" "$Q" bench --causal 2
expect_err "decode-bench: bad --shapes" "bad triple" "" "$Q" decode-bench --shapes 1024:1 --out "$S/x6.csv"
check "decode-bench: bad --shapes: no file" test ! -e "$S/x6.csv"
expect_err "decode-bench: unknown cache format" "unknown format" "" "$Q" decode-bench --caches int9 --out "$S/x7.csv"
expect_err "decode-bench: --page 0" "--page" "" "$Q" decode-bench --page 0
expect_err "decode-bench: --steps 0" "--steps" "" "$Q" decode-bench --steps 0
expect_err "decode-bench: bad --splits" "--splits: bad value '0'" "" "$Q" decode-bench --splits 4,0
expect_err "decode-bench: unknown --page-order" "--page-order: unknown order 'random'" "" "$Q" decode-bench \
    --page-order random --out "$S/x10.csv"
check "decode-bench: unknown --page-order: no file" test ! -e "$S/x10.csv"
expect_err "sparse-bench: unknown variant" "unknown variant 'int9'" "" "$Q" sparse-bench --variants bf16,int9 \
    --out "$S/x8.csv"
check "sparse-bench: unknown variant: no file" test ! -e "$S/x8.csv"
expect_err "sparse-bench: --nkv below 1024" "--nkv: bad value '100'" "" "$Q" sparse-bench --nkv 100
expect_err "sparse-bench: bad --heads" "--heads: bad value 'x'" "" "$Q" sparse-bench --heads 16,x --out "$S/x9.csv"
check "no temporary files left" bash -c "! ls '$S' | grep -q '\\.tmp'"

lib_finish
