"""The encoder ledger's activation figures beside the tensors a real forward keeps, on CPU.

bert-base-uncased, t5-small and whisper-tiny (tests/data/configs) are built with random weights
in fp32 with eager attention and run on CPU:

- no-grad forward: the peak of the bytes of every tensor storage alive at once (parameters and
  buffers excluded), tracked op by op with a TorchDispatchMode; compared with the ledger's
  `activations.inference` prefill figure (BERT: BertForMaskedLM, head included; T5 and Whisper:
  the encoder forward);
- training forward: the bytes of the distinct storages autograd saves for backward
  (saved_tensors_hooks), parameters excluded, for the encoder (BERT) or the whole model
  (T5, Whisper, labels given so the decoder runs), compared with the ledger's saved bytes.

    PYTHONPATH=tui python bench/encoder_activations_vs_torch.py

Takes about a minute on two cores; kept out of the test suite.
"""

from __future__ import annotations

import json
import weakref
from pathlib import Path

import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from vramtui.ledger import encoders
from vramtui.ledger.context import LedgerContext
from vramtui.ledger.items import GpuLayout
from vramtui.models.hf_config import architecture_from_hf_config
from vramtui.spec import loads_spec

CONFIGS = Path(__file__).resolve().parent.parent / "tests" / "data" / "configs"


