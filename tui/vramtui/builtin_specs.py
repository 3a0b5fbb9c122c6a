"""Specs built into vramtui, so they work from an installed wheel without sample_specs/.

`SEED_EXAMPLE_TOML` is the same text as sample_specs/seed-7b-fp16-inference.toml (a test keeps
the two equal).
"""

from __future__ import annotations

import functools

from vramtui.spec import Spec, loads_spec

SEED_EXAMPLE_SOURCE = "<built-in seed example>"

SEED_EXAMPLE_TOML = """\
# The seed's worked example: 7e9 parameters at 16 bits, inference, with a chosen 6 GiB reserve.
# Weights: 7e9 x 2 bytes = 14e9 bytes = 13.04 GiB; + 6 GiB headroom = 19.04 GiB.
# The 6 GiB is the seed's own assumption, not a measured value: verify it with your inputs.
schema_version = 1
name = "Seed example: 7B parameters, 16-bit inference"
description = "7e9 parameters at fp16 with a manual 6 GiB reserve (the seed's worked example)"

[model]
params = 7e9                # a bare parameter count: only the weights can be itemised

[task]
kind = "inference"

[weights]
format = "fp16"

[lengths]
prompt_tokens = 2048
generated_tokens = 256

[batch]
concurrency = 1

[runtime]
attention = "sdpa"
kv_cache_dtype = "fp16"

[placement]
gpus = 1

[headroom]
mode = "manual"
reserve_gib = 6.0
reason = "the seed's chosen reserve, an assumption to verify"

[campaign]
days = 3                    # the seed compares 1 card for 3 days
"""


def seed_example_spec() -> Spec:
    """The seed's worked example: 7e9 parameters, fp16, inference, manual 6 GiB headroom."""
    return loads_spec(SEED_EXAMPLE_TOML, SEED_EXAMPLE_SOURCE)


@functools.cache
def _seed_description() -> str:
    return seed_example_spec().description


def drop_seed_description(form: dict) -> bool:
    """A spec made from the seed example and then changed is another workload: the seed's
    description no longer describes it (nor its sizing sheet). Blank it in `form` (a TOML-shaped
    spec); True when it was there."""
    if form.get("description") == _seed_description():
        form["description"] = ""
        return True
    return False
