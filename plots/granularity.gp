# Granularity study: cos (mean over heads, 95% interval) for each scale
# group, one panel per Q/K format, bars without and with smoothing K; one
# row of panels per model.
#   gnuplot -e "in='results/granularity/summary.csv'; out='paper/generated/fig_granularity.pdf'" plots/granularity.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/granularity/summary.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
nm = words(models) > 0 ? words(models) : 1
qa_w = 7.0
qa_h = 0.7 + 1.9 * nm
eval qa_term

fmts = "int4 int8 e4m3 e5m2"
groups = "tensor block warp thread token"
smooths = "none k"
smooth_title(s) = s eq "none" ? "no smoothing" : "smooth K"
w = 0.17
eval qa_cos_range(in, "cos_ci_lo", "cos_ci_hi")
eval qa_cos_axis
set xrange [0.4:5.6]
set xtics ("tensor" 1, "block" 2, "warp" 3, "thread" 4, "token" 5) rotate by 30 right font ",7"
set key @qa_keypos

# x of a row in model m, format f, smoothing s (NaN for other rows)
gx(m, f, s, off) = (strcol("model") eq m && strcol("qk_fmt") eq f && strcol("smooth") eq s) ? \
    qa_idx(strcol("group"), groups) + off : NaN

lay = qa_layout(nm, 4)
set multiplot @lay title "Scale granularity of Q and K (bars: mean over heads; whiskers: 95% interval)" font ",9"
do for [mi = 1:nm] {
    m = word(models, mi)
    do for [fi = 1:4] {
        f = word(fmts, fi)
        set title sprintf("%s Q/K%s", f, fi == 1 ? sprintf(" — %s", m) : "") font ",8"
        if (fi > 1) { unset ylabel } else { eval qa_cos_axis }
        if (mi == 1 && fi == 1) { set key } else { unset key }
        plot for [si = 1:2] in using (gx(m, f, word(smooths, si), (si - 1.5) * 2 * w)):(qa_e(column("cos_mean"))): \
                 (gx(m, f, word(smooths, si), (si - 1.5) * 2 * w) - w):(gx(m, f, word(smooths, si), (si - 1.5) * 2 * w) + w): \
                 (qa_e(column("cos_mean"))):(qa_ylo) \
                 with boxxyerror fc rgb qa_grey(si) fs solid 1 border lc rgb "black" lw 0.8 dt 1 title smooth_title(word(smooths, si)), \
             for [si = 1:2] in using (gx(m, f, word(smooths, si), (si - 1.5) * 2 * w)):(qa_e(column("cos_ci_lo"))): \
                 (0):(qa_e(column("cos_ci_hi")) - qa_e(column("cos_ci_lo"))) \
                 @qa_whisker lc rgb (si == 1 ? "#a0a0a0" : "black") notitle
    }
}
unset multiplot
