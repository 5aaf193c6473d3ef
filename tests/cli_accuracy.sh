#!/usr/bin/env bash
# qattn accuracy from the command line: the good path on a small synthetic
# file (CSV shape and values, scheme lists, selections, determinism, threads),
# then every bad input, each of which must exit with status 2, print exactly
# one line on stderr containing a distinctive word, and leave no output: the
# --out directory is not created, and an existing one stays empty. Last, a run
# interrupted by SIGTERM or SIGINT leaves no CSV and no temporary file.
#
# Malformed activation files are built with the command-line tools of
# hdf5-tools (no Python, no C helper):
#   - h5import writes a dataset of any shape and type from a text file of
#     numbers, one per line; it reads "nan", "inf" and "-inf", accepts a
#     dimension of 0, and a PATH like layer_01/q creates the group too;
#   - h5copy copies such a group (or /seqlens) into a copy of a file that
#     `qattn synth` wrote, so a valid file gets a malformed /layer_01 next to
#     its valid /layer_00 and its root attributes; copied into a new file, a
#     layer comes without any root attribute;
#   - a wrong schema value is a same-length byte patch of the string
#     "qattn-activations/1": synth writes superblock version 0 and version 1
#     object headers, which carry no checksums, and the string lies once in
#     the global heap.
#
# usage: bash tests/cli_accuracy.sh /path/to/qattn SCRATCHDIR
set -u
source "$(dirname "$0")/lib.sh"
lib_init "$@"
mkdir -p "$S/m" || exit 1
M=$S/m # malformed files and what builds them

for tool in h5import h5copy; do
    if ! command -v "$tool" >/dev/null; then
        echo "FAIL $tool not found (install hdf5-tools)"
        echo "0 passed, 1 failed"
        exit 1
    fi
done

# rows (no header) of a CSV
rows() { tail -n +2 "$1"; }

EMPTY=$S/empty-dir # an existing, empty --out directory: must stay empty
mkdir -p "$EMPTY"
KEEP_EMPTY=$EMPTY

# ---- the good path ----
F=$S/a.h5
expect_ok "synth the test file" "$Q" synth --out "$F" --layers 2 --heads 4 --kv-heads 2 \
    --tokens 96 --seqlens 40,56 --dim 32 --seed 11
CUSTOM='q=int8@token,ch:16 k=int8@block:64 p=fp16 v=fp16 smooth=k'
LIST="fp16,sage2-8b,$CUSTOM,bf16"
NS=4 # schemes in LIST
A=$S/run1
expect_ok "accuracy: 4 schemes, one of them a string with a ,ch:16 group" \
    "$Q" accuracy --data "$F" --schemes "$LIST" --out "$A"
check "accuracy.csv and summary.csv written" test -s "$A/accuracy.csv" -a -s "$A/summary.csv"
check "stdout table names every scheme" \
    bash -c 'grep -q "^fp16 " "$1" && grep -q "^sage2-8b " "$1" && grep -q "^bf16 " "$1" &&
             grep -q "^q=int8@token,ch:16" "$1"' _ "$OUT"
hdr=$(head -n 1 "$A/accuracy.csv")
check "accuracy.csv header starts layer,head,scheme,cos,rel_l1,rmse,max_abs" \
    bash -c '[[ $1 == layer,head,scheme,cos,rel_l1,rmse,max_abs || $1 == layer,head,scheme,cos,rel_l1,rmse,max_abs,* ]]' \
    _ "$hdr"
unquote "$A/accuracy.csv" >"$S/log/a.csv"
check "rows = 2 layers x 4 heads x $NS schemes" test "$(rows "$S/log/a.csv" | wc -l)" -eq $((2 * 4 * NS))
check "every row has the header's column count" \
    awk -F, -v n="$(head -n 1 "$S/log/a.csv" | awk -F, '{ print NF }')" 'NF != n { exit 1 }' "$S/log/a.csv"
check "each layer x head x scheme exactly once" \
    test "$(rows "$S/log/a.csv" | cut -d, -f1-3 | sort -u | wc -l)" -eq $((2 * 4 * NS))
check "layers 0-1 and heads 0-3, nothing else" \
    test "$(rows "$S/log/a.csv" | cut -d, -f1,2 | sort -u | tr '\n' ' ')" = "0,0 0,1 0,2 0,3 1,0 1,1 1,2 1,3 "
check "every cos in (0, 1]" \
    awk -F, 'NR > 1 && !($4 + 0 > 0 && $4 + 0 <= 1) { print "bad cos: " $0; exit 1 }' "$S/log/a.csv"
