"""One editing session of a spec: what the form holds, the last valid spec and its results.

The app is a view of this object. Every edit goes through `set_field`; an edit that makes the
spec invalid is kept (the form shows it, with the reason on the field) while the estimate and
shortlist of the last valid spec stay on screen. Nothing here imports Textual.
"""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass, field
from pathlib import Path

from vramtui.errors import ModelError, SpecError, VramtuiError
from vramtui.ledger import Estimate, estimate
from vramtui.spec import Spec, load_spec, save_spec, spec_from_dict, spec_to_dict
from vramtui.spec_fields import (
    FIELDS_BY_PATH,
    FieldDef,
    FieldError,
    drop_stated_defaults,
    fields_for,
    get_value,
    locate_error,
    parse_text,
    prune_inapplicable,
    set_value,
    value_text,
)

FORM_SOURCE = "the form"


def form_of(spec: Spec) -> dict:
    """The form of a spec: its TOML-shaped dict, with the settings the spec holds at their
    stated defaults left empty, so that the form shows them as defaults (a save still writes
    them: the spec is the same)."""
    form = spec_to_dict(spec)
    drop_stated_defaults(form)
    return form


@dataclass
class Results:
    spec: Spec
    arch: object | None
    estimate: Estimate
    shortlist: object | None  # vramtui.shortlist.Shortlist
    checkpoint: object | None = None  # CheckpointInfo of a local model directory
    reserve_shortfall: object | None = None  # ledger.reserve_check.ReserveShortfall (manual mode)
    model_commit: str | None = None  # the commit a Hub model was sized at (pinned in the form)


@dataclass
class EditOutcome:
    valid: bool
    error_field: str | None = None
    message: str = ""
    layout_changed: bool = False  # the set of fields that apply changed (task, format, ...)
    changed: bool = True  # False: the text was what the field already held (nothing to redo)
    notes: tuple[str, ...] = ()  # what else the edit changed, in words (say it, offer undo)


UNDO_DEPTH = 100  # field edits that F3 can take back


