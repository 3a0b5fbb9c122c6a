"""Training framework profiles: each framework's defaults (catalog/frameworks/<name>.toml),
merged with the spec's explicit [training] overrides into the settings the ledger uses.

A profile is data: one value per setting, each with its source (the framework's file and
version). The spec names the framework (`[training] framework`, default hf-trainer) and may
override any setting; what the ledger does with a setting is code (vramtui.ledger.training_mechanisms).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache

from vramtui.errors import CatalogError
from vramtui.paths import builtin_catalog_dir
from vramtui.spec import (
    ADAPTER_DTYPES,
    DEFAULT_FRAMEWORK,
    FRAMEWORKS,
    FSDP_FROZEN_BASE,
    LOSS_IMPLS,
    OPTIMIZER_PLACEMENTS,
    SELECTIVE_POLICIES,
)

# Every setting a profile gives, with its allowed values (bool / int: that kind).
SETTINGS: dict[str, tuple[str, ...] | type] = {
    "adapter_dtype": ADAPTER_DTYPES,
    "fused_qkv_adapter": bool,
    "loss_impl": LOSS_IMPLS,
    "loss_chunks": int,
    "optimizer_placement": OPTIMIZER_PLACEMENTS,
    "fsdp_frozen_base": FSDP_FROZEN_BASE,
    "no_sync": bool,
    "gqa_expand_kv": bool,
    "unties_lm_head": bool,
    "quantizes_lm_head": bool,
    "softcap_attention_eager": bool,
    "fp32_model_output": bool,
    "fsdp_root_gathered": bool,
    "offload_params": bool,
    "offload_checkpoints": bool,
    "selective_policy": SELECTIVE_POLICIES,
    "fp32_norms": bool,
    "fused_lora_kernels": bool,
}
# Settings that come with the framework's model code, not overridable in [training]
# (loss_chunks comes with loss_impl's profile; unties_lm_head and quantizes_lm_head with the
# framework's own model and quantisation code).
PROFILE_ONLY = (
    "loss_chunks",
    "unties_lm_head",
    "quantizes_lm_head",
    "softcap_attention_eager",
    "fp32_model_output",
    "fused_lora_kernels",
)
# The settings a spec can override in [training].
SPEC_OVERRIDES = tuple(k for k in SETTINGS if k not in PROFILE_ONLY)
MODEL_CODE = ("transformers", "own")
MAX_LOSS_CHUNKS = 4096


@dataclass(frozen=True)
class Profile:
    name: str
    title: str
    version: str  # the framework version the defaults were read from
    model_code: str  # "transformers": runs transformers modules; "own": its own model code
    defaults: dict
    sources: dict


@dataclass(frozen=True)
class FrameworkSettings:
    """The settings one spec trains under: the profile's defaults, the spec's overrides."""

    framework: str
    framework_is_default: bool  # the spec names no framework
    profile: Profile
    values: dict
    overridden: frozenset  # settings the spec set explicitly

    def __getattr__(self, name: str):
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    def origin(self, name: str) -> str:
        """Where a setting's value comes from, in words."""
        if name in self.overridden:
            return "set in the spec"
        return f"{self.framework} default ({self.profile.sources.get(name, 'no source')})"

    def summary(self) -> str:
        """One line for the estimate's notes: the framework and every setting's value, the
        defaults said as defaults."""
        head = (
            f"training framework: {self.framework}"
            + (" (the default: [training] framework not set)" if self.framework_is_default else "")
            + f", profile from {self.profile.version}"
        )
        parts = []
        for name in SPEC_OVERRIDES:
            value = self.values[name]
            shown = str(value).lower() if isinstance(value, bool) else str(value)
            tag = "set in the spec" if name in self.overridden else "default"
            parts.append(f"{name} = {shown} ({tag})")
        return head + ": " + ", ".join(parts) + "; sources in docs/spec-format.md"


def _fail(path, message: str) -> CatalogError:
    return CatalogError(f"framework profile {path}: {message}")


