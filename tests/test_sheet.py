"""The one-page sizing sheet: every required field, in Markdown and in HTML; clear errors."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from vramtui.errors import SpecError, VramtuiError
from vramtui.sheet.command import (
    SheetError,
    add_sheet_parser,
    build_sheet_inputs,
    cmd_sheet,
    save_sheet,
    sheet_for_file,
    write_sheet,
)
from vramtui.sheet.decision import short_url, source_label
from vramtui.sheet.html import render_html
from vramtui.sheet.markdown import render_markdown
from vramtui.sheet.model import SHOW_TRIAGE, exact

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "sample_specs").glob("*.toml"))
SEED = ROOT / "sample_specs" / "seed-7b-fp16-inference.toml"
LLAMA = ROOT / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
# A 70B TP=2 inference case (Llama 3.1 70B Instruct bf16 on 2 GPUs): one printed page too.
LLAMA_70B_TP2 = ROOT / "tests" / "sheet_specs" / "llama-3.1-70b-instruct-bf16-tp2.toml"
TODAY = datetime.date(2026, 12, 2)

MEASURED = """
[[measured]]
stage = "prefill"
quantity = "max_memory_allocated"
bytes = 17000000000
counter = "torch.cuda.max_memory_allocated (peak since the stage started)"
gpu = 0
device = "NVIDIA H100 80GB HBM3"
date = 2026-12-01
source = "probe run.jsonl"
[measured.dims]
batch = 4
seq_len = 2048
[measured.versions]
torch = "2.13.0"
cuda = "12.8"
driver = "570.86.15"
"""

TRIAGE = """
[[triage]]
time = "2026-12-01T10:00:00+00:00"
phase = "generate"
framework = "vllm"
variable = "cache"
change = "concurrency 16 -> 12"
predicted_peak_bytes = 30000000000
outcome = "pending"
[triage.figures]
tried_to_allocate = 2147483648
"""

SECTION_TITLES = (
    "At a glance",
    "Workload",
    "Memory per GPU",
    "item (estimated unless marked)",  # the itemised ledger, inside the memory section
    "Measured beside estimated",
    "Staged validation plan",
    "Measurement conditions",
    "Shortlist decision",
    "Triage log",
    "What would invalidate this conclusion",
)
# Non-blank lines of a sample's Markdown sheet. bench/sheet_pages.py prints every sample, the
# 70B TP=2 case and two cases with 6 measured figures and 3 or 7 triage entries (up to 85
# lines) on one A4 and one Letter page; every sample stays well under them.
MARKDOWN_LINE_BUDGET = 80


# ---------------------------------------------------------------------------- helpers


VOID = {"meta", "br", "hr", "img", "link", "input", "col", "wbr", "source", "area", "base"}


class BalancedHTML(HTMLParser):
    """Checks that every non-void tag is closed in order; collects the text a reader sees."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []
        self.tags: list[str] = []
        self.in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "style":
            self.in_style = True
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        if tag == "style":
            self.in_style = False
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data):
        if not self.in_style:
            self.text.append(data)


def parse_html(doc: str) -> BalancedHTML:
    p = BalancedHTML()
    p.feed(doc)
    p.close()
    assert p.errors == [], p.errors[:5]
    assert p.stack == [], f"unclosed tags: {p.stack}"
    return p


def html_text(doc: str) -> str:
    """What a browser shows, whitespace collapsed (entities decoded)."""
    return " ".join("".join(parse_html(doc).text).split())


def both(spec_path, **kw) -> tuple[str, str]:
    sheet = sheet_for_file(spec_path, today=TODAY, **kw)
    return render_markdown(sheet), render_html(sheet)


