"""The speedup lab dashboard (notebook 08): any registered method against autoregressive, live.

    dash = LabDashboard(lm, load_prompts(), initial=run_experiment(lm, prompt, "prompt_lookup"))
    dash            # last expression of a cell: the controls, and the initial run's view

    prompt    a shipped prompt (data/prompts.jsonl) or your own text; the line under the box says which
    method    every name in METHODS; its parameters are widgets generated from `method_parameters` (int ->
              IntText, float -> FloatText, bool -> Checkbox, anything else -> Text, parsed back by the
              bench's spec parser), so a method added with `register_method` appears here unedited;
              the spec line shows the equivalent bench/sweep spec ("draft:max_draft=4") as you edit
    Run       runs `run_experiment` in a background thread (the kernel stays free for Stop); a progress bar
              follows the method's tokens, then the baseline's; Stop ends the run at the next step
    view      tokens coloured by provenance, tokens per step, speed-up, and the tree of one step (a
              slider over steps: it redraws without a new run; it opens on `instructive_step`, a step
              that accepted part of its proposal)
    snapshot  the default view as static output under the controls (`widgets.Snapshot`: a stored notebook keeps
              no widget state), given or built from `initial`; retired when the dashboard first redraws

The root widget carries the CSS class "specdec-lab" (browser tests find it by that). Callbacks are plain
methods: tests set widget values and call `on_run(background=False)` without a browser.
"""

from __future__ import annotations

import html as _html
import threading
from collections.abc import Sequence

from ..io import Prompt
from ..models.load import unwrap
from ..proposers.registry import LOOP_PARAMS, METHODS, Param, method_parameters, parse_method_spec
from ..viz.lab_figures import accepted_figure, lab_step_tree_figure, numbers_html, provenance_html
from .experiment import LabResult, instructive_step, run_experiment
from .widgets import LIVE_ONLY, PLACEHOLDER, Snapshot, output_record, parse_ids, show_widget

__all__ = ["LabDashboard", "param_widget", "OWN_PROMPT", "LIVE_ONLY"]


OWN_PROMPT = -1  # the picker's value while the text box holds a prompt that is not a shipped one
_OWN_LABEL = "(your own prompt: type it below)"


def param_widget(p: Param):
    """The input widget of one method parameter (its help text as tooltip)."""
    import ipywidgets as W

    common = {"description": p.name, "tooltip": p.help or p.type, "style": {"description_width": "110px"}}
    if p.kind == "bool":
        return W.Checkbox(value=bool(p.default), indent=True, **common)
    if p.kind == "int":
        return W.IntText(value=int(p.default or 0), layout=W.Layout(width="240px"), **common)
    if p.kind == "float":
        return W.FloatText(value=float(p.default or 0.0), layout=W.Layout(width="240px"), **common)
    return W.Text(value="" if p.default is None else str(p.default), layout=W.Layout(width="420px"), **common)


def _spec_value(p: Param, value) -> str | None:
    """The widget's value as spec text, or None when it is the default (the spec stays short)."""
    if p.kind == "text":
        text = str(value).strip()
        return None if text == ("" if p.default is None else str(p.default)) else text
    if value == p.default:
        return None
    return str(value).lower() if p.kind == "bool" else str(value)


