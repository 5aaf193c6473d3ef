#!/usr/bin/env bash
# qattn paper-tables on small fake CSV files that follow studies/CSV.md:
# every table and numbers.tex is written with the expected numbers, the
# anchors table's words follow comparisons.csv's verdicts, a missing study
# says "not run", bad input exits 2 naming the file and column and writes
# nothing, and every macro paper/paper.tex cites is defined. Needs neither
# gnuplot nor LaTeX.
#   bash tests/cli_paper.sh QATTN SCRATCHDIR
set -u
source "$(dirname "$0")/lib.sh"
lib_init "$@"
qattn=$Q
dir=$S
root=$(cd "$(dirname "$0")/.." && pwd)
# has FILE STRING: fixed-string search
has() { if grep -qF -- "$2" "$1" 2>/dev/null; then ok; else bad "$1 lacks: $2"; fi; }
hasnt() { if grep -qF -- "$2" "$1" 2>/dev/null; then bad "$1 has: $2"; else ok; fi; }

# the studies' tables, from their records (qattn studies --tsv), and the paper's own
TABLES="$("$qattn" studies --tsv | awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                                       $c["table"] != "-" { sub(/\.tex$/, "", $c["table"]); printf "%s ", $c["table"] }')tab_models"
R=$dir/results
mkdir -p "$R"/{granularity,smoothing,pv,accumulator,kbias,outliers,pareto,entropy,kvcache,dsv4,e2e}
SUMCOLS="n,cos_mean,cos_ci_lo,cos_ci_hi,cos_worst_head,cos_worst_layer,worst_layer,rel_l1_mean,rel_l1_ci_lo,rel_l1_ci_hi,rel_l1_worst_layer,rmse_mean,rmse_ci_lo,rmse_ci_hi,spec"
MODELS="qattn-alpha qattn_beta"

# summary row: MODEL LABEL FACTORS(comma-joined) COS [LO HI]
row() {
    local model=$1 label=$2 factors=$3 cos=$4 lo=${5:-0.9} hi=${6:-0.99999}
    printf '%s,"%s",%s,96,%s,%s,%s,0.9,0.95,3,0.0345,0.03,0.04,0.05,0.00353,0.003,0.004,"q=int8@token,ch:64 ""x"""\n' \
        "$model" "$label" "$factors" "$cos" "$lo" "$hi"
}

