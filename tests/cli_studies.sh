#!/usr/bin/env bash
# The studies from the command line (studies/CSV.md is the contract):
#   - granularity, smoothing, pv, accumulator, kbias, pareto-cells on two
#     small synthetic files of two models: exact headers of cells.csv,
#     summary.csv and layers.csv; row counts (cells = grid x layers x heads x
#     files, summary = grid x models, layers = grid x layers x models); every
#     (model, layer, head, label) once; label, factors and spec as
#     `qattn STUDY --list` prints them; factor values in the documented sets;
#     metrics are numbers in range; the summaries and per-layer means agree
#     with the cells (mean, worst head, worst layer);
#   - resumability: a rerun reuses every cell and rewrites the same bytes; rows
#     deleted from cells.csv are recomputed (and only those) to the same
#     values; --force recomputes all; a changed spec for a label recomputes
#     that label; a cells.csv without a needed column exits 2 naming it and
#     leaves every output as it was; a layer/head selection, then the rest;
#   - kbias: labelled as augmented data; its r=0 cells are the granularity
#     per-block cells, bit for bit; smooth=k is constant in r while no
#     smoothing degrades with r on data with a planted K bias;
#   - outliers, models, compare, pareto, entropy, kvcache: headers, counts,
#     values (kvcache: groups that never close equal the fp16 cache);
#   - the study records (qattn studies --tsv) give the studies, their
#     factors and values, grid sizes and the claims' studies; studies --run
#     runs every study as its own command would;
#   - bad inputs exit 2 and write nothing.
#
# usage: bash tests/cli_studies.sh /path/to/qattn SCRATCHDIR
set -u
source "$(dirname "$0")/lib.sh"
lib_init "$@"
mkdir -p "$S/list" "$S/keep" || exit 1
R=$S/results # the studies' output tree, as results/ in scripts/reproduce

nrows() { tail -n +2 "$1" | wc -l | tr -d ' '; }
header_is() { [[ $(head -n 1 "$1") == "$2" ]]; }

# awk helpers: isnum(x) (a plain or %g number; not nan/inf), near(a, b, tol)
AWKLIB='function isnum(x) { return x ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
function near(a, b, tol) { return (a - b <= tol && b - a <= tol) }
function abs(x) { return x < 0 ? -x : x }'

