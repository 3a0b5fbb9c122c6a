"""Does the sizing sheet print on one page? Every sample spec, on A4 and on Letter, for real.

For each case the HTML sheet (dated 2026-12-02, as in docs/examples) is printed to PDF by
headless Chromium, once with `@page { size: A4 }` and once with `@page { size: letter }`
appended to a temporary copy (the sheet itself keeps the printer's paper size), and the pages
of the PDF are counted: the `/Type /Page` objects (not `/Pages`), checked against `pdfinfo`
where poppler-utils is installed. The paper size is read back from the first /MediaBox.

Cases: every spec in sample_specs/, the 70B TP=2 inference spec of the sheet tests
(tests/sheet_specs/, Llama 3.1 70B Instruct in bf16 on 2 GPUs), plus two built here: the 8B
chat spec with 6 [[measured]] figures and 3 [[triage]] entries, and the 4-GPU full fine-tune
with 6 figures and 7 entries (the sheet shows the last 5 and counts the rest).

    PYTHONPATH=tui python bench/sheet_pages.py [--save] [--keep DIR]

--save writes the table to bench/results/sheet-pages-<YYYY-MM-DD>.txt as well; --keep leaves
the HTML and PDF files in DIR. The last column says how much room each page has left: the
largest print font enlargement (5% steps) at which the case still fits one Letter page. Without Chromium (chromium, chromium-browser, google-chrome or
$CHROMIUM) the script says so and exits 0: it is a bench, not a test, and CI has no browser.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from vramtui.sheet.command import sheet_for_file
from vramtui.sheet.html import render_html
from vramtui.sheet.markdown import render_markdown

TODAY = dt.date(2026, 12, 2)
PAPERS = {"A4": (595.0, 842.0), "Letter": (612.0, 792.0)}  # PostScript points, portrait
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")  # a page object; /Pages is the tree node
_PRINT_FONT = re.compile(r"@media print \{\s*html, body \{ font-size: ([\d.]+)pt;")
_MEDIABOX = re.compile(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]")


def _measured(
    i,
    stage,
    quantity,
    *,
    counter,
    bytes_=None,
    value=None,
    dims=None,
    item=None,
    device="NVIDIA L40S",
    gpu=0,
    source="probe run.jsonl",
) -> str:
    lines = ["[[measured]]", f'stage = "{stage}"', f'quantity = "{quantity}"']
    if bytes_ is not None:
        lines.append(f"bytes = {bytes_}")
    if value is not None:
        lines.append(f"value = {value}")
    if item is not None:
        lines.append(f'item = "{item}"')
    lines += [
        f'counter = "{counter}"',
        f"gpu = {gpu}",
        f'device = "{device}"',
        f"date = 2026-12-0{1 + i % 2}",
        f'source = "{source}"',
        f'run = "run-{1 + i // 3}"',
    ]
    if dims:
        lines.append("[measured.dims]")
        lines += [f"{k} = {v}" for k, v in dims.items()]
    lines += [
        "[measured.versions]",
        'driver = "570.86.15"',
        'cuda = "12.8"',
        'torch = "2.6.0"',
    ]
    return "\n".join(lines) + "\n"


def _triage(i, phase, framework, variable, change, predicted, outcome, figures=None) -> str:
    lines = [
        "[[triage]]",
        f'time = "2026-12-0{1 + i // 4}T{9 + i:02d}:15:00+00:00"',
        f'phase = "{phase}"',
        f'framework = "{framework}"',
        f'variable = "{variable}"',
        f'change = "{change}"',
        f"predicted_peak_bytes = {predicted}",
        f'outcome = "{outcome}"',
    ]
    if figures:
        lines.append("[triage.figures]")
        lines += [f"{k} = {v}" for k, v in figures.items()]
    return "\n".join(lines) + "\n"


def chat_extra() -> str:
    """6 measured figures (every kind the sheet lays out) and 3 triage entries, 8B chat."""
    m = [
        _measured(
            0,
            "load",
            "process_in_use",
            bytes_=17_400_000_000,
            counter="NVML per-process used memory after load",
        ),
        _measured(
            1,
            "prefill",
            "max_memory_allocated",
            bytes_=17_000_000_000,
            counter="torch.cuda.max_memory_allocated (peak since the stage started)",
            dims={"batch": 4, "seq_len": 2048},
        ),
        _measured(
            2,
            "decode",
            "max_memory_reserved",
            bytes_=33_900_000_000,
            counter="torch.cuda.max_memory_reserved (peak since the stage started)",
            dims={"batch": 16, "seq_len": 8192},
        ),
        _measured(
            3,
            "load",
            "item",
            bytes_=600_000_000,
            item="overhead.cuda_context",
            counter="NVML process memory before the first tensor",
        ),
        _measured(
            4,
            "decode",
            "kv_cache_tokens",
            value=150000,
            counter="vLLM 'GPU KV cache size: N tokens'",
            source="vllm.log",
            dims={"max_model_len": 8192},
        ),
        _measured(
            5,
            "decode",
            "kv_cache_pool",
            bytes_=19_700_000_000,
            counter="vLLM 'Available KV cache memory'",
            source="vllm.log",
        ),
    ]
    t = [
        _triage(
            0,
            "generate",
            "vllm",
            "cache",
            "concurrency 16 -> 12",
            30_000_000_000,
            "still out of memory",
            {"tried_to_allocate": 2_147_483_648},
        ),
        _triage(
            1, "generate", "vllm", "cache", "kv_cache_dtype bf16 -> fp8", 26_000_000_000, "fixed"
        ),
        _triage(
            2,
            "generate",
            "vllm",
            "allocator",
            "gpu_memory_utilization 0.95 -> 0.90",
            26_000_000_000,
            "pending",
        ),
    ]
    return "\n" + "\n".join(m + t)


def finetune_extra() -> str:
    """6 measured figures over the training stages and 7 triage entries, 4-GPU full FT."""
    stages = ("forward", "backward", "optimizer_step", "validation")
    m = [
        _measured(
            i,
            s,
            "max_memory_allocated",
            bytes_=40_000_000_000 + i * 2_500_000_000,
            counter="torch.cuda.max_memory_allocated (peak since the stage started)",
            device="NVIDIA H100 80GB HBM3",
            gpu=i % 4,
            dims={"batch": 2 if i % 2 else 1, "seq_len": 4096},
        )
        for i, s in enumerate(stages)
    ]
    m.append(
        _measured(
            4,
            "load",
            "item",
            bytes_=620_000_000,
            item="overhead.cuda_context",
            device="NVIDIA H100 80GB HBM3",
            counter="NVML process memory before the first tensor",
        )
    )
    m.append(
        _measured(
            5,
            "backward",
            "max_memory_reserved",
            bytes_=55_000_000_000,
            device="NVIDIA H100 80GB HBM3",
            gpu=0,
            counter="torch.cuda.max_memory_reserved (peak since the stage started)",
            dims={"batch": 2, "seq_len": 4096},
        )
    )
    changes = [
        ("backward", "micro_batch", "micro_batch 4 -> 2, grad_accum 4 -> 8", "still out of memory"),
        ("backward", "activation", "gradient checkpointing selective -> full", "fixed"),
        ("optimizer_step", "precision", "adamw states fp32 -> bf16", "still out of memory"),
        ("optimizer_step", "allocator", "expandable_segments:True", "fixed"),
        ("train_forward", "micro_batch", "seq_len 8192 -> 4096", "fixed"),
        ("backward", "capacity", "4 -> 8 GPUs (ZeRO-3)", "still out of memory"),
        ("backward", "allocator", "max_split_size_mb:512", "pending"),
    ]
    t = [
        _triage(
            i,
            ph,
            "transformers",
            var,
            ch,
            50_000_000_000 + i * 10**9,
            out,
            {"tried_to_allocate": 1_073_741_824 * (1 + i % 3)},
        )
        for i, (ph, var, ch, out) in enumerate(changes)
    ]
    return "\n" + "\n".join(m + t)


def cases(tmp: Path) -> list[tuple[str, Path]]:
    out = [(p.stem, p) for p in sorted((REPO / "sample_specs").glob("*.toml"))]
    out += [(p.stem, p) for p in sorted((REPO / "tests" / "sheet_specs").glob("*.toml"))]
    built = [
        ("llama-3.1-8b-chat + 6 measured + 3 triage", "llama-3.1-8b-chat-8k-x16", chat_extra()),
        (
            "full-finetune-zero3 + 6 measured + 7 triage",
            "full-finetune-zero3-4gpu",
            finetune_extra(),
        ),
    ]
    for label, base, extra in built:
        path = tmp / f"{base}-measured.toml"
        path.write_text((REPO / "sample_specs" / f"{base}.toml").read_text() + extra)
        out.append((label, path))
    return out


def find_browser() -> str | None:
    named = os.environ.get("CHROMIUM")
    if named:
        return shutil.which(named) or (named if Path(named).is_file() else None)
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def with_paper(doc: str, paper: str) -> str:
    """The sheet with `@page { size: PAPER }` after its own rules (the later rule wins)."""
    rule = f"<style>@page {{ size: {paper} portrait; }}</style>\n"
    return doc.replace("</head>", rule + "</head>", 1)


def with_font_scale(doc: str, scale: float) -> str:
    """The sheet with its print font size times `scale` (everything in em follows it)."""
    m = _PRINT_FONT.search(doc)
    if m is None:
        raise RuntimeError("the sheet's print font size (html, body { font-size: Npt }) is gone")
    size = float(m.group(1)) * scale
    rule = (
        f"<style>@media print {{ html, body {{ font-size: {size:.2f}pt !important; }} }}</style>\n"
    )
    return doc.replace("</head>", rule + "</head>", 1)


def headroom(browser: str, doc: str, tmp: Path, stem: str) -> str:
    """The largest print font scale, in steps of 5% up to +20%, at which the sheet still fits
    one Letter page (the shorter paper): how much room the page has left."""
    best = "none"
    for step in range(1, 5):
        scale = 1 + step * 0.05
        html_path = tmp / f"{stem}-Letter-x{scale:.2f}.html"
        pdf_path = tmp / f"{stem}-Letter-x{scale:.2f}.pdf"
        html_path.write_text(with_font_scale(with_paper(doc, "Letter"), scale))
        print_pdf(browser, html_path, pdf_path)
        if count_pages(pdf_path.read_bytes()) != 1:
            break
        best = f"+{step * 5}%"
    return best


def print_pdf(browser: str, html_path: Path, pdf_path: Path) -> None:
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-pdf-header-footer",
        f"--print-to-pdf={pdf_path}",
        html_path.as_uri(),
    ]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    if not pdf_path.is_file() or pdf_path.stat().st_size == 0:
        raise RuntimeError(f"{browser} wrote no PDF for {html_path.name}")


def count_pages(pdf: bytes) -> int:
    return len(_PAGE.findall(pdf))


def media_box(pdf: bytes) -> tuple[float, float] | None:
    m = _MEDIABOX.search(pdf)
    if m is None:
        return None
    x0, y0, x1, y1 = (float(v) for v in m.groups())
    return (x1 - x0, y1 - y0)


def paper_name(box: tuple[float, float] | None) -> str:
    if box is None:
        return "?"
    for name, (w, h) in PAPERS.items():
        if abs(box[0] - w) < 2 and abs(box[1] - h) < 2:
            return name
    return f"{box[0]:.0f}x{box[1]:.0f}pt"


def pdfinfo_pages(pdf_path: Path) -> int | None:
    tool = shutil.which("pdfinfo")
    if tool is None:
        return None
    out = subprocess.run([tool, str(pdf_path)], capture_output=True, text=True, check=False)
    m = re.search(r"^Pages:\s+(\d+)", out.stdout, re.MULTILINE)
    return int(m.group(1)) if m else None


def markdown_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--save", action="store_true", help="write bench/results/sheet-pages-DATE.txt")
    ap.add_argument("--keep", metavar="DIR", help="leave the HTML and PDF files in DIR")
    args = ap.parse_args(argv)
    browser = find_browser()
    if browser is None:
        print(
            "sheet_pages: skipped: no Chromium found (chromium, chromium-browser, google-chrome "
            "or $CHROMIUM); install one (Debian: apt-get install chromium) to count pages"
        )
        return 0
    version = subprocess.run(
        [browser, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="sheet-pages-") as tmp_name:
        tmp = Path(args.keep) if args.keep else Path(tmp_name)
        tmp.mkdir(parents=True, exist_ok=True)
        rows = []
        for label, spec in cases(tmp):
            sheet = sheet_for_file(spec, today=TODAY)
            doc = render_html(sheet)
            md = render_markdown(sheet)
            row = [label, str(markdown_lines(md))]
            stem = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")
            for paper in PAPERS:
                html_path = tmp / f"{stem}-{paper}.html"
                pdf_path = tmp / f"{stem}-{paper}.pdf"
                html_path.write_text(with_paper(doc, paper))
                print_pdf(browser, html_path, pdf_path)
                pdf = pdf_path.read_bytes()
                pages = count_pages(pdf)
                check = pdfinfo_pages(pdf_path)
                if check is not None and check != pages:
                    raise RuntimeError(f"{pdf_path.name}: {pages} /Page objects, pdfinfo {check}")
                got = paper_name(media_box(pdf))
                if got != paper:
                    raise RuntimeError(f"{pdf_path.name}: printed on {got}, not {paper}")
                row.append(str(pages))
            row.append(headroom(browser, doc, tmp, stem) if row[-1] == "1" else "-")
            rows.append(row)
    head = ["case", "Markdown lines (non-blank)", "A4 pages", "Letter pages", "font headroom"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def fmt(r):
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
        )

    one = all(r[2] == "1" and r[3] == "1" for r in rows)
    lines = [
        f"Sizing sheet: printed pages per case (bench/sheet_pages.py, {dt.date.today()})",
        f"Browser: {version}; sheet dated {TODAY}; pages = /Type /Page objects in the PDF"
        + (" (= pdfinfo)" if shutil.which("pdfinfo") else ""),
        "",
        fmt(head),
        fmt(["-" * w for w in widths]),
        *(fmt(r) for r in rows),
        "font headroom: the largest print font enlargement (5% steps, up to +20%) at which the",
        "case still fits one Letter page; 'none' = the page is nearly full.",
        "",
        "Every case on one page, A4 and Letter." if one else "NOT every case fits one page.",
    ]
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if args.save:
        out = REPO / "bench" / "results" / f"sheet-pages-{dt.date.today()}.txt"
        out.write_text(report)
        print(f"written to {out.relative_to(REPO)}")
    return 0 if one else 1


if __name__ == "__main__":
    sys.exit(main())
