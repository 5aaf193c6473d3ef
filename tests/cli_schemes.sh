#!/usr/bin/env bash
# qattn schemes, scheme-check, bench-cpu and the command dispatch from the
# command line: the preset list, normalization and errors of scheme strings,
# --help of every subcommand, and a tiny CPU benchmark. Every bad input must
# exit with status 2 and print exactly one line on stderr containing a
# distinctive word.
#
# usage: bash tests/cli_schemes.sh /path/to/qattn SCRATCHDIR
set -u
source "$(dirname "$0")/lib.sh"
lib_init "$@"

# ---- qattn schemes ----
PRESETS=(fp16 bf16 sage1-b sage1-vb sage2-8b sage2-8b-sm90 sage2-4b fa3-fp8 ck-i8fp8bf16 ck-i4fp8bf16 ck-fp8bf16)
expect_ok "schemes" "$Q" schemes
cp "$OUT" "$S/log/schemes.txt"
check "schemes: 11 lines" test "$(wc -l <"$S/log/schemes.txt")" -eq 11
check "schemes: exactly the 11 presets" \
    test "$(awk '{ print $1 }' "$S/log/schemes.txt" | sort | tr '\n' ' ')" = \
    "$(printf '%s\n' "${PRESETS[@]}" | sort | tr '\n' ' ')"
# spec NAME: the spec string `qattn schemes` lists for NAME
spec() { awk -v n="$1" '$1 == n { sub(/^[^ ]+ +/, ""); print }' "$S/log/schemes.txt"; }
for p in "${PRESETS[@]}"; do
    sp=$(spec "$p")
    check "schemes: $p has a full spec (q k p v smooth acc kblock out)" \
        bash -c '[[ $1 =~ ^q=[^\ ]+\ k=[^\ ]+\ p=[^\ ]+\ v=[^\ ]+\ smooth=[^\ ]+\ acc=[^\ ]+\ kblock=[0-9]+\ out=[a-z0-9]+$ ]]' _ "$sp"
    expect_ok "scheme-check $p" "$Q" scheme-check "$p"
    check "scheme-check $p prints the listed spec" test "$(cat "$OUT")" = "$sp"
    expect_ok "scheme-check of $p's spec" "$Q" scheme-check "$sp"
    check "$p's spec is already normalized" test "$(cat "$OUT")" = "$sp"
done
# the presets as docs/DESIGN.md ("Schemes") describes them
has() { # has PRESET WORD...: the preset's spec holds every WORD (space-separated words)
    local p=$1 w sp
    sp=" $(spec "$1") "
    shift
    for w in "$@"; do [[ $sp == *" $w "* ]] || return 1; done
}
check "fp16: no quantization, 128-key blocks" has fp16 q=fp16 k=fp16 p=fp16 v=fp16 smooth=none kblock=128
check "bf16: no quantization, 128-key blocks" has bf16 q=bf16 k=bf16 p=bf16 v=bf16 smooth=none kblock=128
check "sage1-b: int8 per-block Q128/K64, smooth k, fp16 P/V and accumulator" \
    has sage1-b q=int8@block:128 k=int8@block:64 smooth=k p=fp16 v=fp16 acc=fp16
check "sage1-vb: P int8 static, V int8 per-channel" \
    has sage1-vb q=int8@block:128 k=int8@block:64 p=int8@static v=int8@channel
check "sage2-8b: the DESIGN.md example" \
    has sage2-8b q=int8@thread:32/8/1 k=int8@thread:64/8/2 p=e4m3@static v=e4m3@channel smooth=k \
    acc=fp22+fp32:64 out=bf16
check "sage2-8b-sm90: Hopper tiles, kblock 128" \
    has sage2-8b-sm90 q=int8@thread:16/8/1 k=int8@thread:128/8/2 kblock=128
check "sage2-4b: int4 per-thread, smooth q+k, two-level accumulator" \
    has sage2-4b q=int4@thread:32/8/1 k=int4@thread:64/8/2 smooth=q+k p=e4m3@static v=e4m3@channel \
    acc=fp22+fp32:64
check "fa3-fp8: e4m3 per-tensor" has fa3-fp8 q=e4m3@tensor k=e4m3@tensor v=e4m3@tensor
check "ck-i8fp8bf16: int8 Q/K, fp8 P/V, bf16 out" has ck-i8fp8bf16 p=e4m3@static v=e4m3@channel out=bf16
check "ck-i4fp8bf16: int4 Q/K" has ck-i4fp8bf16 smooth=q+k out=bf16
check "ck-fp8bf16: e4m3 Q/K" has ck-fp8bf16 out=bf16
check "ck presets: Q per-thread 4 tokens, K 16 tokens (64/16/1, 64/16/4)" \
    bash -c 'for p in ck-i8fp8bf16 ck-i4fp8bf16 ck-fp8bf16; do
                 grep -Eq "^$p +q=[a-z0-9]+@thread:64/16/1 k=[a-z0-9]+@thread:64/16/4 " "$1" || exit 1
             done' _ "$S/log/schemes.txt"
