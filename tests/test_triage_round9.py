"""Round 9 of the real-report corpus: out-of-memory words of other runtimes (a bare VkResult -2
from ncnn, Metal's command-buffer code 8, TensorRT's "Error Code N: OutOfMemory"), a 1.x message
cut inside any of its words, an engine's "alloc failed (X MiB)" request, and stage evidence
(TensorRT's builder, an app's inference tag on the error line, a training script computing a
loss, TensorFlow's variable initialiser, a loop's bare "testing..." line).

Each excerpt is written by hand in the shape the printing program gives it; bytes are worked by
hand in the printer's convention. Every rule has a counter-case it must not fire on.
"""

from __future__ import annotations

from triage_reading import reading, stage

from vramtui.triage.reader import read_log

MiB = 2**20
GiB = 2**30


# ------------------------------------------------------------------ detection


def test_ncnn_bare_vkresult_minus_two_is_device_memory():
    # vulkan_core.h: VK_ERROR_OUT_OF_HOST_MEMORY = -1, VK_ERROR_OUT_OF_DEVICE_MEMORY = -2
    r = reading("vkAllocateMemory failed -2\nvkAllocateMemory failed -2")
    assert r.primary.framework == "vulkan"


def test_ncnn_host_memory_and_other_vkresults_are_not_a_gpu_oom():
    assert not read_log("vkAllocateMemory failed -1").is_oom  # host memory
    assert not read_log("vkQueueSubmit failed -4").is_oom  # VK_ERROR_DEVICE_LOST
    assert not read_log("vkAllocateMemory failed -21").is_oom  # not -2


def test_metal_command_buffer_out_of_memory():
    text = (
        'Fatal error: MetalExecutionError: Error Domain=MTLCommandBufferErrorDomain Code=8 '
        '"Insufficient Memory (IOAF code 8)" UserInfo={NSLocalizedDescription=Insufficient '
        "Memory (IOAF code 8)}: file main.swift, line 261"
    )
    assert reading(text).primary.framework == "metal"


def test_metal_command_buffer_other_codes_are_not_oom():
    text = 'Error Domain=MTLCommandBufferErrorDomain Code=2 "Caused GPU Timeout Error"'
    assert not read_log(text).is_oom


def test_tensorrt_error_code_named_out_of_memory():
    text = (
        "[E] 2: [virtualMemoryBuffer.cpp::nvinfer1::StdVirtualMemoryBufferImpl::resizePhysical::"
        "140] Error Code 2: OutOfMemory (no further information)"
    )
    assert reading(text).primary.framework == "tensorrt"


def test_tensorrt_other_error_codes_are_not_oom():
    text = "[E] 4: [network.cpp::validate::3013] Error Code 4: Internal Error (Network has dynamic)"
    assert not read_log(text).is_oom


# ------------------------------------------------------------------ figures


def test_a_message_cut_inside_already_allocated_keeps_the_figure():
    text = (
        "RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 21.99 GiB total "
        "capacity; 20.68 GiB already allocate"
    )
    ev = reading(text).primary
    # 20.68 x 2^30 = 22,204,980,920.32 -> 22,204,980,920
    assert ev.figures["already_allocated_bytes"] == 22_204_980_920


def test_a_message_cut_after_reserved_in_total_keeps_the_reserved_total():
    text = (
        "OOM: Ran out of memory with exception: CUDA out of memory. Tried to allocate 93.75 GiB "
        "(GPU 4; 79.17 GiB total capacity; 1.52 GiB already allocated; 74.14 GiB free; 1.54 GiB "
        "reserved in total"
    )
    ev = reading(text).primary
    # 1.54 x 2^30 = 1,653,562,408.96 -> 1,653,562,409
    assert ev.figures["reserved_total_bytes"] == 1_653_562_409


