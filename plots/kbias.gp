# K bias sweep (augmented real data): cos (mean over heads, 95% interval)
# against the strength r of the per-channel offset added to the model's real
# K activations (log2 axis; r = 0 is the unmodified data), one line per Q/K
# format and smoothing (solid: smooth K, dashed: none); one panel per model.
#   gnuplot -e "in='results/kbias/summary.csv'; out='paper/generated/fig_kbias.pdf'" plots/kbias.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/kbias/summary.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
nm = words(models) > 0 ? words(models) : 1
qa_w = 3.4 * (nm > 1 ? 2 : 1)
qa_h = 2.9 * ((nm + 1) / 2) + 0.25
qa_top = 0.85
eval qa_term

fmts = "int8 int4 e4m3"
smooths = "none k"
eval qa_cos_range(in, "cos_ci_lo", "cos_ci_hi")
set logscale x 2
set xrange [0.4:45]
set xtics ("0" 0.5, 1, 2, 4, 8, 16, 32)
set xlabel "K bias r (channel std; 0: unmodified data)"
set key @qa_keypos

# r = 0 sits at 0.5 on the log axis
rx(m, f, s) = (strcol("model") eq m && strcol("qk_fmt") eq f && strcol("smooth") eq s) ? \
    (column("r") > 0 ? column("r") : 0.5) : NaN
fgrey(i) = word("black #555555 #999999", i)
fpt(i) = i == 1 ? 7 : (i == 2 ? 5 : 9)
# line k = 1..6: format (k - 1) / 2 + 1, smoothing (k - 1) % 2 + 1
kf(k) = (k - 1) / 2 + 1
ks(k) = (k - 1) % 2 + 1
dtk(k) = ks(k) == 1 ? 2 : 1

lay = qa_layout((nm + 1) / 2, (nm > 1 ? 2 : 1))
set multiplot @lay title "K bias sweep — augmented real data (points: mean over heads; whiskers: 95% interval)" font ",9"
do for [mi = 1:nm] {
    m = word(models, mi)
    set title m." (augmented real data)" font ",8"
    eval qa_cos_axis
    if (mi > 1) { unset key }
    # each line's points, gathered so that the other rows do not break it
    do for [k = 1:6] {
        eval qa_gather(sprintf("$L%d", k), in, "column('r') > 0 ? column('r') : 0.5", "qa_e(column('cos_mean'))", \
            sprintf("strcol('model') eq '%s' && strcol('qk_fmt') eq '%s' && strcol('smooth') eq '%s'", m, word(fmts, kf(k)), word(smooths, ks(k))))
    }
    plot for [k = 1:6] sprintf("$L%d", k) using "x":"y" smooth unique \
             with linespoints lc rgb fgrey(kf(k)) pt fpt(kf(k)) ps 0.6 lw 1.3 dt dtk(k) \
             title sprintf("%s, %s", word(fmts, kf(k)), ks(k) == 1 ? "no smoothing" : "smooth K"), \
         for [k = 1:6] in using (rx(m, word(fmts, kf(k)), word(smooths, ks(k)))):(qa_e(column("cos_ci_lo"))): \
             (0):(qa_e(column("cos_ci_hi")) - qa_e(column("cos_ci_lo"))) @qa_whisker lc rgb fgrey(kf(k)) notitle
}
unset multiplot