check "other metrics are finite and >= 0" \
    awk -F, 'NR > 1 { for (i = 5; i <= 7; i++) if ($i !~ /^[0-9.e+-]+$/ || $i + 0 < 0) { print "bad: " $0; exit 1 } }' \
    "$S/log/a.csv"
check "fp16 cos > 0.9999 on every head" \
    awk -F, 'NR > 1 && $3 == "fp16" { n++; if (!($4 + 0 > 0.9999)) low = 1 } END { exit low || n != 8 }' "$S/log/a.csv"
check "sage2-8b is less accurate than fp16 (the schemes really differ)" \
    awk -F, 'NR > 1 { s[$3] += $4 } END { exit !(s["sage2-8b"] < s["fp16"]) }' "$S/log/a.csv"
check "the ,ch:16 scheme string is one scheme with 8 rows" \
    test "$(grep -cF "\"$CUSTOM\"" "$A/accuracy.csv")" -eq 8
check "its spec column keeps the ,ch:16 group" \
    grep -qF '"q=int8@token,ch:16 k=int8@block:64 p=fp16 v=fp16 smooth=k' "$A/accuracy.csv"
check "exactly the 4 schemes of the list" \
    test "$(rows "$S/log/a.csv" | cut -d, -f3 | sort -u | wc -l)" -eq $NS
check "kv_head = head / 2 (GQA, 4 heads on 2 kv heads)" \
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "kv_head") c = i; if (!c) exit 1; next }
             $c != int($2 / 2) { exit 1 }' "$S/log/a.csv"
# summary.csv: one row per scheme and metric
unquote "$A/summary.csv" >"$S/log/s.csv"
check "summary.csv header starts scheme,metric" grep -q '^scheme,metric,' "$S/log/s.csv"
for sch in fp16 sage2-8b "${CUSTOM//,/;}" bf16; do
    for met in cos rel_l1 rmse max_abs; do
        check "summary: $sch / $met once, over 8 heads" \
            test "$(awk -F, -v s="$sch" -v m="$met" '$1 == s && $2 == m && $3 == 8' "$S/log/s.csv" | wc -l)" -eq 1
    done
done
check "summary: fp16 mean cos > 0.9999" \
    awk -F, '$1 == "fp16" && $2 == "cos" { f = $4 + 0 > 0.9999 } END { exit !f }' "$S/log/s.csv"

# determinism, and threads do not change the numbers
expect_ok "same run again" "$Q" accuracy --data "$F" --schemes "$LIST" --out "$S/run2"
check "two runs: identical accuracy.csv" cmp -s "$A/accuracy.csv" "$S/run2/accuracy.csv"
check "two runs: identical summary.csv" cmp -s "$A/summary.csv" "$S/run2/summary.csv"
expect_ok "--threads 1" "$Q" accuracy --data "$F" --schemes "$LIST" --out "$S/t1" --threads 1
expect_ok "--threads 2" "$Q" accuracy --data "$F" --schemes "$LIST" --out "$S/t2" --threads 2
check "--threads 1 and 2: identical accuracy.csv" cmp -s "$S/t1/accuracy.csv" "$S/t2/accuracy.csv"
check "--threads 1 and 2: identical summary.csv" cmp -s "$S/t1/summary.csv" "$S/t2/summary.csv"

# selections
expect_ok "--layers 1 --heads 0,3" "$Q" accuracy --data "$F" --schemes "$LIST" --out "$S/sel" \
    --layers 1 --heads 0,3
unquote "$S/sel/accuracy.csv" >"$S/log/sel.csv"
check "selection: 1 layer x 2 heads x $NS schemes rows" test "$(rows "$S/log/sel.csv" | wc -l)" -eq $((2 * NS))
check "selection: exactly layer 1, heads 0 and 3" \
    test "$(rows "$S/log/sel.csv" | cut -d, -f1,2 | sort -u | tr '\n' ' ')" = "1,0 1,3 "
check "selection: the same numbers as the full run" \
    bash -c 'diff <(grep -E "^1,(0|3)," "$1") <(tail -n +2 "$2") >/dev/null' _ "$S/log/a.csv" "$S/log/sel.csv"
unquote "$S/sel/summary.csv" >"$S/log/sel-s.csv"
check "selection: summary counts 2 heads" awk -F, 'NR > 1 && $3 != 2 { exit 1 }' "$S/log/sel-s.csv"
expect_ok "--heads 1-2 and ;-separated schemes, nested new --out" "$Q" accuracy --data "$F" \
    --schemes 'fp16;bf16' --out "$S/nested/a/b" --heads 1-2 --threads 2
