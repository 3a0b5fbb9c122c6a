"""Training frameworks: profiles, overrides, and each mechanism worked by hand from the
framework's code (the cited file and line in each test's docstring)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vramtui.errors import SpecError
from vramtui.ledger import GpuLayout, estimate
from vramtui.ledger.context import LedgerContext
from vramtui.ledger.training_activations import lora_layer_bytes, training_layer_bytes
from vramtui.measure.compare import compare
from vramtui.models.resolve import resolve_model_ref
from vramtui.spec import FRAMEWORKS, ModelRef, dumps_spec, loads_spec
from vramtui.training_profiles import (
    SPEC_OVERRIDES,
    framework_settings,
    load_profile,
    version_tuple,
)

L1B = "meta-llama/Llama-3.2-1B-Instruct"  # hidden 2048, 16 layers, 32/8 heads, MLP 8192
L8B = "meta-llama/Llama-3.1-8B-Instruct"  # 8,030,261,248 parameters
L405B = "meta-llama/Llama-3.1-405B-Instruct"
VOCAB = 128_256


def _arch(model_id: str):
    return resolve_model_ref(ModelRef(id=model_id), None, None).arch


def _spec(
    *,
    model=L1B,
    kind="lora",
    fmt="bf16",
    seq=512,
    mb=8,
    ga=1,
    training="",
    optimizer="adamw",
    ckpt="none",
    gpus=1,
    sharding="none",
    lora='rank = 16\ntargets = ["all-linear"]\ndropout = 0.05',
    measured="",
):
    dq = "double_quant = true" if fmt in ("nf4", "fp4") else ""
    master = "true" if kind == "full_finetune" else "false"
    lora_table = f"[task.lora]\n{lora}" if kind != "full_finetune" else ""
    return loads_spec(
        f"""schema_version = 1
[model]
id = "{model}"
[task]
kind = "{kind}"
{lora_table}
[weights]
format = "{fmt}"
{dq}
[lengths]
seq_len = {seq}
[batch]
micro_batch = {mb}
grad_accum = {ga}
[training]
optimizer = "{optimizer}"
master_weights_fp32 = {master}
grad_dtype = "bf16"
grad_checkpointing = "{ckpt}"
{training}
[runtime]
attention = "sdpa"
[placement]
gpus = {gpus}
data_parallel_sharding = "{sharding}"
[headroom]
mode = "itemised"
{measured}
"""
    )


def _ctx(spec, model=L1B):
    p = spec.placement
    return LedgerContext(
        spec=spec,
        arch=_arch(model),
        checkpoint=None,
        layout=GpuLayout(p.gpus, p.tensor_parallel, p.pipeline_parallel),
    )


def _item(est, key):
    return next(i for i in est.items if i.key == key)


# --------------------------------------------------------------------------- profiles


def test_every_framework_has_a_profile_with_a_source_for_each_default():
    for name in FRAMEWORKS:
        p = load_profile(name)
        assert p.name == name
        for key in SPEC_OVERRIDES:
            assert p.sources[key].strip(), (name, key)


@pytest.mark.parametrize(
    ("framework", "adapter", "loss", "fsdp", "expand"),
    [
        ("hf-trainer", "fp32", "full-upcast", "sharded", False),
        ("litgpt", "bf16", "chunked-bf16", "gathered", True),
        ("torchtune", "bf16", "chunked-fp32", "sharded", True),
        ("unsloth", "fp32", "fused", "sharded", False),
        ("lightning-fabric", "fp32", "full-upcast", "gathered", False),
    ],
)
def test_defaults_per_framework(framework, adapter, loss, fsdp, expand):
    fw = framework_settings(_spec(training=f'framework = "{framework}"'))
    assert (fw.adapter_dtype, fw.loss_impl, fw.fsdp_frozen_base, fw.gqa_expand_kv) == (
        adapter,
        loss,
        fsdp,
        expand,
    )
    assert fw.overridden == frozenset()


def test_framework_absent_is_hf_trainer_said_as_a_default():
    spec = _spec()
    fw = framework_settings(spec)
    assert fw.framework == "hf-trainer" and fw.framework_is_default
    note = next(n for n in estimate(spec, _arch(L1B)).notes if n.startswith("training framework"))
    assert "hf-trainer (the default" in note
    assert "adapter_dtype = fp32 (default)" in note


def test_overrides_win_over_the_profile():
    spec = _spec(training='framework = "litgpt"\nadapter_dtype = "fp32"\nloss_impl = "fused"')
    fw = framework_settings(spec)
    assert fw.adapter_dtype == "fp32" and fw.loss_impl == "fused"
    assert fw.origin("adapter_dtype") == "set in the spec"
    assert fw.gqa_expand_kv is True  # not overridden: still LitGPT's
    assert "litgpt default" in fw.origin("gqa_expand_kv")
    est = estimate(spec, _arch(L1B))
    assert "adapter_dtype = fp32 (set in the spec)" in est.notes[-1]


def test_unknown_framework_and_bad_version_are_one_line_errors():
    with pytest.raises(
        SpecError, match="training.framework must be one of .*did you mean 'litgpt'"
    ):
        _spec(training='framework = "litgtp"')
    with pytest.raises(SpecError, match=r"training.versions.bitsandbytes must be a version"):
        _spec(training='[training.versions]\nbitsandbytes = "latest"')
    with pytest.raises(SpecError, match="did you mean 'training.versions.peft'"):
        _spec(training='[training.versions]\npeftt = "0.12.0"')


def test_in_backward_refuses_gradient_accumulation():
    """torchtune's recipes raise when optimizer_in_bwd is set with gradient accumulation."""
    with pytest.raises(SpecError, match="optimizer_placement = 'in-backward'.*grad_accum is 4"):
        _spec(kind="full_finetune", ga=4, training='optimizer_placement = "in-backward"')


