"""The data tables the training corpus's rows are sized with (`training_corpus_rows` reads them).

Each table says where its facts come from: model configs standing in for a row's model, the
library versions and settings a framework fixes at the commit a row names, recipe configs, the
Unsloth release each notebook row ran, and the settings the spec cannot express.
"""

from __future__ import annotations

# Row models not found in the catalogue under their own name: (kind, reference, why). "catalogue"
# references a catalogue Hub id; "config" a real config.json under tests/data.
MODEL_SOURCES: dict[str, tuple[str, str, str]] = {
    # Names as the round-5 held-out rows write them (mapped after that half's first run, the
    # clean measurement; the estimator was not changed). Each maps a re-upload, a base or an
    # instruct variant, or a framework's own name to a catalogue model with the same tensors.
    # Round 7 (mapped after held_out_7's clean run): same-tensor names of its rows.
    "NousResearch/Llama-2-7b-hf": (
        "catalogue",
        "meta-llama/Llama-2-7b-hf",
        "NousResearch's re-upload of meta-llama/Llama-2-7b-hf",
    ),
    "mistralai/Mistral-7B-Instruct-v0.1": (
        "catalogue",
        "mistralai/Mistral-7B-v0.1",
        "base and Instruct v0.1 of Mistral 7B publish the same architecture config",
    ),
    "unsloth/gemma-3-4b-pt": (
        "catalogue",
        "google/gemma-3-4b-it",
        "the pre-trained and instruction-tuned Gemma 3 4B share the architecture",
    ),
    "unsloth/gemma-3-27b-it-unsloth-bnb-4bit": (
        "catalogue",
        "google/gemma-3-27b-it",
        "Unsloth's 4-bit upload of google/gemma-3-27b-it",
    ),
    "Qwen/Qwen2.5-7B": (
        "catalogue",
        "Qwen/Qwen2.5-7B-Instruct",
        "base and Instruct of Qwen2.5 7B publish the same architecture config",
    ),
    "Qwen/Qwen2.5-14B": (
        "catalogue",
        "Qwen/Qwen2.5-14B-Instruct",
        "base and Instruct of Qwen2.5 14B publish the same architecture config",
    ),
    "unsloth/Qwen2.5-Coder-7B-Instruct-bnb-4bit": (
        "catalogue",
        "Qwen/Qwen2.5-7B-Instruct",
        "Unsloth's 4-bit upload of Qwen2.5-Coder-7B-Instruct, whose config has Qwen2.5 7B's "
        "shapes (hidden 3584, 28 layers, 28/4 heads, MLP 18944, vocabulary 152064)",
    ),
    "meta-llama/Meta-Llama-3-8B-Instruct": (
        "catalogue",
        "meta-llama/Meta-Llama-3-8B",
        "base and Instruct of Llama 3 8B share the architecture",
    ),
    "Llama 3 8B (torchtitan llama3 flavor 8B)": (
        "catalogue",
        "meta-llama/Meta-Llama-3-8B",
        "torchtitan's llama3 8B flavor (dim 4096, 32 layers, 32/8 heads, ffn multiplier 1.3, "
        "vocabulary 128256) builds Llama 3 8B's tensors",
    ),
    "unsloth/Qwen3-0.6B": ("catalogue", "Qwen/Qwen3-0.6B", "Unsloth's re-upload of Qwen/Qwen3-0.6B"),
    "unsloth/Llama-3.2-1B-Instruct": (
        "catalogue",
        "meta-llama/Llama-3.2-1B-Instruct",
        "Unsloth's re-upload of meta-llama/Llama-3.2-1B-Instruct",
    ),
    "unsloth/Qwen3-4B-Instruct-2507": (
        "catalogue",
        "Qwen/Qwen3-4B",
        "Qwen3-4B-Instruct-2507 keeps Qwen3-4B's tensor shapes (only its RoPE base and context "
        "length differ)",
    ),
    "unsloth/qwen3-14b-unsloth-bnb-4bit": (
        "catalogue",
        "Qwen/Qwen3-14B",
        "Unsloth's 4-bit upload of Qwen/Qwen3-14B",
    ),
    "Qwen/Qwen3-30B-A3B-Base": (
        "catalogue",
        "Qwen/Qwen3-30B-A3B",
        "base and post-trained Qwen3-30B-A3B share the architecture",
    ),
    "Qwen/Qwen3-30B-A3B-Instruct-2507": (
        "catalogue",
        "Qwen/Qwen3-30B-A3B",
        "Qwen3-30B-A3B-Instruct-2507 keeps Qwen3-30B-A3B's tensor shapes",
    ),
    # Names as the round-4 held-out rows write them (mapped after that half's first run; the
    # estimator was not changed).
    "unsloth/gpt-oss-20b": (
        "catalogue",
        "openai/gpt-oss-20b",
        "Unsloth's re-upload of openai/gpt-oss-20b",
    ),
    "unsloth/gpt-oss-120b": (
        "catalogue",
        "openai/gpt-oss-120b",
        "Unsloth's re-upload of openai/gpt-oss-120b",
    ),
    "axolotl-ai-co/gpt-oss-120b-dequantized": (
        "catalogue",
        "openai/gpt-oss-120b",
        "gpt-oss-120b with its MXFP4 experts dequantised: the same tensors, stored as the row states",
    ),
    "unsloth/Qwen3-14B": ("catalogue", "Qwen/Qwen3-14B", "Unsloth's re-upload of Qwen/Qwen3-14B"),
    "Qwen/Qwen2.5-3B": (
        "catalogue",
        "Qwen/Qwen2.5-3B-Instruct",
        "base and Instruct of Qwen2.5 3B publish the same architecture config",
    ),
    # Names as the round-3 held-out rows write them (mapped after that half's first run; the
    # estimator was not changed): Unsloth's re-uploads (unsloth/NAME, `-bnb-4bit` = the same
    # model stored 4-bit; the row states the quantisation) are the official architectures.
    "unsloth/Llama-3.2-3B-Instruct": (
        "catalogue",
        "meta-llama/Llama-3.2-3B-Instruct",
        "Unsloth's re-upload of meta-llama/Llama-3.2-3B-Instruct",
    ),
    "unsloth/Llama-3.3-70B-Instruct": (
        "catalogue",
        "meta-llama/Llama-3.3-70B-Instruct",
        "Unsloth's re-upload of meta-llama/Llama-3.3-70B-Instruct",
    ),
    "unsloth/Meta-Llama-3.1-8B": (
        "catalogue",
        "meta-llama/Llama-3.1-8B-Instruct",
        "Unsloth's re-upload of meta-llama/Llama-3.1-8B-Instruct",
    ),
    "unsloth/Phi-4": ("catalogue", "microsoft/phi-4", "Unsloth's re-upload of microsoft/phi-4"),
    "unsloth/Qwen3-14B-unsloth-bnb-4bit": (
        "catalogue",
        "Qwen/Qwen3-14B",
        "Unsloth's re-upload of Qwen/Qwen3-14B",
    ),
    "unsloth/Qwen3-32B": ("catalogue", "Qwen/Qwen3-32B", "Unsloth's re-upload of Qwen/Qwen3-32B"),
    "unsloth/gemma-3-27b-it": (
        "catalogue",
        "google/gemma-3-27b-it",
        "Unsloth's re-upload of google/gemma-3-27b-it",
    ),
    "unsloth/gemma-3-4b-it": (
        "catalogue",
        "google/gemma-3-4b-it",
        "Unsloth's re-upload of google/gemma-3-4b-it",
    ),
    "unsloth/llama-3-8b-bnb-4bit": (
        "catalogue",
        "meta-llama/Meta-Llama-3-8B",
        "Unsloth's re-upload of meta-llama/Meta-Llama-3-8B",
    ),
    "unsloth/mistral-7b-instruct-v0.3-bnb-4bit": (
        "catalogue",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "Unsloth's re-upload of mistralai/Mistral-7B-Instruct-v0.3",
    ),
    "unsloth/Mistral-Nemo-Base-2407": (
        "catalogue",
        "mistralai/Mistral-Nemo-Instruct-2407",
        "base and Instruct of Mistral Nemo publish the same architecture config",
    ),
    "unsloth/Qwen2.5-7B": (
        "catalogue",
        "Qwen/Qwen2.5-7B-Instruct",
        "base and Instruct of Qwen2.5 7B publish the same architecture config",
    ),
    "unsloth/gemma-2-2b": (
        "catalogue",
        "google/gemma-2-2b-it",
        "base and -it of Gemma 2 2B publish the same architecture config",
    ),
    "unsloth/gemma-2-9b": (
        "catalogue",
        "google/gemma-2-9b-it",
        "base and -it of Gemma 2 9B publish the same architecture config",
    ),
    "unsloth/llama-3-8b-Instruct-bnb-4bit": (
        "catalogue",
        "meta-llama/Meta-Llama-3-8B",
        "base and Instruct of Llama 3 8B publish the same architecture config",
    ),
    "unsloth/mistral-7b-v0.3": (
        "catalogue",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "base and Instruct of Mistral 7B v0.3 publish the same architecture config",
    ),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (
        "catalogue",
        "mistralai/Mixtral-8x7B-v0.1",
        "base and Instruct of Mixtral 8x7B publish the same architecture config",
    ),
    "Mixtral 8x7B": ("catalogue", "mistralai/Mixtral-8x7B-v0.1", "the row's model, named in words"),
    "llama2_7b (Llama-2-7B)": (
        "catalogue",
        "meta-llama/Llama-2-7b-hf",
        "torchtune's llama2_7b builder is Llama 2 7B's architecture",
    ),
    "llama2_7b (torchtune.models.llama2.llama2_7b)": (
        "catalogue",
        "meta-llama/Llama-2-7b-hf",
        "torchtune's llama2_7b builder is Llama 2 7B's architecture",
    ),
    "llama2_7b (torchtune.models.llama2.llama2_7b, Llama-2-7b-hf weights)": (
        "catalogue",
        "meta-llama/Llama-2-7b-hf",
        "torchtune's llama2_7b builder is Llama 2 7B's architecture",
    ),
    "NousResearch/Llama-2-70b-hf": (
        "catalogue",
        "meta-llama/Llama-2-70b-hf",
        "a mirror of Meta's Llama-2-70b-hf",
    ),
    "unsloth/Phi-3.5-mini-instruct": (
        "config",
        "tests/data/hub_configs/microsoft--Phi-3.5-mini-instruct.json",
        "Unsloth's re-upload of microsoft/Phi-3.5-mini-instruct (its published config)",
    ),
    "bigcode/gpt_bigcode-santacoder": (
        "config",
        "tests/data/configs/gpt_bigcode-santacoder.json",
        "its config's structural keys (tests/data/configs/README.md)",
    ),
    # Names as the round-2 held-out rows write them (mapped after that half's first run; the
    # estimator was not changed): torchtitan's llama3 "flavors" are Meta's Llama 3.1 shapes
    # (torchtitan/models/llama3/__init__.py: dim, n_layers, n_heads, n_kv_heads,
    # ffn_dim_multiplier, multiple_of, vocab 128,256: the published configs' tensors).
    "Llama 3.1 8B (torchtitan llama3 flavor 8B)": (
        "catalogue",
        "meta-llama/Llama-3.1-8B-Instruct",
        "torchtitan's llama3 8B flavor builds Llama 3.1 8B's tensors",
    ),
    "Llama 3.1 70B (torchtitan llama3 flavor 70B)": (
        "catalogue",
        "meta-llama/Llama-3.1-70B-Instruct",
        "torchtitan's llama3 70B flavor builds Llama 3.1 70B's tensors",
    ),
    "Llama 3.1 405B (torchtitan llama3 flavor 405B)": (
        "catalogue",
        "meta-llama/Llama-3.1-405B-Instruct",
        "torchtitan's llama3 405B flavor builds Llama 3.1 405B's tensors",
    ),
    "01-ai/Yi-34B (as written: Yi 34B)": ("catalogue", "01-ai/Yi-34B", "the row's model"),
    "meta-llama/Llama-2-70b-hf (as written: Llama-2 70B)": (
        "catalogue",
        "meta-llama/Llama-2-70b-hf",
        "the row's model",
    ),
    "meta-llama/Llama-2-7b (torchtune llama2_7b)": (
        "catalogue",
        "meta-llama/Llama-2-7b-hf",
        "torchtune's llama2_7b builder is Llama 2 7B's architecture",
    ),
    "meta-llama/Llama-3.2-1B": (
        "catalogue",
        "meta-llama/Llama-3.2-1B-Instruct",
        "base and Instruct of Llama 3.2 1B publish the same architecture config",
    ),
    "meta-llama/Llama-3.2-3B": (
        "catalogue",
        "meta-llama/Llama-3.2-3B-Instruct",
        "base and Instruct of Llama 3.2 3B publish the same architecture config",
    ),
    "meta-llama/Llama-3.1-8B": (
        "catalogue",
        "meta-llama/Llama-3.1-8B-Instruct",
        "base and Instruct of Llama 3.1 8B publish the same architecture config",
    ),
    "meta-llama/Meta-Llama-3.1-8B": (
        "catalogue",
        "meta-llama/Llama-3.1-8B-Instruct",
        "the Hub's former name of Llama-3.1-8B; base and Instruct share the architecture",
    ),
    "meta-llama/Llama-3.1-70B": (
        "catalogue",
        "meta-llama/Llama-3.1-70B-Instruct",
        "base and Instruct of Llama 3.1 70B publish the same architecture config",
    ),
    "meta-llama/Llama-3.1-405B": (
        "catalogue",
        "meta-llama/Llama-3.1-405B-Instruct",
        "base and Instruct of Llama 3.1 405B publish the same architecture config",
    ),
    "meta-llama/Llama-2-7b": (
        "catalogue",
        "meta-llama/Llama-2-7b-hf",
        "the original-format release of the same weights (torchtune loads it as Llama-2-7b)",
    ),
    "google/gemma-2-2b": (
        "catalogue",
        "google/gemma-2-2b-it",
        "base and -it of Gemma 2 2B publish the same architecture config",
    ),
    "google/gemma-2-9b": (
        "catalogue",
        "google/gemma-2-9b-it",
        "base and -it of Gemma 2 9B publish the same architecture config",
    ),
    "unsloth/Mistral-7B-v0.2": (
        "catalogue",
        "mistralai/Mistral-7B-v0.1",
        (
            "v0.2 base has v0.1's tensor shapes (hidden 4096, 32 layers, 8 KV heads, intermediate "
            "14336, vocabulary 32000); it differs in rope_theta and sliding window, neither of "
            "which changes memory at these lengths"
        ),
    ),
    "google/gemma-2b": ("config", "tests/data/configs/gemma-2b.json", "its published config"),
    "gemma-2b": ("config", "tests/data/configs/gemma-2b.json", "google/gemma-2b's config"),
    "microsoft/phi-1_5": ("config", "tests/data/configs/phi-1_5.json", "its published config"),
    "microsoft/phi-2": ("config", "tests/data/configs/phi-2.json", "its published config"),
}