check "range selection: heads 1 and 2 of both layers, 2 schemes" \
    test "$(rows "$S/nested/a/b/accuracy.csv" | cut -d, -f1-3 | sort -u | tr '\n' ' ')" = \
    '0,1,"bf16" 0,1,"fp16" 0,2,"bf16" 0,2,"fp16" 1,1,"bf16" 1,1,"fp16" 1,2,"bf16" 1,2,"fp16" '
expect_ok "--mask causal" "$Q" accuracy --data "$F" --schemes fp16 --out "$S/causal" --mask causal
expect_ok "--mask none" "$Q" accuracy --data "$F" --schemes fp16 --out "$S/nomask" --mask none
check "--mask changes the result" bash -c '! cmp -s "$1" "$2"' _ "$S/causal/accuracy.csv" "$S/nomask/accuracy.csv"
echo "keep me" >"$S/run1/notes.txt"
expect_ok "rerun into a directory holding other files" "$Q" accuracy --data "$F" --schemes "$LIST" --out "$A"
check "rerun: same results, other file untouched" \
    bash -c 'cmp -s "$1/accuracy.csv" "$2/accuracy.csv" && test "$(cat "$1/notes.txt")" = "keep me"' _ "$A" "$S/run2"

# ---- bad arguments ----
X=$S/x # an --out directory that must never appear
acc() { "$Q" accuracy --data "$F" --schemes fp16 "$@"; }
expect_err "unknown preset in the list" "unknown scheme or preset 'nosuch'" "$X" \
    "$Q" accuracy --data "$F" --schemes fp16,nosuch --out "$X"
expect_err "unknown preset alone" "'sage3'" "$X" "$Q" accuracy --data "$F" --schemes sage3 --out "$X"
expect_err "unknown key" "unknown key 'foo'" "$X" "$Q" accuracy --data "$F" --schemes 'sage2-8b foo=bar' --out "$X"
expect_err "unknown format int9" "int9" "$X" "$Q" accuracy --data "$F" --schemes 'fp16,q=int9@token' --out "$X"
expect_err "bad group suffix" "bogus" "$X" "$Q" accuracy --data "$F" --schemes 'q=int8@token,bogus' --out "$X"
# accepted before, it allocated a scale per declared slot (1e9 of them, 4 GB
# and a minute on a 64-token file)
expect_err "a thread group of 1e9 slots" "larger than 65536" "$X" \
    "$Q" accuracy --data "$F" --schemes 'q=int8@thread:999999999/999999999/1' --out "$X"
# the same length limit as scheme-check (which took 1023 while this took 255)
s256="sage2-8b$(printf '%*s' 240 '')acc=fp22"
expect_err "a 256-character scheme" "at most 255" "$X" "$Q" accuracy --data "$F" --schemes "$s256" --out "$X"
expect_err "a key given twice" "key 'q' is given twice" "$X" \
    "$Q" accuracy --data "$F" --schemes 'fp16,q=int8@token q=int4@token' --out "$X"
expect_err "trailing comma in the list" "empty scheme" "$X" "$Q" accuracy --data "$F" --schemes 'fp16,' --out "$X"
expect_err "empty scheme list" "empty scheme" "$X" "$Q" accuracy --data "$F" --schemes '' --out "$X"
expect_err "empty --layers selection" "empty selection" "$X" acc --out "$X" --layers ''
expect_err "--heads outside the file" "outside" "$X" acc --out "$X" --heads 4
expect_err "--layers outside the file" "outside" "$X" acc --out "$X" --layers 0-2
expect_err "--heads reversed range" "outside" "$X" acc --out "$X" --heads 3-1
expect_err "--heads not a number" "bad selection word" "$X" acc --out "$X" --heads x
expect_err "--heads trailing comma" "comma" "$X" acc --out "$X" --heads 1,
expect_err "unknown mask" "unknown mask" "$X" acc --out "$X" --mask diagonal
expect_err "--threads 0" "--threads" "$X" acc --out "$X" --threads 0
expect_err "--threads abc" "--threads" "$X" acc --out "$X" --threads abc
# libgomp overflowed its stack (SIGSEGV) on 99999 threads; the cap is
# 4 per online CPU, at least 256, and --help says it
expect_err "--threads 99999" "--threads must be a positive integer up to" "$X" acc --out "$X" --threads 99999
"$Q" accuracy --help >"$S/log/help.txt"
cap=$(sed -n 's/.*--threads N .*at most \([0-9]*\) here.*/\1/p' "$S/log/help.txt")
check "accuracy --help states the --threads cap (4 per CPU, at least 256)" \
    test "${cap:-0}" -ge 256 -a "${cap:-0}" -ge $((4 * $(getconf _NPROCESSORS_ONLN)))