write_fakes() {
    { echo "model,label,qk_fmt,group,smooth,$SUMCOLS"
      for m in $MODELS; do for f in int4 int8 e4m3 e5m2; do for g in tensor block warp thread token; do
          for s in none k; do
              if [ "$m/$f/$g/$s" = "qattn-alpha/int4/thread/k" ]; then
                  row "$m" "$f $g, smooth $s" "$f,$g,$s" 0.99453 0.9940 0.9951
              elif [ "$m/$f/$g/$s" = "qattn_beta/int8/block/none" ]; then
                  row "$m" "$f $g, smooth $s" "$f,$g,$s" 0.99781 0.99778 0.99785
              else
                  row "$m" "$f $g, smooth $s" "$f,$g,$s" 0.97
              fi
          done; done; done; done
    } >"$R/granularity/summary.csv"
    { echo "model,label,qk_fmt,smooth,$SUMCOLS"
      for m in $MODELS; do for f in int4 int8; do for s in none k q q+k q+k+v; do
          row "$m" "$f $s" "$f,$s" 0.9812
      done; done; done
    } >"$R/smoothing/summary.csv"
    { echo "model,label,qk_fmt,pv_fmt,$SUMCOLS"
      for m in $MODELS; do for f in int8 int4; do for p in fp16 e4m3 e5m2 int8; do
          if [ "$p" = e5m2 ]; then row "$m" "$f $p" "$f,$p" 0.99987 0.99981 0.99991; else row "$m" "$f $p" "$f,$p" 0.7705; fi
      done; done; done
    } >"$R/pv/summary.csv"
    { echo "model,label,pv,acc,chunk,$SUMCOLS"
      for m in $MODELS; do
          for a in fp32 fp16 fp22; do row "$m" "e4m3/$a" "e4m3,$a,0" 0.999912; done
          for n in 16 32 64 128 256 512; do row "$m" "e4m3/fp22+fp32:$n" "e4m3,fp22+fp32,$n" 0.99995; done
          row "$m" "fp16/fp32" "fp16,fp32,0" 0.99993
          row "$m" "fp16/fp16" "fp16,fp16,0" 0.9999
      done
    } >"$R/accumulator/summary.csv"
    { echo "model,label,r,qk_fmt,smooth,$SUMCOLS"
      for m in $MODELS; do for r in 0 1 2 4 8 16 32; do for f in int8 int4 e4m3; do for s in none k; do
          row "$m" "r=$r $f $s" "$r,$f,$s" 0.95
      done; done; done; done
    } >"$R/kbias/summary.csv"
    { echo "model,layer,tensor,max_mean_over_std,median_mean_over_std,max_kurtosis,amax_ratio,n_outlier_channels,n_channels"
      for m in $MODELS; do for l in 0 1 2; do
          echo "$m,$l,q,1.5,0.2,3.1,2.5,0,256"
          echo "$m,$l,k,$((l + 12)).25,0.4,40,9.5,$((l + 3)),256"
          echo "$m,$l,v,0.8,0.1,2,1.8,0,256"
      done; done
    } >"$R/outliers/summary.csv"
    { echo "model,label,spec,cos_mean,cos_worst_layer,device,tops,tops_source"
      echo 'qattn-alpha,sage2_8b&x,"q=int8@thread:32/8/1 k=int8@thread:64/8/2,ch:64",0.9991,0.998,NVIDIA H100 80GB HBM3,851.2,studies/results/h100/attn_fwd_bench.csv'
      echo 'qattn-alpha,sage2-4b,"q=int4@thread:32/8/1",0.991,0.95,,,none'
      echo 'qattn_beta,sage2-4b,"q=int4@thread:32/8/1",0.992,0.96,,nan,none'
    } >"$R/pareto/pareto.csv"
    { echo "claim,study,model,a,b,metric,n,mean_a,mean_b,mean_diff,ci_lo,ci_hi,verdict"
      echo 'smooth_k_helps,granularity,qattn-alpha,"int4 block, smooth k","int4 block, smooth none",cos,96,0.9807,0.8004,0.1803,0.1701,0.1905,a better'
      echo 'smooth_k_helps,granularity,qattn-alpha,int8 block smooth k,int8 block,cos,96,0.9990,0.9980,0.001,0.0008,0.0012,a better'
      echo 'finer_groups_help,granularity,qattn_beta,int4 thread,int4 tensor,rel_l1,96,0.065,0.18,-0.115,-0.12,-0.11,a better'
      echo 'e4m3_beats_e5m2_pv,pv,qattn-alpha,int8 e4m3,int8 e5m2,cos,96,0.9994,0.9981,0.0013,-0.0001,0.0027,inconclusive'
      echo 'two_level_fixes_fp22,accumulator,qattn-alpha,fp22+fp32:64,fp22,cos,96,0.99995,0.9999,0.00005,0.00003,0.00007,a better'
      echo 'two_level_fixes_fp22,accumulator,qattn-alpha,fp22+fp32:64,fp32,cos,96,0.99995,0.99995,0,-0.00001,0.00001,inconclusive'
      echo 'fp16_acc_ok,accumulator,qattn-alpha,fp16,fp32,cos,96,0.99990,0.99995,-0.00005,-0.00007,-0.00003,b better'
      echo 'smooth_k_helps,kbias,qattn_beta,r=8 int8 k,r=8 int8 none,cos,96,0.999,0.61,0.389,0.35,0.42,a better'
      echo 'smoothing_qk_helps,smoothing,qattn_beta,int4/q+k,int4/none,cos,96,0.9946,0.8004,0.1942,0.18,0.21,a better'
      echo 'smoothing_qk_helps,smoothing,qattn_beta,int4/q+k,int4/none,rel_l1,96,0.06,0.3,-0.24,-0.26,-0.22,a better'
      echo 'fp16_acc_ok,accumulator,qattn_beta,fp16/fp32,fp16/fp16,cos,96,0.99993,0.9999,0.00003,0.00001,0.00005,a better'
      echo 'fp16_acc_ok,accumulator,qattn_beta,fp16/fp32,fp16/fp16,rel_l1,96,0.011,0.012,-0.001,-0.003,0.001,inconclusive'
      echo 'two_level_fixes_fp22,accumulator,qattn_beta,e4m3/fp32,e4m3/fp22+fp32:64,cos,96,0.99996,0.99995,0.00001,0.000005,0.000015,a better'
    } >"$R/comparisons.csv"
    { echo "model,qk_fmt,n,entropy_norm_mean,e4m3_minus_int8_mean,diff_low_entropy,diff_high_entropy,spearman,spearman_ci_lo,spearman_ci_hi,zero_mass_spearman,e4m3_better,int8_better"
      echo "qattn-alpha,int8,96,0.4414,-0.000225,-0.000277,-0.000174,0.868,0.709,0.953,0.35,0,96"
      echo "qattn-alpha,int4,96,0.4414,-0.000214,-0.000268,-0.000161,0.811,0.640,0.899,0.46,1,95"
      echo "qattn_beta,int8,96,0.5197,0.00021,nan,-0.000161,-0.898,-0.96,-0.76,0.0,60,36"
    } >"$R/entropy/summary.csv"
    { echo "model,label,k_cache,smooth,v_cache,n,cos_mean,cos_ci_lo,cos_ci_hi,cos_worst_head,one_minus_cos_mean,one_minus_cos_ci_lo,one_minus_cos_ci_hi,one_minus_cos_worst_head,rel_l1_mean,rel_l1_ci_lo,rel_l1_ci_hi,rel_l1_worst_head,k_spec,v_spec"
      echo 'qattn-alpha,fp16/none/fp16,fp16,none,fp16,32,1,1,1,1,2.4e-14,1.9e-14,3e-14,3e-14,1.9e-07,1.8e-07,2e-07,2.1e-07,"fp16","fp16"'
      echo 'qattn-alpha,int4-token/none/fp16,int4-token,none,fp16,32,0.9867,0.9843,0.9895,0.9726,0.01327,0.01052,0.01569,0.0274,0.1373,0.13,0.145,0.2,"int4@token","fp16"'
      echo 'qattn-alpha,int4-channel/k/fp16,int4-channel,k,fp16,32,0.99774,0.99698,0.99831,0.98827,0.002261,0.001692,0.003018,0.01173,0.04951,0.045,0.054,0.09,"int4@block:32,ch:1","fp16"'
      echo 'qattn_beta,int8-channel/none/int8,int8-channel,none,int8,32,0.99998,0.99997,0.99999,0.99995,2.32e-05,2.19e-05,2.45e-05,5e-05,0.006932,0.0065,0.0073,0.009,"int8@block:32,ch:1","int8@token"'
    } >"$R/kvcache/summary.csv"
    { echo "model,cell,list,n,cos_mean,cos_ci_lo,cos_ci_hi,cos_worst_head,one_minus_cos_mean,one_minus_cos_ci_lo,one_minus_cos_ci_hi,one_minus_cos_worst_head,rel_l1_mean,rel_l1_ci_lo,rel_l1_ci_hi,rel_l1_worst_head"
      echo 'qattn-gamma,v4,dense,48,0.99985,0.99984,0.99987,0.99974,1.45e-04,1.35e-04,1.55e-04,2.55e-04,0.0144,0.0138,0.0149,0.02'
      echo 'qattn-gamma,e4m3-token,top64,48,0.9997,0.99967,0.99972,0.99936,3.02e-04,2.77e-04,3.30e-04,6.38e-04,0.0223,0.0214,0.0233,0.03'
    } >"$R/dsv4/summary.csv"
    { echo "model,scheme,device,date,kbias,loss,loss_lo,loss_hi,delta,delta_lo,delta_hi,one_minus_cos"
      echo 'qattn_beta,"none","NVIDIA H100",2026-11-27,0,2.6059,2.5488,2.6611,0,0,0,'
      echo 'qattn_beta,"sage2-8b-sm90","NVIDIA H100",2026-11-27,0,2.6065,2.5494,2.6617,0.00062,0.00049,0.00074,2.1e-05'
      echo 'qattn_beta,"sage2-4b","NVIDIA H100",2026-11-27,0,2.6382,2.5809,2.6936,0.03235,0.03118,0.0336,0.0011'
      echo 'qattn_beta,"fa3-fp8","NVIDIA H100",2026-11-27,0,2.6095,2.5521,2.6647,0.00358,0.00326,0.00387,0.00024'
      echo 'qattn_beta,"bf16","NVIDIA H100",2026-11-27,0,2.6059,2.5488,2.6611,0.00003,-0.00001,0.00008,1e-06'
      echo 'qattn_beta,"kbias8:fa3-fp8","NVIDIA H100",2026-11-27,8,2.7656,2.7078,2.82,0.15972,0.15492,0.16491,'
    } >"$R/e2e/summary.csv"
    # what qattn e2e writes beside it for these rows (bf16 < sm90 < fa3 < 4b in both 1 - cos and delta)
    printf 'model,n,spearman\nqattn_beta,4,1.0000\n' >"$R/e2e/corr.csv"
    { echo "model,file,layers,heads,kv_heads,tokens,head_dim,eval_loss,vocab_size,source,text_source,license"
      echo 'qattn_beta,data/beta.h5,3,8,2,4096,64,2.5312,32000,"trained here, 100% from scratch",TinyStories,CC-BY 4.0'
      echo 'qattn-alpha,data/alpha.h5,3,8,2,4096,128,3.01,32000,trained here,wikitext,MIT'
    } >"$R/models.csv"
}