# Row GPU names the catalogue's aliases do not spell that way.
GPU_NAMES = {"tesla v100-sxm2 16gb": "v100-16gb"}

# Methods the ledger models; everything else (adapters, prompt tuning, IA3, ...) is counted
# apart as a method vramtui does not size.
TASK_OF_METHOD = {"full": "full_finetune", "lora": "lora", "qlora": "qlora"}

# Precisions that train in pure bf16 (parameters, gradients and optimiser states in the
# parameter dtype, no fp32 master copy): LitGPT's bf16-true, torchtune's dtype bf16, PEFT's
# method-comparison loop with the model in bf16 and use_amp false; the HF Trainer with the
# model loaded in bf16 and neither its bf16 nor fp16 flag (fms-acceleration's full-finetuning
# and standard-peft scenarios at 24bdadb: `torch_dtype: bfloat16`, no `bf16: True`, and
# accelerate.yaml `mixed_precision: 'no'`, so no autocast and no FSDP MixedPrecision: the
# Trainer at transformers 4.48.1 keeps no fp32 copy and torch.optim.AdamW's states take the
# parameters' dtype, `torch.zeros_like(p)`). Round 9: fsdp_qlora's `--precision bf16` as the
# PEFT maintainer's train.py runs it (BenjaminBossan/peft-experiments at e0e5696,
# answerai/llama2-qlora-fsdp/train.py, copied from fsdp_qlora cec4386685: `torch_dtype,
# compute_dtype = torch.bfloat16, torch.bfloat16` and `mp_policy = None`, the README: "dtype:
# bfloat16 (also for LoRA weights)"; the held_out_2 answer.ai rows' "bf16" already read so);
# torchao's low-bit optimizer benchmark (pytorch/ao torchao/optim/README.md at ca17609a: "full
# BF16", torchtune 52d1b838's single-device full fine-tune with dtype bf16).
PURE_BF16 = (
    "bf16-true",
    "bf16",
    "bf16 (dtype: bf16)",
    "bfloat16 (model dtype; use_amp false)",
    "torch_dtype bfloat16 (pure bf16 weights; no mixed precision flag)",
    "bf16 (pure bf16, --precision bf16)",
    "bf16 (full bf16)",
    # round 7 (after held_out_7's clean run): Lightning Thunder's benchmark_litgpt.py
    "bf16 (model.to(torch.bfloat16); no fp32 master copy)",
)