expect_err "--threads one above the cap" "--threads" "$X" acc --out "$X" --threads $((cap + 1))
expect_ok "--threads at the cap" acc --out "$S/tcap" --threads "$cap" --layers 0
expect_err "unknown option" "unknown option" "$X" acc --out "$X" --frobnicate
expect_err "option without a value" "missing value" "$X" acc --out "$X" --layers
expect_err "stray argument" "unexpected argument" "$X" acc --out "$X" extra
expect_err "missing --out" "required" "" acc
# it said "cannot create directory : File name too long"
expect_err "--out ''" "--out is empty" "" acc --out ''
expect_err "missing --data" "required" "$X" "$Q" accuracy --schemes fp16 --out "$X"
expect_err "missing --schemes" "required" "$X" "$Q" accuracy --data "$F" --out "$X"
expect_err "into the existing empty directory: bad scheme" "nosuch" "$EMPTY" \
    "$Q" accuracy --data "$F" --schemes nosuch --out "$EMPTY"
echo "not a directory" >"$S/plain.txt"
expect_err "--out is a regular file" "cannot create directory" "" acc --out "$S/plain.txt"
check "--out regular file untouched" test "$(cat "$S/plain.txt")" = "not a directory"
expect_ok "synth d = 1025" "$Q" synth --out "$S/wide.h5" --layers 1 --heads 1 --kv-heads 1 --tokens 8 --dim 1025
expect_err "int8 scheme on head dim 1025 (exact only to 1024)" "d <= 1024" "$X" \
    "$Q" accuracy --data "$S/wide.h5" --schemes fp16,sage2-8b --out "$X"

# ---- bad files ----
badfile() { # badfile NAME WORD FILE: the file fails with WORD, into a new and into an existing directory
    expect_err "$1" "$2" "$X" "$Q" accuracy --data "$3" --schemes fp16,sage2-8b --out "$X"
    expect_err "$1 (existing --out)" "$2" "$EMPTY" "$Q" accuracy --data "$3" --schemes fp16 --out "$EMPTY"
}
badfile "missing file" "No such file" "$S/missing.h5"
printf 'layer,q,k,v\n0,1,2,3\n' >"$M/text.h5"
badfile "not an HDF5 file" "not an HDF5 file" "$M/text.h5"
: >"$M/empty.h5"
badfile "empty file" "not an HDF5 file" "$M/empty.h5"
badfile "a directory" "not a regular file" "$M"
expect_ok "synth a file to truncate" "$Q" synth --out "$M/full.h5" --layers 2 --heads 4 \
    --kv-heads 2 --tokens 256 --dim 64 --dtype f32
size=$(wc -c <"$M/full.h5")
head -c $((size / 2)) "$M/full.h5" >"$M/trunc.h5"
badfile "truncated file" "truncated" "$M/trunc.h5"

# the base of the malformed files: one valid float32 layer [2, 8, 4] / [1, 8, 4]
expect_ok "synth the base file" "$Q" synth --out "$M/base.h5" --layers 1 --heads 2 --kv-heads 1 \
    --tokens 8 --dim 4 --dtype f32 --seed 5
expect_ok "the base file is valid" "$Q" accuracy --data "$M/base.h5" --schemes fp16 --out "$S/base"

