#!/usr/bin/env bash
# qattn synth / inspect from the command line: good cases, then every bad
# input, each of which must exit with status 2, print exactly one line on
# stderr containing a distinctive word, and leave no output or temporary file.
#
# usage: bash tests/cli_h5.sh /path/to/qattn SCRATCHDIR
set -u
source "$(dirname "$0")/lib.sh"
lib_init "$@"

SMALL=(--layers 2 --heads 4 --kv-heads 2 --tokens 96 --dim 32)

# ---- synth and inspect: good cases ----
expect_ok "synth f16" "$Q" synth --out "$S/a.h5" "${SMALL[@]}" --seed 3
check "synth f16 wrote the file" test -s "$S/a.h5"
expect_ok "synth f32 with seqlens, outliers, model" "$Q" synth --out "$S/b.h5" "${SMALL[@]}" \
    --dtype f32 --seqlens 40,56 --outlier-tokens 2 --model toy-model --seed 4
expect_ok "synth k-bias 0" "$Q" synth --out "$S/k0.h5" "${SMALL[@]}" --k-bias 0 --seed 5
expect_ok "synth k-bias 8" "$Q" synth --out "$S/k8.h5" "${SMALL[@]}" --k-bias 8 --seed 5
expect_ok "synth again, same seed" "$Q" synth --out "$S/a2.h5" "${SMALL[@]}" --seed 3
expect_ok "synth --help" "$Q" synth --help
check "synth --help prints the usage" grep -q -- "--kv-heads" "$OUT"

expect_ok "inspect f16" "$Q" inspect "$S/a.h5"
check "inspect shows the dtype" grep -q "dtype *float16" "$OUT"
check "inspect shows the shape" grep -q "heads (kv) *2" "$OUT"
check "inspect shows the schema attributes" grep -q "license *CC0-1.0" "$OUT"
cp "$OUT" "$S/log/a.txt"
expect_ok "inspect same seed" "$Q" inspect "$S/a2.h5"
check "same seed, same statistics" \
    diff <(grep -v '^file' "$S/log/a.txt") <(grep -v '^file' "$OUT")
expect_ok "inspect f32" "$Q" inspect "$S/b.h5"
check "inspect f32: dtype" grep -q "dtype *float32" "$OUT"
check "inspect f32: seqlens" grep -q "seqlens *2 sequences: 40 56" "$OUT"
check "inspect f32: model" grep -q "model *toy-model" "$OUT"
expect_ok "inspect --csv k-bias 0" "$Q" inspect --csv "$S/k0.h5"
cp "$OUT" "$S/log/k0.csv"
expect_ok "inspect --csv k-bias 8" "$Q" inspect "$S/k8.h5" --csv
cp "$OUT" "$S/log/k8.csv"
check "csv header" grep -qx "layer,tensor,mean_abs_mean,max_mean_over_std,max_abs,amax_ratio,top_channel" \
    "$S/log/k8.csv"
check "csv has 6 rows" test "$(grep -c '^[0-9]' "$S/log/k8.csv")" -eq 6
kmax() { awk -F, '$2 == "k" && $4 + 0 > m { m = $4 + 0 } END { print m + 0 }' "$1"; }
r0=$(kmax "$S/log/k0.csv")
r8=$(kmax "$S/log/k8.csv")
echo "     K max |mean|/std: k-bias 0 -> $r0, k-bias 8 -> $r8"
check "K outlier ratio larger with --k-bias 8 than 0" \
    awk -v a="$r8" -v b="$r0" 'BEGIN { exit !(a > 4 * b && a > 2) }'
expect_ok "inspect --help" "$Q" inspect --help

# ---- synth: bad arguments ----
X=$S/x.h5
expect_err "synth heads 3 kv-heads 2" "divide" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 3 --kv-heads 2 --tokens 8 --dim 4
expect_err "synth dim 0" "positive" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 0
expect_err "synth layers abc" "positive" "$X" \
    "$Q" synth --out "$X" --layers abc --heads 2 --kv-heads 1 --tokens 8 --dim 4