def spec_with(tmp_path: Path, extra: str, base: Path = LLAMA, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(base.read_text() + "\n" + extra)
    return path


# -------------------------------------------------------------------- required fields


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_every_sample_sheet_has_every_required_field(path):
    inputs = build_sheet_inputs(path, today=TODAY)
    spec, est = inputs.spec, inputs.estimate
    md, doc = both(path)
    text = html_text(doc)
    lg, b = spec.lengths, spec.batch
    wanted = [
        *SECTION_TITLES,
        f"Sizing sheet: {spec.name}",
        "Generated 2026-12-02",
        path.name,
        "1 GiB = 2^30 B",
        # model and revision
        spec.model.id or "a bare parameter count",
        # task, precision
        {"inference": "inference", "full_finetune": "full fine-tune", "qlora": "QLoRA"}.get(
            spec.task.kind, spec.task.kind
        ),
        spec.weights.format,
        # lengths, batch or concurrency
        f"{lg.context_tokens:,} tokens per sequence",
        f"{b.concurrency} concurrent sequence"
        if not spec.is_training
        else f"micro-batch {b.micro_batch} x grad_accum {b.grad_accum or 1}",
        # memory per GPU: GiB with exact bytes, labelled estimated
        exact(est.peak_bytes),
        exact(est.weights_only_bytes),
        exact(est.conservative_bound_bytes),
        "estimated",
        "a bound, not a peak",
        "--explain",
        # quality criteria (what "another evaluation" refers to)
        *(q.metric for q in spec.quality),
        # the shortlist decision, kept apart
        "The shortlist ranks; the choice is yours",
        "it ranks, the choice is yours",
        # invalidating factors
        "A longer window",
        "Another evaluation",
        "Another weight format",
        "Nothing measured yet",
        "No measurement yet",
        "No out-of-memory triage recorded",
    ]
    if spec.training is not None:
        wanted.append(f"checkpointing {spec.training.grad_checkpointing}")
    if spec.model.id is not None:
        wanted.append("revision not pinned")  # no sample pins one
    for needle in wanted:
        assert needle in md, f"Markdown lacks {needle!r}"
        assert needle in text, f"HTML lacks {needle!r}"
    for unknown in est.unknown_items:
        assert unknown.name in md and unknown.name in text


def test_seed_sheet_worked_by_hand():
    md, doc = both(SEED)
    text = html_text(doc)
    for needle in (
        # 7e9 parameters x 2 B = 14,000,000,000 B = 13.04 GiB (the seed's worked example)
        "Weights only: 13.04 GiB (14,000,000,000 B)",
        # + the manual 6 GiB reserve (6 x 2^30 = 6,442,450,944 B) = 19.04 GiB
        "19.04 GiB (20,442,450,944 B)",
        "manual reserve 6.00 GiB (6,442,450,944 B)",
        "2,048 prompt + 256 generated = 2,304 tokens per sequence",
        "1 concurrent sequence (2,304 tokens held at once)",
        "fp16",
        "priced for 3 day(s) (campaign.days in the spec)",
        "A manual reserve",
    ):
        assert needle in md, needle
        assert needle in text, needle
    # A bare parameter count has no revision to pin.
    assert "revision not pinned" not in md


def test_llama_sheet_kv_growth_worked_by_hand():
    md, _ = both(LLAMA)
    # KV cache: 2 (K,V) x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token;
    # 16 sequences x 8,192 tokens = 17,179,869,184 B = 16.00 GiB; each extra 1,024 tokens per
    # sequence: 16 x 1,024 x 131,072 B = 2 GiB.
    assert "| KV cache (bf16) | 16.00 GiB | prefill, decode |" in md
    assert "each extra 1,024 tokens per sequence (2.00 GiB of it KV cache)" in md
    # The weight parts share one ledger row; 8,030,261,248 parameters x 2 B = 16,060,522,496 B
    assert "| Weights: embedding, attention, MLP, norms, lm_head | 14.96 GiB | all |" in md
    assert "Weights only: 14.96 GiB (16,060,522,496 B)" in md
    assert "**revision not pinned**" in md
    assert "16 concurrent sequences (131,072 tokens held at once)" in md


# ------------------------------------------------------------------ measured, triage


def test_measured_figure_with_counter_coverage_and_conditions(tmp_path):
    path = spec_with(tmp_path, MEASURED)
    md, doc = both(path)
    text = html_text(doc)
    for needle in (
        "15.83 GiB (17,000,000,000 B)",  # 17e9 / 2^30
        "torch.cuda.max_memory_allocated (peak since the stage started)",
        "peak allocated to tensors",
        "4 x 2,048 tokens",
        "does not validate the required workload",
        "concurrent sequences 4 < required 16",
        "NVIDIA H100 80GB HBM3 (GPU 0)",
        "570.86.15",
        "2.13.0",
        "12.8",
        "2026-12-01",
        "probe run.jsonl",
        "Measurements that do not validate the workload",
        "A different GPU than measured",
        "Other software versions",
    ):
        assert needle in md, needle  # " < " with spaces is not escaped: GFM prints it
        assert needle in text, needle
    assert "No measurement yet" not in md
    # The coloured label carries the words, and its class says it is the failing flag; the
    # stage table flags the figure too.
    assert '<span class="st st-invalid">does not validate the required workload' in doc
    assert "| 15.83 GiB peak allocated, GPU 0 **does not validate** |" in md
    # vLLM is the spec's engine: its version is asked for and said to be missing.
    assert "vLLM **not recorded**" in md
    # What the estimate covers is the estimate's tooltip in HTML.
    assert 'title="estimate: known tensor items live at prefill on GPU 0' in doc


ITEM_AND_COUNT = """
[[measured]]
stage = "load"
quantity = "item"
item = "overhead.cuda_context"
bytes = 600000000
counter = "NVML process memory before the first tensor"
device = "NVIDIA RTX A6000"
source = "feed"

[[measured]]
stage = "decode"
quantity = "kv_cache_tokens"
value = 150000
counter = "vLLM 'GPU KV cache size: N tokens'"
source = "vllm.log"
[measured.dims]
max_model_len = 8192
"""


def test_measured_item_replaces_its_estimate_and_counts_stay_counts(tmp_path):
    md, _ = both(spec_with(tmp_path, ITEM_AND_COUNT))
    # 600,000,000 B = 0.56 GiB replaces the 512 MiB assumption; the sheet keeps both.
    row = "| CUDA context and library workspaces measured (estimate 0.50 GiB) | 0.56 GiB | all |"
    assert row in md
    assert "0.56 GiB (600,000,000 B) against 0.50 GiB estimated (+60.20 MiB, +12%)" in md
    # 16 x 8,192 = 131,072 tokens needed against 150,000 tokens of capacity: +14%.
    assert "150,000 tokens against 131,072 tokens needed (+14% capacity)" in md
    assert "Items: 10 estimated, 1 measured" in md
    assert "Measured: 2 figure(s), 2 validate the required workload" in md
    # Measured on the top-ranked offer's card, so no "different GPU" factor; the CUDA context
    # is no longer an assumption.
    assert "A different GPU than measured" not in md
    assert "Assumed overheads** (`[[measured]] item`): Allocator fragmentation" in md


def test_triage_attempt_is_on_the_sheet(tmp_path):
    path = spec_with(tmp_path, TRIAGE)
    md, doc = both(path)
    text = html_text(doc)
    for needle in (
        "2026-12-01 10:00 UTC",  # 2026-12-01T10:00:00+00:00
        "generate (vllm)",
        "concurrency 16 -> 12 [cache]",  # raw and readable in the Markdown too
        "tried to allocate 2.00 GiB",
        "predicted 27.94 GiB (30,000,000,000 B)",  # 30e9 / 2^30
        "pending",
        "1 attempt(s), one change each.",
        "An unconfirmed triage change",
    ):
        assert needle in text, needle
        assert needle in md, needle
    assert "No out-of-memory triage recorded" not in md


def test_triage_log_shows_the_last_attempts_and_counts_the_rest(tmp_path):
    total = SHOW_TRIAGE + 2
    attempts = "".join(
        TRIAGE.replace("T10:00", f"T{10 + i:02d}:00").replace("16 -> 12", f"attempt {i}")
        for i in range(total)
    )
    md, doc = both(spec_with(tmp_path, attempts))
    text = html_text(doc)
    for i in range(total):
        shown = i >= total - SHOW_TRIAGE
        assert (f"concurrency attempt {i} [cache]" in md) is shown, i
        assert (f"concurrency attempt {i} [cache]" in text) is shown, i
    note = f"{total} attempt(s), one change each; the last {SHOW_TRIAGE} shown, 2 earlier ones"
    assert note in md and note in text
    # The pending changes are one factor: the latest two named, the others counted.
    assert "**An unconfirmed triage changes**" in md
    assert f"; {total - 2} earlier pending" in md


def test_relative_model_path_resolves_against_the_spec(tmp_path, monkeypatch):
    model = tmp_path / "specs" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "vocab_size": 128,
                "max_position_embeddings": 256,
                "torch_dtype": "bfloat16",
                "tie_word_embeddings": False,
            }
        )
    )
    spec = tmp_path / "specs" / "tiny.toml"
    spec.write_text(
        SEED.read_text()
        .replace("params = 7e9", 'path = "tiny"')
        .replace('mode = "manual"', 'mode = "itemised"')
        .replace("reserve_gib = 6.0\n", "")
        .replace('reason = "the seed\'s chosen reserve, an assumption to verify"\n', "")
        .replace("prompt_tokens = 2048", "prompt_tokens = 128")
        .replace("generated_tokens = 256", "generated_tokens = 64")
    )
    monkeypatch.chdir(tmp_path)
    md = write_sheet(spec, today=TODAY)
    assert "local directory tiny" in md
    assert "(llama, 2 layers)" in md