# LitGPT's LoRA flags and torchtune's lora_attn_modules names, by what they adapt.
ATTENTION_INPUTS = ("q_proj", "k_proj", "v_proj")
FUSED_QKV = ("query_key_value", "qkv_proj", "Wqkv", "c_attn")
TARGET_ROLE = {
    "query": "q",
    "key": "k",
    "value": "v",
    "q_proj": "q",
    "k_proj": "k",
    "v_proj": "v",
    "projection": "attn_out",
    "output_proj": "attn_out",
    "mlp": "mlp",
    "head": "head",
    "output": "head",
    # torchtune's FeedForward (torchtune/modules/feed_forward.py): self.w1 = gate_proj,
    # self.w2 = down_proj, self.w3 = up_proj
    "w1": "gate",
    "w2": "down",
    "w3": "up",
}

# Library versions a framework installs at the commit a row names, where the row states none:
# (framework, commit prefix of framework_version) -> {library: version, ...}, with the source.
FRAMEWORK_PINS: dict[tuple[str, str], tuple[dict[str, str], str]] = {
    ("litgpt", "commit 00af8b0d9b"): (
        {"bitsandbytes": "0.42.0"},
        (
            "litgpt pyproject.toml at 00af8b0d9b pins bitsandbytes==0.42.0 (extra 'all'), and "
            "litgpt/finetune/lora.py warns 'LitGPT only supports bitsandbytes v0.42.0' for any other"
        ),
    ),
    ("custom", "fsdp_qlora train.py"): (
        {"bitsandbytes": "0.43.0", "transformers": "4.37.2"},
        (
            "answer.ai fsdp_qlora at e877dda: train.py builds Linear4bit(..., quant_storage="
            "torch_dtype), an argument bitsandbytes has from 0.43.0, and README.md asks for "
            "'bitsandbytes>=0.43.0' and 'transformers!=4.38.*,!=4.39.*'; the benchmarks ran in "
            "February-March 2024, before bitsandbytes 0.43.2 (July 2024) and transformers 4.46 "
            "(October 2024); the ledger uses only 'before 0.43.2' and 'before 4.46'"
        ),
    ),
}

