# Channel outliers per layer: for Q, K and V, the largest |channel mean| /
# channel std over heads and channels (left) and the largest channel max|x|
# over the median channel's (right), against the layer; one row per model.
#   gnuplot -e "in='results/outliers/summary.csv'; out='paper/generated/fig_outliers.pdf'" plots/outliers.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/outliers/summary.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
nm = words(models) > 0 ? words(models) : 1
qa_w = 6.8
qa_h = 0.7 + 2.2 * nm
eval qa_term

tensors = "q k v"
tname(i) = word("Q K V", i)
set logscale y
set format y "%g"
set xlabel "layer"
set key @qa_keypos
set mxtics 1

lay = qa_layout(nm, 2)
set multiplot @lay title "Channel statistics of Q, K and V per layer (over tokens; max over heads and channels)" font ",9"
do for [mi = 1:nm] {
    m = word(models, mi)
    do for [ti = 1:3] {
        eval qa_gather(sprintf("$M%d", ti), in, "column('layer')", "column('max_mean_over_std')", \
            sprintf("strcol('model') eq '%s' && strcol('tensor') eq '%s'", m, word(tensors, ti)))
        eval qa_gather(sprintf("$A%d", ti), in, "column('layer')", "column('amax_ratio')", \
            sprintf("strcol('model') eq '%s' && strcol('tensor') eq '%s'", m, word(tensors, ti)))
    }
    if (mi > 1) { unset key }
    set title sprintf("%s: largest |channel mean| / std", m) font ",8"
    set ylabel "|mean| / std (log)"
    plot for [ti = 1:3] sprintf("$M%d", ti) using "x":"y" smooth unique with linespoints lt ti title tname(ti)
    unset key
    set title sprintf("%s: largest channel max|x| / median channel's", m) font ",8"
    set ylabel "amax ratio (log)"
    plot for [ti = 1:3] sprintf("$A%d", ti) using "x":"y" smooth unique with linespoints lt ti title tname(ti)
    set key
}
unset multiplot
