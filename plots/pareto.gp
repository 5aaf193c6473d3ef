# Accuracy against measured GPU throughput: cos (filled: mean over heads;
# open, joined: worst layer) against kernel TOPS for each scheme with a GPU
# kernel, point shape per model. Schemes without a GPU measurement yet
# (tops empty, tops_source none) are drawn in a separate strip on the left,
# marked "no GPU measurement yet".
#   gnuplot -e "in='results/pareto/pareto.csv'; out='paper/generated/fig_pareto.pdf'" plots/pareto.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/pareto/pareto.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
nm = words(models) > 0 ? words(models) : 1
qa_w = 7.0
qa_h = 3.6
eval qa_term

measured = "(strcol('tops') ne '' && strcol('tops_source') ne 'none' && column('tops') == column('tops'))"
ismeas(dummy) = @measured
tops(m) = (strcol("model") eq m && ismeas(0)) ? column("tops") : NaN
# strip position of an unmeasured point: its scheme's place among all labels,
# models a little apart
labels = qa_values(in, "label")
strip(m) = (strcol("model") eq m && !ismeas(0)) ? \
    qa_idx(strcol("label"), labels) + 0.25 * (qa_idx(m, models) - (nm + 1) / 2.0) / (nm > 1 ? nm - 1 : 1) : NaN
mpt(i) = word("7 5 9 13 11 15", (i - 1) % 6 + 1) + 0
mopen(i) = word("6 4 8 12 10 14", (i - 1) % 6 + 1) + 0

undefine STATS_*
stats in using (ismeas(0) ? 1 : 0) nooutput
nmeas = exists("STATS_sum") ? int(STATS_sum) : 0
nrows = exists("STATS_records") ? int(STATS_records) : 0
eval qa_cos_range(in, "cos_worst_layer", "cos_mean")

# the strip's right edge (screen fraction): wide when nothing is measured
split = nmeas == 0 ? 0.72 : 0.42
set multiplot title sprintf("Accuracy and measured GPU throughput (%d of %d points measured; filled: mean cos, open: worst layer)", nmeas, nrows) font ",9"
set tmargin at screen 1 - 0.75 / qa_h
set bmargin at screen 1.0 / qa_h

# --- the strip: no GPU measurement yet, one column per scheme
set lmargin at screen 0.75 / qa_w
set rmargin at screen split
eval qa_cos_axis
set xrange [0.5:words(labels) + 0.5]
set xtics () rotate by 45 right font ",7"
do for [k = 1:words(labels)] { set xtics add (word(labels, k) k) }
set xlabel "no GPU measurement yet" font ",8" offset 0, 0.3
set title "schemes without a GPU measurement" font ",8"
set key at screen 0.5, 1 - 0.3 / qa_h center top horizontal maxrows 1
plot for [i = 1:nm] in using (strip(word(models, i))):(qa_e(column("cos_worst_layer"))):(0):(qa_e(column("cos_mean")) - qa_e(column("cos_worst_layer"))) \
         with vectors nohead lc rgb "#909090" dt 1 lw 0.8 notitle, \
     for [i = 1:nm] in using (strip(word(models, i))):(qa_e(column("cos_worst_layer"))) with points lc rgb "black" pt mopen(i) ps 0.8 notitle, \
     for [i = 1:nm] in using (strip(word(models, i))):(qa_e(column("cos_mean"))) with points lc rgb "black" pt mpt(i) ps 0.8 title word(models, i)

# --- measured points: cos against TOPS
unset key
set lmargin at screen split + 0.55 / qa_w
set rmargin at screen 1 - 0.15 / qa_w
set xtics auto nomirror out norotate font ",8"
set xlabel "kernel throughput (TOPS)" font ",8" offset 0, 0
set title "measured" font ",8"
unset ylabel
if (nmeas == 0) {
    set xrange [0:1000]
    set label 97 "no GPU\nmeasurement\nyet for any\nscheme" at graph 0.5, 0.5 center font ",8"
    plot NaN notitle
    unset label 97
} else {
    set xrange [*:*]
    set autoscale xfix
    set offsets graph 0.08, graph 0.2, 0, 0
    plot for [i = 1:nm] in using (tops(word(models, i))):(qa_e(column("cos_worst_layer"))):(0):(qa_e(column("cos_mean")) - qa_e(column("cos_worst_layer"))) \
             with vectors nohead lc rgb "#909090" dt 1 lw 0.8 notitle, \
         for [i = 1:nm] in using (tops(word(models, i))):(qa_e(column("cos_worst_layer"))) with points lc rgb "black" pt mopen(i) ps 0.8 notitle, \
         for [i = 1:nm] in using (tops(word(models, i))):(qa_e(column("cos_mean"))) with points lc rgb "black" pt mpt(i) ps 0.8 notitle, \
         for [i = 1:nm] in using (tops(word(models, i))):(qa_e(column("cos_mean"))):(strcol("label")) with labels left offset 0.6, 0 font ",6" notitle
}
unset multiplot