# Framework settings that differ at the commit a row names from the profile's version:
# (framework, commit prefix of framework_version) -> ({setting: value}, source).
FRAMEWORK_AT_COMMIT: dict[tuple[str, str], tuple[dict[str, str], str]] = {
    ("litgpt", "commit 00af8b0d9b"): (
        {"fsdp_frozen_base": "sharded"},
        (
            "litgpt/finetune/lora.py at 00af8b0d9b wraps FSDPStrategy(auto_wrap_policy={Block}): "
            "each unit is a whole Block holding its LoRA parameters, so every unit has a "
            "trainable parameter and is resharded by its post-backward hook (the profile's "
            "'gathered' is 0.5.10's per-Linear wrap)"
        ),
    ),
}

# Settings a framework fixes for every config at the commit a row names, taken where the row
# leaves them unstated (listed among the row's defaults, with the source):
# (framework, commit prefix) -> [(setting, value, applies to n_gpus > 1 only, source)].
FRAMEWORK_DEFAULTS: dict[tuple[str, str], list[tuple[str, str, bool, str]]] = {
    ("torchtune", "commit 0217d44c2e"): [
        (
            "precision",
            "bf16",
            False,
            (
                "every recipe config at 0217d44c2e sets dtype: bf16 (the model, gradients and "
                "optimiser states in bf16, no fp32 master)"
            ),
        ),
        (
            "sharding",
            "fsdp",
            True,
            (
                "recipes/lora_finetune_distributed.py and full_finetune_distributed.py at "
                "0217d44c2e wrap the model in FSDP(sharding_strategy=ShardingStrategy.FULL_SHARD)"
            ),
        ),
    ],
}

