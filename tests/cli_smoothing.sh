#!/usr/bin/env bash
# The foundation's acceptance check, as a test: on a synthetic file with
# planted per-channel K offsets (--k-bias 8), smoothing K makes the same
# scheme clearly more accurate, and the fp16/bf16 presets reach cos > 0.9999.
#   bash tests/cli_smoothing.sh QATTN SCRATCHDIR
set -u
source "$(dirname "$0")/lib.sh"
lib_init "$@"
qattn=$Q
dir=$S

"$qattn" synth --out "$dir/kb8.h5" --layers 1 --heads 4 --kv-heads 2 --tokens 512 --dim 64 --k-bias 8 --seed 5 \
    2>"$dir/synth.err" || bad "synth failed: $(cat "$dir/synth.err")"
"$qattn" accuracy --data "$dir/kb8.h5" --out "$dir/acc" --threads 2 \
    --schemes 'fp16,bf16,q=int8@token k=int8@token p=fp16 v=fp16,q=int8@token k=int8@token p=fp16 v=fp16 smooth=k,q=int4@block:64 k=int4@block:64 p=fp16 v=fp16,q=int4@block:64 k=int4@block:64 p=fp16 v=fp16 smooth=k' \
    >"$dir/acc.out" 2>"$dir/acc.err" || bad "accuracy failed: $(cat "$dir/acc.err")"

# mean of a metric per scheme label from summary.csv (columns: scheme,metric,n,mean,...)
mean_of() {
    awk -F'"' -v want="$1" -v metric="$2" '$2 == want { split($3, f, ","); if (f[2] == metric) print f[4] }' \
        "$dir/acc/summary.csv"
}
for s in fp16 bf16; do
    c=$(mean_of "$s" cos)
    if awk -v c="$c" 'BEGIN { exit !(c > 0.9999) }'; then ok; else bad "$s cos $c <= 0.9999"; fi
done
for bits in "int8@token" "int4@block:64"; do
    base="q=$bits k=$bits p=fp16 v=fp16"
    a=$(mean_of "$base" rel_l1)
    b=$(mean_of "$base smooth=k" rel_l1)
    # "clearly": at least 2x less relative L1 error with smoothing
    if awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && b > 0 && b * 2 < a) }'; then ok; else
        bad "$bits: rel_l1 without smoothing $a, with smooth=k $b"
    fi
    ca=$(mean_of "$base" cos)
    cb=$(mean_of "$base smooth=k" cos)
    if awk -v a="$ca" -v b="$cb" 'BEGIN { exit !(b > a) }'; then ok; else bad "$bits: cos $ca -> $cb"; fi
done
lib_finish
