# The end-to-end study: the change of held-out loss from the unquantized model
# (paired 95% interval) against the scheme's 1 - cos on the shipped
# activations, one panel per model; a point per preset scheme, labelled.
# K-bias rows, schemes without a 1 - cos and changes <= 0 (within noise of the
# unquantized model) are left out: both axes are logarithmic (the table has all).
#   gnuplot -e "in='results/e2e/summary.csv'; out='paper/generated/fig_e2e.pdf'" plots/e2e.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/e2e/summary.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
nm = words(models) > 0 ? words(models) : 1
qa_w = 3.4 * (nm > 1 ? 2 : 1)
qa_h = 3.0
eval qa_term

ok(m) = strcol("model") eq m && column("kbias") == 0 && column("one_minus_cos") == column("one_minus_cos") && \
        column("one_minus_cos") > 0
px(m) = ok(m) && column("delta") > 0 ? column("one_minus_cos") : NaN
lo(m) = column("delta_lo") > 1e-7 ? column("delta_lo") : 1e-7

lay = qa_layout(1, (nm > 1 ? 2 : 1))
set multiplot @lay title "Held-out loss change against 1 - cos (whiskers: paired 95% interval)" font ",9"
set logscale xy
set format x "10^{%T}"
set format y "10^{%T}"
set xlabel "1 - cos on the activations (mean over heads)" font ",7"
set ylabel "{/Symbol D} loss (nats per token)" font ",7"
set xtics font ",7"
set ytics font ",7"
set grid xtics ytics lc rgb "#e0e0e0"
do for [mi = 1:nm] {
    m = word(models, mi)
    set title m font ",8"
    plot in using (px(m)):(column("delta")):(lo(m)):(column("delta_hi")) \
             with yerrorbars pt 7 ps 0.5 lc rgb "black" notitle, \
         in using (px(m)):(column("delta")):(strcol("scheme")) with labels left offset 0.4, 0.2 font ",5" notitle
}
unset multiplot