expect_err "synth negative tokens" "positive" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens -8 --dim 4
expect_err "synth unknown option" "unknown option" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4 --frobnicate
expect_err "synth option without value" "missing value" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim
expect_err "synth seqlens not summing" "sum" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4 --seqlens 3,4
expect_err "synth seqlens with 0" "positive" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4 --seqlens 8,0
# 16 entries of 2^60 - 1 and a 32 sum to 2^64 + 16: wrapped in 64 bits,
# that was --tokens, and the generator wrote past its buffers
big=$(printf '1152921504606846975,%.0s' $(seq 16))32
expect_err "synth seqlens summing past 2^64" "--seqlens" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 1 --kv-heads 1 --tokens 16 --dim 4 --seqlens "$big"
expect_err "synth seqlens entry beyond --tokens" "more than --tokens" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 1 --kv-heads 1 --tokens 16 --dim 4 --seqlens 8,1000000000
expect_err "synth missing --out" "missing" "" \
    "$Q" synth --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4
expect_err "synth missing --dim" "missing" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8
expect_err "synth bad dtype" "dtype" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4 --dtype f8
expect_err "synth bad k-bias" "k-bias" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4 --k-bias nan
expect_err "synth: a layer larger than the memory" "the run would hold" "$X" \
    env QATTN_MEMORY_MB=0.01 "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 256 --dim 64
expect_err "synth too many outliers" "more than" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4 --outlier-tokens 9
expect_err "synth stray argument" "unexpected argument" "$X" \
    "$Q" synth --out "$X" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4 extra
expect_err "synth into a missing directory" "cannot create" "$S/nodir/x.h5" \
    "$Q" synth --out "$S/nodir/x.h5" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4
check "no directory created" test ! -e "$S/nodir"
# an existing directory as --out: refused before any work (it used to
# generate every layer, then fail to rename with exit 1)
mkdir -p "$S/outdir"
expect_err "synth --out an existing directory" "is a directory" "" \
    "$Q" synth --out "$S/outdir" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4
check "the directory is left as it was" bash -c '[[ -d $1 && -z $(ls -A "$1") ]]' _ "$S/outdir"

# ---- inspect: bad inputs ----
expect_err "inspect missing file" "No such file" "" "$Q" inspect "$S/missing.h5"
printf 'layer,q,k,v\n0,1,2,3\n' >"$S/text.h5"
expect_err "inspect non-HDF5 file" "not an HDF5 file" "" "$Q" inspect "$S/text.h5"
: >"$S/empty.h5"
expect_err "inspect empty file" "not an HDF5 file" "" "$Q" inspect "$S/empty.h5"
expect_ok "synth a file to truncate" "$Q" synth --out "$S/full.h5" --layers 2 --heads 4 \
    --kv-heads 2 --tokens 256 --dim 64 --dtype f32
size=$(wc -c <"$S/full.h5")
head -c $((size / 2)) "$S/full.h5" >"$S/trunc.h5"
expect_err "inspect truncated file" "truncated" "" "$Q" inspect "$S/trunc.h5"
expect_err "inspect a directory" "not a regular file" "" "$Q" inspect "$S/log"
expect_err "inspect: a layer larger than the memory" "$S/a.h5: the run would hold" "" \
    env QATTN_MEMORY_MB=0.01 "$Q" inspect "$S/a.h5"
expect_err "inspect unknown option" "unknown option" "" "$Q" inspect "$S/a.h5" --frobnicate
expect_err "inspect no file" "missing" "" "$Q" inspect
expect_err "inspect two files" "exactly one" "" "$Q" inspect "$S/a.h5" "$S/b.h5"

# ---- files corrupt enough to crash or hang libhdf5 ----
# The check runs in a child process: a crash or a hang there is exit 2 and
# one line naming the file. Both files differ from a valid one in the size
# field of one object of the global heap, where h5py-style variable-length
# strings live.
expect_ok "synth --vlen-strings" "$Q" synth --out "$S/vlen.h5" "${SMALL[@]}" --vlen-strings
expect_ok "inspect a file with variable-length strings" "$Q" inspect "$S/vlen.h5"
check "inspect reads the variable-length model" grep -q "model *synthetic" "$OUT"
check "synth writes fixed-length strings by default" \
    bash -c '! h5dump -A "$1" | grep -q H5T_VARIABLE && h5dump -A "$2" | grep -q H5T_VARIABLE' \
    _ "$S/a.h5" "$S/vlen.h5"
