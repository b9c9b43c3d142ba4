"""Several methods on one prompt, side by side (notebook 08): their runs interleaved, one baseline run shared.

    labs = compare_methods(lm, prompt, ["prompt_lookup", "draft", "medusa", "lookahead"], max_new_tokens=48)
    comparison_figure(labs)          # viz/comparison.py: tokens per step, accepted per step, speed
    CompareDashboard(lm, prompts)    # the same with widgets: a methods box, Run / Stop

Timings that are compared are taken in one loop: every round runs the baseline and every method once, in an
order rotated by one per round (what ran first in one round runs last in the next), and each keeps its
fastest round — the bench's rule (`bench/harness.py`), so slow drifts and first-call costs hit all alike. A
warm-up of every method comes first (`warmup_tokens`). Every round's seconds are kept in each result's `extra`
(`round_seconds`, `baseline_round_seconds`): how far one method's rounds lie apart is the run's own timing
noise (`lab.experiment.round_spread`). The result is one `LabResult` per method, all holding
the same baseline run, so each method's speedup is against the same autoregressive timing.
"""

from __future__ import annotations

import html as _html
import threading
from collections.abc import Sequence

from ..generate import GenerationResult
from ..io import Prompt
from ..models.load import unwrap
from ..proposers.registry import BASELINE
from ..viz.comparison import comparison_figure, comparison_frame
from .experiment import LabHook, LabResult, prepare
from .widgets import LIVE_ONLY, output_record, parse_ids

__all__ = ["compare_methods", "CompareDashboard", "DEFAULT_METHODS"]

DEFAULT_METHODS = ("prompt_lookup", "draft", "medusa", "lookahead")


def compare_methods(
    model,
    prompt,
    specs: Sequence[str],
    *,
    temperature: float = 0.0,
    max_new_tokens: int = 64,
    seed: int = 0,
    baseline: str = BASELINE,
    repeats: int = 1,
    warmup_tokens: int = 8,
    tokenizer=None,
    chat: bool | str = "auto",
    on_step: LabHook | None = None,
    extra: dict | None = None,
) -> list[LabResult]:
    """Run every spec and the baseline on the same prompt, interleaved (module docstring); one LabResult per
    spec, in the order given, sharing the baseline's fastest run. on_step(phase, step, trace, emitted) with
    phase "warmup" or the spec's label (the baseline's name for its runs); returning False stops: what ran so
    far is kept (a spec that never ran has an empty, stopped result)."""
    if not specs:
        raise ValueError("compare_methods needs at least one method spec")
    if len(set(specs)) != len(specs):
        raise ValueError(f"a method spec is given twice: {list(specs)}")
    model, tokenizer = unwrap(model, tokenizer)
    setups = {s: prepare(model, prompt, s, temperature=temperature, seed=seed, baseline=baseline,
                         tokenizer=tokenizer, chat=chat) for s in specs}  # fmt: skip
    first = setups[specs[0]]
    runs = [(s, setups[s].parsed.name, setups[s]) for s in specs] + [(baseline, baseline, first)]
    stopped = threading.Event()

    def hook(phase: str):
        def step_hook(step, trace, emitted):
            if on_step is not None and on_step(phase, step, trace, emitted) is False:
                stopped.set()
                return False
            return None

        return step_hook

    if warmup_tokens > 0:
        for _label, name, setup in runs:
            if not stopped.is_set():
                setup.run(name, min(warmup_tokens, max_new_tokens), hook("warmup"))
    best: dict = {}
    rounds: dict = {}  # label -> every finished round's seconds: their spread is this run's own timing noise
    for r in range(max(repeats, 1)):
        for label, name, setup in runs[r % len(runs) :] + runs[: r % len(runs)]:
            if stopped.is_set():
                break
            out = setup.run(name, max_new_tokens, hook(label))
            if out.stop_reason != "stopped":
                rounds.setdefault(label, []).append(out.seconds)
            if label not in best or (out.stop_reason != "stopped" and out.seconds < best[label].seconds):
                best[label] = out
    base = best.get(baseline)
    labs = []
    for s in specs:
        setup = setups[s]
        result = best.get(s)
        if result is None:  # stopped before this method ran
            ids = [int(t) for t in setup.prompt] if not isinstance(setup.prompt, str) else []
            result = GenerationResult([], ids, "", "stopped", setup.parsed.name, 0.0, 0.0)
        labs.append(LabResult(spec=setup.parsed.label, method=setup.parsed.name, params=setup.params,
                              temperature=float(temperature), seed=seed, max_new_tokens=max_new_tokens,
                              result=result, baseline=base, baseline_method=baseline, prompt=setup.text,
                              extra={**(extra or {}), "round_seconds": rounds.get(s, []),
                                     "baseline_round_seconds": rounds.get(baseline, [])}))  # fmt: skip
    return labs