@dataclass
class SizingSession:
    form: dict  # TOML-shaped spec as edited (may be invalid)
    results: Results
    path: Path | None = None  # the file the spec was opened from / saved to
    dirty: bool = False
    texts: dict[str, str] = field(default_factory=dict)  # typed texts that did not parse
    errors: dict[str, str] = field(default_factory=dict)  # field path -> one-line reason
    general_error: str = ""  # an error no field owns
    catalog: object | None = None
    days: float | None = None
    today: datetime.date | None = None
    triage_reading: object | None = None  # vramtui.triage.reader.TriageReading
    triage_advice: object | None = None  # vramtui.triage.advice.Advice
    triage_text: str | None = None  # the log last read (its workload lines are compared)
    triage_failed_gpu: object | None = None  # vramtui.catalog.Gpu the user named as the failed card
    undo_stack: list = field(default_factory=list)  # earlier forms, most recent last (bounded)
    save_warning: str | None = None  # the last save could not keep the file's comments: why

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_spec(
        cls, spec: Spec, path: Path | None = None, catalog=None, today: datetime.date | None = None
    ) -> SizingSession:
        form = form_of(spec)
        results = compute(spec, path.parent if path else None, catalog, None, today)
        session = cls(form=form, results=results, path=path, catalog=catalog, today=today)
        session._pin_model_commit(results)
        return session

    @classmethod
    def open(cls, path: Path, catalog=None) -> SizingSession:
        spec = load_spec(path)
        return cls.from_spec(spec, Path(path), catalog)

    @classmethod
    def from_draft(cls, draft, catalog=None) -> SizingSession:
        """Reopen a draft exactly as it was typed; the results come from the draft when it is a
        valid spec, else from its origin file, else from the built-in example.

        Raises DraftError (one line) when the draft's form cannot be shown and edited: a draft
        file is user data that may be damaged, and the app sets such a draft aside."""
        from vramtui.drafts import DraftError

        try:
            return cls._from_draft(draft, catalog)
        except VramtuiError as exc:
            raise DraftError(f"the draft cannot be recovered: {exc}") from None
        except (
            TypeError,
            ValueError,
            KeyError,
            IndexError,
            AttributeError,
            RecursionError,
            OverflowError,
        ) as exc:
            raise DraftError(
                f"the draft's form cannot be recovered ({type(exc).__name__}); it is damaged"
            ) from None

    @classmethod
    def _from_draft(cls, draft, catalog=None) -> SizingSession:
        from vramtui.builtin_specs import seed_example_spec

        if not isinstance(draft.form, dict) or not isinstance(draft.texts, dict):
            raise TypeError("form and texts must be tables")
        origin = Path(draft.origin) if draft.origin else None
        fallback = None
        try:
            if origin is not None and origin.is_file():
                fallback = load_spec(origin)
        except (VramtuiError, OSError, ValueError):
            fallback = None  # the origin is gone or damaged: the example stands in
        session = cls.from_spec(fallback or seed_example_spec(), origin, catalog)
        form = copy.deepcopy(draft.form)
        check_form_shape(form)
        session.form = form
        session.dirty = True
        for path, text in draft.texts.items():
            if path in FIELDS_BY_PATH:
                if not isinstance(text, str):
                    raise TypeError(f"texts.{path} is not a string")
                session.texts[path] = text
                try:
                    parse_text(FIELDS_BY_PATH[path], text)
                except FieldError as exc:
                    session.errors[path] = str(exc)
        session.revalidate()
        for f in session.fields():  # what the form shows: every value must render
            if not isinstance(session.text(f.path), str):
                raise TypeError(f"{f.path} cannot be shown")
        return session

    # ------------------------------------------------------------------ reading

    @property
    def spec(self) -> Spec:
        """The last valid spec (what the estimate and shortlist describe)."""
        return self.results.spec

    @property
    def is_valid(self) -> bool:
        return not self.errors and not self.general_error

    def fields(self) -> list[FieldDef]:
        return fields_for(self.form)

    def text(self, path: str) -> str:
        if path in self.texts:
            return self.texts[path]
        return value_text(FIELDS_BY_PATH[path], get_value(self.form, path))

    # ------------------------------------------------------------------ editing

    def set_field(self, path: str, text: str) -> EditOutcome:
        f = FIELDS_BY_PATH[path]
        before = [x.path for x in self.fields()]
        if text == self.text(path) and path not in self.errors:
            return EditOutcome(valid=self.is_valid, changed=False)
        self.dirty = True
        try:
            value = parse_text(f, text)
        except FieldError as exc:
            self.texts[path] = text
            self.errors[path] = str(exc)
            return EditOutcome(False, path, str(exc))
        self.texts.pop(path, None)
        self.errors.pop(path, None)
        form = copy.deepcopy(self.form)
        notes: list[str] = []
        if path == "task.kind":
            from vramtui.spec_overrides import switch_task

            notes = switch_task(form, value)
        elif path == "weights.format":
            from vramtui.spec_overrides import weights_for_format

            form["weights"] = weights_for_format(value, form.get("weights", {}))
        else:
            bare_before = "params" in form.get("model", {})
            set_value(form, path, value)
            if (
                path == "model"
                and bare_before
                and "params" not in form.get("model", {})
                and form.get("headroom", {}).get("mode") == "manual"
            ):
                # The seed's reserve stands in for a missing architecture (as `--model` on the
                # command line): a real model gets the itemised ledger.
                from vramtui.spec_overrides import leave_manual_reserve

                reserve = leave_manual_reserve(form)
                notes.append(
                    f"headroom switched from a manual {reserve} GiB reserve to the itemised "
                    "ledger: with a real model the KV cache, activations and overheads are "
                    "sized item by item"
                )
        if path != "name":  # another workload than the seed's: its description no longer fits
            from vramtui.builtin_specs import drop_seed_description

            drop_seed_description(form)
        prune_inapplicable(form)
        self.undo_stack.append(self.form)
        del self.undo_stack[:-UNDO_DEPTH]
        self.form = form
        outcome = self.revalidate()
        if path == "model" and outcome.valid:
            from vramtui.spec_overrides import gguf_form_defaults

            gguf_notes = gguf_form_defaults(self.form, self.results.arch)
            if gguf_notes:  # a GGUF file: sized as stored, for llama.cpp (as the CLI does)
                notes.extend(gguf_notes)
                prune_inapplicable(self.form)
                outcome = self.revalidate()
        outcome.layout_changed = before != [x.path for x in self.fields()]
        outcome.notes = tuple(notes)
        return outcome

    def undo(self) -> EditOutcome | None:
        """Back to the form before the last field edit (None: nothing to undo)."""
        if not self.undo_stack:
            return None
        before = [x.path for x in self.fields()]
        self.form = self.undo_stack.pop()
        self.texts.clear()
        self.errors.clear()
        self.dirty = True
        outcome = self.revalidate()
        outcome.layout_changed = before != [x.path for x in self.fields()]
        return outcome

    def revalidate(self) -> EditOutcome:
        """Re-read the whole form; on success recompute, else mark the field at fault."""
        if self.texts:
            path = next(iter(self.texts))
            return EditOutcome(False, path, self.errors.get(path, ""))
        try:
            spec = spec_from_dict(self.form, FORM_SOURCE)
            base = self.path.parent if self.path else None
            # Each key typed is an edit: the form looks in the caches only, and the Hub is
            # asked when the user presses Enter in the model field (fetch_model).
            results = compute(spec, base, self.catalog, self.days, self.today, hub=False)
        except ModelError as exc:
            return self._fail("model", str(exc))
        except (SpecError, VramtuiError) as exc:
            where = locate_error(str(exc), self.fields())
            return self._fail(where, str(exc))
        self._pin_model_commit(results)
        self.errors.clear()
        self.general_error = ""
        self.results = results
        return EditOutcome(True)

    def fetch_model(self) -> EditOutcome:
        """Ask the Hub for the model the form names (config.json and safetensors headers,
        kept in vramtui's cache), then recompute. Blocks on the network: run it off the UI
        thread."""
        from vramtui.models.resolve import resolve_model_ref

        try:
            spec = spec_from_dict(self.form, FORM_SOURCE)
            base = self.path.parent if self.path else None
            resolve_model_ref(spec.model, base, hub=True)
        except ModelError as exc:
            return self._fail("model", str(exc))
        except (SpecError, VramtuiError):
            pass  # another field is at fault: revalidate names it
        return self.revalidate()

    def _pin_model_commit(self, results: Results) -> None:
        """Record the commit a Hub model was sized at as `[model] revision` (saved with
        the spec), so that the file names exactly what was sized."""
        model = self.form.get("model")
        commit = results.model_commit
        if commit is None or not isinstance(model, dict) or "id" not in model:
            return
        if model.get("revision") != commit:
            model["revision"] = commit
            self.dirty = True

    def _fail(self, path: str | None, message: str) -> EditOutcome:
        self.errors = {k: v for k, v in self.errors.items() if k in self.texts}
        if path is not None:
            self.errors[path] = message
            self.general_error = ""
        else:
            self.general_error = message
        return EditOutcome(False, path, message)

    # ------------------------------------------------------------------ triage

    def triage_read(self, text: str):
        """Read a pasted log; advise against the last valid spec. Returns the reading."""
        from vramtui.triage.reader import read_log

        self.triage_text = text
        self.triage_reading = read_log(text)
        self._triage_advise()
        return self.triage_reading

    def triage_set_phase(self, phase: str) -> None:
        """The user corrects the stage the reader decided (or answers the stage question)."""
        from vramtui.triage.advice import override_stage

        r = self.triage_reading
        if r is None or r.phase.phase == phase:
            return
        self.triage_reading = override_stage(r, phase)
        self._triage_advise()

    def triage_set_failed_gpu(self, gpu_id: str | None) -> None:
        """The user names the card that failed (None: take it from the error or the log)."""
        self.triage_failed_gpu = self.catalog.gpus.get(gpu_id) if gpu_id else None
        self._triage_advise()

    def _triage_advise(self) -> None:
        from vramtui.triage.advice import advise

        r = self.triage_reading
        self.triage_advice = None
        if r is not None and r.is_oom:
            res = self.results
            self.triage_advice = advise(
                r,
                res.spec,
                res.arch,
                res.checkpoint,
                self.catalog,
                res.estimate,
                log_text=self.triage_text,
                failed_gpu=self.triage_failed_gpu,
            )

    def triage_apply(self, index: int, force: bool = False) -> EditOutcome:
        """Apply recommendation `index` (one variable) and log the attempt in the spec. A change
        predicted not to fit is refused unless `force` (the user confirmed it)."""
        from vramtui.triage.advice import record_attempt

        if not self.is_valid:
            raise SpecError("fix the invalid field first: a triage change applies to a valid spec")
        rec = self.triage_advice.recommendations[index]
        if rec.fits is False and not force:
            raise SpecError(f"{rec.change}: {rec.why_not_fit}; confirm to apply it anyway")
        new = record_attempt(self.spec, self.triage_reading, self.triage_advice, rec)
        outcome = self.replace_spec(new)
        from vramtui.builtin_specs import drop_seed_description

        if drop_seed_description(self.form):  # the change made it another workload
            outcome = self.revalidate()
        return outcome

    def triage_record_measured(self) -> int:
        from vramtui.triage.advice import with_measurements

        ms = self.triage_advice.measurements if self.triage_advice else ()
        if ms:
            self.replace_spec(with_measurements(self.spec, ms))
        return len(ms)

    def triage_set_outcome(self, index: int, outcome: str) -> None:
        from vramtui.triage.advice import set_outcome

        self.replace_spec(set_outcome(self.spec, index, outcome))

    def replace_spec(self, spec: Spec) -> EditOutcome:
        """Load a whole new spec into the form (after a triage change), marked unsaved."""
        self.undo_stack.append(self.form)
        del self.undo_stack[:-UNDO_DEPTH]
        self.form = form_of(spec)
        self.texts.clear()
        self.errors.clear()
        self.dirty = True
        return self.revalidate()

    def import_measurements(self, path: Path):
        """Read a probe file or a vLLM log into the spec's measured items (unsaved until the
        user saves). Returns the ImportResult and how many figures were new."""
        from vramtui.measure.importer import merge_measurements, read_measurements

        if not self.is_valid:
            raise SpecError("fix the invalid field first: measurements attach to a valid spec")
        result = read_measurements(Path(path), self.spec)
        spec, added = merge_measurements(self.spec, result.measurements)
        if added:
            self.replace_spec(spec)
        return result, added

    def set_days(self, days: float | None) -> None:
        self.days = days
        self.revalidate()

    # ------------------------------------------------------------------ files

    def save(self, path: Path | None = None) -> Path:
        """Save the last valid spec atomically; refuse (SpecError) while the form is invalid,
        so that a half-typed value never overwrites a good file."""
        target = Path(path) if path else self.path
        if target is None:
            raise SpecError("no file name yet: use save as (ctrl+shift+s) to choose one")
        if not self.is_valid:
            where = next(iter(self.errors), None)
            raise SpecError(
                f"the form has an invalid value ({where or 'spec'}): fix it before saving; "
                "your edits are kept in the draft meanwhile"
            )
        template, warning = self._template_for(target)
        saved_warning = save_spec(
            self.spec, target, template_text=template, in_place=self.path is not None, warn=None
        )
        self.save_warning = saved_warning or warning
        self.path = target
        self.dirty = False
        return target

    def _template_for(self, target: Path) -> tuple[str | None, str | None]:
        """For "save as" to another file: the text of the file the spec was opened from, so
        that its comments follow the spec (None when saving in place: the file itself is the
        template). The second value says why no template could be read."""
        from vramtui.spec import read_spec_text

        origin = self.path
        if origin is None or not origin.exists() or _same_file(origin, target):
            return None, None
        try:
            return read_spec_text(origin), None
        except SpecError as exc:
            return None, f"the comments of {origin} were not carried over: {exc}"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return b.exists() and a.samefile(b)
    except OSError:
        return a.resolve() == b.resolve()


