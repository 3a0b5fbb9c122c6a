"""A GPU as a provider or a user names it ("A100 (40 GB SXM4)", "NVIDIA A100 80GB", "RTX 4090",
"H100 SXM") -> a catalogue card. Offer import, `vramtui fit --gpu` and triage's `--failed-gpu`
all resolve names here.

First the exact names the catalogue knows (id, alias, NVML name: `vramtui.catalog.find_gpu`).
Then by tokens: the name is split into its model tokens ("a100"), a memory size ("40gb") and a
form factor ("sxm", "pcie", "nvl"); a card matches when one of its own names has the same model
tokens, and the size and form factor, when given, agree with the card's. A size given apart
(`gpu_memory_gb`, e.g. vast.ai's `gpu_ram`) is compared with the card's nominal size within
8 %, enough to tell a 40 GB A100 from an 80 GB one or an RTX 3080 10 GB from the 12 GB.

One card must remain: none, or several, is a refusal that names the closest catalogue ids.
"""

from __future__ import annotations

import difflib
import re

# Words that name the vendor or product line, never the card.
_FILLER = {"nvidia", "geforce", "tesla", "amd", "instinct", "gpu", "hbm3", "hbm3e", "hbm2e"}
_FORMS = {
    "sxm": "sxm",
    "sxm2": "sxm",
    "sxm4": "sxm",
    "sxm5": "sxm",
    "sxm6": "sxm",
    "pcie": "pcie",
    "nvl": "nvl",
    "oam": "oam",
}
MEMORY_TOLERANCE = 0.08  # a size given apart may differ from the nominal one by this much
MAX_NAME_CHARS = 200  # a card's name is short; longer text is refused before any matching


class GpuMatchError(Exception):
    """No single catalogue card fits the name; str() is the problem and the fix."""


def _tokens(text: str) -> list[str]:
    text = text.lower().replace("_", " ")
    text = re.sub(r"(\d+)\s*gb\b", r"\1gb", text)  # "40 GB" -> "40gb"
    return [t for t in re.split(r"[^a-z0-9.]+", text) if t]


def _split(text: str) -> tuple[frozenset[str], float | None, str | None]:
    """(model tokens, memory in GB or None, form factor or None)."""
    model, memory, form = [], None, None
    for t in _tokens(text):
        if t in _FILLER:
            continue
        if t in _FORMS:
            form = _FORMS[t]
            continue
        m = re.fullmatch(r"(\d+(?:\.\d+)?)gb", t)
        if m:
            memory = float(m.group(1))
            continue
        model.append(t)
    return frozenset(model), memory, form


def _names(gpu) -> list[str]:
    return [gpu.id, gpu.id.replace("-", " "), gpu.name, *gpu.aliases, *gpu.nvml_names]


def _memory_agrees(gpu, memory_gb: float | None) -> bool:
    if memory_gb is None:
        return True
    nominal = gpu.nominal.bytes / 1e9
    return abs(memory_gb - nominal) <= MEMORY_TOLERANCE * nominal


def _form_agrees(gpu, form: str | None) -> bool:
    if form is None:
        return True
    if form == "sxm":
        return gpu.form_factor in ("sxm", "oam")
    return gpu.form_factor == form


def match_gpu(gpus: dict, text: str, memory_gb: float | None = None):
    """The catalogue GPU `text` names (`memory_gb`: the card's memory, when the source gives it
    apart from the name), else GpuMatchError."""
    from vramtui.catalog import Catalog, find_gpu

    if len(text) > MAX_NAME_CHARS:
        raise GpuMatchError(
            f"gpu name of {len(text):,} characters is over vramtui's limit of {MAX_NAME_CHARS}; "
            "write a catalogue id from `vramtui gpus`"
        )
    exact = find_gpu(Catalog(gpus=gpus, offers={}), text) or find_gpu(
        Catalog(gpus=gpus, offers={}), text.replace("_", " ")
    )
    if exact is None:
        # the same name without the vendor's words ("NVIDIA A100 80GB" is the alias "a100 80gb")
        words = [w for w in re.split(r"\s+", text.strip()) if w.lower() not in _FILLER]
        if words:
            exact = find_gpu(Catalog(gpus=gpus, offers={}), " ".join(words))
    if exact is not None and _memory_agrees(exact, memory_gb):
        return exact
    model, memory, form = _split(text)
    if memory is None:
        memory = memory_gb
    found = []
    if model:
        for gpu in gpus.values():
            if not (_memory_agrees(gpu, memory) and _form_agrees(gpu, form)):
                continue
            if any(_split(name)[0] == model for name in _names(gpu)):
                found.append(gpu)
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        ids = ", ".join(sorted(g.id for g in found))
        raise GpuMatchError(
            f"gpu {text!r} matches several catalogue cards ({ids}); write the catalogue id, or "
            "add the memory size and form factor (e.g. '80 GB SXM')"
        )
    if not found and "(" in text:
        # a remark in parentheses that is not a size or a form ("RTX 3090 24GB (power limited
        # to 280W)"): the name without it
        bare = re.sub(r"\([^()]*\)", " ", text).strip()
        if bare and bare != text:
            try:
                return match_gpu(gpus, bare, memory_gb)
            except GpuMatchError:
                pass
    close = close_matches(gpus, text)
    near = f" (closest: {', '.join(close)})" if close else ""
    raise GpuMatchError(
        f"gpu {text!r}"
        + (f" with {memory_gb:g} GB" if memory_gb is not None else "")
        + f" is not in the GPU catalogue{near}; write a catalogue id from `vramtui gpus`, or "
        "add the card under <catalogue dir>/gpus/ (docs/catalog-gpus.md)"
    )


def close_matches(gpus: dict, text: str, n: int = 3) -> list[str]:
    """Up to `n` catalogue ids whose names are closest to `text`: most model tokens in common
    first ("RTX 6000" -> rtx-6000-ada, rtx-pro-6000), then the most similar spelling."""
    wanted = " ".join(_tokens(text))
    model = _split(text)[0]
    scored = []
    for gpu in gpus.values():
        overlap = ratio = 0.0
        for name in _names(gpu):
            other = _split(name)[0]
            if model and other:
                overlap = max(overlap, len(model & other) / len(model | other))
            ratio = max(
                ratio, difflib.SequenceMatcher(None, wanted, " ".join(_tokens(name))).ratio()
            )
        if overlap > 0 or ratio >= 0.6:
            scored.append((-overlap, -ratio, gpu.id))
    return [gid for _, _, gid in sorted(scored)[:n]]