def test_framework_fields_round_trip_through_toml():
    spec = _spec(
        training='framework = "torchtune"\nno_sync = false\n'
        '[training.versions]\nbitsandbytes = "0.43.1"\npeft = "0.12.0"'
    )
    again = loads_spec(dumps_spec(spec))
    assert again.training == spec.training
    assert dict(again.training.versions) == {"bitsandbytes": "0.43.1", "peft": "0.12.0"}


def test_version_tuple():
    assert version_tuple("0.43.1") == (0, 43, 1)
    assert version_tuple("0.44.0.dev0") == (0, 44, 0)
    assert version_tuple("0.43.2") > version_tuple("0.43.1")


# --------------------------------------------------------------------------- regression


def test_explicit_hf_trainer_is_exactly_the_default():
    for kwargs in (
        {"kind": "lora"},
        {"kind": "qlora", "fmt": "nf4", "ga": 4},
        {"kind": "full_finetune", "gpus": 4, "sharding": "zero3", "ga": 8, "ckpt": "full"},
    ):
        a = estimate(_spec(**kwargs), _arch(L1B))
        b = estimate(_spec(training='framework = "hf-trainer"', **kwargs), _arch(L1B))
        assert [(i.key, dict(i.stage_bytes)) for i in a.items] == [
            (i.key, dict(i.stage_bytes)) for i in b.items
        ]


def test_hf_trainer_loss_is_the_full_fp32_upcast():
    """transformers loss_utils.py ForCausalLMLoss: logits.float() then cross_entropy:
    bf16 logits 2 B + fp32 copy 4 B + log-softmax 4 B = 10 B per logit forward."""
    est = estimate(_spec(mb=2, seq=2048), _arch(L1B))
    logits = 2 * 2048 * VOCAB  # 525,336,576
    assert _item(est, "logits.training").stage_bytes["forward"] == logits * 10


# --------------------------------------------------------------------------- loss


def test_chunked_loss_torchtune_and_litgpt_by_hand():
    """torchtune cross_entropy_loss.py LinearCrossEntropyLoss.compute_cross_entropy:
    F.cross_entropy(logits.float(), ...) per chunk of 8: each chunk's fp32 log-softmax (4 B)
    is saved; at the last chunk its bf16 logits and fp32 upcast (2 + 4 B) live too:
    4 + 6/8 = 4.75 B per logit. The loss backward: 4 B saved + one chunk's grads
    (4 + 4 + 2)/8 = 5.25 B.
    LitGPT utils.py chunked_cross_entropy: cross_entropy on each chunk (no .float()), the
    logits list kept until fabric.backward returns; the chunks are fp32, not bf16: Fabric's
    _FabricModule.forward runs precision.convert_output(output), which for bf16-true
    (HalfPrecision) casts every floating output to torch.get_default_dtype(), fp32: 4 B fp32
    logits + 4 B fp32 log-softmax = 8 B."""
    logits = 2 * 2048 * VOCAB  # 525,336,576
    tt_spec = _spec(mb=2, seq=2048, training='framework = "torchtune"')
    tt = estimate(tt_spec, _arch(L1B))
    assert _item(tt, "logits.training").stage_bytes["forward"] == logits * 19 // 4  # 4.75 B
    points = {p.label: p for p in _walk(tt_spec)}
    assert points["the loss backward"].logits == logits * 21 // 4  # 5.25 B
    lit = estimate(_spec(mb=2, seq=2048, training='framework = "litgpt"'), _arch(L1B))
    assert _item(lit, "logits.training").stage_bytes["forward"] == logits * 8
    assert "cast to fp32" in _item(lit, "logits.training").name
    # 2 x 2,048 x 128k: 6.3 GB charged by hf-trainer (12 B) against LitGPT's 4.2 GB (8 B)
    hf = {p.label: p for p in _walk(_spec(mb=2, seq=2048))}
    assert hf["the loss backward"].logits == logits * 12