run_tables() { # RESULTS OUT -> sets rc; stderr in $dir/err
    "$qattn" paper-tables --results "$1" --out "$2" >"$dir/out.txt" 2>"$dir/err"
    rc=$?
}

# ---- 1. everything present
write_fakes
G=$dir/gen
run_tables "$R" "$G"
[ "$rc" = 0 ] && ok || bad "paper-tables exit $rc: $(cat "$dir/err")"
case " $TABLES " in *" tab_granularity "*" tab_pareto "*) ok ;; *) bad "tables from the records: $TABLES" ;; esac
for f in $TABLES tab_anchors numbers; do
    [ -s "$G/$f.tex" ] && ok || bad "$f.tex missing or empty"
done
N=$G/numbers.tex
# model order: models.csv order (qattn_beta first)
has "$N" '\newcommand{\QAModelAName}{qattn\_beta}'
has "$N" '\newcommand{\QAModelBName}{qattn-{}alpha}'
has "$N" '\newcommand{\QAmodelCount}{3}'  # qattn-gamma only in dsv4/summary.csv
has "$N" '\newcommand{\QAModelAHeadDim}{64}'
# e2e: the columns table and Spearman over the 4 schemes with 1 - cos (bf16 < sm90 < fa3 < 4b in both: 1)
has "$N" '\newcommand{\QAetoeModelASageTwoEightBSmNinetyDelta}{\ensuremath{6.20\times10^{-4}}}'
has "$N" '\newcommand{\QAetoeModelANoneLoss}{2.6059}'
has "$N" '\newcommand{\QAetoeModelASpearman}{1.00}'
has "$N" '\newcommand{\QAetoeModelASpearmanN}{4}'
has "$N" '\newcommand{\QAetoeModelASpearmanWord}{orders them}'
has "$N" '\newcommand{\QAetoeModelBSpearman}{n/a}'
has "$N" '\newcommand{\QAetoeModelAKbiasEightFaThreeFpEightDelta}{0.160}'
has "$N" '\newcommand{\QAModelASource}{trained here, 100\% from scratch}'
# granularity: 0.99453 -> 99.45, its interval, in the table and the macros
has "$G/tab_granularity.tex" '99.45 & [99.40, 99.51]'
has "$N" '\newcommand{\QAgranModelBIntFourThreadSmoothKCosMean}{99.45}'
has "$N" '\newcommand{\QAgranModelBIntFourThreadSmoothKCosCi}{[99.40, 99.51]}'
has "$N" '\newcommand{\QAgranModelAIntFourThreadSmoothKCosMean}{97.00}'
has "$N" '\newcommand{\QAgranModelAEFiveMTwoTensorSmoothNoneWorstLayer}{3}'
has "$N" '\newcommand{\QAgranModelAIntEightTokenSmoothNoneRelLOneMean}{0.0345}'
has "$N" '\newcommand{\QAgranModelAIntEightTokenSmoothNoneRmseMean}{\ensuremath{3.53\times10^{-3}}}'
# a narrow interval gets the decimals it needs to show both ends
has "$N" '\newcommand{\QAgranModelAIntEightBlockSmoothNoneCosCi}{[99.778, 99.785]}'
has "$G/tab_granularity.tex" '99.781 & [99.778, 99.785]'
has "$G/tab_granularity.tex" '\label{tab:granularity}'
has "$G/tab_granularity.tex" 'model \texttt{qattn\_beta}'
# cos close to 1 gets more decimals: 0.99987 [0.99981, 0.99991] -> 99.987
has "$G/tab_pv.tex" '99.987 & [99.981, 99.991]'
has "$N" '\newcommand{\QApvModelAIntFourPvEFiveMTwoCosMean}{99.987}'
has "$N" '\newcommand{\QApvModelAIntEightPvIntEightCosMean}{77.05}'
has "$N" '\newcommand{\QAsmoothModelBIntFourSmoothQKVCosMean}{98.12}'
has "$N" '\newcommand{\QAaccModelAPvEFourMThreeFpTwentyTwoFpThirtyTwoChunkSixtyFourCosMean}{99.9950}'
has "$N" '\newcommand{\QAaccModelAPvEFourMThreeFpSixteenChunkZeroCosMean}{99.9912}'
has "$N" '\newcommand{\QAaccModelBPvFpSixteenFpSixteenChunkZeroCosMean}{99.9900}'
hasnt "$N" '\newcommand{\QAaccModelBPvFpSixteenFpTwentyTwoChunkZeroCosMean}'
has "$G/tab_accumulator.tex" 'e4m3 & fp22 & -- &'
has "$N" '\newcommand{\QAkbiasModelARThirtyTwoEFourMThreeSmoothKCosMean}{95.00}'
# kbias is augmented real data, and says so
has "$G/tab_kbias.tex" 'augmented real data'
has "$G/tab_kbias.tex" 'Augmented real data'
# outliers
has "$G/tab_outliers.tex" '2 & 1.50 & 0/256 & 14.2 & 5/256 & 0.800 & 0/256 & 9.50 \\'
has "$N" '\newcommand{\QAoutModelAKMaxMeanOverStd}{14.2}'
has "$N" '\newcommand{\QAoutModelAKMaxMeanOverStdLayer}{2}'
has "$N" '\newcommand{\QAoutModelAKOutlierChannels}{12}'
has "$N" '\newcommand{\QAoutModelAQOutlierPercent}{0}'
# pareto: escaping, the point without a GPU measurement
has "$G/tab_pareto.tex" 'sage2\_8b\&x'
has "$G/tab_pareto.tex" 'no GPU measurement yet'
has "$G/tab_pareto.tex" '851'
has "$N" '\newcommand{\QAparetoMeasured}{1}'
has "$N" '\newcommand{\QAparetoUnmeasured}{2}'
has "$N" '\newcommand{\QAparetoModelBUnmeasured}{1}'
has "$N" '\newcommand{\QAparetoDevices}{NVIDIA H100 80GB HBM3}'
# entropy: the columns table from the record, a row per Q.K format
E=$G/tab_entropy.tex
has "$E" '\label{tab:entropy}\label{tab:entropy-ModelA}'
has "$E" 'int8 & 96 & 0.520 & +0.021 & n/a & \ensuremath{-}0.016 & \ensuremath{-}0.90 [\ensuremath{-}0.96, \ensuremath{-}0.76] & 60 & 36 \\'
has "$E" 'int4 & 96 & 0.441 & \ensuremath{-}0.021 & \ensuremath{-}0.027 & \ensuremath{-}0.016 & +0.81 [+0.64, +0.90] & 1 & 95 \\'
has "$N" '\newcommand{\QAentModelBIntEightRhoCi}{[+0.71, +0.95]}'
has "$N" '\newcommand{\QAentModelAIntEightEFourMThreeBetter}{60}'
has "$N" '\newcommand{\QAentModelAIntFourRho}{n/a}'
has "$N" '\newcommand{\QAentModelBIntEightDiffLow}{\ensuremath{-}0.028}'
# anchors: published numbers, ours with intervals, words from the verdicts
A=$G/tab_anchors.tex
has "$A" '30.60 $\to$ 99.31'
has "$A" '\textbf{Agrees:} \texttt{int4 block, smooth k} is better than \texttt{int4 block, smooth none} on cos, as published.'
has "$A" '+18.03 [+17.01, +19.05] pts'
has "$A" '\textbf{Inconclusive:} the 95'
has "$A" 'qattn\_\allowbreak{}beta} (augmented real data)'
has "$A" '\textbf{Disagrees:} \texttt{fp32} is measurably better than \texttt{fp16}'
has "$A" '\textbf{Agrees:} no measurable difference between \texttt{fp22+fp32:64} and \texttt{fp32}'
has "$A" '\ensuremath{-}0.115 [\ensuremath{-}0.120, \ensuremath{-}0.110]'
has "$A" 'Not tested: no row for this claim'
# one row per pair: both metrics; the same outcome gives one sentence, different ones two
has "$A" '\textbf{Agrees:} \texttt{int4/q+k} is better than \texttt{int4/none} on cos and relative L1, as published.'
has "$A" 'relative L1: 0.0600 vs 0.300; \ensuremath{-}0.240 [\ensuremath{-}0.260, \ensuremath{-}0.220]'
has "$A" '\textbf{Disagrees:} \texttt{fp16/fp32} is measurably better than \texttt{fp16/fp16} on cos, where the published finding is that \texttt{fp16/fp16} loses nothing. \textbf{Agrees:} no measurable difference between \texttt{fp16/fp16} and \texttt{fp16/fp32} on relative L1'
has "$A" '\textbf{Disagrees:} \texttt{e4m3/fp32} is measurably better than \texttt{e4m3/fp22+fp32:64} on cos, where the published finding is that \texttt{e4m3/fp22+fp32:64} loses nothing.'
has "$A" '\textbf{Smoothing Q and K together helps.} Published:'
has "$N" '\newcommand{\QAcmpFpSixteenAccOkModelATwoWord}{agrees}'
has "$N" '\newcommand{\QAcmpFpSixteenAccOkModelATwoMetric}{relative L1}'
has "$N" '\newcommand{\QAclaimSmoothingQkHelpsWord}{agrees}'
has "$N" '\newcommand{\QAcmpSmoothKHelpsModelBOneWord}{agrees}'
has "$N" '\newcommand{\QAcmpSmoothKHelpsModelBOneSentence}{Agrees: \texttt{int4 block, smooth k} is better than \texttt{int4 block, smooth none} on cos, as published.}'
has "$N" '\newcommand{\QAcmpSmoothKHelpsModelBOneCi}{[+17.01, +19.05]}'
has "$N" '\newcommand{\QAcmpSmoothKHelpsModelBTwoDiff}{+0.100}'
has "$N" '\newcommand{\QAcmpEFourMThreeBeatsEFiveMTwoPvModelBOneWord}{inconclusive}'
has "$N" '\newcommand{\QAcmpFpSixteenAccOkModelBOneWord}{disagrees}'
has "$N" '\newcommand{\QAclaimSmoothKHelpsWord}{agrees}'
has "$N" '\newcommand{\QAclaimSmoothKHelpsSummary}{agrees in 3 of 3 comparisons}'
has "$N" '\newcommand{\QAclaimTwoLevelFixesFpTwentyTwoWord}{mixed}'
has "$N" '\newcommand{\QAclaimEFourMThreeBeatsIntEightPvWord}{not tested}'
has "$N" '\newcommand{\QAanchorsDisagree}{3}'
has "$N" '\newcommand{\QApubSaTwoGranTokenCos}{99.45}'
has "$N" '\newcommand{\QAinputsMissing}{none}'
# macro names are letters only, each defined once
bad_names=$(grep -o '^\\newcommand{\\[^}]*}' "$N" | grep -v '^\\newcommand{\\[A-Za-z]*}$' | head -3)
[ -z "$bad_names" ] && ok || bad "macro names with non-letters: $bad_names"
dups=$(grep -o '^\\newcommand{\\[A-Za-z]*}' "$N" | sort | uniq -d | head -3)
[ -z "$dups" ] && ok || bad "macros defined twice: $dups"
# every macro the paper cites is defined (with data, and below without)
check_paper_macros() {
    local paper=$root/paper/paper.tex missing=""
    [ -f "$paper" ] || { bad "no $paper"; return; }
    # macros cited outside comments, less those paper.tex defines itself
    local own
    own=$(grep -o '\\newcommand{\\QA[A-Za-z]*}' "$paper" | sed 's/.*{\(.*\)}/\1/')
    for m in $(sed -e 's/^%.*//' -e 's/\([^\\]\)%.*/\1/' "$paper" | grep -o '\\QA[A-Za-z]*' | sort -u); do
        printf '%s\n' "$own" | grep -qxF -- "$m" && continue
        grep -qF "\\newcommand{$m}" "$1" || missing="$missing $m"
    done
    [ -z "$missing" ] && ok || bad "paper.tex cites undefined macros ($1):$missing"
}
check_paper_macros "$N"

