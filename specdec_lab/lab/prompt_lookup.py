"""Prompt lookup live (notebook 00): `run_prompt_lookup` and the dashboard built on it.

    run = run_prompt_lookup(lm, "...", max_draft=10, compare=True)   # -> LookupRun (result, baseline, stats)
    dash = PromptLookupDashboard(lm, prompts=specdec_lab.io.load_prompts(), initial_run=run)
    dash          # last expression of a cell: shows the controls, then a static snapshot of the default view

`run_prompt_lookup` is the function behind the button; the notebook calls it directly for its default
(checked) experiment, then builds the dashboard on it. Callbacks are plain methods: tests set the widgets'
values, call `dashboard.on_run()` and read `dashboard.output.value`.
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass

from ..cost.curve import CostCurve, set_cost_curve
from ..generate import GenerationResult, generate, make_proposer
from ..io import Prompt
from ..models.load import unwrap
from ..viz.tokens import tokens_html
from .widgets import PLACEHOLDER, Snapshot, parse_ids, show_widget

__all__ = ["run_prompt_lookup", "LookupRun", "PromptLookupDashboard", "DRAFT_LENGTHS"]

# dropdown label -> PromptLookupConfig.draft_length ("fixed" means: the int max_draft)
DRAFT_LENGTHS = {
    "cost: argmax E[tokens]/t(k+1) from the measured curve": "cost",
    "heuristic: transformers' +2 / −1 rule": "heuristic",
    "fixed: always max_draft (when the match is that long)": "fixed",
}


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
    chat: bool | str = "auto",
    compare: bool = False,
    cost_curve: CostCurve | None = None,
) -> LookupRun:
    """Prompt lookup decoding of `prompt` (text, or token ids / an id string for tokenizer-less models).

    draft_length: "cost" | "heuristic" | "fixed" (= max_draft) | an int
    chat:         how a text prompt is tokenized (`models.prompt_ids`: "auto" = the chat template when there is one)
    compare:      also decode autoregressively (same loop, no proposals) for equality and speed-up
    cost_curve:   a curve already measured for this model, used by draft_length="cost" instead of
                  measuring one on first use
    """
    model, tokenizer = unwrap(model, tokenizer)
    if isinstance(prompt, str) and tokenizer is None:
        prompt = parse_ids(prompt)
    k = max_draft if draft_length == "fixed" else draft_length
    proposer = make_proposer("prompt_lookup", max_draft=max_draft, draft_length=k)
    if cost_curve is not None:
        set_cost_curve(model, cost_curve)
    kwargs = {
        "tokenizer": tokenizer,
        "chat": chat if isinstance(prompt, str) else False,
        "max_new_tokens": max_new_tokens,
    }
    result = generate(model, prompt, proposer=proposer, **kwargs)
    baseline = generate(model, prompt, method="autoregressive", **kwargs) if compare else None
    return LookupRun(result=result, baseline=baseline)


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

        model, tokenizer = unwrap(model, tokenizer)
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
        show_widget(self.widget, PLACEHOLDER)
        if self.snapshot is not None:
            self.snapshot.display()