# The device count a row's run used, where its settings_source (the config file the source
# says the run used) states `devices` and the row's machine has more GPUs than that. LitGPT's
# config hub at 00af8b0d9b: config_hub/finetune/README.md says "All runs are single-GPU
# experiments, use `--devices 4` to utilize more than one GPU", i.e. the runs used each YAML as
# it is; the 4xA10G rows of a YAML with `devices: 1` report the 1xA10G run's peak and runtime.
# litgpt/finetune/lora.py and full.py at that commit pick FSDPStrategy only when
# `devices * num_nodes > 1`, strategy "auto" (one device, nothing sharded) otherwise.
LITGPT_HUB_00AF8B0 = (
    "https://github.com/Lightning-AI/litgpt/blob/00af8b0d9b43eaa3f8c812e3e8bd53ef38cbb49d/"
    "config_hub/finetune/"
)

# `devices:` of every config hub YAML at 00af8b0d9b that is not 1 (all lora.yaml and
# qlora.yaml files, and the full.yaml of llama-3.2-1B, llama-3.2-3B, phi-3 and tiny-llama, say 1).
HUB_DEVICES_NOT_ONE = {
    "gemma-2b/full.yaml": 4,
    "llama-2-7b/full.yaml": 4,
    "llama-3-8b/full.yaml": 4,
    "llama-3.1-8b/full.yaml": 4,
    "phi-2/full.yaml": 2,
    "stablelm-base-alpha-3b/full.yaml": 2,
}