expect_err "schemes extra argument" "unexpected argument" "" "$Q" schemes extra
expect_err "schemes unknown option" "unknown option" "" "$Q" schemes --bogus

# ---- qattn scheme-check: normalization ----
expect_ok "scheme-check 'sage2-8b acc=fp22'" "$Q" scheme-check 'sage2-8b acc=fp22'
check "override: acc=fp22, the rest of sage2-8b kept" \
    test "$(cat "$OUT")" = "$(spec sage2-8b | sed 's/ acc=[^ ]* / acc=fp22 /')"
expect_ok "scheme-check 'smooth=v+k+q q=int4@token,ch:32'" "$Q" scheme-check 'smooth=v+k+q q=int4@token,ch:32'
cp "$OUT" "$S/log/smooth.txt"
check "smooth written in canonical order q+k+v" grep -q ' smooth=q+k+v ' "$S/log/smooth.txt"
check "the ,ch:32 group kept" grep -q '^q=int4@token,ch:32 ' "$S/log/smooth.txt"
check "unset keys filled in (full spec)" \
    grep -Eq '^q=[^ ]+ k=[^ ]+ p=[^ ]+ v=[^ ]+ smooth=[^ ]+ acc=[^ ]+ kblock=[0-9]+ out=[^ ]+$' "$S/log/smooth.txt"
check "one line on stdout" test "$(wc -l <"$S/log/smooth.txt")" -eq 1
expect_ok "normalized form is stable" "$Q" scheme-check "$(cat "$S/log/smooth.txt")"
check "normalizing twice changes nothing" cmp -s "$OUT" "$S/log/smooth.txt"
expect_ok "extra spaces are normalized" "$Q" scheme-check '  sage2-8b    kblock=128  '
check "extra spaces: kblock=128, one space between words" \
    test "$(cat "$OUT")" = "$(spec sage2-8b | sed 's/ kblock=[0-9]* / kblock=128 /')"

# ---- qattn scheme-check: errors name the offending word ----
expect_err "unknown key" "'foo'" "" "$Q" scheme-check 'sage2-8b foo=bar'
expect_err "unknown key: says key" "unknown key" "" "$Q" scheme-check 'q=int8@token foo=bar'
expect_err "unknown preset" "'sage3'" "" "$Q" scheme-check sage3
# a message quoting an input with a newline is still one line (fuzz_scheme)
expect_err "a scheme list with a newline" "scheme 'fp16?bogus'" "" \
    "$Q" accuracy --data "$S/none.h5" --out "$S/acc" --schemes $'fp16\nbogus'
expect_err "bad group" "'bogus:3'" "" "$Q" scheme-check 'q=int8@bogus:3'
expect_err "bad group suffix" "'bogus'" "" "$Q" scheme-check 'q=int8@token,bogus'
expect_err "group ch:0" "'ch:0'" "" "$Q" scheme-check 'q=int8@token,ch:0'
expect_err "group block:0" "'block:0'" "" "$Q" scheme-check 'k=int8@block:0'
expect_err "thread group S not dividing B" "thread:32/8/3" "" "$Q" scheme-check 'q=int8@thread:32/8/3'
expect_err "int9" "'int9'" "" "$Q" scheme-check 'q=int9@token'
expect_err "a key given twice" "key 'q' is given twice" "" "$Q" scheme-check 'q=int8@token q=int4@token'
# one length limit (255) for scheme-check and the scheme lists
s255="sage2-8b$(printf '%*s' 239 '')acc=fp22"
s256="sage2-8b$(printf '%*s' 240 '')acc=fp22"
expect_ok "a 255-character scheme" "$Q" scheme-check "$s255"
expect_err "a 256-character scheme" "at most 255" "" "$Q" scheme-check "$s256"
expect_err "a thread group of 1e9 slots" "larger than 65536" "" "$Q" scheme-check 'q=int8@thread:999999999/999999999/1'
expect_ok "scheme-check --help" "$Q" scheme-check --help
check "scheme-check --help states the size limit" grep -q "1 to 65536" "$OUT"
expect_err "empty spec" "empty" "" "$Q" scheme-check ''
expect_err "no spec" "expected one SPEC" "" "$Q" scheme-check
expect_err "two specs" "expected one SPEC" "" "$Q" scheme-check fp16 bf16
expect_err "unknown option" "unknown option" "" "$Q" scheme-check --bogus

# ---- --help of every subcommand; the dispatcher ----
for cmd in schemes scheme-check synth inspect accuracy bench-cpu; do
    expect_ok "$cmd --help" "$Q" "$cmd" --help
    check "$cmd --help prints a usage line naming it" grep -q "^usage: qattn $cmd" "$OUT"
done
expect_ok "qattn --help" "$Q" --help
check "qattn --help lists every subcommand" \
    bash -c 'for c in schemes scheme-check synth inspect accuracy bench-cpu; do
                 grep -Eq "^  $c " "$1" || exit 1
             done' _ "$OUT"