class CompareDashboard:
    """Prompt, methods (specs, comma-separated), temperature, tokens, rounds -> Run/Stop -> the comparison.

    Callbacks are plain methods: tests set the widgets and call `on_run(background=False)` without a browser.
    """

    def __init__(self, model, prompts: Sequence[Prompt] | None = None, *, tokenizer=None, initial=None,
                 methods: Sequence[str] = DEFAULT_METHODS, max_new_tokens: int = 48, seed: int = 0):  # fmt: skip
        import ipywidgets as W

        self.model, self.tokenizer = unwrap(model, tokenizer)
        self.seed = seed
        self.prompts = [p for p in prompts or [] if p.text]
        self.last: list[LabResult] | None = initial
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        options = [(f"{p.question_id} · {p.category} · {' '.join(p.text.split())[:60]}", i)
                   for i, p in enumerate(self.prompts)]  # fmt: skip
        self.picker = W.Dropdown(options=options or [("(type a prompt below)", -1)], description="prompt",
                                 layout=W.Layout(width="95%"))  # fmt: skip
        hint = "prompt text" if self.tokenizer is not None else "token ids, e.g. 5 7 9"
        self.prompt = W.Textarea(layout=W.Layout(width="95%", height="90px"), placeholder=hint)
        self.methods = W.Text(value=", ".join(methods), description="methods", layout=W.Layout(width="95%"),
                              tooltip="bench specs, comma-separated: prompt_lookup, draft:max_draft=4")  # fmt: skip
        self.temperature = W.FloatSlider(value=0.0, min=0.0, max=1.5, step=0.05, description="temperature")
        self.max_new_tokens = W.BoundedIntText(value=max_new_tokens, min=1, max=4096, description="max tokens")
        self.repeats = W.BoundedIntText(value=1, min=1, max=9, description="rounds",
                                        tooltip="interleaved rounds; each method keeps its fastest")  # fmt: skip
        self.run_button = W.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = W.Button(description="Stop", button_style="warning", icon="stop", disabled=True)
        self.status = W.HTML()
        self.table = W.HTML()
        self.plot = W.Output()
        self.picker.observe(self.on_pick, names="value")
        self.run_button.on_click(self.on_run)
        self.stop_button.on_click(lambda _b=None: self._stop.set())
        settings = W.HBox([self.temperature, self.max_new_tokens, self.repeats])
        buttons = W.HBox([self.run_button, self.stop_button, self.status])
        self.widget = W.VBox([self.picker, self.prompt, self.methods, settings, buttons, self.table, self.plot])
        self.widget.add_class("specdec-compare")
        if initial:
            self.prompt.value = initial[0].prompt or ""
            self.methods.value = ", ".join(lab.spec for lab in initial)
            self.max_new_tokens.value = initial[0].max_new_tokens
            self.temperature.value = initial[0].temperature
            self.show(initial)
        elif self.prompts:
            self.on_pick()

    def on_pick(self, change=None) -> None:
        if 0 <= self.picker.value < len(self.prompts):
            self.prompt.value = self.prompts[self.picker.value].text

    def specs(self) -> list[str]:
        return [s.strip() for s in self.methods.value.split(",") if s.strip()]

    def on_run(self, _button=None, background: bool = True):
        """Run `compare_methods` with the current settings: in a thread (returned), or here (the results)."""
        if self._thread is not None and self._thread.is_alive():
            return self._thread
        text = self.prompt.value
        if not text.strip() or not self.specs():
            self.status.value = "<span style='color:#b00'>give a prompt and at least one method</span>"
            return None
        prompt = text if self.tokenizer is not None else parse_ids(text)
        self._stop.clear()
        self.run_button.disabled, self.stop_button.disabled = True, False
        self.status.value = "<i>running…</i>"
        args = (prompt, self.specs(), self.temperature.value, self.max_new_tokens.value, self.repeats.value)
        if not background:
            return self._work(*args)
        self._thread = threading.Thread(target=self._work, args=args, daemon=True)
        self._thread.start()
        return self._thread

    def _hook(self, phase, step, trace, emitted):
        self.status.value = f"<i>{_html.escape(phase)}: {emitted} tokens</i>"
        return False if self._stop.is_set() else None

    def _work(self, prompt, specs, temperature, n, repeats):
        try:
            labs = compare_methods(self.model, prompt, specs, temperature=temperature, max_new_tokens=n, seed=self.seed,
                                   repeats=repeats, tokenizer=self.tokenizer, on_step=self._hook)  # fmt: skip
        except Exception as err:  # a background thread's error would vanish: show it in the dashboard
            kind = "" if isinstance(err, ValueError) else f"{type(err).__name__}: "
            self.status.value = f"<span class='sd-error' style='color:#b00'>{_html.escape(kind + str(err))}</span>"
            return None
        finally:
            self.run_button.disabled, self.stop_button.disabled = False, True
        self.status.value = "<i>stopped</i>" if any(lab.stopped for lab in labs) else ""
        self.show(labs)
        return labs

    def show(self, labs: list[LabResult]) -> None:
        self.last = labs
        self.table.value = comparison_frame(labs).to_html(float_format="{:.2f}".format)
        self.plot.outputs = (output_record(comparison_figure(labs)),)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = LIVE_ONLY  # no snapshot below: a stored notebook shows the comparison it opened on
        return bundle
