# The harness the command-line tests (tests/cli_*.sh) share; sourced, not
# run. A script calls `lib_init "$@"` first: it takes the two arguments
# every such test gets from CTest (the qattn binary and a scratch
# directory), sets Q, S, OUT and ERR, and starts the scratch directory
# afresh. It ends with `lib_finish`, which prints the counts and sets the
# exit status.

pass=0
fail=0
# ok [NAME], bad MESSAGE: count a check (ok always returns 0, so that
# `cond && ok || bad ...` works)
ok() {
    pass=$((pass + 1))
    if [[ $# -gt 0 ]]; then echo "ok   $1"; fi
    return 0
}
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# lib_init QATTN SCRATCHDIR
lib_init() {
    if [[ $# -ne 2 ]]; then
        echo "usage: bash $0 /path/to/qattn SCRATCHDIR" >&2
        exit 2
    fi
    Q=$1
    S=$2
    export LC_ALL=C
    rm -rf "$S"
    mkdir -p "$S/log" || exit 1
    OUT=$S/log/stdout.txt
    ERR=$S/log/stderr.txt
}

lib_finish() {
    echo "$pass passed, $fail failed"
    [[ $fail -eq 0 ]]
}

# check NAME CONDITION-COMMAND...
check() {
    local name=$1
    shift
    if "$@"; then ok "$name"; else bad "$name"; fi
}

# no temporary files (.NAME.tmp.PID) anywhere in the scratch directory
no_temps() { ! find "$S" -name '*.tmp.*' | grep -q .; }

# expect_ok NAME CMD...: exit 0, nothing on stderr, no temporary file
# run_ok NAME CMD...: the same, but stderr is not checked (the studies report
# progress there). Both return 1 on failure, for `|| continue`.
expect_ok() { run_checked 1 "$@"; }
run_ok() { run_checked 0 "$@"; }
run_checked() {
    local quiet=$1 name=$2
    shift 2
    "$@" >"$OUT" 2>"$ERR"
    local rc=$?
    if [[ $rc -ne 0 ]]; then
        bad "$name: exit $rc: $(head -c 400 "$ERR")"
    elif [[ $quiet -eq 1 && -s $ERR ]]; then
        bad "$name: unexpected stderr: $(head -c 400 "$ERR")"
    elif ! no_temps; then
        bad "$name: left a temporary file"
    else
        ok "$name"
        return 0
    fi
    return 1
}

# expect_err NAME WORD PATH CMD...: exit 2, exactly one line on stderr and
# it contains WORD, nothing on stdout, PATH (if not empty) absent
# afterwards, no temporary file; and the directory KEEP_EMPTY, when a script
# sets it (an existing --out directory given to failing commands), still
# empty: PATH may name it.
expect_err() {
    local name=$1 word=$2 path=$3
    shift 3
    "$@" >"$OUT" 2>"$ERR"
    local rc=$? lines
    lines=$(wc -l <"$ERR")
    if [[ $rc -ne 2 ]]; then
        bad "$name: exit $rc, expected 2 ($(head -c 300 "$ERR"))"
    elif [[ $lines -ne 1 ]]; then
        bad "$name: $lines lines on stderr, expected 1: $(head -c 300 "$ERR")"
    elif ! grep -qF -- "$word" "$ERR"; then
        bad "$name: stderr lacks '$word': $(cat "$ERR")"
    elif [[ -s $OUT ]]; then
        bad "$name: unexpected stdout: $(head -c 300 "$OUT")"
    elif [[ -n $path && $path != "${KEEP_EMPTY-}" && -e $path ]]; then
        bad "$name: left $path behind"
    elif [[ -n ${KEEP_EMPTY-} && -n $(ls -A "$KEEP_EMPTY") ]]; then
        bad "$name: wrote into the existing directory: $(ls -A "$KEEP_EMPTY")"
    elif ! no_temps; then
        bad "$name: left a temporary file"
    else
        ok "$name"
    fi
}

# a CSV without its quotes, commas inside quoted fields (labels and specs
# may hold them) turned into ';', so that awk -F, can split it
unquote() {
    awk '{ out = ""; inq = 0
           for (i = 1; i <= length($0); i++) {
               c = substr($0, i, 1)
               if (c == "\"") { inq = !inq; continue }
               out = out (c == "," && inq ? ";" : c)
           }
           print out }' "$1"
}