def _check_setting(path, name: str, value) -> None:
    allowed = SETTINGS[name]
    if allowed is bool:
        ok = isinstance(value, bool)
    elif allowed is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        ok = ok and 1 <= value <= MAX_LOSS_CHUNKS
    else:
        ok = value in allowed
    if not ok:
        want = (
            "true or false"
            if allowed is bool
            else f"an integer 1-{MAX_LOSS_CHUNKS}"
            if allowed is int
            else "one of " + ", ".join(allowed)
        )
        raise _fail(path, f"defaults.{name} must be {want}, got {value!r}")


@cache
def load_profile(name: str) -> Profile:
    """The built-in profile of framework `name` (one of spec.FRAMEWORKS)."""
    if name not in FRAMEWORKS:
        raise CatalogError(
            f"unknown training framework {name!r}; use one of {', '.join(FRAMEWORKS)}"
        )
    path = builtin_catalog_dir() / "frameworks" / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise _fail(path.name, f"cannot be read ({e}); reinstall vramtui") from None
    defaults = data.get("defaults", {})
    sources = data.get("sources", {})
    for key in SETTINGS:
        if key not in defaults:
            raise _fail(path.name, f"defaults.{key} is missing; every profile sets every setting")
        _check_setting(path.name, key, defaults[key])
        if key in SPEC_OVERRIDES and (
            not isinstance(sources.get(key), str) or not sources[key].strip()
        ):
            raise _fail(path.name, f"sources.{key} is missing; every default names its source")
    extra = sorted(set(defaults) - set(SETTINGS))
    if extra:
        raise _fail(path.name, f"unknown defaults {', '.join(extra)}")
    if data.get("name") != name or data.get("model_code") not in MODEL_CODE:
        raise _fail(path.name, "name must match the file and model_code be transformers or own")
    return Profile(
        name=name,
        title=str(data.get("title", name)),
        version=str(data.get("version", "")),
        model_code=data["model_code"],
        defaults=dict(defaults),
        sources=dict(sources),
    )


def framework_settings(spec) -> FrameworkSettings | None:
    """The settings a training spec trains under (None for inference)."""
    tr = spec.training
    if tr is None:
        return None
    name = tr.framework or DEFAULT_FRAMEWORK
    profile = load_profile(name)
    values = dict(profile.defaults)
    overridden = set()
    for key in SPEC_OVERRIDES:
        v = getattr(tr, key, None)
        if v is not None:
            values[key] = v
            overridden.add(key)
    # A profile's in-backward default cannot accumulate: the framework refuses it, so the
    # loop the spec describes steps after the last micro-batch.
    if (
        values["optimizer_placement"] == "in-backward"
        and "optimizer_placement" not in overridden
        and spec.batch.grad_accum > 1
    ):
        values["optimizer_placement"] = "standard"
    return FrameworkSettings(
        framework=name,
        framework_is_default=tr.framework is None,
        profile=profile,
        values=values,
        overridden=frozenset(overridden),
    )


_NUM = re.compile(r"[0-9]+")


def version_tuple(text: str) -> tuple[int, ...]:
    """ "0.43.1" -> (0, 43, 1); the leading dotted numbers only ("0.44.0.dev0" -> (0, 44, 0))."""
    out = []
    for part in text.split("."):
        m = _NUM.match(part)
        if not m:
            break
        out.append(int(m.group()))
        if m.end() != len(part):
            break
    return tuple(out)


def library_version(spec, library: str) -> str | None:
    """The version [training.versions] gives for `library` (None: not stated)."""
    if spec.training is None:
        return None
    return dict(spec.training.versions).get(library)


def version_before(spec, library: str, fixed_in: str) -> bool:
    """Does the spec state a `library` version older than `fixed_in`? (False when unstated:
    the current behaviour is assumed.)"""
    v = library_version(spec, library)
    if v is None:
        return False
    return version_tuple(v) < version_tuple(fixed_in)
