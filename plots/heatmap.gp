# Per-head accuracy of the main schemes: 1 - cos for every layer (rows) and
# query head (columns) of one model, one panel per scheme, on a shared log
# colour scale (labelled in cos %); darker is worse. Reads the per-head CSV
# of `qattn accuracy` (results/<model>/accuracy.csv).
#   gnuplot -e "in='results/MODEL/accuracy.csv'; out='paper/generated/fig_heatmap_A.pdf'" plots/heatmap.gp
# Optional: model='name' (panel title; default: the input's directory name),
#           schemes='sage1-b sage2-8b ...' (default: those of the main presets
#           that the file has).
if (!exists("in")) exit error "heatmap.gp: set in='results/MODEL/accuracy.csv'"
load system("dirname '".ARG0."'")."/style.gp"
if (!exists("model")) model = system("basename \"$(dirname '".in."')\"")
if (!exists("schemes")) {
    present = qa_values(in, "scheme")
    main = "sage1-b sage1-vb sage2-8b sage2-8b-sm90 sage2-4b fa3-fp8 ck-i8fp8bf16 ck-i4fp8bf16 ck-fp8bf16"
    schemes = ""
    do for [i = 1:words(main)] {
        if (qa_idx(word(main, i), present) == qa_idx(word(main, i), present)) { schemes = schemes.word(main, i)." " }
    }
    if (words(schemes) > 5) { schemes = word(schemes, 1)." ".word(schemes, 2)." ".word(schemes, 3)." ".word(schemes, 4)." ".word(schemes, 5) }
    if (words(schemes) == 0) { schemes = present }
}
ns = words(schemes) > 0 ? words(schemes) : 1
qa_w = 1.0 + 1.35 * ns
qa_h = 3.4
qa_right = 0.75
eval qa_term

undefine STATS_*
stats in using (qa_e(column("cos"))) nooutput
emin = exists("STATS_min") ? STATS_min : 1e-6
emax = exists("STATS_max") ? STATS_max : 1e-1
undefine STATS_*
stats in using (column("layer")):(column("head")) nooutput
nl = exists("STATS_max_x") ? STATS_max_x + 1 : 1
nh = exists("STATS_max_y") ? STATS_max_y + 1 : 1
lo = floor(log10(emin))
hi = ceil(log10(emax))
if (hi <= lo) { hi = lo + 1 }

set palette cubehelix start 0.5 cycles -1.2 saturation 1.0 negative
set cbrange [lo:hi]
set cbtics ("90" -1, "99" -2, "99.9" -3, "99.99" -4, "99.999" -5, "99.9999" -6, "99.99999" -7) font ",7"
set label 98 "cos (%)" at screen 1 - 0.54 / qa_w, 0.84 center font ",7"
set colorbox user origin screen 1 - 0.6 / qa_w, 0.18 size screen 0.12 / qa_w, 0.6
set xrange [-0.5:nh - 0.5]
set yrange [-0.5:nl - 0.5]
set xlabel "query head"
set xtics 0, (nh > 8 ? 4 : 1) font ",7"
set ytics 0, (nl > 12 ? 4 : 1) font ",7"
set grid noytics
set border 15
unset key

lay = qa_layout(1, ns)
set multiplot @lay title sprintf("Per-head accuracy, model %s: 1 − cos per layer and query head (darker is worse)", model) font ",9"
do for [si = 1:ns] {
    s = word(schemes, si)
    set title s font ",8"
    if (si == 1) { set ylabel "layer" } else { unset ylabel }
    plot in using (strcol("scheme") eq s ? column("head") : NaN):(column("layer")):(0.5):(0.5): \
        (log10(qa_e(column("cos")))) with boxxyerror fc palette fs solid 1 noborder notitle
}
unset multiplot
