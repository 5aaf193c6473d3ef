"""Run a Hugging Face causal LM's attention with a qattn scheme; print its held-out loss before and after.
    python3 examples/hf_quantize.py MODEL (a hub id or a save_pretrained directory) TEXT_FILE [SCHEME]"""
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import qattn.hf

model_id, text_file, scheme = sys.argv[1], sys.argv[2], (sys.argv[3:] or ["sage2-8b-sm90"])[0]
tok = AutoTokenizer.from_pretrained(model_id)
model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch.bfloat16).cuda().eval()
ids = tok(open(text_file, encoding="utf-8").read(), return_tensors="pt").input_ids[0]
n = min(2048, model.config.max_position_embeddings, len(ids))
windows = ids[: len(ids) // n * n].view(-1, n).cuda()  # whole windows of n tokens, no padding


def loss():  # mean next-token loss over the windows, nats per token
    with torch.no_grad():
        return sum(model(input_ids=w[None], labels=w[None]).loss.item() for w in windows) / len(windows)


before = loss()
qattn.hf.use(model, scheme)  # every attention layer now runs the scheme (qattn's GPU kernels)
print("held-out loss %.4f -> %.4f nats/token with %s (%d windows of %d tokens)"
      % (before, loss(), scheme, len(windows), n))
