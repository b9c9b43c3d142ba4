"""ipywidgets dashboards for live experiments. Callbacks are plain methods/functions: pytest drives them
without a browser (set the widgets' values, call `dashboard.on_run()`, read `dashboard.output.value`).

    dash = PromptLookupDashboard(load_model("smollm2-135m"), prompts=specdec_lab.io.load_prompts())
    dash          # last expression of a cell: shows the controls, then a static snapshot of the default view

`run_prompt_lookup` is the function behind the button; notebooks call it directly for their default
(checked) experiment, then build the dashboard on it. `Dashboard` wires any controls to a plain callback
that redraws on every change (notebooks 01 and 02).

Stored notebooks. Widget state is stripped before committing (a FigureWidget embeds plotly.js, ~5 MB), so
a reader of the stored notebook sees no controls where a dashboard was. Every dashboard therefore
displays a `Snapshot` under its controls: its default view as ordinary output (HTML, a plotly figure),
which renders anywhere. In a live session the snapshot stays until the dashboard first redraws, and is
then replaced by a one-line note, so the live view and the copy never disagree on screen.
"""

from __future__ import annotations

import html as _html
import json
from collections.abc import Callable
from dataclasses import dataclass

from .cost import CostCurve, set_cost_curve
from .generate import GenerationResult, generate, make_proposer
from .io import Prompt
from .models import LoadedModel
from .viz.tokens import tokens_html

__all__ = ["run_prompt_lookup", "LookupRun", "PromptLookupDashboard", "DRAFT_LENGTHS", "Dashboard", "Snapshot"]

# dropdown label -> PromptLookupConfig.draft_length ("fixed" means: the int max_draft)
DRAFT_LENGTHS = {
    "cost: argmax E[tokens]/t(k+1) from the measured curve": "cost",
    "heuristic: transformers' +2 / −1 rule": "heuristic",
    "fixed: always max_draft (when the match is that long)": "fixed",
}


def _parse_ids(text: str) -> list[int]:
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError as err:
        raise ValueError("this model has no tokenizer: type the prompt as token ids, e.g. '5 7 9 5 7'") from err


@dataclass
class LookupRun:
    """What one dashboard run produced: the prompt-lookup result, optionally the autoregressive one."""

    result: GenerationResult
    baseline: GenerationResult | None = None

    @property
    def equal(self) -> bool | None:
        return None if self.baseline is None else self.baseline.tokens == self.result.tokens

    def stats(self) -> dict:
        out = self.result.summary()
        if self.baseline is not None:
            out["autoregressive_seconds"] = round(self.baseline.seconds, 3)
            out["speedup"] = round(self.baseline.seconds / self.result.seconds, 2) if self.result.seconds else None
            out["equal_to_autoregressive"] = self.equal
        return out


def run_prompt_lookup(
    model,
    prompt,
    *,
    tokenizer=None,
    max_draft: int = 10,
    draft_length: str | int = "cost",
    max_new_tokens: int = 64,
    chat: bool = True,
    compare: bool = False,
    cost_curve: CostCurve | None = None,
) -> LookupRun:
    """Prompt lookup decoding of `prompt` (text, or token ids / an id string for tokenizer-less models).

    draft_length: "cost" | "heuristic" | "fixed" (= max_draft) | an int
    chat:         wrap a text prompt in the chat template
    compare:      also decode autoregressively (same loop, no proposals) for equality and speed-up
    cost_curve:   a curve already measured for this model, used by draft_length="cost" instead of
                  measuring one on first use
    """
    if isinstance(model, LoadedModel):
        tokenizer = tokenizer if tokenizer is not None else model.tokenizer
        model = model.model
    if isinstance(prompt, str) and tokenizer is None:
        prompt = _parse_ids(prompt)
    k = max_draft if draft_length == "fixed" else draft_length
    proposer = make_proposer("prompt_lookup", max_draft=max_draft, draft_length=k)
    if cost_curve is not None:
        set_cost_curve(model, cost_curve)
    kwargs = {
        "tokenizer": tokenizer,
        "chat": chat and isinstance(prompt, str),
        "max_new_tokens": max_new_tokens,
    }
    result = generate(model, prompt, proposer=proposer, **kwargs)
    baseline = generate(model, prompt, method="autoregressive", **kwargs) if compare else None
    return LookupRun(result=result, baseline=baseline)