def check_form_shape(form: dict) -> None:
    """Raise TypeError unless every field's tables are tables and its value can be shown:
    what editing and showing a form recovered from a draft file relies on."""
    fields_for(form)
    for f in FIELDS_BY_PATH.values():
        parts = f.path.split(".")
        node = form
        for part in ["model"] if f.path == "model" else parts[:-1]:
            node = node.get(part)
            if node is None:
                break
            if not isinstance(node, dict):
                raise TypeError(f"{part} in {f.path} is not a table")
        value_text(f, get_value(form, f.path))


HUB_FROM_FORM = "press Enter in the model field to fetch its config from the Hub"


def compute(spec: Spec, base_dir: Path | None, catalog, days, today, hub: bool = True) -> Results:
    """Resolve the model, estimate, and shortlist against `catalog` (if given). `hub`: may
    the Hub be asked for a model found nowhere else (see resolve_model_ref)."""
    from vramtui.models.resolve import pin_revision, resolve_model_ref
    from vramtui.spec import validate_against_architecture

    found = resolve_model_ref(spec.model, base_dir, hub=hub, hub_refused=HUB_FROM_FORM)
    arch, checkpoint = found.arch, found.checkpoint
    spec = pin_revision(spec, found)
    if arch is not None:
        validate_against_architecture(spec, arch, FORM_SOURCE)
    est = estimate(spec, arch, checkpoint)
    sl = None
    if catalog is not None:
        from vramtui.shortlist import shortlist

        sl = shortlist(spec, est, catalog, arch=arch, days=days, today=today, checkpoint=checkpoint)
    from vramtui.ledger.reserve_check import manual_reserve_shortfall

    return Results(
        spec=spec,
        arch=arch,
        estimate=est,
        shortlist=sl,
        checkpoint=checkpoint,
        reserve_shortfall=manual_reserve_shortfall(spec, arch, checkpoint),
        model_commit=found.commit,
    )
