"""Figures and HTML views for the notebooks: data in, `plotly.graph_objects.Figure` (or HTML) out.

Submodules are imported on use so that `import specdec_lab` never pulls in plotly:

    from specdec_lab.viz.figures import save_figure          # HTML (+ PNG via kaleido) into figures/
    from specdec_lab.viz.cost import cost_curve_figure        # t(n) of a CostCurve, per token, break-even
    from specdec_lab.viz.tokens import show_tokens, tokens_html, trace_table   # a GenerationResult's tokens
    from specdec_lab.viz.trees import tree_figure, tree_mask_figure, tidy_layout

    from specdec_lab.viz.lab import LabDashboard               # notebook 08's dashboard over every method
    from specdec_lab.viz.results import ...                   # notebook 09's tables and figures

Figure functions call no model: notebooks run the library, then hand the results to them. The dashboards
(`viz.lab`, `viz.medusa`'s live ones) are the exception: a widget change runs the library again.
"""
