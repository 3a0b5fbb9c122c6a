"""Round 11 of the real-report corpus: an app's error line or a web server's access line that
names inference, Keras' gradients built inside the optimizer's name scope, TensorFlow's
random-normal initialisers, and JAX / Flax parameter initialisation.

Each excerpt is written by hand in the shape the printing program gives it. Every rule has a
counter-case it must not fire on.
"""

from __future__ import annotations

from triage_reading import stage


def test_an_apps_error_line_naming_the_transcription():
    text = (
        "INFO:root:Error processing or transcribing /movies/a.avi: CUDA failed with error out "
        "of memory"
    )
    assert stage(text) == "generate"


def test_an_error_line_naming_no_inference_does_not_decide():
    text = "INFO:root:Error processing /movies/a.avi: CUDA failed with error out of memory"
    assert stage(text) == "unknown"


def test_a_failed_post_request_in_a_servers_access_log_is_serving():
    text = (
        'INFO:     127.0.0.1:57850 - "POST /clone_voice HTTP/1.1" 500 Internal Server Error\n'
        "[server] 2025-03-20 11:29:15 [WARNING] >> failed: CUDA out of memory. Tried to allocate "
        "20.00 MiB. GPU 0 has a total capacity of 11.76 GiB of which 9.94 MiB is free.\n"
    )
    assert stage(text) == "generate"


def test_a_successful_request_line_does_not_decide():
    text = (
        'INFO:     127.0.0.1:57850 - "POST /clone_voice HTTP/1.1" 200 OK\n'
        "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 11.76 "
        "GiB of which 9.94 MiB is free.\n"
    )
    assert stage(text) == "unknown"


def test_keras_gradients_inside_the_optimizers_scope_are_the_backward_pass():
    text = (
        "ResourceExhaustedError: OOM when allocating tensor with shape[216350,462] and type "
        "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
        "\t [[Node: training_1/Adam/gradients/loss_1/classification_loss/pow_grad/Pow = "
        'Pow[T=DT_FLOAT, _device="/job:localhost/replica:0/task:0/device:GPU:0"](x, y)]]\n'
    )
    assert stage(text) == "backward"


def test_an_optimizers_own_update_op_stays_the_optimizer_step():
    text = (
        "ResourceExhaustedError: OOM when allocating tensor with shape[4096,4096] and type "
        "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
        "\t [[Node: training/Adam/mul_23 = Mul[T=DT_FLOAT](x, y)]]\n"
    )
    assert stage(text) == "optimizer_step"


def test_tensorflow_eager_random_normal_initialiser_is_loading():
    text = (
        "ResourceExhaustedError: OOM when allocating tensor with shape[3,3,256,256] and type "
        "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc "
        "[Op:RandomStandardNormal]"
    )
    assert stage(text) == "load"


def test_tensorflow_eager_random_uniform_is_not_called_an_initialiser():
    # RandomUniform also draws dropout masks in a training step
    text = (
        "ResourceExhaustedError: OOM when allocating tensor with shape[64,512,512] and type "
        "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc "
        "[Op:RandomUniform]"
    )
    assert stage(text) != "load"


def test_jax_parameter_initialisation_is_loading():
    text = (
        '  File "resharding_example.py", line 47, in <module>\n'
        "    network = CausalTransformer(params)\n"
        '  File "/p/mesh_transformer/transformer_shard.py", line 272, in __init__\n'
        "    self.state = self.init_xmap(jnp.array(key.take(mp_per_host)), x)\n"
        "RuntimeError: Resource exhausted: Failed to allocate request for 32.00MiB (33554432B) "
        "on device ordinal 0\n"
    )
    assert stage(text) == "load"


def test_an_init_call_without_a_key_is_not_parameter_initialisation():
    text = (
        '  File "/p/run.py", line 12, in main\n'
        "    pool.init(workers)\n"
        "RuntimeError: Resource exhausted: Failed to allocate request for 32.00MiB (33554432B) "
        "on device ordinal 0\n"
    )
    assert stage(text) != "load"
