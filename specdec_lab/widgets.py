"""ipywidgets dashboards for live experiments. Callbacks are plain methods/functions: pytest drives them
without a browser (set the widgets' values, call `dashboard.on_run()`, read `dashboard.output.value`).

    dash = PromptLookupDashboard(load_model("smollm2-135m"), prompts=specdec_lab.io.load_prompts())
    dash          # last expression of a cell: shows the controls

`run_prompt_lookup` is the function behind the button; notebooks call it directly for their default
(checked) experiment, then build the dashboard on it.
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass

from .cost import CostCurve, set_cost_curve
from .generate import GenerationResult, generate, make_proposer
from .io import Prompt
from .models import LoadedModel
from .viz.tokens import tokens_html

__all__ = ["run_prompt_lookup", "LookupRun", "PromptLookupDashboard", "DRAFT_LENGTHS"]

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


def _stats_html(stats: dict) -> str:
    rows = "".join(
        f"<tr><td style='padding:0 8px'>{_html.escape(str(k))}</td><td>{_html.escape(str(v))}</td></tr>"
        for k, v in stats.items()
    )
    return f"<table class='sd-stats' style='font-size:12px;margin-top:6px'>{rows}</table>"


class PromptLookupDashboard:
    """Prompt text (or a prompt from data/prompts.jsonl), max_draft, draft length rule → colored tokens."""

    def __init__(
        self,
        model,
        tokenizer=None,
        prompts: list[Prompt] | None = None,
        *,
        max_new_tokens: int = 64,
        max_draft: int = 10,
        cost_curve: CostCurve | None = None,
        initial_prompt: str = "",
    ):
        import ipywidgets as W

        if isinstance(model, LoadedModel):
            tokenizer = tokenizer if tokenizer is not None else model.tokenizer
            model = model.model
        self.model, self.tokenizer, self.cost_curve = model, tokenizer, cost_curve
        self.last: LookupRun | None = None
        options = [("(type your own prompt)", "")]
        for p in prompts or []:
            text = p.text
            preview = " ".join(text.split())[:60]
            options.append((f"{p.question_id} · {p.category} · {preview}", text))
        self.picker = W.Dropdown(options=options, value="", description="prompt", layout=W.Layout(width="95%"))
        self.prompt = W.Textarea(
            value=initial_prompt,
            placeholder="prompt text" if tokenizer is not None else "token ids, e.g. 5 7 9 5 7 9",
            layout=W.Layout(width="95%", height="120px"),
        )
        self.max_draft = W.IntSlider(value=max_draft, min=1, max=16, description="max_draft")
        self.draft_length = W.Dropdown(
            options=list(DRAFT_LENGTHS.items()),
            value="cost",
            description="k rule",
            layout=W.Layout(width="60%"),
        )
        self.max_new_tokens = W.IntSlider(value=max_new_tokens, min=8, max=256, step=8, description="new tokens")
        self.compare = W.Checkbox(
            value=False,
            description="also decode autoregressively (equality, speed-up)",
            layout=W.Layout(width="60%"),
        )
        self.button = W.Button(description="Generate", button_style="primary", icon="play")
        self.status = W.HTML()
        self.output = W.HTML()
        self.picker.observe(self.on_pick, names="value")
        self.button.on_click(self.on_run)
        self.widget = W.VBox(
            [
                self.picker,
                self.prompt,
                W.HBox([self.max_draft, self.max_new_tokens]),
                self.draft_length,
                self.compare,
                W.HBox([self.button, self.status]),
                self.output,
            ]
        )

    # ---- callbacks (plain methods: call them from tests) ------------------------------------------------
    def on_pick(self, change=None) -> None:
        """A prompt chosen in the dropdown replaces the text box."""
        value = change["new"] if isinstance(change, dict) else self.picker.value
        if value:
            self.prompt.value = value

    def on_run(self, _button=None) -> LookupRun | None:
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
        self.output.value = tokens_html(run.result, self.tokenizer) + _stats_html(run.stats())
        return run

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