# ---- 2. verdicts flip the sentence
sed -i 's/,a better$/,b better/' "$R/comparisons.csv"
run_tables "$R" "$G"
[ "$rc" = 0 ] && ok || bad "flipped: exit $rc: $(cat "$dir/err")"
has "$A" '\textbf{Disagrees:} \texttt{int4 block, smooth none} is better than \texttt{int4 block, smooth k} on cos, the opposite of the published finding.'
hasnt "$A" '\textbf{Agrees:} \texttt{int4 block, smooth k} is better'
has "$N" '\newcommand{\QAcmpSmoothKHelpsModelBOneWord}{disagrees}'
has "$N" '\newcommand{\QAcmpSmoothKHelpsModelBOneSentence}{Disagrees: \texttt{int4 block, smooth none} is better than'
has "$N" '\newcommand{\QAclaimSmoothKHelpsWord}{disagrees}'
sed -i '0,/,b better$/s//,inconclusive/' "$R/comparisons.csv"
run_tables "$R" "$G"
has "$N" '\newcommand{\QAcmpSmoothKHelpsModelBOneWord}{inconclusive}'
has "$N" '\newcommand{\QAclaimSmoothKHelpsWord}{mixed}'
has "$N" '\newcommand{\QAclaimSmoothKHelpsSummary}{disagrees in 2 of 3 comparisons, inconclusive in 1 of 3 comparisons}'
# the same published claim: two_level vs fp22 flips too, vs fp32 (no loss) stays
has "$A" '\textbf{Disagrees:} \texttt{fp22} is better than \texttt{fp22+fp32:64} on cos, the opposite'