# output that never arrived is a failure: exit 1 and one line, not 0
for cmd in "schemes" "scheme-check sage2-8b" "--help" "accuracy --help"; do
    # shellcheck disable=SC2086
    "$Q" $cmd >/dev/full 2>"$ERR"
    rc=$?
    check "$cmd > /dev/full: exit 1 (was 0)" test "$rc" -eq 1
    check "$cmd > /dev/full: one line naming standard output" \
        bash -c '[[ $(wc -l <"$1") -eq 1 ]] && grep -q "cannot write to standard output: No space left" "$1"' _ "$ERR"
done
expect_err "unknown subcommand" "unknown command 'frobnicate'" "" "$Q" frobnicate
expect_err "unknown subcommand that looks like an option" "unknown command" "" "$Q" --frobnicate
"$Q" >"$OUT" 2>"$ERR"
rc=$?
check "no subcommand: exit 2 with the usage on stderr" \
    bash -c '[[ $1 -eq 2 && ! -s $2 ]] && grep -q "^usage: qattn" "$3"' _ "$rc" "$OUT" "$ERR"

# ---- bench-cpu ----
TINY=(--n 64 --dim 16 --reps 1)
"$Q" bench-cpu "${TINY[@]}" >"$OUT" 2>"$ERR"
rc=$?
cp "$OUT" "$S/log/bench.txt"
check "bench-cpu tiny: exit 0" test "$rc" -eq 0
check "bench-cpu: header names N, d and the scheme" \
    grep -q "^N = 64, d = 16, 1 thread(s), scheme $(spec sage2-8b)\$" "$S/log/bench.txt"
for w in reference-f64 emulated sgemm-f32; do
    # seconds (4 decimals) may print as 0.0000 at this size; the rates may not
    check "bench-cpu: a $w row: seconds, then 3 positive rates" \
        awk -v w="$w" '$1 == w { n++; if (NF != 5 || $2 !~ /^[0-9]+[.][0-9]+$/) bad = 1
                                 for (i = 3; i <= 5; i++) if (!($i + 0 > 0)) bad = 1 }
                      END { exit bad || n != 1 }' "$S/log/bench.txt"
done
check "bench-cpu: exactly the three rows after the header lines" \
    test "$(tail -n +3 "$S/log/bench.txt" | awk '{ print $1 }' | tr '\n' ' ')" = "reference-f64 emulated sgemm-f32 "
check "bench-cpu: stderr holds only the per-repetition times" \
    bash -c '! grep -v "^bench-cpu: [a-z0-9-]* rep 1/1 [0-9.]* s$" "$1"' _ "$ERR"
"$Q" bench-cpu "${TINY[@]}" --csv --threads 2 --scheme fp16 >"$OUT" 2>/dev/null
rc=$?
cp "$OUT" "$S/log/bench.csv"
check "bench-cpu --csv --threads 2 --scheme fp16: exit 0" test "$rc" -eq 0
check "bench-cpu --csv: header" \
    grep -qx "what,n,dim,threads,seconds,gflops_total,gflops_per_core,ratio_to_sgemm,scheme" "$S/log/bench.csv"
check "bench-cpu --csv: three rows of n 64, d 16, 2 threads" \
    test "$(tail -n +2 "$S/log/bench.csv" | cut -d, -f1-4 | tr '\n' ' ')" = \
    "reference-f64,64,16,2 emulated,64,16,2 sgemm-f32,64,16,2 "
check "bench-cpu --csv: the emulated row names the fp16 spec" \
    bash -c 'grep "^emulated," "$1" | grep -qF ",\"$2\""' _ "$S/log/bench.csv" "$(spec fp16)"

expect_err "bench-cpu --n 0" "--n" "" "$Q" bench-cpu --n 0
expect_err "bench-cpu --n abc" "'abc'" "" "$Q" bench-cpu --n abc
expect_err "bench-cpu --n too large" "'2000000'" "" "$Q" bench-cpu --n 2000000
expect_err "bench-cpu --dim -1" "--dim" "" "$Q" bench-cpu --dim -1
expect_err "bench-cpu --reps 0" "--reps" "" "$Q" bench-cpu --reps 0
expect_err "bench-cpu --threads x" "--threads" "" "$Q" bench-cpu --threads x
expect_err "bench-cpu --threads 99999" "--threads must be a positive integer up to" "" "$Q" bench-cpu "${TINY[@]}" --threads 99999
expect_err "bench-cpu --n without a value" "missing value" "" "$Q" bench-cpu --n
expect_err "bench-cpu unknown option" "unknown option" "" "$Q" bench-cpu --frobnicate
expect_err "bench-cpu stray argument" "unexpected argument" "" "$Q" bench-cpu "${TINY[@]}" extra
expect_err "bench-cpu unknown scheme" "'nosuch'" "" "$Q" bench-cpu "${TINY[@]}" --scheme nosuch
expect_err "bench-cpu int9 scheme" "'int9'" "" "$Q" bench-cpu "${TINY[@]}" --scheme 'q=int9@token'
expect_err "bench-cpu int8 scheme at d 1025" "d <= 1024" "" "$Q" bench-cpu --n 8 --dim 1025 --reps 1

lib_finish