# gen COUNT [INDEX VALUE]: COUNT numbers, one per line; entry INDEX is VALUE
gen() {
    awk -v n="$1" -v at="${2:--1}" -v sv="${3:-}" \
        'BEGIN { for (i = 0; i < n; i++) if (i == at) print sv; else printf "%.5f\n", sin(0.7 * i + 0.3) }'
}
# imp FILE NAME TYPE DIMS...: stdin's numbers become dataset NAME (a path,
# e.g. layer_01/q) of FILE when `h5imp FILE` runs; TYPE f32, i32 or i64; the
# dimensions multiply to the number count
imp() {
    local file=$1 name=$2 type=$3 ic oc size
    shift 3
    case $type in
    f32) ic=TEXTFP oc=FP size=32 ;;
    i32) ic=TEXTIN oc=IN size=32 ;;
    i64) ic=TEXTIN oc=IN size=64 ;;
    esac
    local base=$file.${name//\//_}
    cat >"$base.txt"
    printf 'PATH %s\nINPUT-CLASS %s\nRANK %d\nDIMENSION-SIZES %s\nOUTPUT-CLASS %s\nOUTPUT-SIZE %d\nOUTPUT-BYTE-ORDER LE\n' \
        "$name" "$ic" $# "$*" "$oc" "$size" >"$base.cfg"
}
# h5imp FILE: one h5import run writes every dataset imp prepared for FILE
h5imp() {
    local -a args=()
    local f
    for f in "$1".*.txt; do args+=("$f" -c "${f%.txt}.cfg"); done
    h5import "${args[@]}" -o "$1" >>"$S/log/tools.txt" 2>&1
}
# layer OUT.h5 SRC.h5 [DEST]: OUT = base.h5 (root attributes and a valid
# /layer_00) plus SRC's group /layer_01 as DEST (default /layer_01)
layer() {
    cp "$M/base.h5" "$1"
    h5copy -i "$2" -o "$1" -s /layer_01 -d "${3:-/layer_01}" >>"$S/log/tools.txt" 2>&1
}
# mk NAME QSHAPE KSHAPE VSHAPE [T INDEX VALUE]: $M/NAME.h5 = base.h5 plus a
# /layer_01 of datasets q, k, v of the given shapes ("H N D", or any rank; an
# empty shape leaves the dataset out), made in $M/NAME.src.h5; tensor T gets
# VALUE at flat index INDEX
mk() {
    local name=$1 src=$M/$1.src.h5 i=0 t shape
    local -a shapes=("$2" "$3" "$4")
    for t in q k v; do
        shape=${shapes[i]}
        i=$((i + 1))
        [[ -z $shape ]] && continue
        local count=1 dd
        for dd in $shape; do count=$((count * dd)); done
        # shellcheck disable=SC2086
        if [[ ${5:-} == "$t" ]]; then gen "$count" "$6" "$7"; else gen "$count"; fi |
            imp "$src" "layer_01/$t" f32 $shape
    done
    h5imp "$src"
    layer "$M/$name.h5" "$src"
}

mk good "2 8 4" "1 8 4" "1 8 4"
expect_ok "assembled 2-layer file is valid (the method works)" \
    "$Q" accuracy --data "$M/good.h5" --schemes fp16 --out "$S/good"
check "assembled file: 2 layers x 2 heads" test "$(rows "$S/good/accuracy.csv" | wc -l)" -eq 4

# NaN / Inf in the activations
mk nan "2 8 4" "1 8 4" "1 8 4" v 13 nan
badfile "NaN in /layer_01/v" "/layer_01/v has NaN at [head 0, token 3, channel 1]" "$M/nan.h5"
# the studies validate every layer first too: a NaN in layer 1 used to leave
# cells.csv with layer 0's rows and print two lines
expect_err "granularity: NaN in /layer_01/v" "/layer_01/v has NaN" "$X" \
    "$Q" granularity --data "$M/nan.h5" --out "$X"
expect_err "smoothing into an existing directory: NaN in /layer_01/v" "/layer_01/v has NaN" "$EMPTY" \
    "$Q" smoothing --data "$M/nan.h5" --out "$EMPTY"
mk inf "2 8 4" "1 8 4" "1 8 4" q 37 inf
badfile "Inf in /layer_01/q" "/layer_01/q has Inf at [head 1, token 1, channel 1]" "$M/inf.h5"
mk ninf "2 8 4" "1 8 4" "1 8 4" k 0 -inf
badfile "-Inf in /layer_01/k" "/layer_01/k has Inf" "$M/ninf.h5"
# shapes
mk dim0 "2 8 0" "1 8 0" "1 8 0"
badfile "head dim 0" "d (head dim) is 0" "$M/dim0.h5"
mk tok0 "2 0 4" "1 0 4" "1 0 4"
badfile "no tokens" "N (tokens) is 0" "$M/tok0.h5"
mk tokens "2 8 4" "1 6 4" "1 6 4"
badfile "q and k token counts differ" "tokens and head dim must match" "$M/tokens.h5"
mk dims "2 8 8" "1 8 8" "1 8 8"
badfile "layer_01 shape differs from layer_00" "but /layer_00/q has" "$M/dims.h5"
mk vk "2 8 4" "1 8 4" "2 8 4"
badfile "v and k shapes differ" "must be equal" "$M/vk.h5"
mk gqa "3 8 4" "2 8 4" "2 8 4"
badfile "q heads not a multiple of kv heads" "not a multiple" "$M/gqa.h5"
mk rank2 "2 32" "1 8 4" "1 8 4"
badfile "rank-2 q" "has rank 2" "$M/rank2.h5"
# schema
seq 64 | imp "$M/int.src.h5" layer_01/q i32 2 8 4
gen 32 | imp "$M/int.src.h5" layer_01/k f32 1 8 4
gen 32 | imp "$M/int.src.h5" layer_01/v f32 1 8 4
h5imp "$M/int.src.h5"
layer "$M/int.h5" "$M/int.src.h5"
badfile "integer q" "only float16 or float32" "$M/int.h5"
mk nov "2 8 4" "1 8 4" ""
badfile "layer without v" "has no dataset 'v'" "$M/nov.h5"
layer "$M/gap.h5" "$M/good.src.h5" /layer_02
badfile "layers not consecutive" "not consecutive" "$M/gap.h5"
layer "$M/name.h5" "$M/good.src.h5" /layer_1
badfile "bad layer name" "not a valid layer name" "$M/name.h5"
h5copy -i "$M/base.h5" -o "$M/noattr.h5" -s /layer_00 -d /layer_00 >>"$S/log/tools.txt" 2>&1
badfile "no root attributes" "missing root attribute 'schema'" "$M/noattr.h5"
cp "$M/base.h5" "$M/schema.h5"
off=$(grep -boa 'qattn-activations/1' "$M/schema.h5" | cut -d: -f1)
if [[ $(wc -w <<<"$off") -eq 1 ]]; then
    printf '9' | dd of="$M/schema.h5" bs=1 seek=$((off + 18)) conv=notrunc status=none
    badfile "wrong schema value" "'qattn-activations/9', expected 'qattn-activations/1'" "$M/schema.h5"