# ---- 3. a missing study says "not run", its macros expand to n/a
rm "$R/pv/summary.csv" "$R/comparisons.csv"
run_tables "$R" "$G"
[ "$rc" = 0 ] && ok || bad "missing study: exit $rc: $(cat "$dir/err")"
has "$G/tab_pv.tex" 'not run'
has "$G/tab_pv.tex" 'pv/summary.csv'
has "$N" '\newcommand{\QApvModelAIntEightPvEFourMThreeCosMean}{n/a}'
has "$N" '\newcommand{\QAclaimSmoothKHelpsWord}{n/a}'
has "$N" '\newcommand{\QAanchorsAgree}{n/a}'
has "$A" 'Not run'
has "$N" '\newcommand{\QAinputsMissing}{\texttt{pv/\allowbreak{}summary.csv}, \texttt{comparisons.csv}}'
has "$G/tab_granularity.tex" '99.45'

# an accumulator summary without the pv column (its first contract) reads as e4m3 P/V
printf 'model,label,acc,chunk,%s\n' "$SUMCOLS" >"$R/accumulator/summary.csv"
row qattn-alpha "fp22+fp32:128" "fp22+fp32,128" 0.9991 >>"$R/accumulator/summary.csv"
run_tables "$R" "$G"
[ "$rc" = 0 ] && ok || bad "accumulator without pv: exit $rc: $(cat "$dir/err")"
has "$N" '\newcommand{\QAaccModelBPvEFourMThreeFpTwentyTwoFpThirtyTwoChunkOneHundredTwentyEightCosMean}{99.910}'