# The recipe config a row's run used where its source names the recipes but not the file:
# torchtune's README at 0217d44c2e says "This table captures the peak memory usage and training
# speed for recipes in torchtune"; for each (model, method, one GPU or several) of its table,
# recipes/configs/ at that commit holds exactly one config, whose settings are taken where the
# row states none (the row stays under-specified; its batch and length are the table's).
# (framework, commit prefix, model, method, distributed) -> (config, {setting: value}).
_TT = "recipes/configs/llama2/"
RECIPE_CONFIGS: dict[tuple[str, str, str, str, bool], tuple[str, dict]] = {
    ("torchtune", "commit 0217d44c2e", "meta-llama/Llama-2-7b-hf", "qlora", False): (
        _TT + "7B_qlora_single_device.yaml",
        {
            "lora_targets": ["q_proj", "v_proj", "k_proj", "output_proj", "mlp"],
            "lora_r": 8,
            "lora_alpha": 16,
            "optimizer": "torch.optim.AdamW",
            "loss": "torch.nn.CrossEntropyLoss",
            "grad_checkpointing": True,
        },
    ),
    ("torchtune", "commit 0217d44c2e", "meta-llama/Llama-2-7b-hf", "lora", False): (
        _TT + "7B_lora_single_device.yaml",
        {
            "lora_targets": ["q_proj", "v_proj"],
            "lora_r": 8,
            "lora_alpha": 16,
            "optimizer": "torch.optim.AdamW",
            "loss": "torch.nn.CrossEntropyLoss",
            "grad_checkpointing": True,
        },
    ),
    ("torchtune", "commit 0217d44c2e", "meta-llama/Llama-2-7b-hf", "lora", True): (
        _TT + "7B_lora.yaml",
        {
            "lora_targets": ["q_proj", "v_proj"],
            "lora_r": 8,
            "lora_alpha": 16,
            "optimizer": "torch.optim.AdamW",
            "loss": "torch.nn.CrossEntropyLoss",
            "grad_checkpointing": False,
        },
    ),
    ("torchtune", "commit 0217d44c2e", "meta-llama/Llama-2-7b-hf", "full", False): (
        _TT + "7B_full_low_memory.yaml",
        {
            "optimizer": "bitsandbytes.optim.PagedAdamW",
            "optimizer_in_bwd": True,
            "loss": "torch.nn.CrossEntropyLoss",
            "grad_checkpointing": True,
        },
    ),
    ("torchtune", "commit 0217d44c2e", "meta-llama/Llama-2-7b-hf", "full", True): (
        _TT + "7B_full.yaml",
        {
            "optimizer": "torch.optim.AdamW",
            "loss": "torch.nn.CrossEntropyLoss",
            "grad_checkpointing": True,
        },
    ),
    ("torchtune", "commit 0217d44c2e", "meta-llama/Llama-2-70b-hf", "lora", True): (
        _TT + "70B_lora.yaml",
        {
            "lora_targets": ["q_proj", "v_proj", "k_proj"],
            "lora_r": 16,
            "lora_alpha": 32,
            "optimizer": "torch.optim.AdamW",
            "loss": "torch.nn.CrossEntropyLoss",
            "grad_checkpointing": True,
        },
    ),
}

