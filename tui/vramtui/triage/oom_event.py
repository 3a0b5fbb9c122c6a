"""What the triage reader returns: one out-of-memory event (`OomEvent`: the framework that
printed it, its kind, the message, every figure in bytes and as written) and the reading of a
whole paste (`TriageReading`: the events, the one acted on, the stage, or why the text is not an
out-of-memory error), with the vocabularies of frameworks and kinds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vramtui.triage.phase import PhaseVerdict

FRAMEWORKS = (
    "pytorch",
    "rocm",
    "xpu",
    "mps",
    "cuda",
    "cublas",
    "vllm",
    "tgi",
    "accelerate",
    "deepspeed",
    "llama.cpp",
    "ollama",
    "comfyui",
    "tensorflow",
    "jax",
    "xla",
    "tensorrt",
    "tensorrt-llm",
    "ctranslate2",
    "onnxruntime",
    "lmdeploy",
    "mlx",
    "vulkan",
    "tinygrad",
    "nnabla",
    "directml",
    "metal",
    "openvino",
    "paddle",
    "rmm",
    "physx",
    "npu",
    "cupy",
    # no engine printed the error: the reporter's words name it (kind "reported")
    "unknown",
)
# Frameworks whose GPU memory is PyTorch's CUDA/HIP caching allocator, the one that
# PYTORCH_CUDA_ALLOC_CONF (PYTORCH_HIP_ALLOC_CONF on ROCm) tunes. XPU and MPS have allocators of
# their own, and so have TensorFlow, JAX, TensorRT, CTranslate2, onnxruntime and llama.cpp.
PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS = (
    "pytorch",
    "rocm",
    "vllm",
    "tgi",
    "accelerate",
    "deepspeed",
    "comfyui",
)
KINDS = ("allocation", "kv_cache", "offload", "startup", "reported")


@dataclass(frozen=True)
class OomEvent:
    framework: str  # one of FRAMEWORKS
    kind: str  # allocation | kv_cache | offload | startup | reported
    message: str  # the error text, de-wrapped to one line (ANSI codes removed)
    line_no: int  # 1-based line where it starts in the original text
    gpu_index: int | None
    figures: dict[str, int] = field(default_factory=dict)  # bytes, keys from FIGURE_KEYS
    as_written: dict[str, str] = field(default_factory=dict)  # same keys, as written
    tokens: dict[str, int] = field(default_factory=dict)  # e.g. max_model_len, kv_cache_tokens
    # Figures a message prints once per item (keys from LISTED_FIGURE_KEYS): each process's
    # "Process N has X memory in use", in the order printed; their sum is in `figures`.
    figure_lists: dict[str, tuple[int, ...]] = field(default_factory=dict)
    lists_as_written: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The line (original numbering) of the earlier failure this event repeats: the same message
    # re-raised by a wrapper or printed again by a server, or an out-of-memory error raised while
    # handling it ("During handling of the above exception"). None: a failure of its own.
    echo_of: int | None = None

    def figure_list(self, key: str) -> tuple[int, ...]:
        """Every figure under `key`: the listed ones, or the single figure, or none."""
        if key in self.figure_lists:
            return self.figure_lists[key]
        return (self.figures[key],) if key in self.figures else ()

    @property
    def is_failure(self) -> bool:
        """An out-of-memory error (not a start-up report, not an offloading warning)."""
        return self.kind in FAILURE_KINDS


# Kinds that are out-of-memory errors. "offload": accelerate says it put weights on the CPU or
# the disk (the model did not fit, nothing failed yet); "startup": vLLM's / ollama's memory
# report while starting (figures only); "reported": no message, the reporter's words name the
# error (`oom_prose`).
FAILURE_KINDS = ("allocation", "kv_cache", "reported")


@dataclass(frozen=True)
class TriageReading:
    is_oom: bool
    events: tuple[OomEvent, ...]  # every OOM-related event found, in order
    # The FIRST out-of-memory error (the later ones are often its consequences); when nothing
    # failed, the first offloading warning; else the last start-up report (is_oom False).
    primary: OomEvent | None
    phase: PhaseVerdict
    framework: str | None
    not_oom_reason: str  # when is_oom is False: one plain line; "" otherwise


__all__ = [
    "FAILURE_KINDS",
    "FRAMEWORKS",
    "KINDS",
    "PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS",
    "OomEvent",
    "TriageReading",
]