# ---- 4. nothing at all: every table says not run, the paper's macros exist
mkdir -p "$dir/empty"
run_tables "$dir/empty" "$dir/gen-empty"
[ "$rc" = 0 ] && ok || bad "empty results: exit $rc: $(cat "$dir/err")"
for f in $TABLES; do
    has "$dir/gen-empty/$f.tex" 'not run'
done
has "$dir/gen-empty/numbers.tex" '\newcommand{\QAgranModelBIntFourThreadSmoothKCosMean}{n/a}'
has "$dir/gen-empty/numbers.tex" '\newcommand{\QAModelAName}{n/a}'
check_paper_macros "$dir/gen-empty/numbers.tex"

# ---- 5. bad input: exit 2, file and column named, nothing written
expect_bad() { # DESCRIPTION PATTERN...
    local what=$1
    shift
    rm -rf "$dir/gen-bad"
    run_tables "$R" "$dir/gen-bad"
    [ "$rc" = 2 ] && ok || bad "$what: exit $rc, expected 2"
    [ "$(wc -l <"$dir/err")" = 1 ] && ok || bad "$what: error not one line: $(cat "$dir/err")"
    for p in "$@"; do has "$dir/err" "$p"; done
    if [ -z "$(ls -A "$dir/gen-bad" 2>/dev/null)" ]; then ok; else bad "$what: left $(ls -A "$dir/gen-bad")"; fi
}
write_fakes
cp "$R/granularity/summary.csv" "$dir/gran.bak"
sed -i '1s/,cos_mean,/,cosmean,/' "$R/granularity/summary.csv"
expect_bad "missing column" "granularity/summary.csv" "'cos_mean'"
cp "$dir/gran.bak" "$R/granularity/summary.csv"
# malformed quoting: an unclosed quote, a bare quote inside a field
printf 'model,label,acc,chunk,%s\nqattn-alpha,"fp32,fp32,0,96,0.9,0.9,0.9,0.9,0.9,1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,s\n' "$SUMCOLS" \
    >"$R/accumulator/summary.csv"