u64() { od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }
# put64 FILE OFFSET VALUE: a little-endian u64 in place
put64() {
    local b="" i
    for i in 0 1 2 3 4 5 6 7; do b+=$(printf '\\x%02x' $((($3 >> (8 * i)) & 255))); done
    printf "$b" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
# GCOL, version, 3 reserved, collection size; then per object: index,
# refcount, 4 reserved, size (u64), data padded to 8 bytes
gcol=$(grep -obUaP 'GCOL\x01' "$S/vlen.h5" | head -1 | cut -d: -f1)
size1=$(u64 "$S/vlen.h5" $((gcol + 24)))
check "the global heap of the vlen file is found" test -n "$gcol" -a "${size1:-0}" -gt 0
obj2=$((gcol + 16 + 16 + (size1 + 7) / 8 * 8))
cp "$S/vlen.h5" "$S/crash.h5"
put64 "$S/crash.h5" $((gcol + 24)) 2147483647
expect_err "inspect: a heap object's size 2^31 - 1 (libhdf5 crashes)" \
    "$S/crash.h5: corrupt HDF5 file: libhdf5 crashed" "" "$Q" inspect "$S/crash.h5"
expect_err "accuracy: the same file" "$S/crash.h5: corrupt HDF5 file" "$S/acc" \
    "$Q" accuracy --data "$S/crash.h5" --out "$S/acc" --schemes sage2-8b
cp "$S/vlen.h5" "$S/hang.h5"
put64 "$S/hang.h5" $((obj2 + 8)) $(($(u64 "$S/hang.h5" $((obj2 + 8))) + 17))
t0=$(date +%s%N)
expect_err "inspect: a heap object 17 bytes longer (libhdf5 loops forever)" \
    "$S/hang.h5: corrupt HDF5 file: libhdf5 was still reading its metadata after 2 s" "" \
    env QATTN_H5_CHECK_SECONDS=2 "$Q" inspect "$S/hang.h5"
ms=$((($(date +%s%N) - t0) / 1000000))
check "the hanging check is stopped at its limit (${ms} ms)" test "$ms" -lt 8000
# qattn killed during the check: its child dies at its own alarm (limit + 1 s)
QATTN_H5_CHECK_SECONDS=1 "$Q" inspect "$S/hang.h5" >/dev/null 2>&1 &
pid=$!
sleep 0.5
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
sleep 2.5
# a process whose command line holds $1 (no procps needed)
running() {
    local c
    for c in /proc/[0-9]*/cmdline; do
        [[ $(tr '\0' ' ' <"$c" 2>/dev/null) == *"$1"* ]] && return 0
    done
    return 1
}
if running "inspect $S/hang.h5"; then
    bad "the check's child outlives a killed qattn"
else
    ok "the check's child dies when qattn was killed"
fi
expect_err "a bad QATTN_H5_CHECK_SECONDS" "QATTN_H5_CHECK_SECONDS" "" \
    env QATTN_H5_CHECK_SECONDS=0 "$Q" inspect "$S/a.h5"
check "no core file from the crashed checks" bash -c '! ls core* "$1"/core* 2>/dev/null | grep -q .' _ "$S"

# ---- an interrupted synth leaves nothing behind ----
BIG=$S/big.h5
"$Q" synth --out "$BIG" --layers 400 --heads 8 --kv-heads 2 --tokens 2048 --dim 128 \
    >/dev/null 2>"$ERR" &
pid=$!
seen=0
for _ in $(seq 1 200); do
    if find "$S" -name '.big.h5.tmp.*' | grep -q .; then
        seen=1
        break
    fi
    sleep 0.05
done
if [[ $seen -eq 1 ]]; then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    if [[ $rc -eq 0 ]]; then
        bad "interrupted synth: it finished before the signal (make it bigger)"
    elif [[ -e $BIG ]] || ! no_temps; then
        bad "interrupted synth left a file behind: $(ls -A "$S")"
    else
        ok "interrupted synth (exit $rc) leaves no file"
    fi
else
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    bad "interrupted synth: no temporary file appeared"
fi

# nothing but what the good cases wrote
extra=$(ls -A "$S" | grep -v -x -e log -e a.h5 -e a2.h5 -e b.h5 -e k0.h5 -e k8.h5 \
    -e full.h5 -e trunc.h5 -e text.h5 -e empty.h5 -e outdir -e vlen.h5 -e crash.h5 -e hang.h5)
check "scratch directory holds only the expected files" test -z "$extra"

# a fuzz_h5 finding (2026-11-27): a chunk dim edited past the shape made libhdf5 copy out of
# bounds when the layer was read; the open check refuses the file now
expect_err "inspect: chunks larger than the shape" "larger than its shape" "" \
    "$Q" inspect "$(dirname "$0")/../fuzz/corpus/h5/chunk-past-shape.h5"

lib_finish