def test_fused_loss_holds_no_logits():
    est = estimate(_spec(mb=2, seq=2048, training='framework = "unsloth"'), _arch(L1B))
    assert _item(est, "logits.training").stage_bytes["forward"] == 0


def _walk(spec):
    from vramtui.ledger.training_activations import backward_walk

    return backward_walk(_ctx(spec)).points


# --------------------------------------------------------------------------- adapter dtype


def test_adapter_dtype_peft_fp32_vs_litgpt_bf16_by_hand():
    """PEFT lora/layer.py Linear.forward: each adapted module casts x to the fp32 adapters and
    applies its own dropout: mask 1 B + fp32 output 4 B = 5 B per input value, each module;
    lora_A's output r x 4 B. LitGPT lora.py LoRAQKVLinear.forward: one lora_dropout(x) for the
    fused q, k, v (bf16: 2 B + mask 1 B = 3 B), lora_A's output r x 2 B.

    Llama-3.2-1B, all-linear r=16, 8 x 512 = 4,096 tokens, per layer:
    inputs q, k, v, o, gate, up 2,048 each, down 8,192.
    PEFT:   (5 x (6 x 2,048 + 8,192) + 7 x 16 x 4) x 4,096 = 102,848 x 4,096 = 421,265,408 B
    LitGPT: (3 x (2,048 [qkv once] + 3 x 2,048 + 8,192) + 7 x 16 x 2) x 4,096
            = 49,376 x 4,096 = 202,244,096 B
    """
    tokens = 8 * 512
    peft, _ = lora_layer_bytes(_ctx(_spec()), tokens)
    lit, why = lora_layer_bytes(_ctx(_spec(training='framework = "litgpt"')), tokens)
    assert peft == 421_265_408
    assert lit == 202_244_096
    assert "fused q, k, v" in why
    # adapters themselves: 11,272,192 LoRA parameters (704,512 per layer x 16) x 4 B vs 2 B
    a = estimate(_spec(), _arch(L1B))
    b = estimate(_spec(training='framework = "litgpt"'), _arch(L1B))
    assert _item(a, "adapter").stage_bytes["forward"] == 11_272_192 * 4
    assert _item(b, "adapter").stage_bytes["forward"] == 11_272_192 * 2


# --------------------------------------------------------------------------- bitsandbytes


def test_old_bitsandbytes_keeps_every_4bit_input_by_hand():
    """bitsandbytes autograd/_functions.py MatMul4Bit.forward: 0.43.1 `ctx.tensors = (A, B)`
    (the input kept), 0.43.2 `ctx.tensors = (None, B)` (PR #1270, commit 9e75374).
    Per layer, one tensor per distinct input: normed attention input and normed MLP input
    (2 x 2,048) and down_proj's input (8,192), bf16, over 4,096 tokens:
    (4,096 + 8,192) x 2 x 4,096 = 100,663,296 B (o_proj's input is the attention output,
    already saved by the attention kernel)."""
    kw = {"kind": "qlora", "fmt": "nf4"}
    new, _ = training_layer_bytes(_ctx(_spec(**kw)), 8, 512)
    fixed, _ = training_layer_bytes(
        _ctx(_spec(training='[training.versions]\nbitsandbytes = "0.43.2"', **kw)), 8, 512
    )
    old, why = training_layer_bytes(
        _ctx(_spec(training='[training.versions]\nbitsandbytes = "0.43.1"', **kw)), 8, 512
    )
    assert fixed == new
    assert old - new == 100_663_296
    assert "0.43.1 < 0.43.2" in why


# --------------------------------------------------------------------------- optimiser