# ---- static snapshots of a dashboard's default view --------------------------------------------------------
def mime_bundle(item) -> dict:
    """A raw IPython mime bundle for a snapshot item: a plotly Figure, an HTML string, or anything else
    (dict, number: printed as text)."""
    import plotly.graph_objects as go

    if isinstance(item, go.Figure):
        bundle = item._repr_mimebundle_()  # what `display(fig)` publishes under the current plotly renderer
        if "application/vnd.plotly.v1+json" not in bundle:  # a renderer without the mimetype (e.g. "browser")
            bundle["application/vnd.plotly.v1+json"] = json.loads(item.to_json())
        bundle.setdefault("text/plain", "(plotly figure: open the notebook in Jupyter to see it)")
        return bundle
    if isinstance(item, str):
        return {"text/html": item, "text/plain": "(HTML output: open the notebook in Jupyter to see it)"}
    text = _html.escape(str(item))
    return {"text/html": f"<pre style='margin:2px 0'>{text}</pre>", "text/plain": str(item)}


def output_record(item) -> dict:
    """`item` as one entry of an `ipywidgets.Output`'s `outputs` (a display_data message).

    Why not `Output.append_display_data(fig)`: plotly figures display through `_ipython_display_`, which
    IPython's formatter runs as a side effect (the figure goes to whatever cell is current) and answers
    with an empty bundle, so the Output stays blank. Setting `outputs` also works from a background
    thread, where `with output:` capture does not.
    """
    return {"output_type": "display_data", "data": mime_bundle(item), "metadata": {}}


class Snapshot:
    """A dashboard's default view as ordinary output, displayed under its (live) controls.

    items: plotly Figures, HTML strings or printable values, shown in order after a caption. `display()`
    publishes them with display ids; `retire()` (called by the dashboard when it first redraws) replaces
    them with a one-line note, so a live session never shows a stale copy beside the live view.
    """

    CAPTION = (
        "<div class='sd-snapshot-caption' style='font-size:12px;color:#555;border-top:1px dashed #bbb;"
        "margin-top:4px;padding-top:2px'><b>Default view</b> (a static snapshot stored with the notebook, "
        "readable without a kernel{what}). {how}</div>"
    )

    def __init__(self, *items, what: str = "", how: str = "Change a control above to redraw it live."):
        self.items = items
        self.caption = self.CAPTION.format(what=f": {what}" if what else "", how=how)
        self.handles: list = []

    def display(self) -> None:
        from IPython.display import display

        self.handles = [display(mime_bundle(x), raw=True, display_id=True) for x in (self.caption, *self.items)]

    def retire(self) -> None:
        """Replace the snapshot by a short note (no-op if it was never displayed or is already gone)."""
        if not self.handles:
            return
        first, *rest = self.handles
        note = (
            "<i style='font-size:12px;color:#777'>(the static snapshot of the default view was here; "
            "the dashboard above is live)</i>"
        )
        first.update({"text/html": note, "text/plain": ""}, raw=True)
        for handle in rest:
            handle.update({"text/plain": ""}, raw=True)
        self.handles = []


def _show_widget(widget, placeholder: str) -> None:
    """Display an ipywidget with a readable text/plain: what a reader of the stored notebook sees in its place
    (widget state is not stored) instead of `VBox(children=(...))`."""
    from IPython.display import display

    bundle = widget._repr_mimebundle_()
    bundle["text/plain"] = placeholder
    display(bundle, raw=True)


PLACEHOLDER = "[interactive dashboard: its controls appear when the notebook runs; the default view follows below]"


