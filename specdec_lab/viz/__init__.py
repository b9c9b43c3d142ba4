"""Figures and HTML views for the notebooks: data in, `plotly.graph_objects.Figure` (or HTML) out.

Submodules are imported on use so that `import specdec_lab` never pulls in plotly:

    from specdec_lab.viz.figures import save_figure          # HTML (+ PNG via kaleido) into figures/
    from specdec_lab.viz.cost import cost_curve_figure        # t(n) of a CostCurve, per token, break-even
    from specdec_lab.viz.tokens import show_tokens, tokens_html, trace_table   # a GenerationResult's tokens
    from specdec_lab.viz.trees import tree_figure, tree_mask_figure, tidy_layout
    from specdec_lab.viz.lab_figures import accepted_figure   # what notebook 08's lab shows of a LabResult
    from specdec_lab.viz.results import ...                   # notebook 09's tables and figures
    from specdec_lab.viz.timeline import timeline_figure      # draft -> verify -> accept from a real trace (00)
    from specdec_lab.viz.batching import ragged_figure        # speculation in a batch (notebook 13)

One module per notebook's figures besides these (acceptance: 01-02, medusa/tree_sizing: 03 and 05, tree_figures:
04-05, decoding: 06, jacobi/lookahead*: 07, lab_figures/comparison: 08, eagle_figures: 10, sampling_trees: 11).

Figure functions call no model and build no widgets: notebooks (and `specdec_lab.lab`, where every
ipywidgets dashboard lives) run the library, then hand the results to them. `viz` never imports `lab`.
"""