else
    bad "wrong schema value: the schema string is not in the file exactly once ($off)"
fi
printf '3\n4\n' | imp "$M/seq.src.h5" seqlens i64 2
h5imp "$M/seq.src.h5"
cp "$M/base.h5" "$M/seq.h5"
h5copy -i "$M/seq.src.h5" -o "$M/seq.h5" -s /seqlens -d /seqlens >>"$S/log/tools.txt" 2>&1
badfile "seqlens not summing to N" "sums to 7" "$M/seq.h5"

# a run that would hold more than the machine's memory (QATTN_MEMORY_MB
# stands in for it here) is refused before allocating, naming the file: it
# used to exit 1 with "out of memory"
expect_err "more memory than there is" "$F: the run would hold" "$X" \
    env QATTN_MEMORY_MB=0.1 "$Q" accuracy --data "$F" --schemes fp16 --out "$X"
expect_ok "QATTN_MEMORY_MB large enough" env QATTN_MEMORY_MB=100 "$Q" accuracy --data "$F" --schemes fp16 \
    --out "$S/mem"

# softmax_scale: finite but absurd (1e300) made every logit inf and every
# metric nan, with exit 0. A file with 0.125 gets its 8 bytes patched.
expect_err "synth --softmax-scale 1e300" "--softmax-scale" "$M/huge-scale.h5" \
    "$Q" synth --out "$M/huge-scale.h5" --layers 1 --heads 2 --kv-heads 1 --tokens 8 --dim 4 --softmax-scale 1e300
expect_ok "synth --softmax-scale 0.125" "$Q" synth --out "$M/scale.h5" --layers 1 --heads 2 --kv-heads 1 \
    --tokens 8 --dim 4 --softmax-scale 0.125
off=$(grep -obUaP '\x00\x00\x00\x00\x00\x00\xc0\x3f' "$M/scale.h5" | cut -d: -f1)
if [[ $(wc -w <<<"$off") -eq 1 ]]; then
    printf '\x9c\x75\x00\x88\x3c\xe4\x37\x7e' | dd of="$M/scale.h5" bs=1 seek="$off" conv=notrunc status=none
    badfile "softmax_scale 1e300" "'softmax_scale' is 1e+300, must be > 0 and at most 10000" "$M/scale.h5"
else
    bad "softmax_scale: the double 0.125 is not in the file exactly once ($off)"
fi

# declared sizes the file does not hold. dims8 H N D: the 24 bytes of a
# dataspace [H, N, D] (8-byte little-endian sizes) as a grep -P pattern
dims8() {
    local v
    for v in "$@"; do printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00\\x00\\x00\\x00' \
        $((v & 255)) $((v >> 8 & 255)) $((v >> 16 & 255)) $((v >> 24 & 255)); done
}
# grow FILE H N D NEWN: every dataspace [H, N, D] of FILE (its current and
# maximum dims, 24 bytes apart; a chunk index key that repeats the dims is
# left alone) becomes [H, NEWN, D]: the data stays as written. The object
# headers of files synth and h5import write carry no checksums.
grow() {
    local file=$1 new=$5 prev=-100 o x n=0
    for o in $(grep -obUaP "$(dims8 "$2" "$3" "$4")" "$file" | cut -d: -f1); do
        if [[ $((o - prev)) -eq 24 ]]; then
            for x in $prev $o; do
                printf "$(dims8 "$new" | cut -c1-32)" | dd of="$file" bs=1 seek=$((x + 8)) conv=notrunc status=none
                n=$((n + 1))
            done
        fi
        prev=$o
    done
    [[ $n -gt 0 ]]
}
# chunked (as synth writes): 3 chunks of [1, 77, 12] hold data, the rest of
# [3, 200000, 12] would read as zeros: it ran for minutes before
expect_ok "synth a file to grow" "$Q" synth --out "$M/grown.h5" --layers 1 --heads 3 --kv-heads 3 \
    --tokens 77 --dim 12
