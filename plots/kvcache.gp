# Quantized KV caches in decode: 1 - cos (mean over heads, 95% interval) per
# K cache format, K per token or per channel (groups of G tokens, KIVI),
# without and with smoothing K, and per block of G tokens x all channels (a
# control: the same fp32 residual as per channel); left three groups: K
# quantized, V fp16;
# right three: K and V quantized (V per token, no smoothing). One panel per
# model.
#   gnuplot -e "in='results/kvcache/summary.csv'; out='paper/generated/fig_kvcache.pdf'" plots/kvcache.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/kvcache/summary.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
nm = words(models) > 0 ? words(models) : 1
qa_w = 3.4 * (nm > 1 ? 2 : 1)
qa_h = 2.9 * ((nm + 1) / 2)
eval qa_term

fmts = "int8 int4 e4m3"
series = "token/none token/k channel/none channel/k block/none"
titles = "per-token per-token+smooth per-channel per-channel+smooth per-block"
w = 0.16
# the axis from the quantized cells (the fp16 cache is exact to ~1e-14)
qz(c) = strcol("label") eq "fp16/none/fp16" ? NaN : qa_e(column(c))
undefine STATS_*
stats in using (qz("cos_ci_lo")) nooutput
qa_emax = exists("STATS_max") ? STATS_max : 1e-1
undefine STATS_*
stats in using (qz("cos_ci_hi")) nooutput
qa_emin = exists("STATS_min") ? STATS_min : 1e-4
set xrange [0.4:6.6]
set xtics ("K int8" 1, "K int4" 2, "K e4m3" 3, "K,V int8" 4, "K,V int4" 5, "K,V e4m3" 6) font ",7"
set xlabel "quantized (left: K only; right: K and V, V per token)"
set key @qa_keypos
set arrow 1 from 3.5, graph 0 to 3.5, graph 1 nohead lc rgb "#808080" dt (4,3) lw 0.8

kf(s) = s[1:4]
kg(s) = strlen(s) > 5 ? s[6:] : ""
grp(x) = qa_idx(kf(strcol("k_cache")), fmts) + (strcol("v_cache") eq "fp16" ? 0 : 3)
gx(m, si) = (strcol("model") eq m && strcol("k_cache") ne "fp16" && \
             kg(strcol("k_cache"))."/".strcol("smooth") eq word(series, si)) ? grp(0) + (si - 3) * w : NaN

lay = qa_layout((nm + 1) / 2, (nm > 1 ? 2 : 1))
set multiplot @lay title "Quantized KV caches in decode (bars: mean over heads; whiskers: 95% interval)" font ",9"
do for [mi = 1:nm] {
    m = word(models, mi)
    set title m font ",8"
    eval qa_cos_axis
    if (mi > 1) { unset key }
    plot for [si = 1:5] in using (gx(m, si)):(qa_e(column("cos_mean"))):(gx(m, si) - w / 2):(gx(m, si) + w / 2): \
             (qa_e(column("cos_mean"))):(qa_ylo) \
             with boxxyerror fc rgb qa_grey(si) fs solid 1 border lc rgb "black" lw 0.8 dt 1 title word(titles, si), \
         for [si = 1:5] in using (gx(m, si)):(qa_e(column("cos_ci_lo"))):(0): \
             (qa_e(column("cos_ci_hi")) - qa_e(column("cos_ci_lo"))) \
             @qa_whisker lc rgb (si == 1 || si == 4 ? "#a0a0a0" : "black") notitle
}
unset multiplot