# The Unsloth release each notebook row ran, from the banner its training cells printed at the
# commit the row's source_url names ("Unsloth 2024.5 patched 32 layers with ...", "Unsloth: Fast
# Llama patching release 2024.5"); the rows' [settings] state no library version.
UNSLOTH_BANNER_VERSIONS = {
    "unsloth-notebook-codegemma-7b-conversational": "2024.4",
    "unsloth-notebook-ernie-4-5-21b-a3b-pt-conversational": "2025.11.3",
    "unsloth-notebook-gemma2-2b-alpaca": "2024.8",
    "unsloth-notebook-gemma2-9b-alpaca": "2024.7",
    "unsloth-notebook-gemma3-27b-a100-conversational": "2025.9.1",
    "unsloth-notebook-gemma3-4b": "2025.3.14",
    "unsloth-notebook-granite4.0": "2025.9.11",
    "unsloth-notebook-lfm2.5-1.2b-conversational": "2025.12.8",
    "unsloth-notebook-llama3-8b-alpaca": "2024.5",
    "unsloth-notebook-llama3-8b-conversational": "2024.5",
    "unsloth-notebook-llama3-8b-ollama": "2024.9",
    "unsloth-notebook-llama3.1-8b-alpaca": "2024.8",
    "unsloth-notebook-llama3.2-1b-and-3b-conversational": "2024.10.0",
    "unsloth-notebook-llama3.3-70b-a100-conversational": "2025.9.1",
    "unsloth-notebook-magistral-24b-reasoning-conversational": "2025.6.1",
    "unsloth-notebook-mistral-7b-text-completion": "2024.5",
    "unsloth-notebook-mistral-nemo-12b-alpaca": "2024.7",
    "unsloth-notebook-mistral-small-22b-alpaca": "2024.9",
    "unsloth-notebook-mistral-v0.3-7b-alpaca": "2024.5",
    "unsloth-notebook-mistral-v0.3-7b-conversational": "2024.5",
    "unsloth-notebook-phi-3-medium-conversational": "2024.5",
    "unsloth-notebook-phi-3.5-mini-conversational": "2024.8",
    "unsloth-notebook-phi-4-conversational": "2025.1.5",
    "unsloth-notebook-qwen2-7b-alpaca": "2024.6",
    "unsloth-notebook-qwen2.5-7b-alpaca": "2024.9",
    "unsloth-notebook-qwen2.5-coder-14b-conversational": "2024.11.6",
    "unsloth-notebook-qwen3-14b-alpaca": "2025.4.4",
    "unsloth-notebook-qwen3-32b-a100-reasoning-conversational": "2025.9.1",
    "unsloth-notebook-tinyllama-1.1b-alpaca": "2024.1",
}

