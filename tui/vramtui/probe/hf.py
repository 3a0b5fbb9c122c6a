"""A ready `transformers.TrainerCallback` that writes the probe's stages of a Trainer run.

    from vramtui.probe.hf import VramtuiProbeCallback
    trainer = Trainer(..., callbacks=[VramtuiProbeCallback()])

Nothing else is needed. The file is `path`, else `$VRAMTUI_PROBE_FILE`, else
`vramtui-probe.jsonl` in the working directory. Each process (rank) writes its own run and
watches its own device (`args.device`).

Stages, as the Trainer (transformers 5.x, `Trainer._inner_training_loop`) calls its hooks:

* "load" at `on_train_begin`: what is already held once the model is loaded and the Trainer
  has prepared it (the optimiser states do not exist yet). Nothing is reset first: the peaks are
  those since the process started.
* "forward": the first training forward pass, from a forward pre-hook on the model (peaks
  reset there) to its forward hook (the loss is computed inside the forward when the batch has
  labels). Dims: `batch` and `seq_len` read from the executed `input_ids` (or `inputs_embeds`).
* "backward": from the end of that forward to `on_pre_optimizer_step`, so it also holds the
  gradient clipping and, with gradient accumulation, every other micro-batch of the first
  optimiser step (forward and backward): dims add `grad_accum`.
* "optimizer_step": `on_pre_optimizer_step` -> `on_optimizer_step` (`optimizer.step()` alone;
  the first step allocates the optimiser states).
* "validation": an evaluation inside training, from `on_step_end` (or `on_epoch_end`, or
  `on_train_begin` with `eval_on_start`) where the Trainer has decided to evaluate, to
  `on_evaluate`. Dims: `batch` = `per_device_eval_batch_size`. Every evaluation is recorded.
* "export": a checkpoint save, from the end of the evaluation (or `on_step_end` when there is
  none) to `on_save`. Every save is recorded.

Only the FIRST forward, backward and optimizer_step are recorded (the first step is the one
that allocates gradients and optimiser states, and later steps repeat it);
`every_step=True` records those three for every optimiser step.

A stage still open when the process dies of an exception (an out-of-memory error in the
backward pass, ...) is written at exit with that exception (see `vramtui.probe`). An
evaluation run outside training (`trainer.evaluate()`) is not recorded.
"""

from __future__ import annotations

from transformers import TrainerCallback

from vramtui.probe import Probe, Stage

__all__ = ["VramtuiProbeCallback"]


def _shape_dims(args, kwargs) -> dict:
    tensor = kwargs.get("input_ids")
    if tensor is None:
        tensor = kwargs.get("inputs_embeds")
    if tensor is None and args:
        tensor = args[0]
    shape = getattr(tensor, "shape", None)
    if shape is None or len(shape) < 2:
        return {}
    return {"batch": int(shape[0]), "seq_len": int(shape[1])}


class VramtuiProbeCallback(TrainerCallback):
    """Writes load / forward / backward / optimizer_step / validation / export stages."""

    def __init__(
        self,
        path=None,
        *,
        every_step: bool = False,
        run_name: str = "",
        probe: Probe | None = None,
    ) -> None:
        self.path = path
        self.every_step = every_step
        self.run_name = run_name
        self.probe = probe
        self._hooks: list = []
        self._armed = False  # the next training forward opens the "forward" stage
        self._steps_done = 0
        self._forward: Stage | None = None
        self._backward: Stage | None = None
        self._optimizer: Stage | None = None
        self._validation: Stage | None = None
        self._export: Stage | None = None
        self._dims: dict = {}
        self._grad_accum = 1

    # ---------------------------------------------------------------- helpers

    def _ensure_probe(self, args) -> Probe:
        if self.probe is None:
            device = getattr(args, "device", None)
            devices = None
            if getattr(device, "type", None) == "cuda" and device.index is not None:
                devices = [device.index]
            from vramtui.probe import detect_framework

            # A Trainer callback: the HF Trainer (with PEFT/TRL) unless a framework built on it
            # (Axolotl, Unsloth) is loaded.
            self.probe = Probe(
                self.path,
                devices=devices,
                run_name=self.run_name,
                framework=detect_framework(default="hf-trainer"),
            )
        return self.probe

    def _close(self, name: str, error=None) -> None:
        st = getattr(self, name)
        if st is not None:
            st.finish(error)
            setattr(self, name, None)

    def _cancel(self, name: str) -> None:
        st = getattr(self, name)
        if st is not None:
            st.cancel()
            setattr(self, name, None)

    def _pre_forward(self, module, args, kwargs):
        try:
            if self._armed and self._forward is None and module.training:
                self._armed = False
                self._dims = _shape_dims(args, kwargs)
                self._forward = self.probe.start("forward", **self._dims)
        except Exception:  # noqa: BLE001, S110 - the probe never breaks training
            pass

    def _post_forward(self, module, args, kwargs, output):
        try:
            if self._forward is not None:
                self._close("_forward")
                dims = dict(self._dims)
                if self._grad_accum > 1:
                    dims["grad_accum"] = self._grad_accum
                self._backward = self.probe.start("backward", **dims)
        except Exception:  # noqa: BLE001, S110 - the probe never breaks training
            pass

    def _start_save_or_eval(self, args, control) -> None:
        if control.should_evaluate and self._validation is None:
            self._cancel("_export")
            self._validation = self.probe.start(
                "validation", batch=int(args.per_device_eval_batch_size)
            )
        elif control.should_save and self._export is None and self._validation is None:
            self._export = self.probe.start("export")

    # ---------------------------------------------------------------- Trainer hooks

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        probe = self._ensure_probe(args)
        self._grad_accum = int(getattr(args, "gradient_accumulation_steps", 1) or 1)
        probe.start("load", reset_peak=False).finish()
        if model is not None and not self._hooks:
            self._hooks.append(model.register_forward_pre_hook(self._pre_forward, with_kwargs=True))
            self._hooks.append(model.register_forward_hook(self._post_forward, with_kwargs=True))
        if getattr(args, "eval_on_start", False):
            self._validation = probe.start("validation", batch=int(args.per_device_eval_batch_size))

    def on_step_begin(self, args, state, control, **kwargs):
        self._cancel("_export")  # a save announced but not made (save_strategy "best")
        if self._steps_done == 0 or self.every_step:
            self._armed = True

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._armed = False
        if self._backward is not None:
            self._close("_backward")
            self._optimizer = self.probe.start("optimizer_step", **self._dims)

    def on_optimizer_step(self, args, state, control, **kwargs):
        self._close("_optimizer")
        self._steps_done += 1

    def on_step_end(self, args, state, control, **kwargs):
        self._start_save_or_eval(args, control)

    def on_epoch_end(self, args, state, control, **kwargs):
        self._start_save_or_eval(args, control)

    def on_evaluate(self, args, state, control, **kwargs):
        if self._validation is not None:
            self._close("_validation")
            save_best = str(getattr(args, "save_strategy", "")).lower().endswith("best")
            if (control.should_save or save_best) and self._export is None:
                self._export = self.probe.start("export")

    def on_save(self, args, state, control, **kwargs):
        self._close("_export")

    def on_train_end(self, args, state, control, **kwargs):
        self._cancel("_export")
        for name in ("_forward", "_backward", "_optimizer", "_validation"):
            self._close(name, "training ended before the stage did")
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
