# P.V accumulator with e4m3 P/V (the FP22 case): cos (mean over heads, 95%
# interval) of the two-level accumulator fp22+fp32 against its chunk length
# N (log axis), with the single-level fp32, fp22 and fp16 accumulators as
# horizontal lines; one panel per model. (The study's fp16-P/V rows are in
# its table, not here.)
#   gnuplot -e "in='results/accumulator/summary.csv'; out='paper/generated/fig_accumulator.pdf'" plots/accumulator.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/accumulator/summary.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
nm = words(models) > 0 ? words(models) : 1
qa_w = 3.4 * (nm > 1 ? 2 : 1)
qa_h = 2.8 * ((nm + 1) / 2)
eval qa_term

singles = "fp32 fp22 fp16"
# where each horizontal line is named: fp32 right, fp22 left, fp16 middle
lx(si) = si == 1 ? 520.0 : (si == 2 ? 13.0 : 90.0)

haspv = qa_hascol(in, "pv")
e4m3pv(dummy) = haspv ? strcol("pv") eq "e4m3" : 1
is(m, a) = strcol("model") eq m && strcol("acc") eq a && e4m3pv(0)

# The axis spans fp32, fp22 and the two-level points: an fp16 accumulator
# far below them is named in a note instead of squashing the others.
ranged(dummy) = e4m3pv(0) && strcol("acc") ne "fp16"
undefine STATS_*
stats in using (ranged(0) ? qa_e(column("cos_ci_lo")) : NaN) nooutput
qa_emax = exists("STATS_max") ? STATS_max : 1e-1
undefine STATS_*
stats in using (ranged(0) ? qa_e(column("cos_ci_hi")) : NaN) nooutput
qa_emin = exists("STATS_min") ? STATS_min : 1e-4
# each model's fp16-accumulator cos (before the axes are set: stats obeys their ranges)
array f16[nm]
do for [mi = 1:nm] {
    undefine STATS_*
    stats in using (is(word(models, mi), "fp16") ? column("cos_mean") : NaN) nooutput
    f16[mi] = exists("STATS_max") ? STATS_max : NaN
}

x0 = 11.0
x1 = 740.0
set logscale x 2
set xrange [x0:x1]
set xtics (16, 32, 64, 128, 256, 512)
set xlabel "chunk length N of the two-level accumulator (keys)"
set key @qa_keypos
onaxis(m, a) = is(m, a) && qa_e(column("cos_mean")) <= qa_ylo
two(m) = is(m, "fp22+fp32") && column("chunk") > 0 ? column("chunk") : NaN

lay = qa_layout((nm + 1) / 2, (nm > 1 ? 2 : 1))
set multiplot @lay title "P·V accumulator, e4m3 P and V (points: mean over heads; whiskers: 95% interval)" font ",9"
do for [mi = 1:nm] {
    m = word(models, mi)
    set title m font ",8"
    eval qa_cos_axis
    if (mi > 1) { unset key }
    if (f16[mi] == f16[mi] && qa_e(f16[mi]) > qa_ylo) {
        set label 96 sprintf("fp16 accumulator: cos %.2f%%, below the axis", 100 * f16[mi]) at graph 0.5, 0.06 center font ",7"
    } else {
        unset label 96
    }
    plot for [si = 1:3] in using (onaxis(m, word(singles, si)) ? x0 : NaN):(qa_e(column("cos_mean"))):(x1 - x0):(0) \
             with vectors nohead lt (si + 1) lw 1.6 title word(singles, si), \
         for [si = 1:3] in using (onaxis(m, word(singles, si)) ? lx(si) : NaN):(qa_e(column("cos_mean"))):(word(singles, si)) \
             with labels center offset 0, 0.55 font ",7" notitle, \
         in using (two(m)):(qa_e(column("cos_mean"))) smooth unique with linespoints lt 1 title "fp22+fp32:N", \
         in using (two(m)):(qa_e(column("cos_ci_lo"))):(0):(qa_e(column("cos_ci_hi")) - qa_e(column("cos_ci_lo"))) \
             @qa_whisker lc rgb "black" notitle
}
unset label 96
unset multiplot