# Stated settings that change memory and that the spec cannot express: sized without them,
# each listed as an approximation of the row (never dropped silently).
UNMODELLED_SETTINGS = {
    "float8_linear": "float8 linear layers are not in the spec: sized in the stated precision",
    "async_tp": "asynchronous tensor parallelism's buffers are not itemised",
    "pp_schedule": "the pipeline schedule's in-flight micro-batches are not itemised",
    "use_dora": "DoRA's magnitude vectors and extra activations are not itemised",
    "num_virtual_tokens": "prefix/prompt tuning is sized as LoRA would not be: not itemised",
    "tiled_mlp": "ArcticTraining's tiled MLP (the MLP computed in sequence tiles) is not itemised",
    "activation_checkpoint_cpu_offload": (
        "checkpointed activations offloaded to the CPU (ArcticTraining) are not mapped: sized on "
        "the GPU"
    ),
    "dora": "DoRA's magnitude vectors and extra activations are not itemised",
    # round 10: a compiler fuses and frees tensors its own way (Inductor, Thunder, CUDA graphs'
    # static pools); the ledger sizes the eager model
    "compile": "a compiled model (Inductor, Thunder, CUDA graphs) is sized as the eager one",
}


# Sequence caps a framework applies to the row's max_seq_length: (framework, framework_version
# substring, model) -> (the length the run trained at, why).
# fms-hf-tuning 2.5.0 (fms-acceleration's refs/requirements.txt at 24bdadb pins it)
# tuning/data/setup_dataprocessor.py process_dataargs:
#     max_seq_length = min(train_args.max_seq_length, tokenizer.model_max_length)
# and tuning/sft_trainer.py train() puts the result back into train_args.max_seq_length, which
# SFTConfig (TRL 0.13.0 packing) packs to. The cap is the tokenizer's model_max_length, not the
# model's n_positions. Santacoder's tokenizer config is not read here; the reference CSV's own
# columns give the length trained: train_tokens_per_second / train_samples_per_second on one GPU
# is 2,048 for every santacoder row (17,188.262 / 8.393, 18,410.851 / 8.99) and 4,096 for every
# Mistral-7B row (3,062.694 / 0.748), with the same benchmark.py max_seq_len 4,096.
SEQ_LEN_CAPS: dict[tuple[str, str, str], tuple[int, str]] = {
    ("hf-trainer", "fms-hf-tuning", "bigcode/gpt_bigcode-santacoder"): (
        2048,
        "fms-hf-tuning 2.5.0 process_dataargs: max_seq_length = min(train_args.max_seq_length, "
        "tokenizer.model_max_length); the CSV's train_tokens_per_second / "
        "train_samples_per_second is 2,048 tokens a sample for santacoder",
    ),
}
SEQ_LEN_CAPS[("accelerate-fsdp", "fms-hf-tuning", "bigcode/gpt_bigcode-santacoder")] = (
    SEQ_LEN_CAPS[("hf-trainer", "fms-hf-tuning", "bigcode/gpt_bigcode-santacoder")]
)

# torchtitan commits whose loss is compiled under training.compile (rows' framework_version
# prefix): components/loss.py at e7c0cae build_cross_entropy_loss wraps cross_entropy(pred.
# flatten(0, 1).float(), ...) in torch.compile when job_config.training.compile; at 9dec370
# train.py leaves it eager ("compiling loss function causes CUDA errors, turning off for now").
TORCHTITAN_COMPILED_LOSS = "torchtitan e7c0cae"

# Axolotl commits (rows' framework_version prefix) whose QLoRA loader leaves the norms fp32:
# src/axolotl/utils/models.py load_model at dc71d8872a calls prepare_model_for_kbit_training
# for adapter qlora + load_in_4bit and converts nothing back (78b9efb7f added the conversion for
# flash attention on llama-derived models later that day; v0.5.0 does it for every LoRA/QLoRA
# adapter, loaders/model.py at 17fc747f99 too).
AXOLOTL_NORMS_LEFT_FP32 = "commit dc71d8872a"
