# DeepSeek-V4's FP8 KV layout: 1 - cos (mean over heads, 95% interval) per
# KV-row format, for dense causal lists and top-512 / top-64 lists; one panel
# per model.
#   gnuplot -e "in='results/dsv4/summary.csv'; out='paper/generated/fig_dsv4.pdf'" plots/dsv4.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/dsv4/summary.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
nm = words(models) > 0 ? words(models) : 1
qa_w = 3.4 * (nm > 1 ? 2 : 1)
qa_h = 2.9 * ((nm + 1) / 2)
eval qa_term

cells = "bf16 e4m3-token e4m3-token+rope e4m3-ch64 e4m3-ch64+rope e4m3-ch64-e8m0 v4 v4-q"
lists = "dense top512 top64"
w = 0.24
eval qa_cos_range(in, "cos_ci_lo", "cos_ci_hi")
set xrange [0.4:8.6]
set xtics ("bf16" 1, "token" 2, "token\n+rope" 3, "ch64" 4, "ch64\n+rope" 5, "ch64\ne8m0" 6, "v4" 7, "v4\n+Q" 8) font ",7"
set xlabel "KV row (e4m3 scales: per token or per 64 channels; +rope: 64 RoPE channels in bf16)" font ",7"
set key @qa_keypos
gx(m, li) = (strcol("model") eq m && strcol("list") eq word(lists, li)) ? qa_idx(strcol("cell"), cells) + (li - 2) * w : NaN

lay = qa_layout((nm + 1) / 2, (nm > 1 ? 2 : 1))
set multiplot @lay title "DeepSeek-V4's FP8 KV layout (bars: mean over heads; whiskers: 95% interval)" font ",9"
do for [mi = 1:nm] {
    m = word(models, mi)
    set title m font ",8"
    eval qa_cos_axis
    if (mi > 1) { unset key }
    plot for [li = 1:3] in using (gx(m, li)):(qa_e(column("cos_mean"))):(gx(m, li) - w / 2):(gx(m, li) + w / 2): \
             (qa_e(column("cos_mean"))):(qa_ylo) \
             with boxxyerror fc rgb qa_grey(li) fs solid 1 border lc rgb "black" lw 0.8 dt 1 title word(lists, li), \
         for [li = 1:3] in using (gx(m, li)):(qa_e(column("cos_ci_lo"))):(0): \
             (qa_e(column("cos_ci_hi")) - qa_e(column("cos_ci_lo"))) \
             @qa_whisker lc rgb (li == 1 ? "#a0a0a0" : "black") notitle
}
unset multiplot