# ------------------------------------------------------------------------- rendering


def test_html_is_balanced_self_contained_printable_and_escaped(tmp_path):
    hostile = '<script>alert("x")</script> & | *bold* _it_ `tick` [link](http://x)'
    path = spec_with(
        tmp_path,
        "",
        base=SEED,
    )
    text = path.read_text()
    text = text.replace(
        'name = "Seed example: 7B parameters, 16-bit inference"', f"name = {json.dumps(hostile)}"
    )
    text = text.replace(
        'description = "7e9', f"description = {json.dumps('- ' + hostile)[:-1]} 7e9"
    )
    path.write_text(text)
    md, doc = both(path)
    parser = parse_html(doc)
    assert doc.startswith("<!DOCTYPE html>")
    assert "<script" not in doc and "&lt;script&gt;" in doc
    assert "@media print" in doc and "@page" in doc
    assert parser.tags.count("style") == 1
    for external in ("<link", "src=", "@import", "url(", "<img"):
        assert external not in doc
    assert hostile in html_text(doc)  # shown as written
    # Markdown: escaped so that nothing becomes a tag, a link, emphasis or a table column.
    assert not re.search(r"(?<!\\)<[A-Za-z/!?]", md)  # no raw HTML can open
    assert "\\<script>alert" in md and "\\</script>" in md
    assert "\\*bold\\*" in md and "\\_it\\_" in md and "\\`tick\\`" in md
    assert "[link\\](http://x)" in md and " \\| " in md
    assert "\n\\- " in md  # the description does not start a list