class Dashboard:
    """Controls that redraw an output on every change, and a snapshot of the default view.

    controls: {name: ipywidget}; callback(**{name: control.value}) returns one item or a tuple of items
    (plotly Figure, HTML string, printable value) shown in `self.output` after each change. initial: the
    items of the default view (usually computed by the notebook's plain cell just above), shown as a
    `Snapshot` until the first redraw. `redraw()` is the callback without a browser; `self.result` keeps
    the last result.
    """

    def __init__(self, controls: dict, callback: Callable, *, header: str = "", initial=None, what: str = ""):
        import ipywidgets as W

        self.controls, self.callback = controls, callback
        self.output = W.Output()
        self.status = W.HTML()
        self.result = None
        self.snapshot = None
        if initial is not None:
            self.snapshot = Snapshot(*(initial if isinstance(initial, tuple) else (initial,)), what=what)
        for control in controls.values():
            control.observe(self.redraw, names="value")
        parts = [W.HTML(header)] if header else []
        self.widget = W.VBox([*parts, W.HBox(list(controls.values())), self.status, self.output])
        self.widget.add_class("sd-dashboard")

    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def redraw(self, _change=None):
        """Call the callback with the controls' values and show its result (or its error) in the output."""
        from IPython.display import display

        self.status.value = "<i>running…</i>"
        try:
            self.result = self.callback(**self.values())
        except ValueError as err:  # bad input: say so in the widget
            self.status.value = f"<pre class='sd-error' style='color:#b00'>{_html.escape(str(err))}</pre>"
            return None
        self.status.value = ""
        items = self.result if isinstance(self.result, tuple) else (self.result,)
        self.output.clear_output(wait=True)
        with self.output:
            for item in items:
                display(mime_bundle(item), raw=True)
        if self.snapshot is not None:
            self.snapshot.retire()
        return self.result

    def _ipython_display_(self):
        _show_widget(self.widget, PLACEHOLDER)
        if self.snapshot is not None:
            self.snapshot.display()


def _stats_html(stats: dict) -> str:
    rows = "".join(
        f"<tr><td style='padding:0 8px'>{_html.escape(str(k))}</td><td>{_html.escape(str(v))}</td></tr>"
        for k, v in stats.items()
    )
    return f"<table class='sd-stats' style='font-size:12px;margin-top:6px'>{rows}</table>"