if grow "$M/grown.h5" 3 77 12 200000; then
    badfile "unwritten chunks" "/layer_00/q declares shape [3, 200000, 12] but only 3 of its 7794 chunks" \
        "$M/grown.h5"
else
    bad "unwritten chunks: the dataspace [3, 77, 12] is not in the file"
fi
# contiguous (as h5import writes): 540 bytes stored for [5, 65536, 3]
mk contig "5 9 3" "1 9 3" "1 9 3"
if grow "$M/contig.h5" 5 9 3 65536 && grow "$M/contig.h5" 1 9 3 65536; then
    badfile "contiguous data shorter than its shape" "/layer_01/q declares shape [5, 65536, 3] (3932160 bytes) but holds 540" \
        "$M/contig.h5"
else
    bad "contiguous data: the dataspace [5, 9, 3] is not in the file"
fi

# ---- outputs of an earlier run are never deleted ----
K=$S/earlier
expect_ok "an earlier run" "$Q" accuracy --data "$F" --schemes fp16 --out "$K"
cp "$K/summary.csv" "$S/log/earlier-summary.csv"
cp "$K/accuracy.csv" "$S/log/earlier-accuracy.csv"
same_as_earlier() { cmp -s "$K/summary.csv" "$S/log/earlier-summary.csv" && cmp -s "$K/accuracy.csv" "$S/log/earlier-accuracy.csv"; }
# accuracy.csv a directory: it failed at the end with exit 1, the wrong
# errno ("No such file or directory"), and deleted summary.csv
mv "$K/accuracy.csv" "$S/log/acc.moved" && mkdir "$K/accuracy.csv"
expect_err "DIR/accuracy.csv is a directory" "$K/accuracy.csv exists and is a directory" "" \
    "$Q" accuracy --data "$F" --schemes fp16,bf16 --out "$K"
check "DIR/accuracy.csv a directory: the earlier summary.csv is kept" cmp -s "$K/summary.csv" "$S/log/earlier-summary.csv"
rmdir "$K/accuracy.csv" && mv "$S/log/acc.moved" "$K/accuracy.csv"
# a write that fails (file size limit: summary.csv fits, accuracy.csv does
# not): the message has the write's errno, and no file of the earlier run
# is replaced or deleted; stderr goes through a pipe (the limit would stop
# a file)
expect_ok "synth 4 layers x 8 heads" "$Q" synth --out "$M/rows.h5" --layers 4 --heads 8 --kv-heads 1 \
    --tokens 16 --dim 8
bash -c 'ulimit -f 2; trap "" XFSZ; exec "$@" 2>&1 >/dev/null' _ \
    "$Q" accuracy --data "$M/rows.h5" --schemes fp16 --out "$K" | cat >"$ERR"
rc=${PIPESTATUS[0]}
check "a failed write: exit 1" test "$rc" -eq 1
check "a failed write: one line with the write's errno" \
    bash -c '[[ $(wc -l <"$1") -eq 1 ]] && grep -q "cannot write into .*: File too large" "$1"' _ "$ERR"
check "a failed write: the earlier summary.csv and accuracy.csv are kept" same_as_earlier
check "a failed write: no temporary file" no_temps

# ---- an interrupted run leaves no CSV and no temporary file ----
BIG=$M/big.h5
expect_ok "synth a larger file" "$Q" synth --out "$BIG" --layers 6 --heads 8 --kv-heads 2 \
    --tokens 1024 --dim 64
