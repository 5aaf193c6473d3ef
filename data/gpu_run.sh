#!/bin/bash
# One self-contained GPU-machine run of qattn's data recipe.
#
#   bash data/gpu_run.sh check                 exporter round-trip check only
#   bash data/gpu_run.sh smoke                 check + tokenizer training + a few steps of each model
#   bash data/gpu_run.sh qattn-qwen2-hd64      train + export that model (RUN_CHECK=1: check first)
#   bash data/gpu_run.sh qattn-qwen2-hd128     likewise
#   bash data/gpu_run.sh qattn-mqa512          the MQA-512 model (data/train_mqa512.py)
#   bash data/gpu_run.sh e2e                   the end-to-end study: retrain both Qwen2 models
#                                              (their GPUs in parallel where there are two), then
#                                              data/e2e_loss.py on each; QATTN_LIB names libqattn.so
#
# Needs .carry/train.txt.xz and .carry/heldout.txt.xz (xz -9 of data/scratch/corpus/*.txt,
# written by data/build_corpus.py) and, except in smoke mode, data/tokenizer.json.
# Results go to $OUT (default /tmp/qattn-out); the .h5 comes back split in 15 MiB parts
# (cat MODEL.h5.part* > MODEL.h5).  Run it as
#   set -o pipefail; bash data/gpu_run.sh MODE 2>&1 | tee $OUT/log.txt
set -eo pipefail
MODE=${1:?usage: gpu_run.sh check|smoke|MODEL}
OUT=${OUT:-/tmp/qattn-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T0=$(date +%s)

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c 'import sys, torch, transformers, tokenizers, h5py, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "h5py", h5py.__version__, "numpy", numpy.__version__)'

corpus() {
    C=/tmp/qattn-corpus
    mkdir -p $C
    xz -dc .carry/train.txt.xz > $C/train.txt &
    xz -dc .carry/heldout.txt.xz > $C/heldout.txt
    wait
    echo "corpus unpacked: $(du -b $C/train.txt $C/heldout.txt | tr '\n' ' ')"
}

case "$MODE" in
check)
    python3 data/check_export.py --csv "$OUT/check_export.csv"
    ;;
smoke)
    python3 data/check_export.py --csv "$OUT/check_export.csv" || echo "CHECK FAILED (continuing)"
    corpus
    S=/tmp/qattn-smoke
    mkdir -p $S/a $S/b $S/c
    python3 data/train.py --model qattn-qwen2-hd64 --corpus $C --out $S/a --train-tokenizer \
        --steps 40 --eval-every 20 --eval-windows 16 --compile
    cp $S/a/tokenizer.json "$OUT/tokenizer.json"
    python3 data/train.py --model qattn-qwen2-hd64 --corpus $C --out $S/c --tokenizer $S/a/tokenizer.json \
        --steps 20 --eval-every 10 --eval-windows 16 --no-export --no-verify
    python3 data/train.py --model qattn-qwen2-hd128 --corpus $C --out $S/b --tokenizer $S/a/tokenizer.json \
        --steps 40 --eval-every 20 --eval-windows 16 --compile --no-verify
    cp $S/a/summary_*.json "$OUT/summary_smoke_hd64.json"
    cp $S/b/summary_*.json "$OUT/summary_smoke_hd128.json"
    cp $S/b/curve_*.csv "$OUT/curve_smoke_hd128.csv"
    ls -l $S/a $S/b
    python3 - <<'EOF'
import h5py, glob
for p in sorted(glob.glob("/tmp/qattn-smoke/*/*.h5")):
    with h5py.File(p) as f:
        print(p, dict(f.attrs))
        print(" layers", len([k for k in f if k.startswith("layer_")]), "q", f["layer_00/q"].shape, f["layer_00/q"].dtype,
              "k", f["layer_00/k"].shape, "chunks", f["layer_00/q"].chunks, f["layer_00/q"].compression,
              "seqlens", f["seqlens"][()])
EOF
    ;;