class LabDashboard:
    """Prompt, method + parameters, temperature, max tokens -> Run/Stop -> the lab's view (module docstring).

    snapshot: a `Snapshot` of the default view to display under the controls; None with `initial` builds one
    from it (its coloured text and numbers, tokens-per-step plot and the tree of its instructive step).
    """

    def __init__(
        self,
        model,
        prompts: Sequence[Prompt] | None = None,
        *,
        tokenizer=None,
        initial: LabResult | None = None,
        method: str = "prompt_lookup",
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        seed: int = 0,
        snapshot: Snapshot | None = None,
    ):
        import ipywidgets as W

        model, tokenizer = unwrap(model, tokenizer)
        self.model, self.tokenizer, self.seed = model, tokenizer, seed
        self.prompts = [p for p in prompts or [] if p.text]
        self.last: LabResult | None = initial
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._n = max_new_tokens
        self.snapshot = snapshot if snapshot is not None or initial is None else self.default_snapshot(initial)

        options = [(_OWN_LABEL, OWN_PROMPT)]
        for i, p in enumerate(self.prompts):
            options.append((f"{p.question_id} · {p.category} · {' '.join(p.text.split())[:60]}", i))
        self.picker = W.Dropdown(options=options, value=OWN_PROMPT, description="prompt", layout=W.Layout(width="95%"))
        self.prompt = W.Textarea(
            placeholder="prompt text" if tokenizer is not None else "token ids, e.g. 5 7 9 5 7 9",
            layout=W.Layout(width="95%", height="110px"),
        )
        self.prompt_state = W.HTML()
        self.method = W.Dropdown(options=sorted(METHODS), value=method.split(":")[0], description="method")
        self.params_box = W.VBox()
        self.param_widgets: dict[str, tuple[Param, object]] = {}
        self.loop: dict = {}  # the spec's loop keys (accept, top_k, top_p), kept until the method changes
        self.spec_line = W.HTML()
        self.temperature = W.FloatSlider(value=temperature, min=0.0, max=1.5, step=0.05, description="temperature")
        self.max_new_tokens = W.BoundedIntText(value=max_new_tokens, min=1, max=4096, description="max tokens")
        self.run_button = W.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = W.Button(description="Stop", button_style="warning", icon="stop", disabled=True)
        self.progress = W.IntProgress(value=0, min=0, max=1, description="idle")
        self.status = W.HTML()
        self.text = W.HTML()
        self.numbers = W.HTML()
        self.plot = W.Output()
        self.step = W.IntSlider(value=0, min=0, max=0, description="step", continuous_update=False, disabled=True)
        self.tree = W.Output()

        self.picker.observe(self.on_pick, names="value")
        self.prompt.observe(self.on_text, names="value")
        self.method.observe(self.on_method, names="value")
        for w in (self.temperature, self.max_new_tokens):
            w.observe(self.update_spec, names="value")
        self.step.observe(lambda change: self.show_step(change["new"]), names="value")
        self.run_button.on_click(self.on_run)
        self.stop_button.on_click(self.on_stop)
        self.on_method()
        if ":" in method:
            self.set_spec(method)

        self.widget = W.VBox(
            [
                self.picker,
                self.prompt,
                self.prompt_state,
                W.HBox([self.method, self.temperature, self.max_new_tokens]),
                self.params_box,
                self.spec_line,
                W.HBox([self.run_button, self.stop_button, self.progress, self.status]),
                self.text,
                self.numbers,
                self.plot,
                self.step,
                self.tree,
            ]
        )
        self.widget.add_class("specdec-lab")
        if initial is not None:
            if initial.prompt is not None:
                self.prompt.value = initial.prompt
            self.temperature.value = initial.temperature
            self.max_new_tokens.value = initial.max_new_tokens
            self.set_spec(initial.spec)
            self.show(initial)
        self.on_text()

    # ---- prompt ----------------------------------------------------------------------------------------
    def on_pick(self, change=None) -> None:
        """A shipped prompt chosen in the picker replaces the text box (the own-prompt entry keeps it)."""
        i = self.picker.value
        if i != OWN_PROMPT:
            self.prompt.value = self.prompts[i].text

    def on_text(self, change=None) -> None:
        """Keep the picker honest: it names the shipped prompt the box holds, or says it is your own."""
        text = self.prompt.value
        match = next((i for i, p in enumerate(self.prompts) if p.text == text), OWN_PROMPT)
        if self.picker.value != match:
            self.picker.value = match
        if match != OWN_PROMPT:
            p = self.prompts[match]
            self.prompt_state.value = f"<small>shipped prompt {p.question_id} ({_html.escape(p.category)})</small>"
        elif text.strip():
            self.prompt_state.value = "<small>your own prompt (not one of the shipped prompts)</small>"
        else:
            self.prompt_state.value = "<small>no prompt yet: pick a shipped one above or type your own</small>"

    def prompt_input(self):
        text = self.prompt.value
        if not text.strip():
            raise ValueError("the prompt is empty: pick a shipped prompt or type one")
        return text if self.tokenizer is not None else parse_ids(text)

    # ---- method and its parameters -----------------------------------------------------------------------
    def on_method(self, change=None) -> None:
        """Regenerate the parameter widgets from the chosen method's config dataclass."""
        import ipywidgets as W

        rows, self.param_widgets, self.loop = [], {}, {}
        for p in method_parameters(self.method.value):
            w = param_widget(p)
            w.observe(self.update_spec, names="value")
            self.param_widgets[p.name] = (p, w)
            rows.append(W.HBox([w, W.HTML(f"<small style='color:#666'>{_html.escape(p.help)}</small>")]))
        if not rows:
            rows = [W.HTML(f"<small>{_html.escape(self.method.value)} has no parameters</small>")]
        self.params_box.children = rows
        self.update_spec()

    def spec(self) -> str:
        """The bench/sweep spec of the current settings: name plus every parameter changed from its default."""
        parts = [self.method.value]
        for name, (p, w) in self.param_widgets.items():
            text = _spec_value(p, w.value)
            if text is not None:
                parts.append(f"{name}={text}")
        parts += [f"{k}={v}" for k, v in self.loop.items()]
        return ":".join(parts)

    def set_spec(self, spec: str) -> None:
        """Set the method and parameter widgets from a spec string (parsed by the bench's parser)."""
        parsed = parse_method_spec(spec)
        self.method.value = parsed.name
        self.on_method()  # back to the defaults (the method may not have changed)
        for key, value in parsed.params.items():
            if key == "temperature":
                self.temperature.value = float(value)
                continue
            if key in LOOP_PARAMS:  # accept=..., top_k, top_p: no widget of their own, kept in the spec
                self.loop[key] = value
                continue
            if key not in self.param_widgets:
                raise ValueError(f"method spec {spec!r}: the dashboard has no parameter {key!r} for {parsed.name}")
            p, w = self.param_widgets[key]
            if p.kind == "bool":
                value = str(value).lower() in ("true", "1")
            w.value = str(value) if p.kind == "text" else value

    def update_spec(self, change=None) -> None:
        self.spec_line.value = (
            f"<small>spec: <code>{_html.escape(self.spec())}</code> · temperature {self.temperature.value:g} · "
            f"{self.max_new_tokens.value} tokens (the same point in a sweep)</small>"
        )

    # ---- run / stop ----------------------------------------------------------------------------------------
    def on_run(self, _button=None, background: bool = True):
        """Start `run_experiment` with the current settings: in a thread (returned), or here (the LabResult)."""
        if self._thread is not None and self._thread.is_alive():
            return self._thread
        try:
            prompt = self.prompt_input()
        except ValueError as err:
            self._error(err)
            return None
        self._n = self.max_new_tokens.value
        self._stop.clear()
        self.run_button.disabled, self.stop_button.disabled = True, False
        self.progress.max, self.progress.value, self.status.value = 2 * self._n, 0, "<i>running…</i>"
        args = (prompt, self.spec(), self.temperature.value, self._n)
        if not background:
            return self._work(*args)
        self._thread = threading.Thread(target=self._work, args=args, daemon=True)
        self._thread.start()
        return self._thread

    def on_stop(self, _button=None) -> None:
        self._stop.set()
        self.status.value = "<i>stopping at the next step…</i>"

    def _hook(self, phase: str, step: int, trace, emitted: int):
        self.progress.description = phase
        self.progress.value = {"warmup": 0, "method": emitted, "baseline": self._n + emitted}[phase]
        return False if self._stop.is_set() else None

    def _work(self, prompt, spec: str, temperature: float, n: int) -> LabResult | None:
        try:
            lab = run_experiment(
                self.model, prompt, spec, temperature=temperature, max_new_tokens=n, seed=self.seed,
                tokenizer=self.tokenizer, on_step=self._hook,
            )  # fmt: skip
        except Exception as err:  # a background thread's error would vanish: show it in the dashboard
            self._error(err)
            return None
        finally:
            self.run_button.disabled, self.stop_button.disabled = False, True
            self.progress.description = "done"
        self.status.value = "<i>stopped</i>" if lab.stopped else ""
        self.show(lab)
        return lab

    def _error(self, err: Exception) -> None:
        kind = "" if isinstance(err, ValueError) else f"{type(err).__name__}: "
        self.status.value = f"<span class='sd-error' style='color:#b00'>{_html.escape(kind + str(err))}</span>"

    # ---- view ----------------------------------------------------------------------------------------------
    def default_snapshot(self, lab: LabResult) -> Snapshot:
        """`lab`'s view as `show` draws it, as static output: coloured text and numbers, the tokens-per-step plot
        and the tree of its instructive step."""
        items = [provenance_html(lab, self.tokenizer) + numbers_html(lab)]
        if lab.result.steps:
            step = instructive_step(lab.result.steps)
            items += [accepted_figure(lab), lab_step_tree_figure(lab.result, step, self.tokenizer)]
        return Snapshot(*items, how="Press Run or move the step slider above to redraw it live.")

    def show(self, lab: LabResult) -> None:
        """Render a LabResult: coloured text, numbers, tokens-per-step plot, the step slider and its tree."""
        self.last = lab
        self.text.value = provenance_html(lab, self.tokenizer)
        self.numbers.value = numbers_html(lab)
        self.plot.outputs = (output_record(accepted_figure(lab)),) if lab.result.steps else ()
        last = max(len(lab.result.steps) - 1, 0)
        with self.step.hold_trait_notifications():
            self.step.max, self.step.value = last, min(instructive_step(lab.result.steps), last)
        self.step.disabled = not lab.result.steps
        self.show_step(self.step.value)

    def show_step(self, step: int) -> None:
        """Redraw the tree of `step` of the last run (the slider's callback). The live view now differs from the
        stored default view, so the snapshot gives way (a no-op before it is displayed, as while building)."""
        if self.snapshot is not None:
            self.snapshot.retire()
        if self.last is not None and 0 <= step < len(self.last.result.steps):
            self.tree.outputs = (output_record(lab_step_tree_figure(self.last.result, step, self.tokenizer)),)
        else:
            self.tree.outputs = ()

    def _ipython_display_(self):
        # a stored notebook keeps no widget state: its reader sees the placeholder, not `VBox(children=...)`, and
        # the snapshot below it that the placeholder promises
        show_widget(self.widget, PLACEHOLDER if self.snapshot is not None else LIVE_ONLY)
        if self.snapshot is not None:
            self.snapshot.display()