class LiveBytes(TorchDispatchMode):
    """The largest sum of storages created under the mode and alive at once."""

    def __init__(self, model):
        super().__init__()
        self.skip = {
            t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())
        }
        self.refs: dict[int, list[int]] = {}
        self.live = self.peak = 0

    def _drop(self, key):
        ref = self.refs.get(key)
        if ref is None:
            return
        ref[0] -= 1
        if not ref[0]:
            self.live -= ref[1]
            del self.refs[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            key = t.untyped_storage().data_ptr()
            if not key or key in self.skip:
                continue
            if key in self.refs:
                self.refs[key][0] += 1
            else:
                self.refs[key] = [1, t.untyped_storage().nbytes()]
                self.live += self.refs[key][1]
            weakref.finalize(t, self._drop, key)
        self.peak = max(self.peak, self.live)
        return out


def saved_bytes(model, run) -> int:
    skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in skip:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()
    return sum(seen.values())


def build(name: str, cls: str, **over):
    cfg = {**json.loads((CONFIGS / f"{name}.json").read_text()), **over}
    kwargs = {k: v for k, v in cfg.items() if k not in ("model_type", "torch_dtype")}
    hf = transformers.AutoConfig.for_model(cfg["model_type"], **kwargs)
    hf._attn_implementation = "eager"
    model = getattr(transformers, cls)(hf)
    arch = architecture_from_hf_config(cfg, name, f"{name}/config.json", whole_model=True)
    return model, arch


def ctx_for(arch, *, training: bool, batch: int, prompt: int = 1, generated: int = 1, seq: int = 1):
    if training:
        body = (
            '[task]\nkind = "full_finetune"\n[weights]\nformat = "fp32"\n'
            f"[lengths]\nseq_len = {seq}\n[batch]\nmicro_batch = {batch}\n"
            '[training]\noptimizer = "adamw"\nmaster_weights_fp32 = false\ngrad_dtype = "fp32"\n'
            'grad_checkpointing = "none"\n[runtime]\nattention = "eager"\n'
        )
    else:
        body = (
            '[task]\nkind = "inference"\n[weights]\nformat = "fp32"\n'
            f"[lengths]\nprompt_tokens = {prompt}\ngenerated_tokens = {generated}\n"
            f'[batch]\nconcurrency = {batch}\n[runtime]\nattention = "eager"\n'
            'kv_cache_dtype = "fp32"\n'
        )
    text = (
        "schema_version = 1\n[model]\nparams = 1000000\n"
        + body
        + '[placement]\ngpus = 1\n[headroom]\nmode = "itemised"\n'
    )
    return LedgerContext(spec=loads_spec(text), arch=arch, checkpoint=None, layout=GpuLayout(1))


def row(what: str, measured: int, estimated: int) -> None:
    print(
        f"{what:52s} measured {measured:>14,} B  ledger {estimated:>14,} B  "
        f"ledger/measured {estimated / measured:6.3f}"
    )


def main() -> None:
    torch.manual_seed(0)
    # BERT no-grad, MLM head included
    for b, s in ((2, 128), (4, 256)):
        model, arch = build("bert-base-uncased", "BertForMaskedLM", num_hidden_layers=2)
        model.eval()
        ids = torch.randint(0, 30000, (b, s))
        mode = LiveBytes(model)
        with torch.no_grad(), mode:
            model(input_ids=ids)
        ctx = ctx_for(arch, training=False, batch=b, prompt=s)
        est = encoders.inference_items(ctx)[0].stage_bytes["prefill"]
        row(f"bert-base MLM no-grad forward b={b} s={s}", mode.peak, est)
    # T5 encoder no-grad (with an attention mask, as a tokenizer gives)
    for b, s in ((2, 128), (1, 512)):
        model, arch = build("t5-small", "T5EncoderModel", num_layers=2)
        model.eval()
        ids = torch.randint(0, 30000, (b, s))
        mode = LiveBytes(model)
        with torch.no_grad(), mode:
            model(input_ids=ids, attention_mask=torch.ones(b, s, dtype=torch.long))
        ctx = ctx_for(arch, training=False, batch=b, prompt=s)
        shape = encoders.shape_of(arch)
        enc, _ = encoders._stacks(shape)
        est, _ = encoders.layer_peak_bytes(ctx, shape, enc, b, s, s)
        row(f"t5-small encoder no-grad forward b={b} s={s}", mode.peak, est)
    # Whisper encoder no-grad (30 s of audio)
    model, arch = build("whisper-tiny", "WhisperModel", encoder_layers=2, num_hidden_layers=2)
    model.eval()
    feats = torch.randn(1, 80, 3000)
    enc_model = model.get_encoder()
    mode = LiveBytes(enc_model)
    with torch.no_grad(), mode:
        enc_model(input_features=feats)
    ctx = ctx_for(arch, training=False, batch=1, prompt=4, generated=4)
    shape = encoders.shape_of(arch)
    enc, _ = encoders._stacks(shape)
    est, _ = encoders.layer_peak_bytes(ctx, shape, enc, 1, 1500, 1500)
    row("whisper-tiny encoder no-grad forward b=1 (1500 frames)", mode.peak, est)
    # Training: saved tensors of the layers
    # CPU's dropout keeps a mask in the input dtype where CUDA's fused kernel keeps 1 B: the
    # training runs set the dropouts to 0 so that every other saved tensor is compared
    model, arch = build(
        "bert-base-uncased",
        "BertModel",
        num_hidden_layers=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model.train()
    b, s = 2, 128
    ids = torch.randint(0, 30000, (b, s))
    measured = saved_bytes(model, lambda: model(input_ids=ids))
    ctx = ctx_for(arch, training=True, batch=b, seq=s)
    shape = encoders.shape_of(arch)
    enc, _ = encoders._stacks(shape)
    per_layer, _ = encoders.layer_saved_bytes(ctx, shape, enc, b, s)
    extra, _ = encoders.stack_saved_bytes(ctx, shape, b, s, 0)
    row(
        f"bert-base training saved, 2 layers + embeddings b={b} s={s}",
        measured,
        2 * per_layer + extra,
    )
    model, arch = build(
        "whisper-tiny", "WhisperModel", encoder_layers=2, decoder_layers=2, num_hidden_layers=2
    )
    model.train()
    dec_len = 64
    measured = saved_bytes(
        model,
        lambda: model(
            input_features=torch.randn(1, 80, 3000),
            decoder_input_ids=torch.randint(0, 50000, (1, dec_len)),
        ),
    )
    ctx = ctx_for(arch, training=True, batch=1, seq=dec_len)
    shape = encoders.shape_of(arch)
    enc, dec = encoders._stacks(shape)
    e, _ = encoders.layer_saved_bytes(ctx, shape, enc, 1, 1500)
    d, _ = encoders.layer_saved_bytes(ctx, shape, dec, 1, dec_len, 1500)
    extra, _ = encoders.stack_saved_bytes(ctx, shape, 1, 1500, dec_len)
    row("whisper-tiny training saved, 2+2 layers", measured, 2 * e + 2 * d + extra)
    model, arch = build("t5-small", "T5Model", num_layers=2, num_decoder_layers=2, dropout_rate=0.0)
    model.train()
    s = 128
    measured = saved_bytes(
        model,
        lambda: model(
            input_ids=torch.randint(0, 30000, (1, s)),
            decoder_input_ids=torch.randint(0, 30000, (1, s)),
        ),
    )
    ctx = ctx_for(arch, training=True, batch=1, seq=s)
    shape = encoders.shape_of(arch)
    enc, dec = encoders._stacks(shape)
    e, _ = encoders.layer_saved_bytes(ctx, shape, enc, 1, s)
    d, _ = encoders.layer_saved_bytes(ctx, shape, dec, 1, s, s)
    extra, _ = encoders.stack_saved_bytes(ctx, shape, 1, s, s)
    row(f"t5-small training saved, 2+2 layers s={s}", measured, 2 * e + 2 * d + extra)


if __name__ == "__main__":
    main()
