# plots/style.gp: the style every figure shares; loaded first by each
# plots/*.gp, which then sets qa_w and qa_h (figure size in inches) and runs
# `eval qa_term` to open the output.
#
#   out   (required) output file; .pdf -> pdfcairo (the paper), .png ->
#         pngcairo (the README)
#
# Readable in greyscale: black and grey lines told apart by dash pattern and
# point shape; bars told apart by grey level; cosines plotted as 1 - cos on a
# log axis, reversed so that up is better, with ticks labelled in cos (%).

if (!exists("out")) exit error "plots: set the output file: gnuplot -e \"in='...'; out='fig.pdf'\" SCRIPT"
qa_ext = strlen(out) > 4 ? out[strlen(out)-2:strlen(out)] : ""
if (qa_ext ne "pdf" && qa_ext ne "png") exit error sprintf("plots: %s: the output must end in .pdf or .png", out)
# `eval qa_term` once qa_w and qa_h (inches) are known
qa_term = "if (qa_ext eq 'pdf') { \
    set terminal pdfcairo enhanced color font 'Helvetica,8' size qa_w in, qa_h in linewidth 1 \
  } else { \
    set terminal pngcairo enhanced color font 'Helvetica,11' size qa_w * 150, qa_h * 150 linewidth 1.5 \
  }; set output out"

set datafile separator comma
set datafile columnheaders
set datafile missing "nan"
set encoding utf8

set border 3 lw 0.8
set tics nomirror out scale 0.6
set grid ytics lw 0.4 lc rgb "#d0d0d0" dt 1
set key noopaque nobox samplen 2.5 spacing 1.1 font ",7"
set style fill solid 1.0 border lc rgb "black"
set pointintervalbox 0

# line types: black and grey, dash patterns and point shapes differ
set linetype 1 lc rgb "black"   lw 1.2 dt 1        pt 7  ps 0.55
set linetype 2 lc rgb "#505050" lw 1.2 dt (6,3)    pt 5  ps 0.55
set linetype 3 lc rgb "black"   lw 1.2 dt (2,2)    pt 6  ps 0.6
set linetype 4 lc rgb "#808080" lw 1.2 dt (8,3,2,3) pt 9  ps 0.65
set linetype 5 lc rgb "#303030" lw 1.2 dt (3,3)    pt 4  ps 0.6
set linetype 6 lc rgb "#909090" lw 1.2 dt 1        pt 13 ps 0.65
set linetype 7 lc rgb "black"   lw 1.2 dt (12,4)   pt 8  ps 0.6
set linetype 8 lc rgb "#606060" lw 1.2 dt (1,3)    pt 11 ps 0.6
set linetype cycle 8

# 95% interval whiskers: plot ... using (x):(e_lo):(0):(e_hi - e_lo) @qa_whisker
qa_whisker = "with vectors heads size screen 0.005,90 dt 1 lw 0.9"

# bar fills, darkest first
qa_grey(i) = word("#1a1a1a #8c8c8c #ffffff #4d4d4d #c8c8c8 #000000", (int(i) - 1) % 6 + 1)

# position of word s in the space-separated list L (1-based), NaN if absent
qa_idx(s, L) = qa_idx_(s, L, 1)
qa_idx_(s, L, i) = i > words(L) ? NaN : (word(L, i) eq s ? i : qa_idx_(s, L, i + 1))

# 1 - cos, floored so that a perfect cosine stays on a log axis
qa_e(c) = (c == c) ? ((1.0 - c) < 1e-7 ? 1e-7 : 1.0 - c) : NaN
# the distinct values of a CSV column, in file order, as a word list
# (the column holds no commas or spaces: model names, formats)
qa_values(file, col) = system(sprintf("awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"%s\") c = i; next } c && $c != \"\" && !seen[$c]++ { gsub(/\"/, \"\", $c); printf \"%%s \", $c }' '%s'", col, file))

# 1 if the CSV's header has the column, else 0
qa_hascol(file, col) = int(system(sprintf("awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"%s\") f = 1; print f + 0; exit }' '%s'", col, file)))

# The cos axis: set qa_emin and qa_emax (range of 1 - cos) then `eval qa_cos_axis`.
qa_decade_lo(x) = 10**floor(log10(x) - 1e-9)
qa_decade_hi(x) = 10**ceil(log10(x) + 1e-9)
qa_cos_axis = "set logscale y; \
  qa_ylo = qa_decade_hi(qa_emax > 1 ? 1 : qa_emax); qa_yhi = qa_decade_lo(qa_emin); \
  if (qa_yhi >= qa_ylo) { qa_yhi = qa_ylo / 10 }; \
  set yrange [qa_ylo * 1.001:qa_yhi / 1.001]; \
  set ytics ('0' 1, '90' 1e-1, '99' 1e-2, '99.9' 1e-3, '99.99' 1e-4, '99.999' 1e-5, '99.9999' 1e-6, '99.99999' 1e-7); \
  set mytics 10; \
  set ylabel 'cos (%), log scale of 1 − cos'"

# Range of 1 - cos over the columns lo / hi of a whole file (all models, so
# that panels share one axis): sets qa_emin and qa_emax; 1e-4 .. 1e-1 if the
# file has no finite value. Usage: eval qa_cos_range(in, "cos_ci_lo", "cos_ci_hi")
qa_cos_range(f, lo, hi) = sprintf("undefine STATS_*; \
  stats '%s' using (qa_e(column('%s'))) nooutput; \
  qa_emax = exists('STATS_max') ? STATS_max : 1e-1; \
  undefine STATS_*; \
  stats '%s' using (qa_e(column('%s'))) nooutput; \
  qa_emin = exists('STATS_min') ? STATS_min : 1e-4", f, lo, f, hi)

# Gather the rows of a file that satisfy cond into a datablock with columns
# x,y, so that a line through them is not broken by the other rows:
#   eval qa_gather("$L1", in, 'column("layer")', 'column("amax_ratio")', 'strcol("tensor") eq "k"')
#   plot "$L1" using "x":"y" with linespoints
qa_gather(block, file, x, y, cond) = sprintf("set print %s; print 'x,y'; unset print; \
  set table %s append separator comma; \
  plot '%s' using (%s):(%s) with table if (%s); unset table", block, block, file, x, y, cond)

# multiplot layout with room at the top for the title and a shared key:
#   lay = qa_layout(rows, cols); set multiplot @lay title "..."; set key @qa_keypos
# (qa_top, qa_right: inches kept free at the top and right)
qa_top = 0.62
qa_right = 0.1
qa_layout(r, c) = sprintf("layout %d, %d margins %g, %g, %g, %g spacing %g, %g", \
    r, c, 0.75 / qa_w, 1 - qa_right / qa_w, 0.5 / qa_h, 1 - qa_top / qa_h, 0.6 / qa_w, 0.7 / qa_h)
qa_keypos = "at screen 0.5, 1 - 0.27 / qa_h center top horizontal maxrows (qa_top > 0.7 ? 2 : 1)"

# a panel that only says why it is empty
qa_empty(msg) = sprintf("unset logscale; set xrange [0:1]; set yrange [0:1]; unset xtics; unset ytics; unset ylabel; unset xlabel; set border 0; set label 99 '%s' at graph 0.5, 0.5 center; plot NaN notitle; unset label 99; set border 3; set xtics; set ytics", msg)