def test_html_has_the_one_page_print_layout():
    _, doc = both(LLAMA)
    css = doc[doc.index("<style>") : doc.index("</style>")]
    assert re.search(r"@page\s*\{[^}]*size:\s*portrait;[^}]*margin:", css)
    print_rules = css[css.index("@media print") :]
    # Two columns at about 7pt, tight tables, the header kept compact.
    assert re.search(r"\.cols\s*\{[^}]*column-count:\s*2", print_rules)
    assert re.search(r"html, body\s*\{[^}]*font-size:\s*7(\.\d+)?pt", print_rules)
    assert re.search(r"th, td\s*\{[^}]*padding:\s*0 ", print_rules)
    assert re.search(r"tr[^{]*\{[^}]*break-inside:\s*avoid", print_rules)
    # The sections flow in the columns; the header and the summary span the page.
    body = doc[doc.index("<main>") :]
    assert body.index('<section class="glance"') < body.index('<div class="cols">')
    assert body.index('<div class="cols">') < body.index('<section id="workload">')
    assert body.rstrip().endswith("</div>\n</main>\n</body>\n</html>")


@pytest.mark.parametrize("path", [*SAMPLES, LLAMA_70B_TP2], ids=lambda p: p.stem)
def test_markdown_stays_within_its_line_budget(path):
    md, _ = both(path)
    lines = [line for line in md.splitlines() if line.strip()]
    assert len(lines) <= MARKDOWN_LINE_BUDGET, len(lines)


def test_70b_tp2_sheet_is_compact_and_keeps_its_figures():
    md, doc = both(LLAMA_70B_TP2)
    text = html_text(doc)
    for needle in (
        # 70,553,706,496 parameters x 2 B / 2 GPUs (TP=2) = 70,553,706,496 B = 65.71 GiB
        "| Weights: embedding, attention, MLP, norms, lm_head | 65.71 GiB | all |",
        "Weights only: 131.42 GiB (141,107,412,992 B)",
        # KV: 2 x 80 layers x 4 KV heads per GPU x 128 x 2 B = 163,840 B per token, x 8 x
        # 4,608 tokens = 6,039,797,760 B = 5.625 GiB, printed 5.62 GiB
        "| KV cache (bf16) | 5.62 GiB | prefill, decode |",
        "**Precision:** bf16; KV cache bf16, paged blocks of 16 tokens",
        "**Lengths:** 4,096 prompt + 512 generated = 4,608 tokens per sequence",
        "**Concurrency:** 8 concurrent sequences (36,864 tokens held at once)",
        # the staged plan in one line, every step with its status
        (
            "**Staged validation plan** (only the required limit validates the workload): "
            "**load the model** (no inputs): not run; **short inputs, small batch** (1 x 512 tokens): "
            "not run; **typical inputs** (4 x 2,304 tokens): not run; **the required limit** "
            "(8 x 4,608 tokens): not run."
        ),
    ):
        assert needle in md, needle
    assert "2 GPUs: TP 2 x PP 1 x DP 1" in md and "2 GPUs: TP 2 x PP 1 x DP 1" in text
    assert (
        "Staged validation plan (only the required limit validates the workload): load the "
        "model (no inputs): not run;" in text
    )
    # 63 non-blank lines, down from 67 before the plan's note and 4 steps became one line
    assert len([line for line in md.splitlines() if line.strip()]) == 63