# csvawk PROGRAM [-v VAR=VALUE]... FILE...: each CSV unquoted and split on
# commas; fi is the file's number (1, 2, ...) and c[fi, "name"] the column
# of name; header lines are skipped. PROGRAM prints what is wrong; silence
# means success.
csvawk() {
    local prog=$1 opts=() args=()
    shift
    while [[ $# -gt 0 ]]; do
        if [[ $1 == -v ]]; then
            opts+=(-v "$2")
            shift 2
        else
            unquote "$1" >"$S/log/u.${#args[@]}.csv" || return 1
            args+=("$S/log/u.${#args[@]}.csv")
            shift
        fi
    done
    awk -F, "${opts[@]}" "$AWKLIB"'
FNR == 1 { fi++; for (i = 1; i <= NF; i++) c[fi, $i] = i; next }
'"$prog" "${args[@]}"
}
# awk_quiet NAME PROGRAM ARGS...: ok when the program runs and prints nothing
awk_quiet() {
    local name=$1 prog=$2 msg rc
    shift 2
    msg=$(csvawk "$prog" "$@" 2>&1)
    rc=$?
    if [[ $rc -ne 0 ]]; then
        bad "$name: awk exit $rc: $(head -n 3 <<<"$msg")"
    elif [[ -n $msg ]]; then
        bad "$name: $(head -n 5 <<<"$msg")"
    else
        ok "$name"
    fi
}

# ---------------------------------------------------------------- data
LAYERS=2 HEADS=4 KVH=2 DIM=32
synth() { # synth FILE MODEL SEED KBIAS
    "$Q" synth --out "$1" --layers $LAYERS --heads $HEADS --kv-heads $KVH --tokens 160 --seqlens 64,96 \
        --dim $DIM --k-bias "$4" --seed "$3" --model "$2" >"$OUT" 2>"$ERR"
}
A=$S/alpha.h5 B=$S/beta.h5 C=$S/gamma.h5 A2=$S/alpha-again.h5
if ! synth "$A" m-alpha 1 4 || ! synth "$B" m-beta 2 4 || ! synth "$C" m-gamma 3 8 || ! synth "$A2" m-alpha 5 4; then
    echo "FAIL qattn synth: $(cat "$ERR")"
    echo "0 passed, 1 failed"
    exit 1
fi
MODELS="m-alpha m-beta"
NM=2
BOOT=(--boot 200)

# The studies, as their records give them (qattn studies --tsv): the grid
# studies with their factor columns and values (column=alt|alt;...), and
# those whose cells the paper's claims compare.
TSV=$S/studies.tsv
"$Q" studies --tsv >"$TSV" || { echo "FAIL qattn studies --tsv"; echo "0 passed, 1 failed"; exit 1; }
tsv_col() { # tsv_col STUDY COLUMN
    awk -F'\t' -v s="$1" -v col="$2" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $1 == s { print $c[col] }' "$TSV"
}
STUDIES=$(awk -F'\t' 'NR > 1 && $2 == "grid" { printf "%s ", $1 }' "$TSV")
CLAIM_STUDIES=$(awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c["claims"] != "-" { printf "%s ", $1 }' "$TSV")
factors_of() { tsv_col "$1" factors; }
values_of() { tsv_col "$1" levels; }
METRICS="cos,rel_l1,rmse,max_abs,row_cos_min"
SUMCOLS="n,cos_mean,cos_ci_lo,cos_ci_hi,cos_worst_head,cos_worst_layer,worst_layer,rel_l1_mean,rel_l1_ci_lo,rel_l1_ci_hi,rel_l1_worst_layer,rmse_mean,rmse_ci_lo,rmse_ci_hi,spec"

# the records themselves: every study is a command; a grid's size is its --list
for st in $(awk -F'\t' 'NR > 1 { print $1 }' "$TSV"); do
    check "studies: $st --help names it" bash -c '"$1" "$2" --help | grep -q "^usage: qattn $2 "' _ "$Q" "$st"
    check "studies: qattn --help lists $st" bash -c '"$1" --help | grep -Eq "^  $2 "' _ "$Q" "$st"
    if [[ $(tsv_col "$st" kind) == grid ]]; then
        check "studies: $st has $(tsv_col "$st" cells) cells, as --list prints" \
            [ "$("$Q" "$st" --list | wc -l)" -eq "$(tsv_col "$st" cells)" ]
    fi
done
check "studies: --list prints every study" \
    bash -c 'for s in $(awk -F"\t" "NR > 1 { print \$1 }" "$2"); do "$1" studies --list | grep -q "^$s " || exit 1; done' _ "$Q" "$TSV"
PRESETS=$("$Q" schemes | awk '{ printf "%s%s", (NR > 1 ? "|" : ""), $1 }')
check "studies: pareto-cells' kernels are presets" \
    bash -c 'v=$(awk -F"\t" "\$1 == \"pareto-cells\" { print \$4 }" "$1"); v=${v#kernel=}
             IFS="|"; for k in $v; do [[ "|$2|" == *"|$k|"* ]] || exit 1; done' _ "$TSV" "$PRESETS"
expect_err "studies: --run without --results" "--results" "" "$Q" studies --run --data "$A"
expect_err "studies: --data without --run" "--run" "" "$Q" studies --data "$A"

# the grid of `--list` as label|factors|spec
list_grid() {
    "$Q" "$1" --list | sed -E 's/  \(K augmented\)$//; s/^([^ ]+) +([^ ]+) +(.*[^ ]) *$/\1|\2|\3/'
}

# ------------------------------------------------- the emulation studies
for st in $STUDIES; do
    F=$(factors_of "$st")
    D=$R/$st
    if ! list_grid "$st" >"$S/list/$st.txt" || [[ ! -s $S/list/$st.txt ]]; then
        bad "$st --list"
        continue
    fi
    G=$(wc -l <"$S/list/$st.txt")
    NC=$((G * LAYERS * HEADS * NM))
    run_ok "$st: runs on two models" "$Q" "$st" --data "$A" --data "$B" --out "$D" "${BOOT[@]}" --threads 2 || continue
    check "$st: reports $NC cells, 0 reused" grep -qF "$NC cells (0 reused)" "$ERR"
    for f in cells summary layers; do cp "$D/$f.csv" "$S/keep/$st.$f.csv"; done

    # headers
    check "$st: cells.csv header" header_is "$D/cells.csv" "model,layer,head,label,$F,$METRICS,spec"
    check "$st: summary.csv header" header_is "$D/summary.csv" "model,label,$F,$SUMCOLS"
    check "$st: layers.csv header" header_is "$D/layers.csv" "model,layer,label,$F,cos_mean,rel_l1_mean,rmse_mean"

    # counts
    check "$st: cells.csv rows = $G x $LAYERS x $HEADS x $NM" [ "$(nrows "$D/cells.csv")" -eq "$NC" ]
    check "$st: summary.csv rows = $G x $NM" [ "$(nrows "$D/summary.csv")" -eq $((G * NM)) ]
    check "$st: layers.csv rows = $G x $LAYERS x $NM" [ "$(nrows "$D/layers.csv")" -eq $((G * LAYERS * NM)) ]

    # every (model, layer, head, label) once, for both models, in range
    awk_quiet "$st: cells are every model x layer x head x label once" '
        { k = $(c[1,"model"]) SUBSEP $(c[1,"layer"]) SUBSEP $(c[1,"head"]) SUBSEP $(c[1,"label"])
          if (k in seen) print "duplicate " $0; seen[k] = 1
          if ($(c[1,"model"]) != "m-alpha" && $(c[1,"model"]) != "m-beta") print "model " $0
          if ($(c[1,"layer"]) !~ /^[0-9]+$/ || $(c[1,"layer"]) >= L) print "layer " $0
          if ($(c[1,"head"]) !~ /^[0-9]+$/ || $(c[1,"head"]) >= H) print "head " $0
          per[$(c[1,"model"])]++ }
        END { if (per["m-alpha"] != per["m-beta"]) print "models differ in rows" }' \
        -v L=$LAYERS -v H=$HEADS "$D/cells.csv"

    # label, factors, spec as the grid lists them (cells, summary, layers)
    for f in cells summary layers; do
        awk_quiet "$st: $f.csv label, factors and spec as --list" '
            BEGIN { nf = split(F, fn, ",")
                    while ((getline line < LIST) > 0) {
                        split(line, p, "|"); fac[p[1]] = p[2]; spec[p[1]] = p[3]; nl++ } }
            { lab = $(c[1,"label"])
              if (!(lab in fac)) { print "unknown label " lab; next }
              v = ""; for (i = 1; i <= nf; i++) v = v (i > 1 ? "," : "") $(c[1, fn[i]])
              if (v != fac[lab]) print lab ": factors " v " != " fac[lab]
              if (c[1,"spec"] && $(c[1,"spec"]) != spec[lab]) print lab ": spec " $(c[1,"spec"])
              labs[lab] = 1 }
            END { for (l in fac) if (!(l in labs)) print "label " l " missing" }' \
            -v F="$F" -v LIST="$S/list/$st.txt" "$D/$f.csv"
    done

    # factor values in the documented sets
    awk_quiet "$st: factor values in the documented sets" '
        BEGIN { n = split(V, parts, ";")
                for (i = 1; i <= n; i++) { split(parts[i], kv, "="); allowed[kv[1]] = "|" kv[2] "|" } }
        { for (k in allowed) if (!index(allowed[k], "|" $(c[1,k]) "|")) print k "=" $(c[1,k]) " not documented: " $0
          if (ST == "accumulator") {
              ch = $(c[1,"chunk"]); acc = $(c[1,"acc"])
              if (ch !~ /^[0-9]+$/ || (ch != 0 && (ch < 16 || ch > 512))) print "chunk " ch
              if ((acc == "fp22+fp32") != (ch != 0)) print "chunk " ch " with acc " acc }
          if (ST == "pareto-cells" && $(c[1,"kernel"]) != $(c[1,"label"])) print "kernel != label: " $0 }' \
        -v V="$(values_of "$st")" -v ST="$st" "$D/cells.csv"

    # metrics
    awk_quiet "$st: metrics are numbers, 0 < cos <= 1" '
        { for (k = split("cos rel_l1 rmse max_abs row_cos_min", m, " "); k > 0; k--)
              if (!isnum($(c[1, m[k]]))) print m[k] " not a number: " $0
          if (!($(c[1,"cos"]) > 0 && $(c[1,"cos"]) <= 1 + 1e-12)) print "cos " $(c[1,"cos"])
          if ($(c[1,"rel_l1"]) < 0 || $(c[1,"rmse"]) < 0 || $(c[1,"max_abs"]) < 0) print "negative error " $0
          if ($(c[1,"row_cos_min"]) < -1 - 1e-12 || $(c[1,"row_cos_min"]) > 1 + 1e-12) print "row_cos_min " $0 }' \
        "$D/cells.csv"

    # summary: numbers, intervals, worst head/layer, and agreement with the cells
    awk_quiet "$st: summary numbers, ci_lo <= mean <= ci_hi, worst layer >= worst head" '
        fi == 1 { split(NUMS, nm, " "); for (k in nm) if (!isnum($(c[1, nm[k]]))) print nm[k] " not a number: " $0
                  for (k = split("cos rel_l1 rmse", m, " "); k > 0; k--)
                      if (!($(c[1, m[k] "_ci_lo"]) <= $(c[1, m[k] "_mean"]) && $(c[1, m[k] "_mean"]) <= $(c[1, m[k] "_ci_hi"])))
                          print m[k] " interval " $0
                  if (!($(c[1,"cos_mean"]) > 0 && $(c[1,"cos_mean"]) <= 1 + 1e-12)) print "cos_mean " $0
                  if (!($(c[1,"cos_worst_layer"]) >= $(c[1,"cos_worst_head"]))) print "worst layer < worst head: " $0
                  if (!($(c[1,"cos_mean"]) >= $(c[1,"cos_worst_layer"]))) print "mean < worst layer: " $0
                  if ($(c[1,"worst_layer"]) !~ /^[0-9]+$/ || $(c[1,"worst_layer"]) >= L) print "worst_layer " $0
                  if ($(c[1,"n"]) != L * H) print "n " $(c[1,"n"]) }' \
        -v L=$LAYERS -v H=$HEADS \
        -v NUMS="n cos_mean cos_ci_lo cos_ci_hi cos_worst_head cos_worst_layer worst_layer rel_l1_mean rel_l1_ci_lo rel_l1_ci_hi rel_l1_worst_layer rmse_mean rmse_ci_lo rmse_ci_hi" \
        "$D/summary.csv"
    awk_quiet "$st: summary and layers agree with the cells" '
        fi == 1 { k = $(c[1,"model"]) SUBSEP $(c[1,"label"]); kl = k SUBSEP $(c[1,"layer"])
                  n[k]++; cs[k] += $(c[1,"cos"]); l1[k] += $(c[1,"rel_l1"]); rm[k] += $(c[1,"rmse"])
                  if (!(k in wh) || $(c[1,"cos"]) < wh[k]) wh[k] = $(c[1,"cos"])
                  ln[kl]++; lc[kl] += $(c[1,"cos"]); ll[kl] += $(c[1,"rel_l1"]); lr[kl] += $(c[1,"rmse"]) }
        fi == 2 { kl = $(c[2,"model"]) SUBSEP $(c[2,"label"]) SUBSEP $(c[2,"layer"]); k = $(c[2,"model"]) SUBSEP $(c[2,"label"])
                  if (!(kl in ln)) { print "layers row without cells: " $0; next }
                  if (!near($(c[2,"cos_mean"]), lc[kl] / ln[kl], 1e-9) || !near($(c[2,"rel_l1_mean"]), ll[kl] / ln[kl], 1e-9) ||
                      !near($(c[2,"rmse_mean"]), lr[kl] / ln[kl], 1e-9)) print "layer mean " $0
                  if (!(k in wl) || $(c[2,"cos_mean"]) < wl[k]) { wl[k] = $(c[2,"cos_mean"]); wli[k] = $(c[2,"layer"]); wll[k] = $(c[2,"rel_l1_mean"]) }
                  nl[k]++ }
        fi == 3 { k = $(c[3,"model"]) SUBSEP $(c[3,"label"])
                  if (!(k in n)) { print "summary row without cells: " $0; next }
                  if ($(c[3,"n"]) != n[k]) print "n " $0
                  if (!near($(c[3,"cos_mean"]), cs[k] / n[k], 1e-9)) print "cos_mean " $0
                  if (!near($(c[3,"rel_l1_mean"]), l1[k] / n[k], 1e-9)) print "rel_l1_mean " $0
                  if (!near($(c[3,"rmse_mean"]), rm[k] / n[k], 1e-9)) print "rmse_mean " $0
                  if ($(c[3,"cos_worst_head"]) + 0 != wh[k] + 0) print "cos_worst_head " $0 " != " wh[k]
                  if (nl[k] != L) print "layers rows " nl[k] " for " $0
                  if ($(c[3,"worst_layer"]) != wli[k] || !near($(c[3,"cos_worst_layer"]), wl[k], 1e-12) ||
                      !near($(c[3,"rel_l1_worst_layer"]), wll[k], 1e-12)) print "worst layer " $0 }' \
        -v L=$LAYERS "$D/cells.csv" "$D/layers.csv" "$D/summary.csv"

    # the simplest resume: everything reused, the same bytes
    run_ok "$st: rerun" "$Q" "$st" --data "$A" --data "$B" --out "$D" "${BOOT[@]}" --threads 2 &&
        check "$st: rerun reuses all $NC cells" grep -qF "$NC cells ($NC reused)" "$ERR"
    for f in cells summary layers; do
        check "$st: rerun leaves $f.csv byte-identical" cmp -s "$D/$f.csv" "$S/keep/$st.$f.csv"
    done
done

# ------------------------------------------------- qattn studies --run
# every study in record order, each as its own command would: the same cells
if run_ok "studies --run on two models" "$Q" studies --run --data "$A" --data "$B" --results "$S/all" --threads 2; then
    for st in $STUDIES; do
        check "studies --run: $st cells.csv as the study's own run" cmp -s "$S/all/$st/cells.csv" "$S/keep/$st.cells.csv"
    done
    check "studies --run: logs each study it runs or skips (dsv4: no --layout-data)" \
        bash -c '[[ $(grep -c "^\[qattn\] qattn " "$1") -eq $(($(wc -l <"$2") - 2)) ]] &&
                 grep -q "^\[qattn\] dsv4: skipped (no --layout-data file)" "$1"' _ "$ERR" "$TSV"
fi
"$Q" studies --run --data "$S/nope.h5" --results "$S/all-bad" >"$OUT" 2>"$ERR"
check "studies --run: a missing file stops the first study with exit 2" \
    bash -c '[[ $1 -eq 2 ]] && grep -q "nope.h5" "$2" && [[ ! -e $3 ]]' _ "$?" "$ERR" "$S/all-bad"

# ------------------------------------------------------- resumability
D=$R/pv
K=$S/keep
G=$(wc -l <"$S/list/pv.txt")
NC=$((G * LAYERS * HEADS * NM))
same_as_first() { # same_as_first STUDY DIR: all three files as in the first run
    cmp -s "$2/cells.csv" "$K/$1.cells.csv" && cmp -s "$2/summary.csv" "$K/$1.summary.csv" &&
        cmp -s "$2/layers.csv" "$K/$1.layers.csv"
}

# delete 10 rows: exactly those are recomputed, to the same values
sed -i '3,7d;40,44d' "$D/cells.csv"
run_ok "pv: rerun after 10 rows deleted" "$Q" pv --data "$A" --data "$B" --out "$D" "${BOOT[@]}" &&
    check "pv: only the 10 deleted cells recomputed" grep -qF "$NC cells ($((NC - 10)) reused)" "$ERR"
check "pv: recomputed cells equal the first run's (all three files)" same_as_first pv "$D"

# a reused cell is really not recomputed: a planted value survives a rerun
awk -F, 'NR == 2 { sub(/,0\.[0-9]+,/, ",0.5,") } { print }' "$K/pv.cells.csv" >"$D/cells.csv"
run_ok "pv: rerun over a planted value" "$Q" pv --data "$A" --data "$B" --out "$D" "${BOOT[@]}"
check "pv: the planted cos is kept (skipped, not recomputed)" \
    [ "$(sed -n 2p "$D/cells.csv" | cut -d, -f7)" = "0.5" ]
# --force recomputes everything
run_ok "pv: --force" "$Q" pv --data "$A" --data "$B" --out "$D" "${BOOT[@]}" --force &&
    check "pv: --force reports 0 reused" grep -qF "$NC cells (0 reused)" "$ERR"
check "pv: --force restores the first run's values" same_as_first pv "$D"

# a changed spec for one label (a changed grid): that label is recomputed
LAB=int8/e4m3
NL=$((LAYERS * HEADS * NM))
awk -v lab="\"$LAB\"" -F, -v OFS=, '$4 == lab { sub(/acc=fp32/, "acc=fp16"); $7 = "0.25" } { print }' \
    "$K/pv.cells.csv" >"$D/cells.csv"
check "pv: (the spec of $LAB was edited)" [ "$(grep -c 'acc=fp16' "$D/cells.csv")" -eq $NL ]
run_ok "pv: rerun after a spec changed" "$Q" pv --data "$A" --data "$B" --out "$D" "${BOOT[@]}" &&
    check "pv: the $NL cells of the changed label recomputed" grep -qF "$NC cells ($((NC - NL)) reused)" "$ERR"
check "pv: the changed label recomputed to the first run's values" same_as_first pv "$D"

# a cells.csv without a needed column: exit 2 naming it, outputs unchanged
unquote "$K/pv.cells.csv" | cut -d, -f1-8,10- >"$D/cells.csv"
cp "$D/cells.csv" "$S/keep/pv.broken.csv"
expect_err "pv: cells.csv without rmse exits 2 naming the column" "'rmse'" "" \
    "$Q" pv --data "$A" --data "$B" --out "$D" "${BOOT[@]}"
check "pv: a malformed cells.csv is left as it was" cmp -s "$D/cells.csv" "$S/keep/pv.broken.csv"
check "pv: summary.csv and layers.csv are left as they were" \
    eval 'cmp -s "$D/summary.csv" "$K/pv.summary.csv" && cmp -s "$D/layers.csv" "$K/pv.layers.csv"'
run_ok "pv: --force repairs a malformed cells.csv" "$Q" pv --data "$A" --data "$B" --out "$D" "${BOOT[@]}" --force
check "pv: ... to the first run" same_as_first pv "$D"

# threads do not change a value
run_ok "pv: one thread" "$Q" pv --data "$A" --data "$B" --out "$S/pv-1thread" "${BOOT[@]}" --threads 1
check "pv: one thread gives the same bytes as two" same_as_first pv "$S/pv-1thread"

# kbias: the augmented cells resume too (delete every r=32 row)
D=$R/kbias
NK=$(grep -c '"r32/' "$D/cells.csv")
NC=$(nrows "$D/cells.csv")
grep -v '"r32/' "$K/kbias.cells.csv" >"$D/cells.csv"
run_ok "kbias: rerun after the r=32 rows deleted" "$Q" kbias --data "$A" --data "$B" --out "$D" "${BOOT[@]}" &&
    check "kbias: only the $NK r=32 cells recomputed" grep -qF "$NC cells ($((NC - NK)) reused)" "$ERR"
check "kbias: recomputed augmented cells equal the first run's" same_as_first kbias "$D"

# a selection first, then the rest
D=$S/sel
G=$(wc -l <"$S/list/granularity.txt")
run_ok "granularity --layers 1 --heads 0,2" "$Q" granularity --data "$A" --data "$B" --out "$D" "${BOOT[@]}" \
    --layers 1 --heads 0,2
check "selection: cells = grid x 1 layer x 2 heads x 2 files" [ "$(nrows "$D/cells.csv")" -eq $((G * 2 * NM)) ]
awk_quiet "selection: only layer 1, heads 0 and 2" '$(c[1,"layer"]) != 1 || ($(c[1,"head"]) != 0 && $(c[1,"head"]) != 2) { print }' \
    "$D/cells.csv"
awk_quiet "selection: summary n = 2, worst layer 1" '$(c[1,"n"]) != 2 || $(c[1,"worst_layer"]) != 1 { print }' "$D/summary.csv"
check "selection: layers.csv = grid x 1 layer x 2 models" [ "$(nrows "$D/layers.csv")" -eq $((G * NM)) ]
awk_quiet "selection: values equal the full run's" '
    fi == 1 { v[$(c[1,"model"]), $(c[1,"layer"]), $(c[1,"head"]), $(c[1,"label"])] = $0 }
    fi == 2 { k = $(c[2,"model"]) SUBSEP $(c[2,"layer"]) SUBSEP $(c[2,"head"]) SUBSEP $(c[2,"label"])
              if (v[k] != $0) print "differs: " $0 }' "$K/granularity.cells.csv" "$D/cells.csv"
run_ok "selection: then all layers and heads" "$Q" granularity --data "$A" --data "$B" --out "$D" "${BOOT[@]}" &&
    check "selection: the selected cells reused" grep -qF "$((G * LAYERS * HEADS * NM)) cells ($((G * 2 * NM)) reused)" "$ERR"
check "selection: completed run equals the full run" same_as_first granularity "$D"

# ---------------------------------------------------------------- kbias
"$Q" kbias --help >"$OUT" 2>"$ERR"
check "kbias --help says AUGMENTED" grep -q AUGMENTED "$OUT"
"$Q" kbias --list >"$OUT" 2>"$ERR"
check "kbias --list marks every r > 0 cell as K augmented, no r = 0 cell" \
    eval '[ "$(grep -c "(K augmented)" "$OUT")" -eq "$(grep -vc "^r0/" "$OUT")" ] && ! grep "^r0/" "$OUT" | grep -q augmented'
D=$R/kbias
awk_quiet "kbias: r=0 cells equal the granularity per-block cells (cos, rel_l1, rmse, spec)" '
    fi == 1 && $(c[1,"group"]) == "block" {
        g[$(c[1,"model"]), $(c[1,"layer"]), $(c[1,"head"]), $(c[1,"qk_fmt"]), $(c[1,"smooth"])] = \
            $(c[1,"cos"]) " " $(c[1,"rel_l1"]) " " $(c[1,"rmse"]) " " $(c[1,"spec"]) }
    fi == 2 && $(c[2,"r"]) == 0 {
        k = $(c[2,"model"]) SUBSEP $(c[2,"layer"]) SUBSEP $(c[2,"head"]) SUBSEP $(c[2,"qk_fmt"]) SUBSEP $(c[2,"smooth"])
        n++
        if (!(k in g)) print "no granularity cell for " $0
        else if (g[k] != $(c[2,"cos"]) " " $(c[2,"rel_l1"]) " " $(c[2,"rmse"]) " " $(c[2,"spec"])) print "differs: " $0 " vs " g[k] }
    END { if (n != N) print n " r=0 cells, expected " N }' \
    -v N=$((3 * 2 * LAYERS * HEADS * NM)) "$R/granularity/cells.csv" "$D/cells.csv"
awk_quiet "kbias: smooth=k cells constant in r (|cos(r) - cos(0)| < 1e-5)" '
    $(c[1,"smooth"]) == "k" { k = $(c[1,"model"]) SUBSEP $(c[1,"layer"]) SUBSEP $(c[1,"head"]) SUBSEP $(c[1,"qk_fmt"])
        if ($(c[1,"r"]) == 0) z[k] = $(c[1,"cos"]); else v[k, $(c[1,"r"])] = $(c[1,"cos"]) }
    END { for (kr in v) { split(kr, p, SUBSEP); k = p[1] SUBSEP p[2] SUBSEP p[3] SUBSEP p[4]
              if (!near(v[kr], z[k], 1e-5)) print "r=" p[5] " " p[4] ": " v[kr] " vs " z[k] } }' "$D/cells.csv"
awk_quiet "kbias: without smoothing, every cell worse at r=32 than at r=0" '
    $(c[1,"smooth"]) == "none" && ($(c[1,"r"]) == 0 || $(c[1,"r"]) == 32) {
        k = $(c[1,"model"]) SUBSEP $(c[1,"layer"]) SUBSEP $(c[1,"head"]) SUBSEP $(c[1,"qk_fmt"]); v[k, $(c[1,"r"])] = $(c[1,"cos"]); ks[k] = 1 }
    END { for (k in ks) if (!(v[k, 32] < v[k, 0])) print k ": " v[k, 32] " >= " v[k, 0] }' "$D/cells.csv"
awk_quiet "kbias: without smoothing, the mean cos falls with every step of r" '
    $(c[1,"smooth"]) == "none" { v[$(c[1,"model"]), $(c[1,"qk_fmt"]), $(c[1,"r"])] = $(c[1,"cos_mean"]); m[$(c[1,"model"])] = 1 }
    END { split("0 1 2 4 8 16 32", rs, " "); split("int8 int4 e4m3", fs, " ")
          for (mm in m) for (f = 1; f <= 3; f++) for (i = 2; i <= 7; i++)
              if (!(v[mm, fs[f], rs[i]] < v[mm, fs[f], rs[i - 1]])) print mm " " fs[f] " r=" rs[i] }' "$D/summary.csv"
awk_quiet "kbias: smoothing K beats no smoothing at r=32" '
    $(c[1,"r"]) == 32 { v[$(c[1,"model"]), $(c[1,"qk_fmt"]), $(c[1,"smooth"])] = $(c[1,"cos_mean"]); m[$(c[1,"model"]) SUBSEP $(c[1,"qk_fmt"])] = 1 }
    END { for (k in m) if (!(v[k, "k"] > v[k, "none"])) print k }' "$D/summary.csv"

# ------------------------------------------------------------- outliers
D=$R/outliers
run_ok "outliers on two models" "$Q" outliers --data "$C" --data "$A" --out "$D"
check "outliers: channels.csv header" header_is "$D/channels.csv" \
    "model,layer,tensor,head,channel,mean,std,mean_over_std,max_abs,kurtosis,outlier"
check "outliers: summary.csv header" header_is "$D/summary.csv" \
    "model,layer,tensor,max_mean_over_std,median_mean_over_std,max_kurtosis,amax_ratio,n_outlier_channels,n_channels"
check "outliers: channels rows = 2 files x layers x (hq + 2 hkv) x d" \
    [ "$(nrows "$D/channels.csv")" -eq $((2 * LAYERS * (HEADS + 2 * KVH) * DIM)) ]
check "outliers: summary rows = 2 files x layers x 3" [ "$(nrows "$D/summary.csv")" -eq $((2 * LAYERS * 3)) ]
awk_quiet "outliers: channel rows in range, numbers, outlier 0/1 and as defined" '
    { t = $(c[1,"tensor"]); nh = t == "q" ? H : KV
      if (t != "q" && t != "k" && t != "v") print "tensor " $0
      if ($(c[1,"model"]) != "m-gamma" && $(c[1,"model"]) != "m-alpha") print "model " $0
      if ($(c[1,"layer"]) >= L || $(c[1,"head"]) >= nh || $(c[1,"channel"]) >= DIM) print "range " $0
      for (k = split("mean std mean_over_std max_abs kurtosis", m, " "); k > 0; k--)
          if (!isnum($(c[1, m[k]]))) print m[k] " not a number: " $0
      o = $(c[1,"outlier"])
      if (o != "0" && o != "1") print "outlier " $0
      if ($(c[1,"std"]) < 0 || $(c[1,"mean_over_std"]) < 0 || $(c[1,"max_abs"]) < 0) print "negative " $0
      if (!near($(c[1,"mean_over_std"]), abs($(c[1,"mean"])) / $(c[1,"std"]), 1e-4 * $(c[1,"mean_over_std"]) + 1e-6)) print "mos " $0
      if ($(c[1,"mean_over_std"]) > 3.001 && o != "1") print "offset channel not an outlier: " $0
      k = $(c[1,"model"]) SUBSEP $(c[1,"layer"]) SUBSEP t SUBSEP $(c[1,"head"]) SUBSEP $(c[1,"channel"])
      if (k in seen) print "duplicate " $0; seen[k] = 1 }' \
    -v L=$LAYERS -v H=$HEADS -v KV=$KVH -v DIM=$DIM "$D/channels.csv"
awk_quiet "outliers: summary agrees with the channels (max, counts)" '
    fi == 1 { k = $(c[1,"model"]) SUBSEP $(c[1,"layer"]) SUBSEP $(c[1,"tensor"])
              n[k]++; no[k] += $(c[1,"outlier"])
              if (!(k in mx) || $(c[1,"mean_over_std"]) > mx[k]) mx[k] = $(c[1,"mean_over_std"]) }
    fi == 2 { k = $(c[2,"model"]) SUBSEP $(c[2,"layer"]) SUBSEP $(c[2,"tensor"])
              if ($(c[2,"n_channels"]) != n[k]) print "n_channels " $0 " vs " n[k]
              if ($(c[2,"n_outlier_channels"]) != no[k]) print "n_outlier_channels " $0 " vs " no[k]
              if (!near($(c[2,"max_mean_over_std"]), mx[k], 1e-5 * mx[k])) print "max_mean_over_std " $0 " vs " mx[k] }' \
    "$D/channels.csv" "$D/summary.csv"
# median |mean|/std over all channels of all heads of a layer and tensor
med_ok=1
while IFS=, read -r m l t med; do
    want=$(unquote "$D/channels.csv" | awk -F, -v m="$m" -v l="$l" -v t="$t" '$1 == m && $2 == l && $3 == t { print $8 }' |
        sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
    if ! awk -v a="$med" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b + 1e-6) }'; then
        med_ok=0
        echo "     median_mean_over_std $m $l $t: $med, channels give $want"
    fi
done < <(tail -n +2 "$D/summary.csv" | cut -d, -f1-3,5)
check "outliers: median_mean_over_std is the median over every head's channels" [ $med_ok -eq 1 ]
awk_quiet "outliers: K has the largest max_mean_over_std on --k-bias 8 data" '
    $(c[1,"model"]) == "m-gamma" { v[$(c[1,"layer"]), $(c[1,"tensor"])] = $(c[1,"max_mean_over_std"]); ls[$(c[1,"layer"])] = 1 }
    END { for (l in ls) if (!(v[l, "k"] > v[l, "q"] && v[l, "k"] > v[l, "v"] && v[l, "k"] > 3)) print "layer " l }' "$D/summary.csv"
awk_quiet "outliers: the planted K offsets are flagged as outlier channels" '
    $(c[1,"model"]) == "m-gamma" && $(c[1,"tensor"]) == "k" && $(c[1,"n_outlier_channels"]) == 0 { print }' "$D/summary.csv"

# ---------------------------------------------------------------- models
run_ok "models on two files" "$Q" models --data "$A" --data "$B" --out "$R/models.csv"
check "models: header" header_is "$R/models.csv" \
    "model,file,layers,heads,kv_heads,tokens,head_dim,eval_loss,vocab_size,source,text_source,license"
check "models: one row per file" [ "$(nrows "$R/models.csv")" -eq 2 ]
awk_quiet "models: the synth attributes" '
    { f = $(c[1,"model"]) == "m-alpha" ? "alpha.h5" : $(c[1,"model"]) == "m-beta" ? "beta.h5" : "?"
      if ($(c[1,"file"]) != f || $(c[1,"layers"]) != L || $(c[1,"heads"]) != H || $(c[1,"kv_heads"]) != KV ||
          $(c[1,"tokens"]) != 160 || $(c[1,"head_dim"]) != DIM) print; n[$(c[1,"model"])]++ }
    END { if (n["m-alpha"] != 1 || n["m-beta"] != 1) print "models" }' \
    -v L=$LAYERS -v H=$HEADS -v KV=$KVH -v DIM=$DIM "$R/models.csv"

# --------------------------------------------------------------- compare
CMPH="claim,study,model,a,b,metric,n,mean_a,mean_b,mean_diff,ci_lo,ci_hi,verdict"
run_ok "compare" "$Q" compare --results "$R" --out "$R/comparisons.csv" "${BOOT[@]}"
check "compare: header" header_is "$R/comparisons.csv" "$CMPH"
check "compare: has rows" [ "$(nrows "$R/comparisons.csv")" -gt 0 ]
awk_quiet "compare: verdicts in the set and consistent with the interval and the metric's direction" '
    { v = $(c[1,"verdict"]); lo = $(c[1,"ci_lo"]); hi = $(c[1,"ci_hi"]); md = $(c[1,"mean_diff"]); m = $(c[1,"metric"])
      for (k = split("n mean_a mean_b mean_diff ci_lo ci_hi", nm, " "); k > 0; k--) if (!isnum($(c[1, nm[k]]))) print nm[k] " " $0
      if (v != "a better" && v != "b better" && v != "inconclusive") print "verdict " $0
      if (m != "cos" && m != "rel_l1") print "metric " $0
      if (!(lo <= md && md <= hi)) print "interval " $0
      if (!near(md, $(c[1,"mean_a"]) - $(c[1,"mean_b"]), 1e-9)) print "mean_diff " $0
      want = (m == "cos") ? (lo > 0 ? "a better" : hi < 0 ? "b better" : "inconclusive") \
                          : (hi < 0 ? "a better" : lo > 0 ? "b better" : "inconclusive")
      if (v != want) print "verdict " v " != " want ": " $0
      if ($(c[1,"n"]) != L * H) print "n " $0
      if ($(c[1,"model"]) != "m-alpha" && $(c[1,"model"]) != "m-beta") print "model " $0 }' \
    -v L=$LAYERS -v H=$HEADS "$R/comparisons.csv"
awk_quiet "compare: every claim of each model for both metrics; a and b are labels of the study" '
    BEGIN { split(CS, ss, " ")
            for (i in ss) { f = LD "/" ss[i] ".txt"; while ((getline line < f) > 0) { split(line, p, "|"); lab[ss[i], p[1]] = 1 } } }
    { s = $(c[1,"study"]); if (!((s, $(c[1,"a"])) in lab) || !((s, $(c[1,"b"])) in lab)) print "labels " $0
      k = $(c[1,"claim"]) SUBSEP s SUBSEP $(c[1,"a"]) SUBSEP $(c[1,"b"]) SUBSEP $(c[1,"model"]); cnt[k, $(c[1,"metric"])]++; ks[k] = 1
      studies[s] = 1 }
    END { for (k in ks) if (cnt[k, "cos"] != 1 || cnt[k, "rel_l1"] != 1) print "metrics of " k
          for (i in ss) if (!(ss[i] in studies)) print "no claim from " ss[i] }' \
    -v LD="$S/list" -v CS="$CLAIM_STUDIES" "$R/comparisons.csv"
CELLS=()
for st in $CLAIM_STUDIES; do CELLS+=("$R/$st/cells.csv"); done
awk_quiet "compare: mean_a and mean_b are the cells' means" '
    fi <= NS { k = ST[fi] SUBSEP $(c[fi,"model"]) SUBSEP $(c[fi,"label"]); sc[k] += $(c[fi,"cos"]); sl[k] += $(c[fi,"rel_l1"]); n[k]++ }
    fi == NS + 1 { s = $(c[fi,"study"]); m = $(c[fi,"model"])
              ka = s SUBSEP m SUBSEP $(c[fi,"a"]); kb = s SUBSEP m SUBSEP $(c[fi,"b"])
              if ($(c[fi,"metric"]) == "cos") { ea = sc[ka] / n[ka]; eb = sc[kb] / n[kb] } else { ea = sl[ka] / n[ka]; eb = sl[kb] / n[kb] }
              if (!near($(c[fi,"mean_a"]), ea, 1e-9) || !near($(c[fi,"mean_b"]), eb, 1e-9)) print $0 " vs " ea " " eb }
    BEGIN { NS = split(CS, ST, " ") }' \
    -v CS="$CLAIM_STUDIES" "${CELLS[@]}" "$R/comparisons.csv"
check "compare: smoothing K helps int4 per-block on K-biased data (a better, cos and rel_l1)" \
    [ "$(grep -c '^smooth_k_helps,granularity,m-[a-z]*,"int4/block/k","int4/block/none",[a-z0-9_]*,.*,a better$' "$R/comparisons.csv")" -eq 4 ]
# a study not run: its claims are skipped, the others unchanged
mv "$R/accumulator" "$S/accumulator.away"
run_ok "compare without the accumulator study" "$Q" compare --results "$R" --out "$S/cmp-noacc.csv" "${BOOT[@]}"
check "compare: no claims of a study not run" eval '! grep -q ",accumulator," "$S/cmp-noacc.csv"'
check "compare: the other claims unchanged" \
    eval 'cmp -s "$S/cmp-noacc.csv" <(grep -v ",accumulator," "$R/comparisons.csv")'
mkdir -p "$S/empty-results"
run_ok "compare with no study run" "$Q" compare --results "$S/empty-results" --out "$S/cmp-none.csv"
check "compare: no study, header only" eval '[ "$(cat "$S/cmp-none.csv")" = "$CMPH" ]'
mv "$S/accumulator.away" "$R/accumulator"

# ---------------------------------------------------------------- pareto
PH="model,label,spec,cos_mean,cos_worst_layer,device,tops,tops_source"
GP=$(wc -l <"$S/list/pareto-cells.txt")
run_ok "pareto without GPU results" "$Q" pareto --results "$R" --bench "$S/no-bench" --out "$R/pareto"
check "pareto: header" header_is "$R/pareto/pareto.csv" "$PH"
check "pareto: one row per model x kernel scheme" [ "$(nrows "$R/pareto/pareto.csv")" -eq $((GP * NM)) ]
awk_quiet "pareto: no bench, every row tops_source none with empty device and tops" '
    $(c[1,"tops_source"]) != "none" || $(c[1,"tops"]) != "" || $(c[1,"device"]) != "" { print }' "$R/pareto/pareto.csv"
awk_quiet "pareto: accuracy and spec from pareto-cells/summary.csv" '
    fi == 1 { s[$(c[1,"model"]), $(c[1,"label"])] = $(c[1,"cos_mean"]) " " $(c[1,"cos_worst_layer"]) " " $(c[1,"spec"]) }
    fi == 2 { k = $(c[2,"model"]) SUBSEP $(c[2,"label"])
              if (!(k in s) || s[k] != $(c[2,"cos_mean"]) " " $(c[2,"cos_worst_layer"]) " " $(c[2,"spec"])) print; n++ }
    END { if (n != N) print n " rows" }' -v N=$((GP * NM)) "$R/pareto-cells/summary.csv" "$R/pareto/pareto.csv"
BENCH=$S/bench
mkdir -p "$BENCH/h100" "$BENCH/not-a-device"
{
    echo "device,date,kernel,scheme,head_dim,causal,n,batch,heads,tops_kernel,tops_e2e,tops_torch_flash,tops_torch_cudnn"
    echo "NVIDIA H100 80GB HBM3,2025-01-01,sage2,sage2-8b,$DIM,1,1024,4,32,100.5,90,80,70"
    echo "NVIDIA H100 80GB HBM3,2025-01-01,sage2,sage2-8b,$DIM,1,8192,4,32,300.25,290,280,270"
    echo "NVIDIA H100 80GB HBM3,2025-01-01,sage2,sage2-8b,$DIM,1,4096,4,32,250,240,230,220"
    echo "NVIDIA H100 80GB HBM3,2025-01-01,sage2,sage2-8b,$DIM,0,16384,4,32,999,1,1,1"
    echo "NVIDIA H100 80GB HBM3,2025-01-01,sage2,sage2-8b,$((DIM * 2)),1,16384,4,32,888,1,1,1"
    echo "NVIDIA H100 80GB HBM3,2025-01-01,sage2,sage2-8b,$DIM,1,32768,4,32,nan,nan,nan,nan"
    # the portable (correctness-path) instance is never a throughput point
    echo "NVIDIA H100 80GB HBM3,2025-01-01,attn_fwd_portable_d${DIM}_qk_int8_pv_e4m3_acc_fp22,sage2-8b,$DIM,1,65536,4,32,3.5,3,1,1"
    echo "NVIDIA H100 80GB HBM3,2025-01-01,sage2,sage2-4b,$((DIM * 2)),1,8192,4,32,500,1,1,1"
} >"$BENCH/h100/attn_fwd_bench.csv"
echo "not a bench file" >"$BENCH/not-a-device/README"
run_ok "pareto with a bench CSV" "$Q" pareto --results "$R" --bench "$BENCH" --out "$R/pareto"
check "pareto: still one row per model x kernel scheme" [ "$(nrows "$R/pareto/pareto.csv")" -eq $((GP * NM)) ]
awk_quiet "pareto: sage2-8b gets the largest causal N at the model's head dim; tops_source names the file" '
    $(c[1,"label"]) == "sage2-8b" { n++
        if ($(c[1,"tops"]) != "300.25" || $(c[1,"device"]) != "NVIDIA H100 80GB HBM3" || $(c[1,"tops_source"]) != SRC) print }
    $(c[1,"label"]) != "sage2-8b" && ($(c[1,"tops_source"]) != "none" || $(c[1,"tops"]) != "") { print }
    END { if (n != 2) print n " sage2-8b rows" }' -v SRC="$BENCH/h100/attn_fwd_bench.csv" "$R/pareto/pareto.csv"
expect_err "pareto without pareto-cells results" "summary.csv" "$S/pareto-bad" \
    "$Q" pareto --results "$S/empty-results" --bench "$BENCH" --out "$S/pareto-bad"

# --------------------------------------------------------------- entropy
D=$R/entropy
PVC=$S/keep/pv.cells.csv
if run_ok "entropy on two models" "$Q" entropy --data "$A" --data "$B" --out "$D" --pv "$PVC" "${BOOT[@]}" --threads 2; then
    check "entropy: heads.csv header" header_is "$D/heads.csv" \
        "model,layer,head,kv_head,rows,entropy,entropy_norm,pmax,int8_zero_mass"
    check "entropy: pv.csv header" header_is "$D/pv.csv" \
        "model,layer,head,qk_fmt,entropy_norm,int8_zero_mass,cos_fp16,cos_e4m3,cos_int8,e4m3_minus_int8,better"
    check "entropy: summary.csv header" header_is "$D/summary.csv" \
        "model,qk_fmt,n,entropy_norm_mean,e4m3_minus_int8_mean,diff_low_entropy,diff_high_entropy,spearman,spearman_ci_lo,spearman_ci_hi,zero_mass_spearman,e4m3_better,int8_better"
    check "entropy: a row per model x layer x head" [ "$(nrows "$D/heads.csv")" -eq $((LAYERS * HEADS * NM)) ]
    check "entropy: pv.csv a row per head and Q.K format of the pv study" \
        [ "$(nrows "$D/pv.csv")" -eq $((LAYERS * HEADS * NM * 2)) ]
    check "entropy: summary a row per model and Q.K format" [ "$(nrows "$D/summary.csv")" -eq $((NM * 2)) ]
    awk_quiet "entropy: rows, 0 <= H <= ln 96, 0 <= H/ln n <= 1, 0 < pmax <= 1, 0 <= zero mass < 1, kv head" '
        { if ($(c[1,"rows"]) != 160) print "rows " $0
          if (!($(c[1,"entropy"]) >= 0 && $(c[1,"entropy"]) <= log(96) + 1e-9)) print "entropy " $0
          if (!($(c[1,"entropy_norm"]) >= 0 && $(c[1,"entropy_norm"]) <= 1 + 1e-9)) print "entropy_norm " $0
          if (!($(c[1,"pmax"]) > 0 && $(c[1,"pmax"]) <= 1 + 1e-12)) print "pmax " $0
          if (!($(c[1,"int8_zero_mass"]) >= 0 && $(c[1,"int8_zero_mass"]) < 1)) print "zero mass " $0
          if ($(c[1,"kv_head"]) != int($(c[1,"head"]) / (H / KV))) print "kv_head " $0 }' \
        -v H=$HEADS -v KV=$KVH "$D/heads.csv"
    awk_quiet "entropy: pv.csv cos are the pv cells; the difference and the better format follow" '
        fi == 1 { cs[$(c[1,"model"]), $(c[1,"layer"]), $(c[1,"head"]), $(c[1,"label"])] = $(c[1,"cos"]) }
        fi == 2 { k = $(c[2,"model"]) SUBSEP $(c[2,"layer"]) SUBSEP $(c[2,"head"]); q = $(c[2,"qk_fmt"])
                  if ($(c[2,"cos_e4m3"]) != cs[k, q "/e4m3"] || $(c[2,"cos_int8"]) != cs[k, q "/int8"] ||
                      $(c[2,"cos_fp16"]) != cs[k, q "/fp16"]) print "cos " $0
                  d = $(c[2,"cos_e4m3"]) - $(c[2,"cos_int8"])
                  if (!near($(c[2,"e4m3_minus_int8"]), d, 1e-9)) print "difference " $0
                  if ($(c[2,"better"]) != (d > 0 ? "e4m3" : d < 0 ? "int8" : "tie")) print "better " $0 }' \
        "$PVC" "$D/pv.csv"
    awk_quiet "entropy: summary counts and means from pv.csv; -1 <= rho in its interval <= 1" '
        fi == 1 { k = $(c[1,"model"]) SUBSEP $(c[1,"qk_fmt"]); n[k]++; s[k] += $(c[1,"e4m3_minus_int8"])
                  ne[k] += $(c[1,"better"]) == "e4m3"; ni[k] += $(c[1,"better"]) == "int8" }
        fi == 2 { k = $(c[2,"model"]) SUBSEP $(c[2,"qk_fmt"])
                  if ($(c[2,"n"]) != n[k] || $(c[2,"e4m3_better"]) != ne[k] || $(c[2,"int8_better"]) != ni[k]) print "counts " $0
                  if (!near($(c[2,"e4m3_minus_int8_mean"]), s[k] / n[k], 1e-9)) print "mean " $0
                  r = $(c[2,"spearman"])
                  if (!(r >= -1 && r <= 1 && $(c[2,"spearman_ci_lo"]) <= r && r <= $(c[2,"spearman_ci_hi"]))) print "rho " $0 }' \
        "$D/pv.csv" "$D/summary.csv"
    check "entropy: studies --run ran it after pv, the same heads" cmp -s "$S/all/entropy/heads.csv" "$D/heads.csv"
fi
expect_err "entropy: no --pv" "--pv" "$S/bad-ent" "$Q" entropy --data "$A" --out "$S/bad-ent"
sed '1s/,pv_fmt,/,pvfmt,/' "$PVC" >"$S/pv-bad.csv"
expect_err "entropy: pv cells without pv_fmt" "'pv_fmt'" "$S/bad-ent" \
    "$Q" entropy --data "$A" --out "$S/bad-ent" --pv "$S/pv-bad.csv"
expect_err "entropy: missing --data file" "nope.h5" "$S/bad-ent" \
    "$Q" entropy --data "$S/nope.h5" --out "$S/bad-ent" --pv "$PVC"
expect_err "entropy: --heads out of range" "$A" "$S/bad-ent" \
    "$Q" entropy --data "$A" --out "$S/bad-ent" --pv "$PVC" --heads 9

# --------------------------------------------------------------- kvcache
# 25 cells; rows sampled every 16th of each sequence and its last row:
# 15,31,47,63 of 64 and 15,...,95 of 96 = 10 rows a layer
D=$R/kvcache
KVCELLS=25
if run_ok "kvcache on two models" "$Q" kvcache --data "$A" --data "$B" --out "$D" "${BOOT[@]}" --threads 2; then
    check "kvcache: cells.csv header" header_is "$D/cells.csv" \
        "model,layer,head,label,k_cache,smooth,v_cache,rows,cos,rel_l1,rmse,max_abs,row_cos_min,k_spec,v_spec"
    check "kvcache: summary.csv header" header_is "$D/summary.csv" \
        "model,label,k_cache,smooth,v_cache,n,cos_mean,cos_ci_lo,cos_ci_hi,cos_worst_head,one_minus_cos_mean,one_minus_cos_ci_lo,one_minus_cos_ci_hi,one_minus_cos_worst_head,rel_l1_mean,rel_l1_ci_lo,rel_l1_ci_hi,rel_l1_worst_head,k_spec,v_spec"
    check "kvcache: a row per model x layer x head x cell" \
        [ "$(nrows "$D/cells.csv")" -eq $((KVCELLS * LAYERS * HEADS * NM)) ]
    check "kvcache: summary a row per model x cell" [ "$(nrows "$D/summary.csv")" -eq $((KVCELLS * NM)) ]
    awk_quiet "kvcache: label, levels of the record, specs, 10 rows, metrics in range, fp16 exact, int8 close" '
        { k = $(c[1,"k_cache"]); sm = $(c[1,"smooth"]); v = $(c[1,"v_cache"])
          if ($(c[1,"label"]) != k "/" sm "/" v) print "label " $0
          if (index("|" KL "|", "|" k "|") == 0 || index("|" VL "|", "|" v "|") == 0 || (sm != "none" && sm != "k")) print "level " $0
          f = substr(k, 1, 4); g = substr(k, 6)
          ks = k == "fp16" ? "fp16" : f "@" (g == "token" ? "token" : g == "channel" ? "block:32,ch:1" : "block:32")
          sp = $(c[1,"k_spec"]); gsub(/;/, ",", sp) # unquote turns the comma inside a field into ;
          if (sp != ks || $(c[1,"v_spec"]) != (v == "fp16" ? "fp16" : v "@token")) print "spec " $0
          if ($(c[1,"rows"]) != 10) print "rows " $0
          x = $(c[1,"cos"]); l = $(c[1,"rel_l1"])
          if (!isnum(x) || x < -1 || x > 1 + 1e-9 || !isnum(l) || l < 0) print "metric " $0
          if (k == "fp16" && v == "fp16" && (x < 0.999999 || l > 1e-5)) print "fp16 " $0
          if (k ~ /^(int8|fp16)/ && v ~ /^(int8|fp16)/ && x < 0.999) print "int8 " $0
          n[$(c[1,"model"]), $(c[1,"label"])]++ }
        END { for (i in n) if (n[i] != H * L) print "heads of " i ": " n[i] }' \
        -v KL="$(tsv_col kvcache levels | sed 's/^k_cache=//; s/;.*//')" -v VL="fp16|int8|int4|e4m3" \
        -v H=$HEADS -v L=$LAYERS "$D/cells.csv"
    awk_quiet "kvcache: summary means and worst heads from the cells, in their intervals" '
        fi == 1 { k = $(c[1,"model"]) SUBSEP $(c[1,"label"]); n[k]++; s[k] += $(c[1,"cos"]); l[k] += $(c[1,"rel_l1"])
                  if (!(k in w) || $(c[1,"cos"]) < w[k]) w[k] = $(c[1,"cos"]) }
        fi == 2 { k = $(c[2,"model"]) SUBSEP $(c[2,"label"]); m = $(c[2,"cos_mean"])
                  if ($(c[2,"n"]) != n[k] || !near(m, s[k] / n[k], 1e-9) || !near($(c[2,"rel_l1_mean"]), l[k] / n[k], 1e-9)) print "mean " $0
                  if (!near($(c[2,"cos_worst_head"]), w[k], 1e-9) || !near($(c[2,"one_minus_cos_mean"]), 1 - m, 1e-9) ||
                      !near($(c[2,"one_minus_cos_worst_head"]), 1 - w[k], 1e-9)) print "worst " $0
                  if (!($(c[2,"cos_ci_lo"]) <= m + 1e-12 && m <= $(c[2,"cos_ci_hi"]) + 1e-12)) print "interval " $0 }' \
        "$D/cells.csv" "$D/summary.csv"
    check "kvcache: studies --run ran it, the same cells" cmp -s "$S/all/kvcache/cells.csv" "$D/cells.csv"
fi
# groups longer than any sequence never close: the per-channel and
# per-block K caches hold the fp32 residual only, which is the fp16 data
if run_ok "kvcache: --group 128 --stride 1" "$Q" kvcache --data "$A" --out "$S/kv-g128" --group 128 --stride 1 --boot 0 --layers 1; then
    awk_quiet "kvcache: --group 128: open groups equal the fp16 cache; every row sampled" '
        { if ($(c[1,"rows"]) != 160) print "rows " $0
          h = $(c[1,"head"]); lb = $(c[1,"label"])
          if (lb == "fp16/none/fp16") { base[h] = $(c[1,"cos"]) SUBSEP $(c[1,"rel_l1"]) }
          if (lb ~ /^(int8|int4|e4m3)-(channel|block)\/none\/fp16$/) { got[h, lb] = $(c[1,"cos"]) SUBSEP $(c[1,"rel_l1"]); ng++ } }
        END { for (i in got) { split(i, p, SUBSEP); if (got[i] != base[p[1]]) print "differs " p[2] " head " p[1] }
              if (ng != 6 * 4) print ng " cells" }' "$S/kv-g128/cells.csv"
fi
expect_err "kvcache: no --out" "--out" "" "$Q" kvcache --data "$A"
expect_err "kvcache: --stride 0" "--stride" "$S/bad-kv" "$Q" kvcache --data "$A" --out "$S/bad-kv" --stride 0
expect_err "kvcache: --group 0" "--group" "$S/bad-kv" "$Q" kvcache --data "$A" --out "$S/bad-kv" --group 0
expect_err "kvcache: missing --data file" "nope.h5" "$S/bad-kv" "$Q" kvcache --data "$S/nope.h5" --out "$S/bad-kv"
expect_err "kvcache: --heads out of range" "$A" "$S/bad-kv" "$Q" kvcache --data "$A" --out "$S/bad-kv" --heads 9

# ------------------------------------------------------------------ dsv4
# a DeepSeek-V4-layout file: one kv head as key and value, the last 40 of 200 query rows,
# rope_dim 16; every 3rd row sampled and the last = 14 rows; with 200 keys, top512 = dense
L4=$S/layout.h5
D=$R/dsv4
if run_ok "synth: a DeepSeek-V4-layout file" "$Q" synth --out "$L4" --layers 2 --heads 4 --kv-heads 1 --tokens 200 \
        --dim 128 --q-rows 40 --rope-dim 16 --shared-kv --model m-lay &&
    run_ok "dsv4 on it" "$Q" dsv4 --data "$L4" --out "$D" "${BOOT[@]}" --stride 3 --threads 2; then
    check "dsv4: cells.csv header" header_is "$D/cells.csv" \
        "model,layer,head,cell,list,rows,cos,rel_l1,rmse,max_abs,row_cos_min,kv_spec,q_spec,rope"
    check "dsv4: summary.csv header" header_is "$D/summary.csv" \
        "model,cell,list,n,cos_mean,cos_ci_lo,cos_ci_hi,cos_worst_head,one_minus_cos_mean,one_minus_cos_ci_lo,one_minus_cos_ci_hi,one_minus_cos_worst_head,rel_l1_mean,rel_l1_ci_lo,rel_l1_ci_hi,rel_l1_worst_head"
    check "dsv4: a row per layer x head x cell x list" [ "$(nrows "$D/cells.csv")" -eq $((2 * 4 * 8 * 3)) ]
    check "dsv4: summary a row per cell x list" [ "$(nrows "$D/summary.csv")" -eq 24 ]
    awk_quiet "dsv4: levels of the record, 14 rows, metrics in range, bf16 best, top512 = dense" '
        { cl = $(c[1,"cell"]); li = $(c[1,"list"]); k = $(c[1,"layer"]) SUBSEP $(c[1,"head"])
          if (index("|" CL "|", "|" cl "|") == 0 || (li != "dense" && li != "top512" && li != "top64")) print "level " $0
          if ($(c[1,"rows"]) != 14) print "rows " $0
          x = $(c[1,"cos"]); l = $(c[1,"rel_l1"])
          if (!isnum(x) || x < 0.99 || x > 1 + 1e-9 || !isnum(l) || l < 0) print "metric " $0
          if (cl == "bf16" && 1 - x > 1e-4) print "bf16 " $0
          if (($(c[1,"rope"]) == "bf16") != (cl ~ /rope|v4/)) print "rope " $0
          cs[k, cl, li] = x }
        END { for (i in cs) { split(i, p, SUBSEP); kk = p[1] SUBSEP p[2]
                if (cs[i] > cs[kk, "bf16", p[4]] + 1e-12) print "above bf16 " i
                if (p[4] == "top512" && cs[i] != cs[kk, p[3], "dense"]) print "top512 != dense " i } }' \
        -v CL="$(tsv_col dsv4 levels | sed 's/^cell=//; s/;.*//')" "$D/cells.csv"
    awk_quiet "dsv4: top64 lists differ from dense (fewer keys than the rows see)" '
        { k = $(c[1,"layer"]) SUBSEP $(c[1,"head"]) SUBSEP $(c[1,"cell"]); v[k, $(c[1,"list"])] = $(c[1,"cos"]) }
        END { same = 0; for (i in v) { split(i, p, SUBSEP); if (p[4] == "top64" && v[i] == v[p[1], p[2], p[3], "dense"]) same++ }
              if (same > 0) print same " top64 cells equal to dense" }' "$D/cells.csv"
fi
expect_err "dsv4: a file not in the layout" "not in the layout" "$S/bad-dsv4" "$Q" dsv4 --data "$A" --out "$S/bad-dsv4"
expect_err "dsv4: no --out" "--out" "" "$Q" dsv4 --data "$L4"
expect_err "dsv4: missing --data file" "nope.h5" "$S/bad-dsv4" "$Q" dsv4 --data "$S/nope.h5" --out "$S/bad-dsv4"
expect_err "dsv4: --stride 0" "--stride" "$S/bad-dsv4" "$Q" dsv4 --data "$L4" --out "$S/bad-dsv4" --stride 0
if run_ok "synth: the layout without a shared K/V" "$Q" synth --out "$S/layout-kv.h5" --layers 1 --heads 4 --kv-heads 1 \
        --tokens 200 --dim 128 --q-rows 40 --rope-dim 16 --model m-lay2; then
    expect_err "dsv4: v not equal to k" "v differs from k" "$S/bad-dsv4" "$Q" dsv4 --data "$S/layout-kv.h5" --out "$S/bad-dsv4"
fi
expect_err "inspect: a file with only the last query rows" "q_offset" "" "$Q" inspect "$L4"
expect_err "synth: --q-rows over --tokens" "--q-rows" "$S/bad.h5" "$Q" synth --out "$S/bad.h5" --layers 1 --heads 4 \
    --kv-heads 1 --tokens 20 --dim 8 --q-rows 21
expect_err "synth: --q-rows with two sequences" "one sequence" "$S/bad.h5" "$Q" synth --out "$S/bad.h5" --layers 1 \
    --heads 4 --kv-heads 1 --tokens 20 --dim 8 --q-rows 5 --seqlens 10,10
expect_err "synth: --rope-dim over --dim" "--rope-dim" "$S/bad.h5" "$Q" synth --out "$S/bad.h5" --layers 1 --heads 4 \
    --kv-heads 1 --tokens 20 --dim 8 --rope-dim 9

# ------------------------------------------------------------ bad inputs
for st in $STUDIES; do
    expect_err "$st: missing --data file" "nope.h5" "$S/bad-$st" \
        "$Q" "$st" --data "$A" --data "$S/nope.h5" --out "$S/bad-$st"
    expect_err "$st: unknown option" "--frobnicate" "$S/bad-$st" \
        "$Q" "$st" --data "$A" --out "$S/bad-$st" --frobnicate
done
expect_err "pv: no --out" "--out" "" "$Q" pv --data "$A"
expect_err "pv: no --data" "--data" "$S/bad-pv1" "$Q" pv --out "$S/bad-pv1"
expect_err "pv: --layers out of range" "$A" "$S/bad-pv2" "$Q" pv --data "$A" --out "$S/bad-pv2" --layers 5
expect_err "pv: two files of one model" "m-alpha" "$S/bad-pv3" "$Q" pv --data "$A" --data "$A2" --out "$S/bad-pv3"
expect_err "pv: more memory than there is" "$A: the run would hold" "$S/bad-pv5" \
    env QATTN_MEMORY_MB=0.01 "$Q" pv --data "$A" --out "$S/bad-pv5"
expect_err "outliers: more memory than there is" "$A: the run would hold" "$S/bad-pv5" \
    env QATTN_MEMORY_MB=0.01 "$Q" outliers --data "$A" --out "$S/bad-pv5"
expect_err "pv: bad --threads" "'0'" "$S/bad-pv4" "$Q" pv --data "$A" --out "$S/bad-pv4" --threads 0
check "pv: --threads 0 names the option" grep -qF -- "--threads" "$ERR"
expect_err "pv: --threads 99999 (libgomp crashed)" "--threads must be a positive integer up to" "$S/bad-pv4" \
    "$Q" pv --data "$A" --out "$S/bad-pv4" --threads 99999
expect_err "outliers: missing --data file" "nope.h5" "$S/bad-out" "$Q" outliers --data "$S/nope.h5" --out "$S/bad-out"
expect_err "outliers: unknown option" "--frobnicate" "$S/bad-out" "$Q" outliers --data "$C" --out "$S/bad-out" --frobnicate
expect_err "outliers: no --out" "--out" "" "$Q" outliers --data "$C"
expect_err "models: missing --data file" "nope.h5" "$S/bad-models.csv" "$Q" models --data "$A" --data "$S/nope.h5" --out "$S/bad-models.csv"
expect_err "models: unknown option" "--frobnicate" "$S/bad-models.csv" "$Q" models --data "$A" --out "$S/bad-models.csv" --frobnicate
expect_err "models: no --out" "--out" "" "$Q" models --data "$A"
# outputs that a rename could not replace are refused before any work
mkdir -p "$S/bad-pv6/summary.csv"
expect_err "pv: DIR/summary.csv is a directory" "bad-pv6/summary.csv exists and is a directory" "" \
    "$Q" pv --data "$A" --out "$S/bad-pv6"
check "pv: DIR/summary.csv a directory: no cells.csv written" test ! -e "$S/bad-pv6/cells.csv"
rm -r "$S/bad-pv6"
mkdir -p "$S/bad-models.d"
expect_err "models: --out a directory" "exists and is a directory" "" \
    "$Q" models --data "$A" --out "$S/bad-models.d"
rmdir "$S/bad-models.d"
expect_err "compare: --out ''" "--out is empty" "" "$Q" compare --results "$R" --out ''
expect_err "compare: unknown option" "--frobnicate" "$S/bad-cmp.csv" "$Q" compare --results "$R" --out "$S/bad-cmp.csv" --frobnicate
expect_err "compare: no --out" "--out" "" "$Q" compare --results "$R"
expect_err "pareto: unknown option" "--frobnicate" "$S/bad-par" "$Q" pareto --results "$R" --bench "$BENCH" --out "$S/bad-par" --frobnicate
expect_err "pareto: no --out" "--out" "" "$Q" pareto --results "$R" --bench "$BENCH"

# ---- your own schemes in a study (--schemes): rows carry 'custom' factors,
# they persist when a later run omits --schemes, and a clash is an error ----
CU=$S/custom
MY='q=int8@thread:32/8/1 k=int8@thread:64/8/2 p=e4m3@static v=e4m3@channel smooth=k'
if run_ok "custom: smoothing --schemes" "$Q" smoothing --data "$A" --out "$CU" --layers 0 "${BOOT[@]}" \
    --schemes "$MY,sage2-4b"; then
    grid=$("$Q" smoothing --list | wc -l)
    check "custom: two extra cells per head" [ "$(nrows "$CU/cells.csv")" -eq $(((grid + 2) * HEADS)) ]
    check "custom: factors read custom" [ "$(grep -c ',custom,custom,' "$CU/cells.csv")" -eq $((2 * HEADS)) ]
    check "custom: summary rows" [ "$(grep -c ',custom,custom,' "$CU/summary.csv")" -eq 2 ]
    run_ok "custom: rerun without --schemes" "$Q" smoothing --data "$A" --out "$CU" "${BOOT[@]}"
    check "custom: rows kept and extended to every layer" \
        [ "$(grep -c ',custom,custom,' "$CU/cells.csv")" -eq $((2 * HEADS * LAYERS)) ]
fi
expect_err "custom: a label already in the grid" "already in the grid" "$S/bad-custom" \
    "$Q" smoothing --data "$A" --out "$S/bad-custom" --schemes 'sage2-4b,sage2-4b'
# --list used to print the grid at once, before a later --schemes was read
expect_err "custom: --list --schemes nosuch (exit 0 before)" "nosuch" "" \
    "$Q" granularity --list --schemes nosuch
expect_err "custom: unknown scheme" "nosuch" "$S/bad-custom" "$Q" smoothing --data "$A" --out "$S/bad-custom" \
    --schemes nosuch

# ---- e2e: the held-out losses of a GPU run joined with the cells' 1 - cos;
# the newest date of a model and scheme wins; Spearman's rho by hand ----
E=$S/e2e
mkdir -p "$E/loss/gpu-a" "$E/loss/gpu-b"
HDR='device,date,model,scheme,loss,loss_lo,loss_hi,delta,delta_lo,delta_hi,kbias,spec'
{
    echo "$HDR"
    for r in none,0 s1,0.01 s2,0.02 s3,0.03 s4,0.05 s5,0.04; do
        echo "gpu A,2026-01-01,m1,${r%,*},2.5,2.4,2.6,${r#*,},0,0.1,0,x"
    done
    echo "gpu A,2026-01-01,m1,kbias8:s1,2.9,2.8,3,0.4,0.3,0.5,8,x"
    echo "gpu A,2026-01-01,m2,s1,2.5,2.4,2.6,0.9,0,0.1,0,x"
} >"$E/loss/gpu-a/e2e_loss.csv"
{ echo "$HDR"; echo "gpu B,2026-02-01,m1,s5,2.5,2.4,2.6,0.06,0,0.1,0,x"; echo "gpu B,2025-12-01,m1,s4,9,9,9,9,9,9,0,x"; } \
    >"$E/loss/gpu-b/e2e_loss.csv"
printf 'model,label,cos_mean\nm1,s1,0.9\nm1,s2,0.8\nm1,s3,0.7\nm1,s4,0.6\nm1,s5,0.5\nm1,kbias8:s1,0.1\n' >"$E/cells.csv"
if run_ok "e2e: joins two devices' files" "$Q" e2e --cells "$E/cells.csv" --loss "$E/loss" --out "$E/out"; then
    check "e2e: summary header" header_is "$E/out/summary.csv" \
        "model,scheme,device,date,kbias,loss,loss_lo,loss_hi,delta,delta_lo,delta_hi,one_minus_cos"
    check "e2e: the models of the cells file only (7 rows of m1)" [ "$(nrows "$E/out/summary.csv")" -eq 7 ]
    check "e2e: the newer date wins, the older is ignored" \
        grep -q '^m1,"s5","gpu B",2026-02-01,0,2.5,2.4,2.6,0.06,0,0.1,0.5$' "$E/out/summary.csv"
    check "e2e: s4 from the older file is not taken" grep -q '^m1,"s4","gpu A",.*,0.05,0,0.1,0.4$' "$E/out/summary.csv"
    check "e2e: none has no 1 - cos" grep -q '^m1,"none",.*,0,0,0.1,$' "$E/out/summary.csv"
    # x = 0.1..0.5 ranks 1..5, delta ranks 1 2 3 4 5 with s4 (0.05) and s5 (0.06): rho = 1;
    # without the K-bias row and without none
    check "e2e: corr.csv" [ "$(cat "$E/out/corr.csv")" == $'model,n,spearman\nm1,5,1.0000' ]
fi
sed -i 's/^gpu B,2026-02-01,m1,s5,2.5,2.4,2.6,0.06/gpu B,2026-02-01,m1,s5,2.5,2.4,2.6,0.035/' "$E/loss/gpu-b/e2e_loss.csv"
if run_ok "e2e: rerun" "$Q" e2e --cells "$E/cells.csv" --loss "$E/loss" --out "$E/out"; then
    # delta ranks 1 2 3 5 4 against 1..5: rho = 1 - 6 * 2 / (5 * 24) = 0.9
    check "e2e: Spearman 0.9 by hand" grep -q '^m1,5,0.9000$' "$E/out/corr.csv"
fi
cp -r "$E/loss" "$E/bad1" && sed -i '2s/,2.5,2.4,/,nan,2.4,/' "$E/bad1/gpu-a/e2e_loss.csv"
expect_err "e2e: a loss that is not finite" "loss is not a finite number" "$S/bad-e2e" \
    "$Q" e2e --cells "$E/cells.csv" --loss "$E/bad1" --out "$S/bad-e2e"
cp -r "$E/loss" "$E/bad2" && sed -i '1s/,kbias,/,k_bias,/' "$E/bad2/gpu-b/e2e_loss.csv"
expect_err "e2e: a file without kbias" "kbias" "$S/bad-e2e" "$Q" e2e --cells "$E/cells.csv" --loss "$E/bad2" --out "$S/bad-e2e"
expect_err "e2e: no cells file" "nope.csv" "$S/bad-e2e" "$Q" e2e --cells "$E/nope.csv" --loss "$E/loss" --out "$S/bad-e2e"
expect_err "e2e: no --loss" "--loss" "$S/bad-e2e" "$Q" e2e --cells "$E/cells.csv" --out "$S/bad-e2e"
check "e2e: a failed run left the earlier outputs" grep -q '^m1,5,0.9000$' "$E/out/corr.csv"

lib_finish