def test_cut_words_that_fit_no_phrase_name_nothing():
    text = (
        "RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 21.99 GiB total "
        "capacity; 20.68 GiB xyz"
    )
    ev = reading(text).primary
    assert "already_allocated_bytes" not in ev.figures
    assert "reserved_total_bytes" not in ev.figures


def test_an_engines_alloc_failed_request():
    text = "ds4: CUDA q8 fp16 cache alloc failed (64.00 MiB): out of memory"
    assert reading(text).primary.figures["tried_to_allocate_bytes"] == 64 * MiB  # 67,108,864


# ------------------------------------------------------------------ stage


def test_tensorrts_builder_giving_up_is_a_conversion():
    text = (
        "[E] Error[1]: [defaultAllocator.cpp::allocate::31] Error Code 1: Cuda Runtime (out of "
        "memory)\n"
        "[W] [TRT] Requested amount of GPU memory (15485030400 bytes) could not be allocated.\n"
        "[E] Error[10]: IBuilder::buildSerializedNetwork: Error Code 10: Internal Error (Could "
        "not find any implementation for node)\n"
        "[E] Engine could not be created from network\n"
    )
    r = reading(text)
    assert r.phase.phase == "other" and "builder" in r.phase.reason


def test_an_apps_inference_tag_on_the_error_line():
    text = (
        "[python] [upscale] Real-ESRGAN failed: CUDA out of memory. Tried to allocate 2.68 GiB. "
        "GPU 0 has a total capacity of 7.63 GiB of which 1.61 GiB is free."
    )
    assert stage(text) == "generate"


def test_a_tag_that_names_no_inference_task_does_not_decide():
    text = (
        "[python] [worker] failed: CUDA out of memory. Tried to allocate 2.68 GiB. GPU 0 has a "
        "total capacity of 7.63 GiB of which 1.61 GiB is free."
    )
    assert stage(text) == "unknown"


def test_a_training_script_computing_a_loss_is_the_training_forward():
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 75, in <module>\n'
        "    content_loss = content_param * compute_content_loss(a_C, a_G)\n"
        '  File "/content/proj/utils.py", line 64, in compute_content_loss\n'
        "    J = torch.sum((a_C - a_G) ** 2)\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 2.99 GiB (GPU 0; 14.73 GiB total "
        "capacity; 10.14 GiB already allocated; 1.89 GiB free; 1.97 GiB cached)"
    )
    assert stage(text) == "train_forward"


def test_a_non_training_script_computing_a_loss_is_not_called_training():
    text = (
        "Traceback (most recent call last):\n"
        '  File "report.py", line 75, in <module>\n'
        "    content_loss = compute_content_loss(a_C, a_G)\n"
        '  File "/content/proj/utils.py", line 64, in compute_content_loss\n'
        "    J = torch.sum((a_C - a_G) ** 2)\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 2.99 GiB (GPU 0; 14.73 GiB total "
        "capacity; 10.14 GiB already allocated; 1.89 GiB free; 1.97 GiB cached)"
    )
    assert stage(text) != "train_forward"


def test_tensorflow_variable_initialiser_is_loading():
    text = (
        "Resource exhausted: OOM when allocating tensor with shape[25088,4096]\n"
        "Traceback (most recent call last):\n"
        '  File "./lib/fast_rcnn/train.py", line 148, in train_model\n'
        "    sess.run(tf.global_variables_initializer())\n"
    )
    assert stage(text) == "load"


def test_a_loops_bare_testing_line_is_evaluation():
    text = (
        "train epoch 11   err 0.100179   lr 0.003\n"
        "\n"
        "===> testing...\n"
        "THCudaCheck FAIL file=THCStorage.cu line=66 error=2 : out of memory\n"
    )
    r = reading(text)
    assert r.phase.phase == "other" and "evaluation" in r.phase.reason


def test_testing_in_a_sentence_is_not_evaluation():
    text = (
        "I am testing... the new driver and get this\n"
        "THCudaCheck FAIL file=THCStorage.cu line=66 error=2 : out of memory\n"
    )
    assert stage(text) != "other"