def test_evidence_is_cited_in_short_with_the_full_source_kept():
    md, doc = both(LLAMA)
    # The top fit offers' usable-memory figures, with a source label and the URL's tail; the
    # full source (a quote and the whole URL) is the label's tooltip in HTML only. #1 is fit on
    # an unverified figure whose whole bounded range holds the estimate (capacity_bounds).
    assert "**#1**: NVIDIA RTX A6000 nvml total = 49140 MiB (unverified figure; not located" in md
    assert "**#2**: NVIDIA L40S cuda total = 44.53 GiB (verified figure; PyTorch OOM" in md
    assert "github.com/…/issues/205)" in md and "https://" not in md
    assert (
        'title="PyTorch OOM message &#x27;total capacity&#x27; quoted in https://github.com/' in doc
    )
    assert "Offer evidence: illustrative sample data shipped with vramtui, vramtui catalogue " in md
    # Needs verification: the cheapest three with what to check, then a count.
    assert "5 need verification (the 3 cheapest, with what to check; 2 more" in md
    assert "327.60 EUR: convert 327.60 EUR to USD to rank it" in md
    assert "**8 excluded** by an established failure" in md


def test_source_labels_and_short_urls():
    assert short_url("https://github.com/Wan-Video/Wan2.1/issues/205") == (
        "github.com/…/issues/205"
    )
    assert short_url("https://www.nvidia.com/en-us/") == "nvidia.com/en-us"
    assert source_label("NVIDIA L4 Tensor Core GPU datasheet, nvidia.com") == (
        "NVIDIA L4 Tensor Core GPU datasheet, nvidia.com"
    )
    long = (
        "CUDA deviceQuery 'Total amount of global memory: 40339 MBytes (42298834944 bytes)' "
        "for 'NVIDIA A100-SXM4-40GB' quoted in https://github.com/o/r/pull/3873 (an aside)"
    )
    assert source_label(long) == "CUDA deviceQuery, github.com/…/pull/3873"
    label = source_label("x " * 60)
    assert len(label) <= 57 and label.endswith("…")


def test_markdown_stays_readable_raw(tmp_path):
    path = spec_with(tmp_path, MEASURED)
    md, _ = both(path)
    # Comparisons, brackets and arrows are left as written; nothing here opens markup.
    assert "concurrent sequences 4 < required 16" in md
    assert "\\<" not in md and "\\[" not in md and "\\>" not in md


def test_status_labels_carry_words_not_only_colours():
    _, doc = both(LLAMA)
    for status in ("estimated", "fit", "excluded"):
        assert f'class="st st-{status}">' in doc
    assert '<span class="st st-worst">worst stage</span>' in doc
    assert '<span class="st st-estimated">11 estimated</span>' in doc


def test_markdown_tables_have_one_cell_per_column():
    md, _ = both(ROOT / "sample_specs" / "full-finetune-zero3-4gpu.toml")
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| ---"):
            width = line.count("|")
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                unescaped = lines[j].replace("\\|", "")
                assert unescaped.count("|") == width, lines[j]
                j += 1


def test_output_is_reproducible_and_names_no_machine_path():
    a = write_sheet(LLAMA, today=TODAY)
    b = write_sheet(LLAMA, today=TODAY)
    assert a == b
    assert str(ROOT) not in a and "Generated 2026-12-02" in a


# ---------------------------------------------------------------------- files, errors


