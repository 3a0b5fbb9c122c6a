"""Round 13 of the real-report corpus: CuPy's memory pool, NVIDIA PhysX's GPU allocator,
Ascend's CANN runtime and torch_npu's message, and a device's own error name inside a
std::bad_alloc.

Each excerpt is written by hand in the shape the printing program gives it; each byte count is
the program's own exact figure. Every rule has a counter-case it must not fire on.
"""

from __future__ import annotations

from triage_reading import reading

from vramtui.triage.reader import read_log

GiB = 2**30
MiB = 2**20


def test_cupys_old_message_is_an_oom_with_its_request_in_bytes():
    text = (
        "Exception in main training loop: out of memory to allocate 747110400 bytes (total "
        "5722942464 bytes)\n"
    )
    r = reading(text)
    assert r.framework == "cupy"
    assert r.primary.figures["tried_to_allocate_bytes"] == 747_110_400


def test_cupys_new_message_with_thousands_separators():
    text = (
        "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1,073,741,824 bytes "
        "(allocated so far: 10,737,418,240 bytes).\n"
    )
    assert reading(text).primary.figures["tried_to_allocate_bytes"] == GiB


def test_a_sentence_about_allocating_is_not_cupys_message():
    assert not read_log("It ran out of memory allocating buffers for the loader.\n").is_oom


def test_physx_gpu_allocator_failure_is_an_oom_with_its_request():
    text = (
        "2025-03-15T15:07:10Z [job] +++ Using GPU PhysX\n"
        "2025-03-15T15:07:10Z [job] PxgCudaDeviceMemoryAllocator fail to allocate memory "
        "100663296 bytes!! Result = 2\n"
    )
    r = reading(text)
    assert r.framework == "physx"
    assert r.primary.figures["tried_to_allocate_bytes"] == 96 * MiB == 100_663_296


def test_physx_pinned_host_memory_warning_alone_is_not_a_gpu_oom():
    text = (
        "/buildAgent/work/source/gpucommon/src/PxgCudaMemoryAllocator.cpp (59) : warning : "
        "Failed to allocate pinned memory.\n"
    )
    assert not read_log(text).is_oom


def test_canns_memory_allocation_failure_reads_the_request_below_it():
    text = (
        "ERROR 04-09 21:56:46 [diffusion_engine.py:82] [PID: 210907] 2026-04-09-21:56:40.384.694 "
        "Memory_Allocation_Failure(EL0004): Failed to allocate memory requested by GE module.\n"
        "ERROR 04-09 21:56:46 [diffusion_engine.py:82]         Possible Cause: Available memory "
        "is insufficient.\n"
        "ERROR 04-09 21:56:46 [diffusion_engine.py:82]         TraceBack (most recent call "
        "last):\n"
        "ERROR 04-09 21:56:46 [diffusion_engine.py:82]         Call rtMalloc fail, purpose: page "
        "caching, type = 2, size:3221291008, device_id:0[FUNC:Alloc][FILE:device_allocator.cc]"
        "[LINE:72]\n"
        "ERROR 04-09 21:56:46 [diffusion_engine.py:82]         Call rtMalloc fail, purpose: page "
        "caching, type = 2, size:1610678272, device_id:0[FUNC:Alloc][FILE:device_allocator.cc]"
        "[LINE:72]\n"
    )
    r = reading(text)
    assert r.framework == "npu"
    # the first request printed, not the retry below it
    assert r.primary.figures["tried_to_allocate_bytes"] == 3_221_291_008


def test_torch_npus_message_is_read_like_pytorchs_with_its_figures():
    text = (
        "RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 6; 60.97 GiB total "
        "capacity; 10.24 GiB already allocated; 10.24 GiB current active; 19.79 MiB free; 10.65 "
        "GiB reserved in total by PyTorch)\n"
    )
    r = reading(text)
    assert r.framework == "npu"
    f = r.primary.figures
    assert f["tried_to_allocate_bytes"] == 22 * MiB
    assert f["total_capacity_bytes"] == 65_466_039_009  # 60.97 * 2**30 = 65466039009.28
    assert f["already_allocated_bytes"] == 10_995_116_278  # 10.24 * 2**30 = 10995116277.76


def test_a_device_error_name_inside_bad_alloc_is_a_gpu_oom():
    text = (
        '  File "/mnt/workspace/gs/scene/gaussian_model.py", line 144, in create_from_pcd\n'
        "    dist2 = torch.clamp_min(distCUDA2(points.float().cuda()), 0.0000001)\n"
        "MemoryError: std::bad_alloc: cudaErrorMemoryAllocation: out of memory\n"
    )
    assert reading(text).is_oom


def test_the_same_bad_alloc_without_a_device_error_name_is_still_host_memory():
    text = (
        '  File "/mnt/workspace/gs/scene/gaussian_model.py", line 144, in create_from_pcd\n'
        "    dist2 = torch.clamp_min(distCUDA2(points.float().cuda()), 0.0000001)\n"
        "MemoryError: std::bad_alloc\n"
    )
    assert not read_log(text).is_oom