class PromptLookupDashboard:
    """Prompt text (or a prompt from data/prompts.jsonl), max_draft, draft length rule → colored tokens.

    Every control but the text box reruns on change (the text box reruns with *Generate*, so typing does
    not start a generation per keystroke). initial_run: the notebook's default run with these settings,
    shown as a static `Snapshot` under the controls until the first rerun. CSS classes for browser tests:
    `sd-max-draft` (slider), `sd-k-rule` (dropdown), `sd-output` (the result).
    """

    def __init__(
        self,
        model,
        tokenizer=None,
        prompts: list[Prompt] | None = None,
        *,
        max_new_tokens: int = 64,
        max_draft: int = 10,
        draft_length: str = "cost",
        compare: bool = False,
        cost_curve: CostCurve | None = None,
        initial_prompt: str = "",
        initial_run: LookupRun | None = None,
    ):
        import ipywidgets as W

        if isinstance(model, LoadedModel):
            tokenizer = tokenizer if tokenizer is not None else model.tokenizer
            model = model.model
        self.model, self.tokenizer, self.cost_curve = model, tokenizer, cost_curve
        self.last: LookupRun | None = initial_run
        options = [(self.OWN_PROMPT, "")]
        for p in prompts or []:
            text = p.text
            preview = " ".join(text.split())[:60]
            options.append((f"{p.question_id} · {p.category} · {preview}", text))
        self._texts = {value for _, value in options if value}
        self.picker = W.Dropdown(options=options, value="", description="prompt", layout=W.Layout(width="95%"))
        self.prompt = W.Textarea(
            value="",
            placeholder="prompt text" if tokenizer is not None else "token ids, e.g. 5 7 9 5 7 9",
            layout=W.Layout(width="95%", height="120px"),
        )
        self.max_draft = W.IntSlider(
            value=max_draft, min=1, max=16, description="max_draft", continuous_update=False
        ).add_class("sd-max-draft")
        self.draft_length = W.Dropdown(
            options=list(DRAFT_LENGTHS.items()),
            value=draft_length,
            description="k rule",
            layout=W.Layout(width="60%"),
        ).add_class("sd-k-rule")
        self.max_new_tokens = W.IntSlider(
            value=max_new_tokens, min=8, max=256, step=8, description="new tokens", continuous_update=False
        )
        self.compare = W.Checkbox(
            value=compare,
            description="also decode autoregressively (equality, speed-up)",
            layout=W.Layout(width="60%"),
        )
        self.button = W.Button(description="Generate", button_style="primary", icon="play")
        self.status = W.HTML()
        self.output = W.HTML().add_class("sd-output")
        self.picker.observe(self.on_pick, names="value")
        self.prompt.observe(self.on_edit, names="value")
        self.prompt.value = initial_prompt  # on_edit selects the matching prompt in the picker, if any
        self.button.on_click(self.on_run)
        for control in (self.max_draft, self.draft_length, self.max_new_tokens, self.compare):
            control.observe(self.on_run, names="value")
        self.widget = W.VBox(
            [
                W.HTML("<b>Change any control</b> to rerun (edit the prompt, then press <i>Generate</i>)."),
                self.picker,
                self.prompt,
                W.HBox([self.max_draft, self.max_new_tokens]),
                self.draft_length,
                self.compare,
                W.HBox([self.button, self.status]),
                self.output,
            ]
        ).add_class("sd-dashboard")
        self.snapshot = None
        if initial_run is not None:
            self.snapshot = Snapshot(self.view_html(initial_run))  # the view's first line gives the settings

    OWN_PROMPT = "(type your own prompt)"

    def settings_text(self) -> str:
        rule = self.draft_length.value
        return f"max_draft {self.max_draft.value}, k rule {rule}, {self.max_new_tokens.value} new tokens" + (
            ", compared with autoregressive" if self.compare.value else ""
        )

    def view_html(self, run: LookupRun) -> str:
        """What the dashboard shows for a run: the settings, the colored tokens, the numbers."""
        head = f"<div class='sd-settings' style='font-size:12px;color:#555'>{_html.escape(self.settings_text())}</div>"
        return head + tokens_html(run.result, self.tokenizer) + _stats_html(run.stats())

    # ---- callbacks (plain methods: call them from tests) ------------------------------------------------
    def on_pick(self, change=None) -> None:
        """A prompt chosen in the dropdown replaces the text box, and runs."""
        value = change["new"] if isinstance(change, dict) else self.picker.value
        if value and value != self.prompt.value:
            self.prompt.value = value
            self.on_run()

    def on_edit(self, change=None) -> None:
        """The picker follows the text box: the shipped prompt it holds, or "(type your own prompt)"."""
        text = change["new"] if isinstance(change, dict) else self.prompt.value
        target = text if text in self._texts else ""
        if self.picker.value != target:
            self.picker.unobserve(self.on_pick, names="value")
            try:
                self.picker.value = target
            finally:
                self.picker.observe(self.on_pick, names="value")

    def on_run(self, _event=None) -> LookupRun | None:
        """Run prompt lookup with the current settings; show colored tokens and stats (or the error)."""
        self.status.value = "<i>running…</i>"
        self.button.disabled = True
        try:
            run = run_prompt_lookup(
                self.model,
                self.prompt.value,
                tokenizer=self.tokenizer,
                max_draft=self.max_draft.value,
                draft_length=self.draft_length.value,
                max_new_tokens=self.max_new_tokens.value,
                compare=self.compare.value,
                cost_curve=self.cost_curve,
            )
        except ValueError as err:  # bad input (empty prompt, ids out of range, ...): say so in the widget
            self.status.value = ""
            self.output.value = f"<pre class='sd-error' style='color:#b00'>{_html.escape(str(err))}</pre>"
            return None
        finally:
            self.button.disabled = False
        self.last = run
        self.status.value = ""
        self.output.value = self.view_html(run)
        if self.snapshot is not None:
            self.snapshot.retire()
        return run

    def _ipython_display_(self):
        _show_widget(self.widget, PLACEHOLDER)
        if self.snapshot is not None:
            self.snapshot.display()