def test_write_markdown_and_html_atomically(tmp_path):
    md_path = tmp_path / "sheet.md"
    html_path = tmp_path / "sheet.HTML"
    text = write_sheet(SEED, md_path, today=TODAY)
    assert md_path.read_text() == text and text.startswith("# Sizing sheet:")
    text = write_sheet(SEED, html_path, today=TODAY)
    assert html_path.read_text() == text and text.startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sheet.HTML", "sheet.md"]


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    out = tmp_path / "sheet.md"
    out.write_text("old sheet\n")
    import vramtui.fsutil

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(vramtui.fsutil.os, "replace", refuse)
    with pytest.raises(SheetError) as exc:
        write_sheet(SEED, out, today=TODAY)
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(f"sheet: cannot write '{out}': No space left on device")
    assert out.read_text() == "old sheet\n"
    assert [p.name for p in tmp_path.iterdir()] == ["sheet.md"]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("report.pdf", "sheet: unknown output format '.pdf'; use FILE.md or FILE.html"),
        ("report", "has no suffix; use FILE.md or FILE.html"),
    ],
)
def test_bad_output_suffix_is_one_line(tmp_path, name, expected):
    out = tmp_path / name
    with pytest.raises(SheetError) as exc:
        write_sheet(SEED, out, today=TODAY)
    assert expected in str(exc.value) and "\n" not in str(exc.value)
    assert not out.exists()


def test_output_checked_before_the_spec_is_read(tmp_path):
    with pytest.raises(SheetError, match=r"unknown output format '\.pdf'"):
        write_sheet(tmp_path / "missing.toml", tmp_path / "x.pdf")


def test_unwritable_outputs_name_the_directory_and_the_fix(tmp_path):
    missing = tmp_path / "no-such-dir" / "sheet.md"
    with pytest.raises(SheetError) as exc:
        write_sheet(SEED, missing, today=TODAY)
    msg = str(exc.value)
    assert f"directory '{missing.parent}' does not exist" in msg and "create it" in msg
    assert "\n" not in msg

    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(SheetError, match="is not a directory"):
        write_sheet(SEED, a_file / "sheet.md", today=TODAY)

    a_dir = tmp_path / "out.md"
    a_dir.mkdir()
    with pytest.raises(SheetError, match="is a directory; give a file name"):
        write_sheet(SEED, a_dir, today=TODAY)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can write anywhere"
)
def test_read_only_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(SheetError, match="is not writable"):
            write_sheet(SEED, ro / "sheet.md", today=TODAY)
    finally:
        ro.chmod(0o700)


def test_not_writable_directory_even_as_root(tmp_path, monkeypatch):
    from vramtui.sheet import command

    monkeypatch.setattr(command.os, "access", lambda path, mode: False)
    with pytest.raises(SheetError) as exc:
        write_sheet(SEED, tmp_path / "sheet.md", today=TODAY)
    assert str(exc.value) == (
        f"sheet: cannot write '{tmp_path / 'sheet.md'}': directory '{tmp_path}' is not "
        "writable; choose a directory you can write to"
    )


def test_malformed_spec_error_passes_through(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SEED.read_text().replace('format = "fp16"', 'format = "fp17"'))
    with pytest.raises(SpecError) as exc:
        write_sheet(bad, today=TODAY)
    assert "weights.format" in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(SpecError, match="not found"):
        write_sheet(tmp_path / "missing.toml")


# ------------------------------------------------------------------------ command line


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="vramtui")
    sub = parser.add_subparsers(dest="command")
    add_sheet_parser(sub)
    return cmd_sheet(parser.parse_args(argv))


def test_cmd_sheet_prints_markdown_and_writes_files(tmp_path, capsys):
    assert run_cli(["sheet", str(SEED), "--today", "2026-12-02"]) == 0
    out = capsys.readouterr().out
    assert out == write_sheet(SEED, today=TODAY)
    target = tmp_path / "seed.html"
    assert run_cli(["sheet", str(SEED), "-o", str(target), "--today", "2026-12-02"]) == 0
    assert "written to" in capsys.readouterr().out
    assert target.read_text().startswith("<!DOCTYPE html>")


def test_cmd_sheet_bad_today_is_one_line():
    with pytest.raises(VramtuiError, match=r"--today must be a date such as 2026-12-02"):
        run_cli(["sheet", str(SEED), "--today", "tomorrow"])


def test_save_sheet_for_the_app_export(tmp_path):
    sheet = sheet_for_file(SEED, today=TODAY)
    text = save_sheet(sheet, tmp_path / "export.htm")
    assert (tmp_path / "export.htm").read_text() == text and "</html>" in text


def test_the_sheet_never_imports_textual():
    code = (
        "import sys, datetime\n"
        "from vramtui.sheet.command import write_sheet\n"
        f"write_sheet({str(LLAMA)!r}, today=datetime.date(2026, 12, 2))\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'textual'], 'textual loaded'\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tui"))
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
