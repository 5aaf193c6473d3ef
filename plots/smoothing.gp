# Smoothing ablation: cos (mean over heads, 95% interval) with no smoothing,
# smoothing K, Q, Q+K and Q+K+V, bars for int4 and int8 per-thread Q/K; one
# panel per model.
#   gnuplot -e "in='results/smoothing/summary.csv'; out='paper/generated/fig_smoothing.pdf'" plots/smoothing.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/smoothing/summary.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
nm = words(models) > 0 ? words(models) : 1
qa_w = 3.4 * (nm > 1 ? 2 : 1)
qa_h = 2.8 * ((nm + 1) / 2)
eval qa_term

fmts = "int4 int8"
smooths = "none k q q+k q+k+v"
w = 0.19
eval qa_cos_range(in, "cos_ci_lo", "cos_ci_hi")
set xrange [0.4:5.6]
set xtics ("none" 1, "K" 2, "Q" 3, "Q+K" 4, "Q+K+V" 5)
set xlabel "smoothing"
set key @qa_keypos

gx(m, f, off) = (strcol("model") eq m && strcol("qk_fmt") eq f) ? qa_idx(strcol("smooth"), smooths) + off : NaN

lay = qa_layout((nm + 1) / 2, (nm > 1 ? 2 : 1))
set multiplot @lay title "Smoothing ablation, per-thread Q/K groups (bars: mean over heads; whiskers: 95% interval)" font ",9"
do for [mi = 1:nm] {
    m = word(models, mi)
    set title m font ",8"
    eval qa_cos_axis
    if (mi > 1) { unset key }
    plot for [fi = 1:2] in using (gx(m, word(fmts, fi), (fi - 1.5) * 2 * w)):(qa_e(column("cos_mean"))): \
             (gx(m, word(fmts, fi), (fi - 1.5) * 2 * w) - w):(gx(m, word(fmts, fi), (fi - 1.5) * 2 * w) + w): \
             (qa_e(column("cos_mean"))):(qa_ylo) \
             with boxxyerror fc rgb qa_grey(fi) fs solid 1 border lc rgb "black" lw 0.8 dt 1 title word(fmts, fi)." Q/K", \
         for [fi = 1:2] in using (gx(m, word(fmts, fi), (fi - 1.5) * 2 * w)):(qa_e(column("cos_ci_lo"))): \
             (0):(qa_e(column("cos_ci_hi")) - qa_e(column("cos_ci_lo"))) \
             @qa_whisker lc rgb (fi == 1 ? "#a0a0a0" : "black") notitle
}
unset multiplot
