# Attention entropy against the P.V format: per head, its normalized
# entropy (mean over rows of H / ln keys seen) against cos with e4m3 P and V
# minus cos with int8 P and V (percentage points; above 0: e4m3 better);
# one panel per Q.K format, a point type per model.
#   gnuplot -e "in='results/entropy/pv.csv'; out='paper/generated/fig_entropy.pdf'" plots/entropy.gp
# Optional: models='m1 m2' (default: every model in the file).
if (!exists("in")) in = "results/entropy/pv.csv"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("models")) models = qa_values(in, "model")
fmts = qa_values(in, "qk_fmt")
nm = words(models) > 0 ? words(models) : 1
nf = words(fmts) > 0 ? words(fmts) : 1
qa_w = 3.4 * (nf > 1 ? 2 : 1)
qa_h = 2.9
eval qa_term

set xrange [0:1]
set xtics 0.2
set xlabel "entropy of the attention rows, H / ln(keys seen)"
set ylabel "cos(e4m3) − cos(int8), percentage points"
set key @qa_keypos
set grid xtics ytics lw 0.4 lc rgb "#d0d0d0"

pt(m, f) = (strcol("model") eq m && strcol("qk_fmt") eq f) ? 100 * column("e4m3_minus_int8") : NaN

lay = qa_layout(1, (nf > 1 ? 2 : 1))
set multiplot @lay title "Attention entropy and the P·V format, per head (above 0: e4m3 P/V more accurate than int8)" font ",9"
do for [fi = 1:nf] {
    f = word(fmts, fi)
    set title f." Q·K" font ",8"
    if (fi > 1) { unset key; unset ylabel }
    plot 0 with lines lc rgb "#808080" dt (4,3) lw 0.8 notitle, \
         for [mi = 1:nm] in using "entropy_norm":(pt(word(models, mi), f)) with points lt mi title word(models, mi)
}
unset multiplot