expect_bad "unclosed quote" "accumulator/summary.csv:2" "never closed"
printf 'model,label,acc,chunk,%s\nqattn-alpha,fp"32,fp32,0,96,0.9,0.9,0.9,0.9,0.9,1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,s\n' "$SUMCOLS" \
    >"$R/accumulator/summary.csv"
expect_bad "quote in field" "accumulator/summary.csv:2" "column 'label'"
write_fakes
sed -i '3s/,0\.9,0\.95,3,/,0.9,bogus,3,/' "$R/smoothing/summary.csv"
expect_bad "bad number" "smoothing/summary.csv:3" "column 'cos_worst_layer'" "bogus"
write_fakes
sed -i '2s/a better$/maybe/' "$R/comparisons.csv"
expect_bad "bad verdict" "comparisons.csv:2" "column 'verdict'"
write_fakes
sed -i '2s/^qattn-alpha,0,q,/qattn-alpha,0,x,/' "$R/outliers/summary.csv"
expect_bad "bad tensor" "outliers/summary.csv:2" "column 'tensor'"
write_fakes
sed -i '1s/tops_source/src/' "$R/pareto/pareto.csv"
expect_bad "pareto column" "pareto/pareto.csv" "'tops_source'"
write_fakes
printf 'qattn-alpha,x,1\n' >>"$R/models.csv"
expect_bad "short row" "models.csv:4" "fields"
write_fakes
# a bad input leaves earlier outputs as they were
before=$(md5sum "$G/numbers.tex")
sed -i '1s/,verdict$/,verdikt/' "$R/comparisons.csv"
run_tables "$R" "$G"
[ "$rc" = 2 ] && [ "$(md5sum "$G/numbers.tex")" = "$before" ] && ok || bad "bad input changed earlier output"
[ -z "$(find "$G" -name '.*tmp*')" ] && ok || bad "temporary files left in $G"
# usage errors
"$qattn" paper-tables --results "$dir/nonexistent" --out "$dir/x" 2>"$dir/err"
[ $? = 2 ] && ok || bad "nonexistent results dir: not exit 2"
"$qattn" paper-tables --bogus 2>"$dir/err"
[ $? = 2 ] && ok || bad "unknown option: not exit 2"
"$qattn" paper-tables --help >"$dir/help" && grep -q numbers.tex "$dir/help" && ok || bad "--help"

lib_finish