def _paged_spec(placement: str, measured: str = ""):
    return _spec(training=f'optimizer_placement = "{placement}"', measured=measured)


MEASURED = """
[[measured]]
stage = "backward"
quantity = "max_memory_allocated"
counter = "torch.cuda.max_memory_allocated"
bytes = 9000000000
[[measured]]
stage = "backward"
quantity = "nvml_used"
counter = "nvmlDeviceGetMemoryInfo used"
bytes = 9000000000
"""


def test_paged_optimiser_is_seen_by_nvml_only_by_hand():
    """bitsandbytes optim/optimizer.py get_state_buffer: `if not self.is_paged or p.numel() <
    1e5: torch.zeros_like(...)` else F.get_paged (cudaMallocManaged, outside PyTorch).
    LoRA r=16 all-linear on Llama-3.2-1B: the tensors of at least 100,000 values are down's
    A (16 x 8,192) and gate's and up's B (8,192 x 16): 3 x 131,072 x 16 layers = 6,291,456
    values; paged AdamW 32-bit: 2 states x 4 B = 50,331,648 B in managed memory."""
    paged = estimate(_paged_spec("paged", MEASURED), _arch(L1B))
    item = _item(paged, "optimizer.paged")
    assert item.stage_bytes["backward"] == 50_331_648
    assert item.seen_by == ("process_in_use", "nvml_used")
    # the rest stays in PyTorch's allocator: 11,272,192 x 8 B - 50,331,648
    assert _item(paged, "optimizer").stage_bytes["backward"] == 11_272_192 * 8 - 50_331_648
    std = estimate(_paged_spec("standard", MEASURED), _arch(L1B))
    cp, cs = (
        compare(_paged_spec("paged", MEASURED), paged),
        compare(_paged_spec("standard", MEASURED), std),
    )
    assert cp[0].estimate_bytes == cs[0].estimate_bytes - 50_331_648  # max_memory_allocated
    assert cp[1].estimate_bytes == cs[1].estimate_bytes  # NVML sees the managed memory
    assert "seen by NVML only" in str(cp[0].scope)


def test_optimizer_in_backward_never_holds_all_gradients_by_hand():
    """torchtune full_finetune_single_device.py optimizer_in_bwd: a post-accumulate-grad hook
    steps each parameter and frees its gradient. Llama-3.2-1B full fine-tune: the largest
    parameter is the tied embedding, 128,256 x 2,048 = 262,668,288 values x 2 B bf16."""
    spec = _spec(kind="full_finetune", training='optimizer_placement = "in-backward"')
    est = estimate(spec, _arch(L1B))
    grads = _item(est, "gradients")
    assert grads.stages == ("backward",)
    assert grads.stage_bytes["backward"] == 262_668_288 * 2
    assert not any(i.key == "transient.optimizer_step" for i in est.items)


def test_cpu_offload_keeps_states_off_the_gpu():
    spec = _spec(kind="full_finetune", training='optimizer_placement = "cpu-offload"')
    est = estimate(spec, _arch(L1B))
    assert _item(est, "optimizer").max_bytes == 0
    assert _item(est, "master_weights").max_bytes == 0


# --------------------------------------------------------------------------- FSDP


def test_fsdp_no_sync_holds_unsharded_gradients_by_hand():
    """transformers trainer.py: accelerator.no_sync(model) on every micro-batch but the last
    (not for DeepSpeed); FSDP1 no_sync keeps unsharded gradients. Llama-3.1-8B full fine-tune
    on 4 GPUs, grad_accum 4: every rank holds 8,030,261,248 x 2 B = 16,060,522,496 B of
    gradients; DeepSpeed's partitioned buffers: a quarter, 4,015,130,624 B."""
    kw = {"model": L8B, "kind": "full_finetune", "gpus": 4, "sharding": "fsdp", "ga": 4}
    kw |= {"mb": 1, "seq": 2048, "ckpt": "full"}
    fsdp = estimate(_spec(**kw), _arch(L8B))
    ds = estimate(_spec(training='framework = "deepspeed"', **kw), _arch(L8B))
    assert max(_item(fsdp, "gradients").rank_bytes_at("forward", fsdp.layout)) == 16_060_522_496
    assert max(_item(ds, "gradients").rank_bytes_at("forward", ds.layout)) == 4_015_130_624
    # the real out-of-memory runs: 8B full fine-tune on 4 x 24 GB does not fit
    assert fsdp.peak_bytes > 24 * 10**9


