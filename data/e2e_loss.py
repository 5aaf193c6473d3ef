#!/usr/bin/env python3
"""The end-to-end study: held-out loss (nats per token) of a trained model
with its attention run by each quantized-attention scheme.

The model (a save_pretrained directory of data/train.py --save-dir) is
evaluated on every held-out window of 2048 tokens, the windows train.py
evaluates, in bf16 autocast as train.py does. Row "none" is the unquantized
model (torch SDPA); every other row runs its attention through qattn.hf
(the GPU kernels, the CPU emulation where no kernel takes the call). Rows
"kbias<r>:<scheme>" add the kbias study's per-channel K offset of r standard
deviations (augmented data: exact attention does not change). The interval
of a loss is the 2.5 / 97.5 percentile of the mean over windows resampled
with replacement (--boot times); that of a delta resamples the same windows
for both rows (paired).

Writes one CSV row per scheme (studies/CSV.md, e2e_loss.csv):
  device,date,model,scheme,loss,loss_lo,loss_hi,delta,delta_lo,delta_hi,
  kbias,spec,windows,tokens,gpu_calls,emulated_calls,seconds

Usage (GPU machine):
  python3 data/e2e_loss.py --model-dir DIR --model qattn-qwen2-hd64 --corpus DIR --out FILE.csv
"""
import argparse
import csv
import datetime
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from train import SEP, SEQ, encode, log  # noqa: E402

KBIAS_R = 8.0


def rows_to_run(schemes, kbias):
    """(label, spec, kbias r) of every row, the unquantized model first; the K-bias rows: a
    scheme that smooths K, the same without smoothing, a per-tensor fp8 one, bf16"""
    import qattn
    rows = [("none", "", 0.0)]
    names = [s.name for s in qattn.schemes()] if schemes == "all" else schemes.split(",")
    rows += [(n, n, 0.0) for n in names]
    if kbias:
        preset = qattn.parse("sage2-8b-sm90")
        nosmooth = preset.replace("smooth=k ", "smooth=none ")
        if nosmooth == preset:
            sys.exit("e2e_loss.py: sage2-8b-sm90 no longer smooths K: %s" % preset)
        rows.append(("sage2-8b-sm90-nosmooth", nosmooth, 0.0))
        rows += [("kbias%g:%s" % (KBIAS_R, label), spec, KBIAS_R)
                 for label, spec in (("sage2-8b-sm90", "sage2-8b-sm90"), ("sage2-8b-sm90-nosmooth", nosmooth),
                                     ("fa3-fp8", "fa3-fp8"), ("bf16", "bf16"))]
    return rows


def bootstrap(per_window, base, boot, seed):
    """(lo, hi) of the mean and of the paired mean difference from base, 95% percentile intervals"""
    import numpy as np
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per_window), size=(boot, len(per_window)))
    m = per_window[idx].mean(1)
    d = (per_window - base)[idx].mean(1)
    return np.percentile(m, [2.5, 97.5]), np.percentile(d, [2.5, 97.5])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", required=True, help="save_pretrained directory (train.py --save-dir)")
    ap.add_argument("--model", required=True, help="the model's name in the CSV (qattn-qwen2-hd64, ...)")
    ap.add_argument("--corpus", required=True, help="directory with heldout.txt")
    ap.add_argument("--out", required=True, help="CSV to write (atomically)")
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer.json"))
    ap.add_argument("--schemes", default="all", help="comma-separated schemes, or all presets (default)")
    ap.add_argument("--no-kbias", action="store_true", help="leave out the K-bias rows")
    ap.add_argument("--windows", type=int, default=0, help="first N held-out windows (0: all)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--boot", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    import numpy as np
    import torch
    import torch.nn.functional as F
    from tokenizers import Tokenizer
    from transformers import Qwen2ForCausalLM
    import qattn
    import qattn.hf as hf

    if not torch.cuda.is_available():
        sys.exit("e2e_loss.py: needs a CUDA device (the emulation of a whole model's held-out set would take days)")
    dev = torch.device("cuda")
    tok = Tokenizer.from_file(args.tokenizer)
    with open(os.path.join(args.corpus, "heldout.txt"), encoding="utf-8") as f:
        held = torch.from_numpy(encode(tok, f.read().rstrip("\n").split(SEP)).astype(np.int64))
    n_win = (len(held) - 1) // SEQ
    if args.windows:
        n_win = min(n_win, args.windows)
    windows = torch.stack([held[i * SEQ: i * SEQ + SEQ + 1] for i in range(n_win)])
    model = Qwen2ForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32).to(dev).eval()
    model.config.use_cache = False
    vocab = model.config.vocab_size
    gpu_name = torch.cuda.get_device_name()
    log("%s: %d held-out windows of %d tokens on %s" % (args.model, n_win, SEQ, gpu_name))

    def per_window_loss():
        out = []
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for i in range(0, n_win, args.batch):
                w = windows[i:i + args.batch].to(dev)
                logits = model(input_ids=w[:, :-1], use_cache=False).logits
                ce = F.cross_entropy(logits.float().reshape(-1, vocab), w[:, 1:].reshape(-1), reduction="none")
                out.append(ce.view(w.shape[0], -1).mean(1).double().cpu())
        return torch.cat(out).numpy()

    results, base = [], None
    for label, spec, r in rows_to_run(args.schemes, not args.no_kbias):
        t0 = time.time()
        hf.reset_calls()
        hf.use(model, spec or None, kbias=r, fallback=False)
        pw = per_window_loss()
        torch.cuda.synchronize()
        secs = time.time() - t0
        if base is None:
            base = pw
        (lo, hi), (dlo, dhi) = bootstrap(pw, base, args.boot, args.seed)
        results.append(dict(device=gpu_name, date=datetime.date.today().isoformat(), model=args.model,
                            scheme=label, loss="%.6f" % pw.mean(), loss_lo="%.6f" % lo, loss_hi="%.6f" % hi,
                            delta="%.6g" % (pw - base).mean(), delta_lo="%.6g" % dlo, delta_hi="%.6g" % dhi,
                            kbias="%g" % r, spec=qattn.parse(spec) if spec else "torch sdpa",
                            windows=n_win, tokens=n_win * SEQ, gpu_calls=hf.calls["gpu"],
                            emulated_calls=hf.calls["emulate"], seconds="%.1f" % secs))
        log("%-32s loss %.4f [%.4f, %.4f]  delta %+.5f [%+.5f, %+.5f]  %5.1fs  (gpu %d, emulated %d calls)"
            % (label, pw.mean(), lo, hi, (pw - base).mean(), dlo, dhi, secs, hf.calls["gpu"], hf.calls["emulate"]))
    hf.use(model, None)
    tmp = args.out + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    os.replace(tmp, args.out)
    log("wrote %s (%d rows)" % (args.out, len(results)))


if __name__ == "__main__":
    main()
