"""The architecture facts the ledger needs, independent of where they were read from.

An `Architecture` is built from a Hugging Face style config (the built-in catalogue stores
exactly those keys; a local `config.json` is read the same way). `modules()` lists every
parameter-holding module with its shape, so parameter counts, per-group weight formats and
LoRA adapters are all derived from one description.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

# Module groups: the unit at which a spec may choose a weight format.
GROUPS = ("embedding", "lm_head", "attention", "mlp", "experts", "router", "norm", "other")


@dataclass(frozen=True)
class ModuleShape:
    """One kind of parameter-holding module, repeated `count` times in the model.

    `params` is the parameter count of ONE instance (weight + bias, or the whole fused
    tensor). For a linear layer, `in_features`/`out_features` are its matrix shape (for fused
    3-D expert tensors, the shape of one expert's matrix and `count` counts experts x layers).
    `is_nn_linear` is True only for real `nn.Linear` modules: bitsandbytes and PEFT act on those.
    """

    name: str  # Hugging Face leaf name, e.g. "q_proj", "embed_tokens", "input_layernorm"
    kind: str  # "linear" | "embedding" | "norm" | "other"
    group: str  # one of GROUPS
    params: int  # per instance
    count: int  # instances in the whole model
    in_features: int = 0
    out_features: int = 0
    has_bias: bool = False
    is_nn_linear: bool = False
    # transformers' Conv1D (GPT-2 family): a linear layer stored transposed. PEFT adapts it;
    # bitsandbytes does not quantise it.
    is_conv1d: bool = False

    @property
    def lora_adaptable(self) -> bool:
        """PEFT's LoRA wraps nn.Linear and transformers' Conv1D."""
        return self.is_nn_linear or self.is_conv1d

    @property
    def total_params(self) -> int:
        return self.params * self.count


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3) ranks."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None


@dataclass(frozen=True)
class Architecture:
    model_id: str
    model_type: str  # Hugging Face model_type of the text model, e.g. "llama"
    num_layers: int
    hidden_size: int
    intermediate_size: int  # dense MLP width (0 if every layer is MoE)
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    default_dtype: str  # "bf16" | "fp16" | "fp32" (config torch_dtype / dtype)
    max_position_embeddings: int
    gated_mlp: bool = True  # SwiGLU/GeGLU (gate, up, down) vs plain (up, down)
    # Mixture of experts (num_experts == 0: dense model)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0  # per routed expert
    shared_expert_intermediate_size: int = 0  # total width of the shared expert(s), 0 if none
    moe_layers: tuple[bool, ...] = ()  # per layer: True where the MLP is MoE
    # Attention layout per layer: "full", "sliding", or "none" (a layer with no KV cache: a
    # state-space / linear-attention or cross-attention layer)
    layer_attention: tuple[str, ...] = ()
    sliding_window: int | None = None
    mla: MLA | None = None
    quantization_config: dict | None = None  # as the checkpoint's config.json declares it
    source: str = ""  # where these facts came from (catalogue file, config.json path)
    config: dict = field(default_factory=dict, compare=False, repr=False)  # the raw text config
    # How the module structure was obtained: HAND_MODELLED (vramtui.models.structure) or the
    # label of a derivation from transformers (vramtui.models.derive).
    structure: str = "hand-modelled"
    # What the ledger cannot itemise for this family, each a sentence shown with the estimate.
    ledger_notes: tuple[str, ...] = ()
    # Set when the activation formulas do not apply (the reason); the items are then unknown.
    activation_unknown: str = ""
    # Set when the KV cache cannot be worked out (the reason); the item is then unknown.
    kv_unknown: str = ""
    # Fixed-size per-sequence state of state-space / linear-attention layers (RecurrentState).
    state: object | None = None
    # The derived structure (vramtui.models.derive.DerivedStructure) of a family not hand-modelled.
    derived: object | None = field(default=None, compare=False, repr=False)

    def modules(self) -> list[ModuleShape]:
        """Every parameter-holding module (a fresh list; the shapes are derived once)."""
        return list(self._modules)

    @property
    def is_hand_modelled(self) -> bool:
        return self.derived is None

    @cached_property
    def _modules(self) -> tuple[ModuleShape, ...]:
        if self.derived is not None:
            return tuple(self.derived.modules)
        from vramtui.models.structure import modules_of

        return tuple(modules_of(self))

    @cached_property
    def param_count(self) -> int:
        return sum(m.total_params for m in self.modules())

    def params_by_group(self) -> dict[str, int]:
        out = {g: 0 for g in GROUPS}
        for m in self.modules():
            out[m.group] += m.total_params
        return out

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def num_full_attention_layers(self) -> int:
        return (
            sum(1 for t in self.layer_attention if t == "full")
            if self.layer_attention
            else self.num_layers
        )

    @property
    def num_sliding_layers(self) -> int:
        return sum(1 for t in self.layer_attention if t == "sliding")