def test_litgpt_fsdp_frozen_base_is_whole_on_every_rank_by_hand():
    """litgpt 0.5.10 finetune/lora.py FSDPStrategy(auto_wrap_policy={torch.nn.Linear}): each
    frozen Linear is its own FSDP unit; torch fsdp _runtime_utils.py _register_post_backward_hook
    returns early for a flat parameter without requires_grad, so those units are resharded only
    by _catch_all_reshard at the end of the backward: at the backward's peak every rank holds the
    full bf16 weights, 8,030,261,248 x 2 = 16,060,522,496 B, on 2 GPUs as on 1."""
    kw = {"model": L8B, "gpus": 2, "sharding": "fsdp", "mb": 1, "seq": 2048, "ckpt": "full"}
    lit = estimate(_spec(training='framework = "litgpt"', **kw), _arch(L8B))
    weights = sum(
        i.rank_bytes_at("backward", lit.layout)[0]
        for i in lit.items
        if i.category in ("weights", "quant_metadata")
    )
    extra = _item(lit, "transient.fsdp_frozen_unsharded").rank_bytes_at("backward", lit.layout)[0]
    assert weights + extra == 16_060_522_496
    hf = estimate(_spec(**kw), _arch(L8B))
    assert not any(i.key == "transient.fsdp_frozen_unsharded" for i in hf.items)


def test_zero3_gather_of_a_frozen_nf4_base_is_two_nf4_layers_by_hand():
    """A frozen 4-bit base: the gathered unit is the stored layer, with no gradient.
    Llama-3.1-405B layer: 570,425,344 attention + 2,617,245,696 MLP = 3,187,671,040 values;
    NF4 0.5 B = 1,593,835,520 B; double-quant metadata 1 B per 64 values = 49,807,360 B + one
    fp32 per 256 blocks = 778,240 B; two bf16 norms 65,536 B: 1,644,486,656 B. LoRA r=16
    all-linear adapters per layer: 4,947,968 x 4 B = 19,791,872 B, and as much of gradients.
    2 x (1,644,486,656 + 2 x 19,791,872) = 3,368,140,800 B (not 25.5 GB of bf16 layers)."""
    spec = _spec(model=L405B, kind="qlora", fmt="nf4", gpus=8, sharding="zero3", mb=1)
    est = estimate(spec, _arch(L405B))
    gather = _item(est, "transient.zero3_gather").stage_bytes["backward"]
    assert gather == pytest.approx(3_368_140_800, rel=1e-5)
    # adapters sharded by ZeRO-3 like every parameter
    adapter = _item(est, "adapter")
    assert adapter.rank_bytes_at("forward", est.layout)[0] == -(-adapter.max_bytes // 8)


def test_gqa_expansion_saves_k_and_v_for_every_head_by_hand():
    """litgpt model.py CausalSelfAttention: k.repeat_interleave(q_per_kv, dim=1) when
    n_query_groups != n_head. Llama-3.2-1B: K and V saved at 32 heads x 64 instead of 8 x 64:
    2 x (2,048 - 512) x 2 B x 4,096 tokens = 25,165,824 B more per layer."""
    base, _ = training_layer_bytes(_ctx(_spec(training="gqa_expand_kv = false")), 8, 512)
    expanded, why = training_layer_bytes(_ctx(_spec(training="gqa_expand_kv = true")), 8, 512)
    assert expanded - base == 25_165_824
    assert "expanded to every query head" in why


def test_replace_keeps_framework_fields():
    spec = _spec(training='framework = "litgpt"')
    assert replace(spec.training, optimizer="sgd").framework == "litgpt"


def test_form_offers_the_framework_and_shows_defaults_as_defaults():
    from vramtui.spec_fields import FIELDS_BY_PATH, fields_for

    form = {"task": {"kind": "lora"}, "training": {}}
    paths = [f.path for f in fields_for(form)]
    assert "training.framework" in paths and "training.loss_impl" in paths
    assert "training.framework" not in [f.path for f in fields_for({"task": {"kind": "inference"}})]
    fw = FIELDS_BY_PATH["training.framework"]
    assert fw.optional and fw.default(form) == "hf-trainer"
    adapter = FIELDS_BY_PATH["training.adapter_dtype"]
    assert adapter.default(form) == "fp32"
    assert adapter.default({"training": {"framework": "litgpt"}}) == "bf16"
    assert FIELDS_BY_PATH["training.loss_impl"].default(
        {"training": {"framework": "torchtune"}}
    ) == ("chunked-fp32")
