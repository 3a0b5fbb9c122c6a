"""The checkpoint's stored format in the dry run: pre-quantised weights at their stored sizes.

A checkpoint whose config.json declares a `quantization_config` is built with meta tensors of
the dtypes and shapes the checkpoint stores, scales included, following transformers' own
integrations and the safetensors names:

* FP8 (`quant_method = "fp8"`, transformers' FineGrainedFP8): every nn.Linear but lm_head and
  `modules_to_not_convert` holds `weight` e4m3 (1 B per value) and `weight_scale_inv` fp32,
  one per `weight_block_size` block (ceil(out/b0) x ceil(in/b1)), or one per tensor without a
  block size; fused MoE experts hold the same per expert (FP8Experts).
  `fbgemm_fp8`: e4m3 weights and one fp32 scale per output row.
* MXFP4 (`quant_method = "mxfp4"`, gpt-oss): the experts' projections are `*_blocks` uint8
  (32 values of 4 bits in 16 B per block along the input) and `*_scales` uint8 (one e8m0 per
  block); everything in `modules_to_not_convert` (attention, router, embeddings, lm_head)
  stays in the compute dtype, as do the experts' biases.
* compressed-tensors (`quant_method = "compressed-tensors"`): each `config_groups` scheme on
  its targets, `ignore` left alone: int8 weights (`int-quantized`/`naive-quantized`), packed
  int32 `weight_packed` for fewer bits (`pack-quantized`), e4m3 weights (`float-quantized`),
  NVFP4 (`nvfp4-pack-quantized`: packed uint8 + e4m3 scale per 16 + fp32 global scale);
  scales per the scheme's strategy (tensor, channel, group, block) in the scheme's
  `scale_dtype` or the model's dtype, zero points when asymmetric.
* bitsandbytes and GPTQ/AWQ: the spec's format, which the checkpoint's config sets, already
  builds them at their stored sizes (quantized.py); `llm_int8_skip_modules` is honoured.

A stored format the dry run cannot build is refused with the reason (DryRunError).
Weights stored in a format the ledger does not model (MXFP4, compressed-tensors) make the two
disagree; the reason travels with the result (`BuiltModel.weights_gap`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from vramtui.dryrun.errors import DryRunError

FP8 = "float8_e4m3fn"
MXFP4_BLOCK = 32  # values per MXFP4 block (16 B of data + one 1 B e8m0 scale)
NVFP4_GROUP = 16  # values per NVFP4 e4m3 scale
FP8_METHODS = ("fp8", "fbgemm_fp8")
LEDGER_FORMAT_METHODS = ("bitsandbytes", "gptq", "awq")  # built by quantized.py at stored size
BUILT_METHODS = (*FP8_METHODS, "mxfp4", "compressed-tensors", *LEDGER_FORMAT_METHODS)

Tensor = tuple[str, tuple[int, ...], str]  # (name, shape, torch dtype name)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------ stored tensors, by hand


def fp8_tensors(out_f: int, in_f: int, block: tuple[int, int] | None) -> list[Tensor]:
    """FineGrainedFP8: e4m3 weight + fp32 weight_scale_inv per block (per tensor: a scalar)."""
    scale = (_cdiv(out_f, block[0]), _cdiv(in_f, block[1])) if block else ()
    return [("weight", (out_f, in_f), FP8), ("weight_scale_inv", scale, "float32")]


def fbgemm_fp8_tensors(out_f: int, in_f: int) -> list[Tensor]:
    """FbgemmFp8Linear: e4m3 weight + one fp32 scale per output row."""
    return [("weight", (out_f, in_f), FP8), ("weight_scale", (out_f, 1), "float32")]


def mxfp4_tensors(out_f: int, in_f: int) -> list[Tensor]:
    """gpt-oss's MXFP4: per output row, ceil(in/32) blocks of 16 B and one uint8 scale each."""
    blocks = _cdiv(in_f, MXFP4_BLOCK)
    return [
        ("blocks", (out_f, blocks, MXFP4_BLOCK // 2), "uint8"),
        ("scales", (out_f, blocks), "uint8"),
    ]


@dataclass(frozen=True)
class CtScheme:
    """One compressed-tensors quantisation scheme (the weights' QuantizationArgs)."""

    kind: str  # "int" | "float"
    bits: int
    strategy: str  # tensor | channel | group | block | tensor_group
    fmt: str  # pack-quantized | int-quantized | naive-quantized | float-quantized | nvfp4-...
    group_size: int | None = None
    block: tuple[int, int] | None = None
    symmetric: bool = True
    scale_dtype: str | None = None  # None: the model's dtype
    static_input: bool = False  # input_activations with dynamic = false: an input_scale

    @property
    def label(self) -> str:
        extra = f" g{self.group_size}" if self.group_size else ""
        extra += f" block {self.block[0]}x{self.block[1]}" if self.block else ""
        sym = "" if self.symmetric else " asymmetric"
        return f"{self.kind}{self.bits} {self.strategy}{extra}{sym} ({self.fmt})"


def _scale_shape(s: CtScheme, out_f: int, in_f: int) -> tuple[int, ...]:
    if s.strategy == "tensor":
        return (1,)
    if s.strategy == "channel":
        return (out_f, 1)
    if s.strategy in ("group", "tensor_group"):
        return (out_f, _cdiv(in_f, int(s.group_size or in_f)))
    if s.strategy == "block" and s.block:
        return (_cdiv(out_f, s.block[0]), _cdiv(in_f, s.block[1]))
    raise DryRunError(
        f"compressed-tensors strategy '{s.strategy}' is not one the dry run can size (it builds "
        "tensor, channel, group, tensor_group and block scales); the analytic ledger still "
        "stands"
    )


def ct_tensors(s: CtScheme, out_f: int, in_f: int, model_dtype: str) -> list[Tensor]:
    """The tensors compressed-tensors stores for one (out x in) weight under scheme `s`."""
    scale_dtype = s.scale_dtype or model_dtype
    scale = _scale_shape(s, out_f, in_f)
    if s.kind == "float" and s.bits == 4:  # NVFP4: packed e2m1 pairs, e4m3 scale per 16
        out = [
            ("weight_packed", (out_f, _cdiv(in_f, 2)), "uint8"),
            ("weight_scale", (out_f, _cdiv(in_f, int(s.group_size or NVFP4_GROUP))), FP8),
            ("weight_global_scale", (1,), "float32"),
        ]
        if s.static_input:
            out.append(("input_global_scale", (1,), "float32"))
        return out
    if s.kind == "float" and s.bits == 8:
        out = [("weight", (out_f, in_f), FP8), ("weight_scale", scale, scale_dtype)]
    elif s.kind == "int" and s.bits == 8 and s.fmt != "pack-quantized":
        out = [("weight", (out_f, in_f), "int8"), ("weight_scale", scale, scale_dtype)]
        if not s.symmetric:
            out.append(("weight_zero_point", scale, "int8"))
    elif s.kind == "int" and s.bits in (2, 4, 8) and s.fmt == "pack-quantized":
        per_word = 32 // s.bits
        out = [
            ("weight_packed", (out_f, _cdiv(in_f, per_word)), "int32"),
            ("weight_scale", scale, scale_dtype),
            ("weight_shape", (2,), "int64"),
        ]
        if not s.symmetric:  # zero points packed along the output rows
            out.append(("weight_zero_point", (_cdiv(out_f, per_word), *scale[1:]), "int32"))
    else:
        raise DryRunError(
            f"compressed-tensors scheme {s.label} is not one the dry run can build at its "
            "stored size (it builds int8, packed int2/4/8, fp8 and nvfp4 weights); the "
            "analytic ledger still stands"
        )
    if s.static_input:
        out.append(("input_scale", (1,), scale_dtype))
    return out


def tensor_bytes(tensors: list[Tensor]) -> int:
    import torch

    return sum(
        math.prod(shape) * torch.empty((), dtype=getattr(torch, dt)).element_size()
        for _, shape, dt in tensors
    )


# ------------------------------------------------------------------ the plan


@dataclass
class StoredPlan:
    method: str
    label: str  # the stored format, in words
    linear: object | None  # (out, in) -> tensors for nn.Linear layers, None: not converted
    experts: object | None  # (out, in) -> tensors for each expert's matrix
    skip: tuple[str, ...] = ()  # module name patterns left in the compute dtype
    ledger_models: bool = True  # the ledger charges this format (else: weights_gap)
    targets: tuple[str, ...] = ("Linear",)  # compressed-tensors targets
    notes: list[str] = field(default_factory=list)


def _block(qc: dict) -> tuple[int, int] | None:
    b = qc.get("weight_block_size")
    if isinstance(b, (list, tuple)) and len(b) == 2 and all(isinstance(x, int) for x in b):
        return int(b[0]), int(b[1])
    return None


def _ct_scheme(group: dict, fmt: str) -> CtScheme:
    w = group.get("weights") or {}
    act = group.get("input_activations") or None
    block = w.get("block_structure")
    if isinstance(block, str) and "x" in block:  # "128x128" in older releases
        block = [int(x) for x in block.split("x")]
    return CtScheme(
        kind=str(w.get("type", "int")),
        bits=int(w.get("num_bits", 8)),
        strategy=str(w.get("strategy", "tensor")),
        fmt=str(group.get("format") or fmt),
        group_size=w.get("group_size"),
        block=tuple(block) if isinstance(block, list) and len(block) == 2 else None,
        symmetric=bool(w.get("symmetric", True)),
        scale_dtype=_torch_dtype_name(w.get("scale_dtype")),
        static_input=bool(act) and not act.get("dynamic", True),
    )


def _torch_dtype_name(value) -> str | None:
    if not value:
        return None
    text = str(value).removeprefix("torch.")
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(text, text)


def plan_for(spec, quantization_config: dict | None) -> StoredPlan | None:
    """How the checkpoint's stored format is built, None to follow the spec's format (no
    quantised checkpoint, or a spec that converts it to another format, as the ledger
    does); DryRunError for a stored format the dry run cannot build."""
    from vramtui.ledger.formats import DTYPE_FORMATS
    from vramtui.models.quantization import (
        describe_quantization,
        weights_from_quantization_config,
    )

    qc = quantization_config
    if not qc or spec.task.kind == "full_finetune":
        return None  # full fine-tuning trains dequantised weights: the spec's format
    method = str(qc.get("quant_method", "")).lower()
    ledger_stored = weights_from_quantization_config(qc)
    fmt = spec.weights.format
    if ledger_stored is not None and ledger_stored["format"] != fmt:
        return None  # the spec converts the checkpoint; the ledger says so in its notes
    if ledger_stored is None and fmt not in DTYPE_FORMATS:
        return None  # the spec quantises it its own way
    if method in LEDGER_FORMAT_METHODS:
        skip = qc.get("llm_int8_skip_modules") or qc.get("modules_to_not_convert") or ()
        return StoredPlan(method, describe_quantization(qc), None, None, tuple(skip))
    skip = tuple(qc.get("modules_to_not_convert") or ())
    if method == "fp8":
        block = _block(qc)
        label = (
            f"fp8 e4m3, fp32 scales per {block[0]}x{block[1]} block"
            if block
            else "fp8 e4m3, one fp32 scale per tensor"
        )
        fn = lambda o, i: fp8_tensors(o, i, block)
        return StoredPlan(method, label, fn, fn, skip, ledger_stored is not None)
    if method == "fbgemm_fp8":
        label = "fp8 e4m3, one fp32 scale per output row (fbgemm)"
        return StoredPlan(
            method, label, fbgemm_fp8_tensors, fbgemm_fp8_tensors, skip, ledger_stored is not None
        )
    if method == "mxfp4":
        label = "mxfp4 experts: 4-bit values in blocks of 32 with a uint8 (e8m0) scale each"
        return StoredPlan(method, label, None, mxfp4_tensors, skip, False)
    if method == "compressed-tensors":
        return _ct_plan(qc)
    raise DryRunError(
        f"the checkpoint is stored as {describe_quantization(qc)}, which the dry run cannot "
        f"build at its stored size (it builds {', '.join(BUILT_METHODS)}); the analytic "
        "ledger still stands"
    )


def _ct_plan(qc: dict) -> StoredPlan:
    sparsity = qc.get("sparsity_config") or {}
    if sparsity and str(sparsity.get("format", "dense")) != "dense":
        raise DryRunError(
            f"the checkpoint is compressed-tensors with {sparsity.get('format')} sparsity, "
            "which the dry run cannot build at its stored size (dense schemes only); the "
            "analytic ledger still stands"
        )
    groups = qc.get("config_groups") or {}
    schemes = [
        (tuple(g.get("targets") or ("Linear",)), _ct_scheme(g, str(qc.get("format", ""))))
        for g in groups.values()
        if isinstance(g, dict) and g.get("weights")
    ]
    if not schemes:
        raise DryRunError(
            "the checkpoint is compressed-tensors without a weight scheme in config_groups; "
            "the dry run cannot size it, the analytic ledger still stands"
        )
    for _, s in schemes:  # an unbuildable scheme is refused before anything is built
        ct_tensors(s, 64, 64, "bfloat16")
    label = "compressed-tensors " + "; ".join(s.label for _, s in schemes)
    plan = StoredPlan(
        "compressed-tensors",
        label,
        None,
        None,
        tuple(str(x) for x in qc.get("ignore") or ()),
        False,
    )
    plan.schemes = schemes
    return plan


# --------------------------------------------------------------- which modules


def _pattern_matches(name: str, pattern: str) -> bool:
    """transformers' should_convert_module: a prefix to a module boundary, a regex with the
    same boundary, or a suffix; compressed-tensors' `re:` patterns are regexes."""
    pattern = pattern.removeprefix("re:")
    try:
        if re.match(rf"(?:{pattern})(?:(?<=\.)|(?=\.|$))", name):
            return True
    except re.error:
        pass
    return name.endswith(pattern)


def _clean_name(name: str) -> str:
    """The checkpoint's module name of a (possibly PEFT-wrapped) module."""
    name = name.replace(".base_layer", "")
    return name.removeprefix("base_model.model.")


def skipped(name: str, plan: StoredPlan) -> bool:
    clean = _clean_name(name)
    return any(_pattern_matches(clean, p) for p in plan.skip)


def _ct_scheme_for(name: str, plan: StoredPlan) -> CtScheme | None:
    clean = _clean_name(name)
    for targets, scheme in plan.schemes:
        for t in targets:
            if t == "Linear" or (t.startswith("re:") and _pattern_matches(clean, t)):
                return scheme
    return None


# ------------------------------------------------------------------ the build


def _text_config(hf_config):
    get = getattr(hf_config, "get_text_config", None)
    return get() if get is not None else hf_config


def _expert_matrix(pname: str, shape: tuple[int, ...], hidden: int) -> tuple[int, int]:
    """(out, in) of one expert's matrix of a fused (E, a, b) parameter: transformers stores
    most as (E, out, in), gpt-oss as (E, in, out); the hidden size tells which."""
    _, a, b = shape
    if "down" in pname:  # out = hidden
        return (b, a) if (b == hidden and a != hidden) else (a, b)
    return (b, a) if (a == hidden and b != hidden) else (a, b)


def _experts_params(module, num_experts: int | None) -> list[str]:
    out = []
    for pname, p in module.named_parameters(recurse=False):
        fused = p.dim() == 3 and p.is_floating_point() and not pname.endswith("_bias")
        if fused and (num_experts is None or p.shape[0] == num_experts):
            out.append(pname)
    return out


def apply(plan: StoredPlan, built, spec) -> None:
    """Replace the converted modules of `built.model` by their stored tensors."""
    import torch

    from vramtui.dryrun.build import TORCH_DTYPES, group_of
    from vramtui.dryrun.quantized import make_stored_linear

    model_dtype = TORCH_DTYPES[built.compute_dtype]
    text = _text_config(built.hf_config)
    hidden = int(getattr(text, "hidden_size", 0) or 0)
    num_experts = None
    for key in ("num_local_experts", "n_routed_experts", "num_experts"):
        if getattr(text, key, None):
            num_experts = int(getattr(text, key))
            break
    linears, experts = [], []
    for name, module in built.model.named_modules():
        if "lora_" in name or skipped(name, plan):
            continue
        if type(module) is torch.nn.Linear:
            if group_of(name) == "lm_head":  # transformers never converts the output layer
                continue
            fn = _tensors_fn(plan, name, "linear", model_dtype)
            if fn is not None:
                linears.append((name, module, fn))
        elif num_experts and ".experts" in name + "." and _experts_params(module, num_experts):
            fn = _tensors_fn(plan, name, "experts", model_dtype)
            if fn is not None:
                experts.append((module, fn))
    for name, module, fn in linears:
        parent_name, _, leaf = name.rpartition(".")
        parent = built.model.get_submodule(parent_name) if parent_name else built.model
        tensors = fn(module.out_features, module.in_features)
        setattr(parent, leaf, make_stored_linear(module, plan.method, tensors, built.dtype))
    n_expert_tensors = 0
    for module, fn in experts:
        for pname in _experts_params(module, num_experts):
            p = module._parameters.pop(pname)
            # the compute-dtype matrix the fused kernel multiplies by: a plain attribute, no
            # parameter, no storage counted (created before the trace; the real kernels read
            # the stored blocks and never hold it)
            object.__setattr__(module, pname, p.detach())
            e = p.shape[0]
            out_f, in_f = _expert_matrix(pname, tuple(p.shape), hidden)
            for suffix, shape, dt in fn(out_f, in_f):
                stored = torch.empty((e, *shape), dtype=getattr(torch, dt), device=p.device)
                module.register_parameter(
                    f"{pname}_{'q' if suffix == 'weight' else suffix}",
                    torch.nn.Parameter(stored, requires_grad=False),
                )
            n_expert_tensors += 1
    built.quantized_linears = len(linears)
    what = []
    if linears:
        what.append(f"{len(linears)} linear layers")
    if n_expert_tensors:
        what.append(f"{n_expert_tensors} fused expert tensors")
    built.notes.append(
        f"stored format {plan.label}: {' and '.join(what) or 'no module'} built as meta "
        "tensors of the checkpoint's stored dtypes and shapes, scales included; computed "
        "without a 16-bit copy of the weights (the fused kernels read the stored blocks)"
    )
    if not plan.ledger_models:
        built.weights_gap = (
            f"the checkpoint stores {plan.label}, which the dry run builds at its stored size; "
            f"the ledger does not model {plan.method} and charges these weights as the spec's "
            f"{spec.weights.format}"
        )


def _tensors_fn(plan: StoredPlan, name: str, kind: str, model_dtype: str):
    if plan.method == "compressed-tensors":
        scheme = _ct_scheme_for(name, plan)
        if scheme is None:
            return None
        return lambda o, i: ct_tensors(scheme, o, i, model_dtype)
    return plan.linear if kind == "linear" else plan.experts
