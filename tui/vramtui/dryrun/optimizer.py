"""The optimiser's memory, emulated on the trainable parameters.

torch.optim cannot reproduce the spec's choices on its own (fp32 states on 16-bit parameters,
an fp32 master copy, bitsandbytes 8-bit states, Adafactor's factored statistics), so the trace
allocates, per trainable parameter, the tensors each optimiser keeps - with the shapes and
dtypes that optimiser uses - and runs the one large temporary of its step:

* AdamW: m and v (zeros_like in the state dtype); torch's foreach step computes sqrt(v) for the
  whole group (`torch._foreach_sqrt`) before the update, in place otherwise.
* 8-bit AdamW (bitsandbytes): two uint8 states and one fp32 absmax per 256 values each, for
  tensors of 4,096 values or more (`min_8bit_size`); smaller tensors keep 32-bit states.
* SGD with momentum: one buffer; plain SGD: nothing.
* Adafactor: row and column statistics for tensors of 2+ dimensions, a full second moment for
  vectors, no first moment.
* fp32 master weights (mixed-precision full fine-tuning): an fp32 copy of each parameter.
"""

from __future__ import annotations

BNB_MIN_8BIT_SIZE = 4096
BNB_BLOCK = 256


def _state_dtype(torch, spec):
    name = spec.training.optimizer_state_dtype or "fp32"
    return {"fp32": torch.float32, "bf16": torch.bfloat16}[name]


class EmulatedOptimizer:
    """The states (and master weights) of the spec's optimiser for `params`, kept alive by
    this object; `step()` runs the step's large temporaries."""

    def __init__(self, spec, params: list, tracker):
        self.spec = spec
        self.states, self.masters = _allocate(spec, params, tracker)
        self.description = _describe(spec)

    def step(self) -> None:
        import torch

        if self.spec.training.optimizer != "adamw":
            return
        second_moments = [s[1] for s in self.states if len(s) == 2]
        if second_moments:
            sqrt_v = torch._foreach_sqrt(second_moments)
            del sqrt_v

    def release(self) -> None:
        self.states, self.masters = [], []


def _allocate(spec, params: list, tracker) -> tuple[list, list]:
    import torch

    tr = spec.training
    opt = tr.optimizer
    sdt = _state_dtype(torch, spec)
    states: list = []
    masters: list = []
    is_lora = spec.task.kind in ("lora", "qlora")
    if (
        not is_lora
        and tr.master_weights_fp32
        and spec.weights.format in ("bf16", "fp16")
        and params
        and params[0].dtype != torch.float32
    ):
        for p in params:
            m = p.detach().to(torch.float32, copy=True)
            tracker.tag(m, "master_weights")
            masters.append(m)
    with torch.no_grad():
        for p in params:
            if opt == "adamw":
                new = [torch.zeros_like(p, dtype=sdt), torch.zeros_like(p, dtype=sdt)]
            elif opt == "adamw_8bit":
                if p.numel() >= BNB_MIN_8BIT_SIZE:
                    blocks = -(-p.numel() // BNB_BLOCK)
                    new = [torch.zeros_like(p, dtype=torch.uint8) for _ in range(2)]
                    new += [
                        torch.zeros(blocks, dtype=torch.float32, device=p.device) for _ in range(2)
                    ]
                else:
                    new = [torch.zeros_like(p, dtype=torch.float32) for _ in range(2)]
            elif opt == "sgd_momentum":
                new = [torch.zeros_like(p, dtype=sdt)]
            elif opt == "adafactor":
                shape = tuple(p.shape)
                if len(shape) >= 2:
                    new = [
                        torch.zeros(shape[:-1], dtype=sdt, device=p.device),
                        torch.zeros(shape[:-2] + shape[-1:], dtype=sdt, device=p.device),
                    ]
                else:
                    new = [torch.zeros_like(p, dtype=sdt)]
            else:  # sgd
                new = []
            for s in new:
                tracker.tag(s, "optimizer_states")
            states.append(new)
    return states, masters


def _describe(spec) -> str:
    tr = spec.training
    sd = tr.optimizer_state_dtype or "fp32"
    text = {
        "adamw": f"AdamW m and v in {sd}; the step's foreach sqrt(v) temporary",
        "adamw_8bit": "bitsandbytes 8-bit AdamW: uint8 m and v + fp32 absmax per 256 values "
        f"(tensors under {BNB_MIN_8BIT_SIZE:,} values keep fp32 states)",
        "sgd": "plain SGD: no state",
        "sgd_momentum": f"SGD momentum buffer in {sd}",
        "adafactor": f"Adafactor row/column statistics in {sd}",
    }[tr.optimizer]
    return (
        f"optimiser emulated (not torch.optim): {text}; states allocated before the forward, "
        "as they are at every step after the first"
    )