# interrupt SIG DIR: start a run into DIR, wait for its first finished layer
# (progress on stderr), send SIG; then no temporary file, and a DIR that did
# not exist is absent or empty. Job control (set -m) keeps SIGINT from being
# ignored, as it otherwise is for a background job of a script.
interrupt() {
    local sig=$1 dir=$2 pid seen=0 rc existed=0
    [[ -e $dir ]] && existed=1
    set -m
    QATTN_PROGRESS=1 "$Q" accuracy --data "$BIG" --schemes sage2-8b,fp16 --out "$dir" --threads 2 \
        >/dev/null 2>"$ERR" &
    pid=$!
    set +m
    for _ in $(seq 1 600); do
        if grep -q 'layers 1/' "$ERR"; then
            seen=1
            break
        fi
        sleep 0.02
    done
    kill -"$sig" "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    if [[ $seen -ne 1 ]]; then
        bad "interrupted run ($sig): no progress seen: $(tr '\r' '\n' <"$ERR" | head -c 300)"
    elif [[ $rc -eq 0 ]]; then
        bad "interrupted run ($sig): it finished before the signal (make the file bigger)"
    elif ! no_temps; then
        bad "interrupted run ($sig) left a temporary file: $(find "$S" -name '*.tmp.*')"
    elif [[ $existed -eq 0 && -e $dir && -n $(ls -A "$dir") ]]; then
        bad "interrupted run ($sig) left a file behind: $(ls -A "$dir")"
    else
        ok "interrupted run ($sig, exit $rc) leaves no CSV and no temporary file"
    fi
}
interrupt TERM "$S/killed-term"
interrupt INT "$S/killed-int"
# into a directory holding earlier results: they stay as they were
cp -r "$S/run2" "$S/keep"
echo "notes" >"$S/keep/notes.txt"
interrupt TERM "$S/keep"
check "interrupted run: the earlier accuracy.csv and summary.csv unchanged" \
    bash -c 'cmp -s "$1/accuracy.csv" "$2/accuracy.csv" && cmp -s "$1/summary.csv" "$2/summary.csv"' \
    _ "$S/keep" "$S/run2"
check "interrupted run: nothing added to or removed from --out" \
    test "$(ls -A "$S/keep" | sort | tr '\n' ' ')" = "accuracy.csv notes.txt summary.csv "

# a run started with SIGHUP ignored (nohup) keeps it ignored: a study used
# to install its handler at the first checkpoint and die on SIGHUP there
(trap '' HUP; exec "$Q" pv --data "$BIG" --out "$S/nohup" --boot 10 --threads 2) >/dev/null 2>"$ERR" &
pid=$!
seen=0
for _ in $(seq 1 500); do
    if grep -q "layer 0 done" "$ERR" 2>/dev/null; then
        seen=1
        break
    fi
    sleep 0.02
done
kill -HUP "$pid" 2>/dev/null
wait "$pid"
rc=$?
if [[ $seen -ne 1 ]]; then
    bad "nohup'ed study: no checkpoint seen: $(head -c 300 "$ERR")"
elif grep -q "layer 5 done" "$ERR" && [[ $(grep -c "layer 5 done" "$ERR") -eq 1 ]] && [[ $rc -eq 0 ]] &&
    [[ -s $S/nohup/summary.csv ]] && no_temps; then
    ok "nohup'ed study lives through SIGHUP after its first checkpoint"
else
    bad "nohup'ed study: exit $rc after SIGHUP: $(tail -c 300 "$ERR")"
fi

# temporary files that a SIGKILL left (their process is gone) are removed
# when a run starts in that directory; a live process's and other names stay
mkdir -p "$S/stale"
sleep 0 &
dead=$!
wait "$dead"
touch "$S/stale/.summary.csv.tmp.$dead" "$S/stale/.accuracy.csv.tmp.$dead" \
    "$S/stale/.summary.csv.tmp.$$" "$S/stale/.notes.tmp.$dead"
"$Q" accuracy --data "$F" --schemes fp16 --out "$S/stale" >/dev/null 2>"$ERR"
check "stale temporary files: the run succeeds" test $? -eq 0 -a -s "$S/stale/summary.csv"
check "stale temporary files of a dead process are removed" \
    test ! -e "$S/stale/.summary.csv.tmp.$dead" -a ! -e "$S/stale/.accuracy.csv.tmp.$dead"
check "a live process's temporary file and other names stay" \
    test -e "$S/stale/.summary.csv.tmp.$$" -a -e "$S/stale/.notes.tmp.$dead"
rm -f "$S/stale/.summary.csv.tmp.$$" "$S/stale/.notes.tmp.$dead"

# nothing but what the good cases wrote
extra=$(ls -A "$S" | grep -v -x -e log -e m -e a.h5 -e wide.h5 -e plain.txt -e empty-dir -e run1 -e run2 \
    -e t1 -e t2 -e tcap -e mem -e earlier -e nohup -e stale -e sel -e nested -e causal -e nomask -e base -e good -e keep -e killed-term -e killed-int)
check "scratch directory holds only the expected files" test -z "$extra"

lib_finish
