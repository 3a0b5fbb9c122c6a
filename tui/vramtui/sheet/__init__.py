"""The one-page sizing sheet: the calculation kept with what confirms it.

`model.build_sheet` gathers, as plain data, what the seed asks a sizing result to state on one
sheet - model and revision, task, precision, lengths, micro-batch or concurrency, memory per GPU
(estimated and measured, with counters and units), the measurement conditions, the shortlist
decision with its evidence, the triage log and the factors that would invalidate the
conclusion. One concept a module: `blocks` (the document), `figures` (bytes, per-GPU queries),
`describe` (spec fields in words), `memory`, `measured`, `decision` and `factors` (their
sections), `model` (build_sheet, the header, summary, workload and triage).
`markdown.render_markdown` and `html.render_html` print the same sheet (the HTML on one A4 or
Letter page: `bench/sheet_pages.py` checks it); `command` is
`vramtui sheet SPEC.toml [-o FILE.md|FILE.html]`. Nothing here imports Textual.
"""
