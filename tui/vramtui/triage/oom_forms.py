"""The out-of-memory message families the triage reader knows.

One `Form` per family: where its message starts (`start`), where a message wrapped over several
lines ends (`end`), which framework printed it (a name, or a function of the line when the
family is shared: XLA's allocator prints the same words under JAX and TensorFlow), and the
reader of its figures (`vramtui.triage.oom_figures`). `ANCHORS` and each form's `keys` are
plain substrings: a line holding none of them never meets a regex.

Not every memory message is a GPU out-of-memory error: PyTorch's CPU allocator failing
(`HOST_RAM`), an XPU platform's 4 GB single-block limit (`BLOCK_LIMIT`), TensorFlow's
"not a failure" allocator retry, and prose naming an error are left out on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from vramtui.triage.oom_event import FRAMEWORKS, KINDS, PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS
from vramtui.triage.oom_figures import (
    BLOCK_LIMIT,
    FIGURE_KEYS,
    HOST_RAM,
    LISTED_FIGURE_KEYS,
    Facts,
    ascii_re,
    read_driver_free_total,
    read_exact_bytes,
    read_exact_bytes_tail,
    read_cupy,
    read_miopen,
    read_fraction,
    read_generic,
    read_llama,
    read_mlx,
    read_mps,
    read_nccl_size,
    read_nothing,
    read_ollama,
    read_paddle,
    read_tgi,
    read_tgi_span,
    read_torch,
    read_trtllm,
    read_vllm_kv,
    read_vllm_startup,
    read_vulkan_size,
    read_xla,
    read_xla_buffer_stats,
)
from vramtui.triage.oom_form_frameworks import (
    _cuda_or_hip,
    _dev,
    _fraction,
    _generic,
    _lib,
    _ort_or_cuda,
    _ort_or_torch,
    _trt,
    _vulkan,
    _xla_family,
)


# Substrings that every recognised line contains at least one of (case-sensitive, cheap to find).
ANCHORS = (
    "emory",
    "EMORY",
    "lloc",
    "LLOC",
    "apacity",
    "eserved",
    "che blocks",
    "che size",
    "Cache is",
    "cache_init",
    "cache_size",
    "seq len",
    "ispatched",
    "ffload",
    " took ",
    "eights take",
    "blocks: ",
    "oncurrency",
    "uffer",
    "runner process",
    "ALLOC",
    "xhausted",
    "XHAUSTED",
    "cuDNN algorithm",
    "GPU resources",
)

# ------------------------------------------------------------------------------ forms


@dataclass(frozen=True)
class Form:
    name: str
    start: re.Pattern[str]
    kind: str  # or "auto": kv_cache when the line speaks of a KV cache, else allocation
    framework: str | Callable[[re.Match[str], str], str]
    extract: Callable[[str, Facts], None]
    end: re.Pattern[str] | None = None  # None: a one-line message
    binary_si: bool = False
    needs: re.Pattern[str] | None = None  # the line must also match this to count
    exception_prefix: bool = True  # start the message at "torch.OutOfMemoryError: " if present
    keys: tuple[str, ...] = ()  # the line holds one of these before `start` is even tried
    blank_lines: int = 0  # blank lines the message may span (its figures follow a gap)
    # figures printed on the lines after the message (NCCL's failed size, XLA's buffer stats):
    # `tail` reads each of the next `tail_lines` lines (blank ones too) into the same Facts
    tail: Callable[[str, Facts], None] | None = None
    tail_lines: int = 0
    # forms whose message this one's start line may continue: under one of them, a line that
    # starts this form is read as the rest of that message, not as a message of its own
    continues: tuple[str, ...] = ()


# Words that put "CUDA out of memory" in a reporter's sentence, each a fixed-width lookbehind.
_PROSE_BEFORE = "".join(
    f"(?<!{w} )"
    for w in (
        "getting",
        "get",
        "got",
        "gets",
        "having",
        "facing",
        "into",
        "hit",
        "hitting",
        "encounter",
        "encountered",
        "encountering",
        "causes",
        "caused",
        "throws",
        "gives",
        "giving",
        "run",
        "runs",
        # an article: "i get a CUDA out of memory." names the error in a sentence
        "a",
        "the",
    )
)

_VLLM_END = ascii_re(r"initializing the engine\.?|max_model_len`\.?\s*$|other processes\.?\s*$")

FORMS: tuple[Form, ...] = (
    Form(
        "torch",
        # What follows is the message's own punctuation or "Tried to allocate": prose such as
        # "getting CUDA out of memory error" is not the message. A retyped message may be
        # lower case ("cuda out of memory, tried to allocate 50MiB(GPU 0; ...").
        # A reporter's sentence ("I am getting CUDA out of memory.") is not the message
        # either, unless the figures follow it. Markdown emphasis may open it
        # ("_CUDA out of memory. ... cached)_"), and so may a quote when the figures follow
        # (I encounter "CUDA out of memory. Tried to allocate 44.00 MiB (GPU 0; ...)").
        ascii_re(
            r"(?<![A-Za-z0-9])(?:(?<![\"'])"
            + _PROSE_BEFORE
            + r"|(?=\w{3,4} out of memory[.,:]?\s{0,3}"
            r"[Tt]ried to allocate))(?P<dev>CUDA|HIP|XPU|NPU|cuda|Cuda) out of memory"
            r"(?=[.,;:!()]|\s*$|\s{1,3}[Tt]ried to allocate)(?![.!]?\*\*\s*$)"
        ),
        "allocation",
        _dev,
        read_torch,
        end=ascii_re(
            r"environment-variables\)|alloc-conf\)|_ALLOC_CONF\s*$|unoccupied cached "
            r"memory\.|(?:by Py[Tt]orch|cached|inactive)\)\s*$|fragmentation\.\s*$"
        ),
        keys=("out of memory",),
    ),
    Form(
        "torch_fraction",
        ascii_re(r"\bAllocation on device(?: \d{1,4} would exceed allowed memory|\s*$)"),
        "allocation",
        _fraction,
        read_fraction,
        end=ascii_re(r"memory fraction\)(?:\\n)?\s{0,60}(?:\\n)?\s{0,60}: {0,4}\d[^\n]{0,30}B"),
        keys=("Allocation on device",),
    ),
    Form(
        "mps",
        ascii_re(r"MPS backend out of memory"),
        "allocation",
        "mps",
        read_mps,
        end=ascii_re(r"system failure\)\.?|pool\.\s*$"),
        binary_si=True,
        keys=("MPS backend",),
    ),
    Form(
        "mps_buffer",
        ascii_re(r"\bInvalid buffer size: \d"),
        "allocation",
        "mps",
        read_mps,
        binary_si=True,
        keys=("Invalid buffer size",),
    ),
    Form(
        "tgi",
        ascii_re(r"Not enough memory to handle \d"),
        "kv_cache",
        "tgi",
        read_tgi,
        end=ascii_re(r"tokens`"),
        keys=("Not enough memory",),
    ),
    Form(
        "vllm_nomem",
        ascii_re(r"No available memory for the cache blocks"),
        "kv_cache",
        "vllm",
        read_vllm_kv,
        end=_VLLM_END,
        binary_si=True,
        keys=("cache blocks",),
    ),
    Form(
        "vllm_maxlen",
        ascii_re(r"The model's max seq len \(\d"),
        "kv_cache",
        "vllm",
        read_vllm_kv,
        end=_VLLM_END,
        binary_si=True,
        keys=("max seq len",),
    ),
    Form(
        "vllm_v1",
        ascii_re(r"To serve at least one request with the models?'s?'?s? max seq len"),
        "kv_cache",
        "vllm",
        read_vllm_kv,
        end=_VLLM_END,
        binary_si=True,
        keys=("max seq len",),
    ),
    Form(
        "vllm_free",
        ascii_re(r"Free memory on device \(\d"),
        "allocation",
        "vllm",
        read_vllm_kv,
        end=_VLLM_END,
        binary_si=True,
        keys=("Free memory on device",),
    ),
    Form(
        "offload_8bit",
        ascii_re(r"Some modules are dispatched on the CPU or the disk"),
        "offload",
        "accelerate",
        read_nothing,
        end=ascii_re(r"for more details\.?|from_pretrained`\.?\s*$"),
        keys=("dispatched on the CPU",),
    ),
    Form(
        "offload_meta",
        ascii_re(
            r"Some parameters are on the meta device(?: device)? because they "
            r"were offloaded to the"
        ),
        "offload",
        "accelerate",
        read_nothing,
        keys=("meta device",),
    ),
    Form(
        "offload_disk",
        ascii_re(r"You are trying to offload the whole model to the disk"),
        "offload",
        "accelerate",
        read_nothing,
        keys=("offload the whole",),
    ),
    Form(
        "offload_buffers",
        ascii_re(r"bytes of buffer for offloaded layers"),
        "offload",
        "accelerate",
        read_nothing,
        keys=("offloaded layers",),
    ),
    Form(
        "mlx",
        ascii_re(
            r"\[METAL\] Command buffer execution failed: Insufficient Memory|"
            r"\[metal::malloc\] (?:Unable to allocate|Resource limit)|"
            # one buffer larger than Metal's maxBufferLength: a memory limit on a single
            # allocation, read as an out-of-memory error (the request is the figure)
            r"\[metal::malloc\] Attempting to allocate \d{1,20} bytes which is greater than the "
            r"maximum allowed buffer size"
        ),
        "allocation",
        "mlx",
        read_mlx,
        keys=("[METAL]", "[metal::malloc]"),
    ),
    Form(
        "llama",
        ascii_re(
            r"ggml_backend_\w{1,40}_buffer_type_alloc_buffer: (?:allocating|error: failed|failed)|"
            r"failed to allocate \S{1,100} buffer of size \d|unable to allocate \S{1,100} buffer|"
            r"failed to allocate compute(?: pp)? buffers|compute buffer allocation failed|"
            r"kv_cache_init: failed to allocate|failed to allocate buffer for kv cache|"
            r"kv_cache_init\(\) failed|ggml_vulkan: Device memory allocation of size \d|"
            r"ErrorOutOfDeviceMemory|kIOGPUCommandBufferCallbackErrorOutOfMemory|"
            r"ggml_metal\w{0,60}: error: (?:failed to allocate|Insufficient Memory)|"
            r"failed to allocate buffer of size \d|"
            r"CUDA error \d{1,4} at [^\s:]{0,400}ggml[^\s:]{0,100}:\d{1,6}: out of memory|"
            # ggml-cuda's "%s: allocating %.2f MiB on device %d: cudaMalloc failed: %s", also
            # when a user quotes it without the function name in front
            r"\ballocating \d{1,9}\.\d{2} MiB on device \d{1,3}: cudaMalloc failed"
        ),
        "auto",
        "llama.cpp",
        read_llama,
        exception_prefix=False,
        keys=(
            "_alloc_buffer",
            "failed to allocate",
            "unable to allocate",
            "allocation failed",
            "kv_cache_init",
            "Device memory allocation",
            "ErrorOutOfDeviceMemory",
            "OutOfMemory",
            "ggml_metal",
            "CUDA error",
            "cudaMalloc failed",
        ),
    ),
    Form(
        "ollama_runner",
        ascii_re(r"llama runner process (?:has terminated|no longer running)"),
        "auto",
        "ollama",
        read_ollama,
        needs=ascii_re(
            r"out of memory|unable to allocate|failed to allocate|cudaMalloc failed|"
            r"requires more|[Ii]nsufficient [Mm]emory|ErrorOutOfDeviceMemory"
        ),
        keys=("llama runner process",),
    ),
    Form(
        "cublas",
        ascii_re(
            r"\b(?:CUBLAS|HIPBLAS|CUSOLVER|CUSPARSE|CUDNN)_STATUS_ALLOC_FAILED|"
            r"\bCUFFT_ALLOC_FAILED|\brocblas_status_memory_error"
        ),
        "allocation",
        _lib,
        read_nothing,
        keys=("ALLOC_FAILED", "rocblas_status_memory_error"),
    ),
    Form(
        "tf_tensor",
        ascii_re(r"(?:Resource exhausted: )?\bOOM when allocating tensor\b"),
        "allocation",
        "tensorflow",
        read_xla,
        keys=("OOM when allocating",),
    ),
    Form(
        "xla_bfc",
        # the retried form ("... with freed_by_count=0. The caller indicates that this is not
        # a failure ...") is a warning, not a failure
        # also Intel's ITEX ("Allocator ran out of memory trying to allocate 117964800 Bytes")
        # and TensorFlow 1.x's bfc_allocator.cc ("Ran out of memory trying to allocate
        # 144.00MiB.  See logs for memory state.")
        ascii_re(
            r"(?:\bAllocator (?:\(\w{1,40}\) )?r|\bR)an out of memory trying to allocate \d"
            r"(?![^\n]{0,300}not a failure)"
        ),
        "allocation",
        _xla_family,
        read_xla,
        keys=("an out of memory trying to allocate",),
    ),
    Form(
        "xla_driver",
        ascii_re(r"failed to allocate \S{1,24} \(\d{1,20} bytes\) from device"),
        "allocation",
        _xla_family,
        read_xla,
        exception_prefix=False,
        keys=("bytes) from device",),
    ),
    Form(
        "xla_exhausted",
        ascii_re(
            r"(?:RESOURCE_EXHAUSTED|Resource exhausted): {0,4}(?:[Oo]ut ?(?:of memory)?\s*$|"
            r"[Oo]ut of memory|Failed to allocate request|Attempting to (?:reserve|allocate) \d|"
            # PJRT (TPU) "Error allocating device buffer: Attempting to allocate 15.65G. That was
            # not possible. There are 11.08G free."
            r"Error allocating device buffer: Attempting to allocate \d|"
            # the same, re-quoted one sentence per line ("Error allocating device buffer: " at
            # a line's end, "Attempting to allocate 1.96G." on the next)
            r"Error allocating device buffer:\s*$|"
            # XLA:TPU's compile-time check: "XLA:TPU compile permanent error. Ran out of memory
            # in memory space hbm. Used 21.95G of 15.48G hbm."
            r"XLA:\w{1,10} compile permanent error\. Ran out of memory)"
        ),
        "allocation",
        _xla_family,
        read_xla,
        end=ascii_re(r"(?:bytes|[KMGT]iB|\dB)\.?\s*$|\(\d{1,20}B\)|reservable\.?\s*$"),
        keys=("RESOURCE_EXHAUSTED", "Resource exhausted"),
        tail=read_xla_buffer_stats,  # "BufferAssignment OOM Debugging." stats, when printed
        tail_lines=12,
    ),
    Form(
        "trtllm_executor",
        ascii_re(r"Executor creation failed due to insufficient GPU memory"),
        "allocation",
        "tensorrt-llm",
        read_trtllm,
        end=ascii_re(r"creation attempt \(GiB\): \d{1,9}(?:\.\d{1,6})?"),
        keys=("insufficient GPU memory",),
        blank_lines=2,
    ),
    Form(
        "tensorrt",
        ascii_re(r"Requested amount of GPU memory \(\d{1,20} bytes\) could not be allocated"),
        "allocation",
        _trt,
        read_exact_bytes,
        keys=("could not be allocated",),
    ),
    Form(
        "miopen",
        # MIOpen's HIP handle cannot allocate a workspace or buffer on the GPU (TensorFlow-ROCm
        # and PyTorch-ROCm call it for convolutions): "MIOpen Error: /.../handlehip.cpp:68:
        # Memory not available to allocate buffer: 528515072"
        ascii_re(r"\bMemory not available to allocate buffer: \d"),
        "allocation",
        "rocm",
        read_miopen,
        exception_prefix=False,
        keys=("not available to allocate",),
    ),
    Form(
        "tensorrt_error_code",
        # TensorRT's logger names the error code: "[E] 2: [virtualMemoryBuffer.cpp::nvinfer1::
        # StdVirtualMemoryBufferImpl::resizePhysical::140] Error Code 2: OutOfMemory (no
        # further information)"
        ascii_re(r"\bError Code \d{1,3}: OutOfMemory\b"),
        "allocation",
        _trt,
        read_nothing,
        exception_prefix=False,
        keys=(": OutOfMemory",),
    ),
    Form(
        "ctranslate2",
        # CTranslate2 (faster-whisper, whisperX): THROW_RUNTIME_ERROR("CUDA failed with error " ...)
        ascii_re(r"\bCUDA failed with error out of memory"),
        "allocation",
        "ctranslate2",
        read_nothing,
        keys=("failed with error",),
    ),
    Form(
        "onnxruntime",
        ascii_re(
            r"Failed to allocate memory for requested buffer of size \d|"
            r"\bCUDA failure \d{1,4}: out of memory"
        ),
        "allocation",
        _ort_or_cuda,
        read_exact_bytes,
        exception_prefix=False,
        keys=("requested buffer", "CUDA failure"),
    ),
    Form(
        "nccl",
        # NCCL's CUDACHECK: WARN("Cuda failure '%s'") (newer: "Cuda failure %d '%s'"), also
        # repeated under "ncclUnhandledCudaError: ... Last error:"; alloc.h then says which
        # allocation failed: WARN("Failed to CUDA calloc %ld bytes") (read by the tail)
        ascii_re(r"\bCuda failure (?:\d{1,4} )?'?out of memory"),
        "allocation",
        "cuda",
        read_nothing,
        keys=("Cuda failure",),
        tail=read_nccl_size,
        tail_lines=4,
    ),
    Form(
        "cudnn_algorithm",
        # PyTorch's cuDNN convolution tries every algorithm, skipping each one whose workspace
        # does not fit (it catches CUDAOutOfMemoryError and CuDNNError), then raises this;
        # onnxruntime's ORT_ENFORCE says the same words. Out of memory in nearly every report.
        ascii_re(r"\bUnable to find a valid cuDNN algorithm to run convolution"),
        "allocation",
        _ort_or_torch,
        read_nothing,
        keys=("valid cuDNN algorithm",),
    ),
    Form(
        "tf_cudnn_scratch",
        # TensorFlow's autotuned convolution: errors::Unknown when the workspace (scratch)
        # allocation fails and no runner works without one
        ascii_re(r"\bCUDNN failed to allocate the scratch space for the runner"),
        "allocation",
        "tensorflow",
        read_nothing,
        keys=("scratch space",),
    ),
    Form(
        "vulkan",
        # VkResult VK_ERROR_OUT_OF_DEVICE_MEMORY (TVM / MLC's Vulkan runtime, any Vulkan app);
        # llama.cpp's Vulkan backend is matched by the llama form first
        # ncnn prints the bare VkResult: "vkAllocateMemory failed -2" (-2 is
        # VK_ERROR_OUT_OF_DEVICE_MEMORY in vulkan_core.h; -1, host memory, is not matched)
        ascii_re(
            r"\bVK_ERROR_OUT_OF_DEVICE_MEMORY\b|"
            # Omniverse / Isaac's carb.graphics-vulkan prints the name without VK_:
            # "VkResult: ERROR_OUT_OF_DEVICE_MEMORY"
            r"\bVkResult: ERROR_OUT_OF_DEVICE_MEMORY\b|"
            r"\bvk(?:AllocateMemory|CreateBuffer|CreateImage|MapMemory) failed:? {0,2}\(?-2\b"
        ),
        "allocation",
        _vulkan,
        read_vulkan_size,
        keys=("OUT_OF_DEVICE_MEMORY", " failed -2", " failed: -2", " failed (-2"),
    ),
    Form(
        "openvino_gpu",
        # OpenVINO's GPU plugin (intel_gpu/src/runtime/ocl/ocl_engine.cpp) when an OpenCL
        # allocation fails: "[GPU] out of GPU resources"
        ascii_re(r"\[GPU\] out of GPU resources"),
        "allocation",
        "openvino",
        read_nothing,
        exception_prefix=False,
        keys=("out of GPU resources",),
    ),
    Form(
        "metal",
        # Apple's Metal: a command buffer that failed with MTLCommandBufferErrorOutOfMemory
        # (MTLCommandBufferErrorDomain code 8), printed by Swift / Objective-C apps as
        # 'Error Domain=MTLCommandBufferErrorDomain Code=8 "Insufficient Memory (IOAF code 8)"'
        ascii_re(
            r"\bMTLCommandBufferErrorDomain Code=8\b|Insufficient Memory \(IOAF code 8\)"
        ),
        "allocation",
        "metal",
        read_nothing,
        exception_prefix=False,
        keys=("MTLCommandBufferErrorDomain", "IOAF code 8"),
    ),
    Form(
        "paddle",
        # PaddlePaddle's CUDA allocators (paddle/fluid/memory/allocation/cuda_allocator.cc and
        # its siblings): "Out of memory error on GPU 0. Cannot allocate 558.000000MB memory on
        # GPU 0, 7.999695GB memory has been allocated and available memory is only 0.000000B."
        # Sizes are string::HumanReadableSize: divided by 1024, written B/kB/MB/GB.
        ascii_re(r"\bOut of memory error on GPU \d{1,3}\. {0,2}Cannot allocate \d"),
        "allocation",
        "paddle",
        read_paddle,
        binary_si=True,
        keys=("Out of memory error on GPU",),
    ),
    Form(
        "xla_compile_space",
        # XLA's compile-time check printed without the RESOURCE_EXHAUSTED status (TensorFlow 1.x
        # TPUEstimator: "Compilation failure: Ran out of memory in memory space hbm. Used 12.34G
        # of 8.00G hbm. Exceeded hbm capacity by 4.34G.")
        ascii_re(r"\bRan out of memory in memory space \w{1,10}\. Used \d"),
        "allocation",
        _xla_family,
        read_xla,
        exception_prefix=False,
        keys=("memory in memory space",),
    ),
    Form(
        "rmm",
        # RAPIDS' memory manager (cuDF, cuML, RAFT, Milvus' GPU indexes): rmm::out_of_memory,
        # "out_of_memory: RMM failure at:.../pool_memory_resource.hpp:195: Maximum pool size
        # exceeded" (the pool's limit), or "out_of_memory: CUDA error at: ...: cudaErrorMemory
        # Allocation out of memory" (the device)
        ascii_re(r"\bout_of_memory: (?:RMM failure|CUDA error) at:"),
        "allocation",
        "rmm",
        read_nothing,
        exception_prefix=False,
        keys=("out_of_memory: ",),
    ),
    Form(
        "cupy",
        # CuPy's memory pool (Chainer, cuML/cuDF users, CuPy code): OutOfMemoryError
        ascii_re(
            r"\bout of memory to allocate \d{1,20} bytes \(total \d{1,20} bytes\)|"
            r"\bOut of memory allocating [\d,]{1,30} bytes \(allocated so far: [\d,]{1,30} bytes"
        ),
        "allocation",
        "cupy",
        read_cupy,
        exception_prefix=False,
        keys=("out of memory to allocate", "Out of memory allocating"),
    ),
    Form(
        "physx",
        # NVIDIA PhysX's GPU simulation (Isaac Gym, Isaac Sim / Lab): its device allocator's
        # "PxgCudaDeviceMemoryAllocator fail to allocate memory 339738624 bytes!! Result = 2"
        # (2: cudaErrorMemoryAllocation)
        ascii_re(r"\bPxgCudaDeviceMemoryAllocator fail to allocate memory \d"),
        "allocation",
        "physx",
        read_exact_bytes,
        exception_prefix=False,
        keys=("PxgCudaDeviceMemoryAllocator",),
    ),
    Form(
        "cann",
        # Huawei Ascend's CANN runtime (torch_npu, MindSpore): error code EL0004,
        # "Memory_Allocation_Failure(EL0004): Failed to allocate memory requested by GE module.",
        # the request on a later "Call rtMalloc fail, ..., size:N" line
        ascii_re(r"\bMemory_Allocation_Failure\(EL0004\)"),
        "allocation",
        "npu",
        read_exact_bytes,
        exception_prefix=False,
        keys=("Memory_Allocation_Failure",),
        tail=read_exact_bytes_tail,
        tail_lines=6,
    ),
    Form(
        "cuda_error",
        ascii_re(r"(?<![\"'])\b(?:CUDA|HIP) error: out of memory"),
        "allocation",
        _cuda_or_hip,
        read_nothing,
        keys=("error: out of memory",),
    ),
    Form(
        "xpu_ur",
        ascii_re(
            r"\b(?:UR|ZE|PI)_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|"
            r"\bPI_ERROR_OUT_OF_DEVICE_MEMORY"
        ),
        "allocation",
        "xpu",
        read_nothing,
        keys=("OUT_OF_DEVICE_MEMORY",),
    ),
    Form(
        "cuda_misc",
        ascii_re(
            r"cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|"
            r"\b(?:cuda|hip)\w{0,20} failed: out of memory|"
            r"hipErrorOutOfMemory|HIP_ERROR_OUT_OF_MEMORY|Triton Error \[CUDA\]: "
            r"out of memory"
        ),
        "allocation",
        _cuda_or_hip,
        read_exact_bytes,
        keys=("MemoryAllocation", "OUT_OF_MEMORY", "out of memory", "OutOfMemory"),
        tail=read_driver_free_total,
        tail_lines=2,
    ),
    Form(
        "vllm_startup",
        ascii_re(
            r"(?:Model loading|Loading model weights) took \d|total_gpu_memory[ =(]|model weights "
            r"take \d|non_torch_memory(?: takes |=)|activation peak memory takes|reserved for KV "
            r"Cache is|# \w{1,10} blocks: \d|KV cache size: [\d,]{1,20} tokens|Maximum concurrency "
            r"for [\d,]{1,20} tokens per request|Available KV cache memory: -?\d|kv_cache_size=\d"
        ),
        "startup",
        "vllm",
        read_vllm_startup,
        binary_si=True,
        exception_prefix=False,
        keys=(
            " took ",
            "total_gpu_memory",
            "weights take",
            "non_torch_memory",
            "activation peak",
            "KV Cache is",
            " blocks: ",
            "KV cache size",
            "concurrency for",
            "KV cache memory",
            "kv_cache_size=",
        ),
    ),
    Form(
        "ollama_startup",
        ascii_re(r"msg=\"?offload to "),
        "startup",
        "ollama",
        read_ollama,
        needs=ascii_re(r"memory\."),
        exception_prefix=False,
        keys=("offload to ",),
    ),
    Form(
        "torch_headless",
        # PyTorch 1.x's parenthesised message with its head cut off by the paste: the line starts
        # at "Tried to allocate X (GPU N; Y total capacity; ...". Only at the start of a line: the
        # same words after an XPU platform's block-size refusal are not exhausted memory.
        # Or only its parenthesis is left, quoted in prose: "(GPU 0; 31.75 GiB total capacity;
        # 20.61 GiB already allocated; ..." (a size just before it is the XPU refusal's).
        ascii_re(
            r"^\s{0,8}Tried to allocate \d[\d.,]{0,24}\s?[KMGT]i?B \((?:GPU|XPU|HIP|NPU) {1,3}\d{1,4}; "
            r"[^\n]{0,40}total ?capac|(?<!B )\((?:GPU|XPU|HIP) {1,3}\d{1,4}; \d[\d.,]{0,24}\s?"
            r"[KMGT]i?B total ?capac\w{1,4}; \d[\d.,]{0,24}\s?[KMGT]i?B already allocated|"
            # the 2.x sentence form cut the same way: "Tried to allocate 4.00 GiB. GPU 2 has a
            # total capacity of 21.99 GiB of which 1.21 GiB is free. ..."
            r"^\s{0,8}Tried to allocate \d[\d.,]{0,24}\s?[KMGT]i?B\. {1,2}(?:GPU|XPU) {0,2}\d{1,4} "
            r"has a total capac"
        ),
        "allocation",
        "pytorch",
        read_torch,
        end=ascii_re(
            r"(?:by Py[Tt]orch|cached|inactive)\)\s*$|memory in use\.\s*$|"
            r"environment-variables\)|alloc-conf\)|_ALLOC_CONF\s*$|fragmentation\.\s*$"
        ),
        keys=("Tried to allocate", "already allocated"),
        # "CUDA out of memory." on one line and its figures on the next
        continues=("torch", "torch_generic", "generic"),
    ),
    Form(
        "nnabla",
        # nnabla's caching allocator gives up after freeing its cache and retrying once
        ascii_re(r"^\s{0,8}Failed to allocate again\.?\s*$"),
        "allocation",
        "nnabla",
        read_nothing,
        keys=("allocate again",),
    ),
    Form(
        "device_out_of_memory",
        # a device runtime's own sentence: "Out of Memory: Not enough space to allocate
        # 204800000 B DRAM buffer across 12 banks" (not the kernel's "Out of memory: Killed
        # process", which names no allocation)
        ascii_re(
            r"(?:^|[:\]]\s{1,4})Out [Oo]f [Mm]emory: {1,4}[^\n]{0,80}?\ballocate \d{1,20}\s?"
            r"(?:[KMGT]i?B|B|bytes)\b"
        ),
        "allocation",
        _generic,
        read_exact_bytes,
        exception_prefix=False,
        keys=("ut of Memory:", "ut of memory:", "ut Of Memory:"),
    ),
    Form(
        "directml",
        # torch-directml (Windows, any DirectX 12 card): "Could not allocate tensor with
        # 402653184 bytes. There is not enough GPU video memory available!"
        ascii_re(
            r"\bCould not allocate tensor with \d{1,20} bytes\. {0,2}There is not enough GPU "
            r"video memory available"
        ),
        "allocation",
        "directml",
        read_exact_bytes,
        keys=("not enough GPU video memory",),
    ),
    Form(
        "tinygrad_device",
        # tinygrad's AMD (KFD) allocator on ENOMEM: MemoryError(f"Cannot allocate {size} bytes:
        # no memory is available.") -- device memory, unlike a bare host MemoryError
        ascii_re(r"\bCannot allocate \d{1,20} bytes: no memory is available"),
        "allocation",
        "tinygrad",
        read_exact_bytes,
        keys=("no memory is available",),
    ),
    Form(
        "torch_generic",
        # a Jupyter traceback heads the exception: "OutOfMemoryError      Traceback (most ..."
        ascii_re(
            r"(?<![\w.])(?:torch\.)?(?:cuda\.)?OutOfMemoryError"
            r"(?=:|\s*$|\s{2,80}Traceback \(most recent call last\))"
        ),
        "allocation",
        _generic,
        read_torch,
        keys=("OutOfMemoryError",),
    ),
    Form(
        "generic",
        ascii_re(
            r"(?:Error|error|ERROR|FAILED|failed|RESOURCE_EXHAUSTED)\b[^\n]{0,120}?"
            r"\b[Oo]ut [Oo]f [Mm]emory\b(?![.!]?\*\*\s*$)"
        ),
        "allocation",
        _generic,
        read_generic,
        keys=("ut of memory", "ut of Memory", "ut Of Memory", "ut Of memory"),
    ),
)

ANY_KEY = re.compile(
    "|".join(sorted({re.escape(k) for f in FORMS for k in f.keys}, key=len, reverse=True))
)


__all__ = [
    "ANCHORS",
    "ANY_KEY",
    "BLOCK_LIMIT",
    "FIGURE_KEYS",
    "FORMS",
    "FRAMEWORKS",
    "HOST_RAM",
    "KINDS",
    "LISTED_FIGURE_KEYS",
    "PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS",
    "Facts",
    "Form",
    "ascii_re",
    "read_tgi_span",
]
