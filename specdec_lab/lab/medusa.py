"""Medusa-1 training live (notebook 03): sliders and a button that train fresh heads, with a live loss plot.

The figures are `specdec_lab.viz.medusa`'s (`loss_figure`, and `update_loss_figure` as the live-plot
callback); the training function comes from the notebook, which holds the rows and the model.
"""

from __future__ import annotations

import plotly.graph_objects as go

from ..viz.medusa import loss_figure, update_loss_figure
from .widgets import PLACEHOLDER, show_widget

__all__ = ["MedusaTrainingDashboard"]


class MedusaTrainingDashboard:
    """Sliders (steps, learning rate, decay) + a button that trains fresh heads with a live loss plot.

    train_fn(steps, lr, decay, callback) -> (TrainLog, HeadAccuracy) is supplied by the notebook (it
    holds the rows and the model); the dashboard only wires widgets to it and to `update_loss_figure`.
    snapshot: a `specdec_lab.lab.widgets.Snapshot` of the default view (the run its default settings give),
    displayed under the controls (stored notebooks keep no widget state) and retired by the first run.
    """

    def __init__(self, train_fn, num_heads: int, steps: int = 100, lr: float = 2e-3, decay: float = 0.8, snapshot=None):
        import ipywidgets as w

        self.train_fn, self.snapshot = train_fn, snapshot
        self.figure = go.FigureWidget(loss_figure(None, num_heads, title="Medusa-1, live"))
        self.steps = w.IntSlider(value=steps, min=10, max=1000, step=10, description="steps")
        self.lr = w.FloatLogSlider(value=lr, base=10, min=-4, max=-1, description="lr")
        self.decay = w.FloatSlider(value=decay, min=0.3, max=1.0, step=0.05, description="decay")
        self.button = w.Button(description="train", button_style="primary")
        self.output = w.HTML()
        self.button.on_click(lambda _: self.run())
        self.widget = w.VBox([w.HBox([self.steps, self.lr, self.decay, self.button]), self.figure, self.output])

    def run(self):
        """Train with the sliders' values; the figure updates every logged step."""
        self.button.disabled = True
        if self.snapshot is not None:
            self.snapshot.retire()
        try:
            log, acc = self.train_fn(
                self.steps.value,
                self.lr.value,
                self.decay.value,
                lambda lg: update_loss_figure(self.figure, lg),
            )
        finally:
            self.button.disabled = False
        top1 = ", ".join(f"{x:.3f}" for x in acc.top1)
        self.output.value = f"held-out top-1 per head: {top1} ({log.seconds:.0f} s)"
        return log, acc

    def _ipython_display_(self):
        show_widget(self.widget, PLACEHOLDER)
        if self.snapshot is not None:
            self.snapshot.display()