qattn-qwen2-*)
    if [ -n "${RUN_CHECK:-}" ]; then
        python3 data/check_export.py --csv "$OUT/check_export.csv" || echo "CHECK FAILED (continuing)"
    fi
    corpus
    R=/tmp/qattn-run
    mkdir -p $R
    python3 data/train.py --model "$MODE" --corpus $C --out $R --compile ${TRAIN_ARGS:-}
    ls -l $R
    cp "$R/curve_$MODE.csv" "$R/stats_$MODE.csv" "$R/summary_$MODE.json" "$OUT/"
    # files coming back from the device machine are limited to 16 MiB each: split the .h5
    (cd $R && sha256sum "$MODE.h5" && split -b 15M -d "$MODE.h5" "$OUT/$MODE.h5.part")
    ls -l "$OUT"
    ;;
qattn-mqa512)
    corpus
    R=/tmp/qattn-run
    mkdir -p $R
    # data parallel over every GPU of the machine (one window batch per GPU and step)
    NGPU=$(nvidia-smi -L | wc -l)
    if [ "$NGPU" -gt 1 ]; then
        torchrun --standalone --nproc_per_node="$NGPU" data/train_mqa512.py --corpus $C --out $R --compile ${TRAIN_ARGS:-}
    else
        python3 data/train_mqa512.py --corpus $C --out $R --compile ${TRAIN_ARGS:-}
    fi
    ls -l $R
    cp "$R/curve_$MODE.csv" "$R/summary_$MODE.json" "$OUT/"
    (cd $R && sha256sum "$MODE.h5" && split -b 15M -d "$MODE.h5" "$OUT/$MODE.h5.part")
    ls -l "$OUT"
    ;;
e2e)
    [ -f "${QATTN_LIB:-}" ] || { echo "e2e: set QATTN_LIB to libqattn.so (scripts/device-bundle)"; exit 2; }
    python3 -c 'import sys; sys.path.insert(0, "python"); import qattn; print("qattn", qattn.version(), len(qattn.kernels()), "kernels")'
    corpus
    R=/tmp/qattn-e2e
    mkdir -p $R
    NGPU=$(nvidia-smi -L | wc -l)
    MODELS="qattn-qwen2-hd64 qattn-qwen2-hd128"
    # each_model CMD: CMD MODEL for every model, each on a GPU of its own where there are two
    each_model() {
        local i=0 m
        for m in $MODELS; do
            CUDA_VISIBLE_DEVICES=$(( NGPU > 1 ? i : 0 )) "$@" "$m" &
            [ "$NGPU" -gt 1 ] || wait $!
            i=$(( i + 1 ))
        done
        wait
    }
    # the recipe that made the shipped activations (train.py's defaults)
    train_one() {
        python3 data/train.py --model "$1" --corpus $C --out $R/$1 --compile --no-export \
            --save-dir $R/$1/weights ${TRAIN_ARGS:-} >"$OUT/train_$1.log" 2>&1
    }
    eval_one() {
        python3 data/e2e_loss.py --model-dir $R/$1/weights --model "$1" --corpus $C \
            --out "$OUT/e2e_$1.csv" ${E2E_ARGS:-} >"$OUT/e2e_$1.log" 2>&1
    }
    each_model train_one
    for m in $MODELS; do
        tail -3 "$OUT/train_$m.log"
        cp "$R/$m/summary_$m.json" "$OUT/summary_e2e_$m.json"
        cp "$R/$m/curve_$m.csv" "$OUT/curve_e2e_$m.csv"
    done
    echo "trained: $(( $(date +%s) - T0 ))s"
    each_model eval_one
    set -- $MODELS
    { cat "$OUT/e2e_$1.csv"; tail -n +2 "$OUT/e2e_$2.csv"; } >"$OUT/e2e_loss.csv"
    for m in $MODELS; do grep -v "^$" "$OUT/e2e_$m.log" | tail -22; done
    ;;
*)
    echo "unknown mode $MODE"; exit 2 ;;
esac
echo "gpu_run.sh $MODE: $(( $(date +%s) - T0 ))s"
