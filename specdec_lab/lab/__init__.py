"""The lab: live experiments and every ipywidgets dashboard, built on the library and on `specdec_lab.viz`.

Nothing is imported here: `import specdec_lab.lab.experiment` (what sweeps use) needs no ipywidgets, and a
dashboard module imports ipywidgets only when a dashboard is built.

    experiment.py     run_experiment, LabResult, experiment_record, provenance: one method against
                      autoregressive on a prompt (notebook 08; sweeps read its record). No widgets.
    widgets.py        what every dashboard shares: Snapshot (the stored default view), Dashboard (controls
                      -> callback -> output), mime_bundle / output_record / show_widget, parse_ids
    prompt_lookup.py  run_prompt_lookup, LookupRun, PromptLookupDashboard (notebook 00)
    draft.py          run_draft_demo: the distilled draft live, the callback of notebook 02's Dashboard
    medusa.py         MedusaTrainingDashboard: Medusa-1 training with a live loss plot (notebook 03)
    trees.py          Explorer (a control that redraws figures), node_explorer (notebook 04; 05-07 sliders)
    lookahead.py      RecordingLookahead: the lookahead proposer reporting its pool every step (notebook 07)
    speedup.py        LabDashboard: any registered method against autoregressive, Run/Stop (notebook 08)
    compare.py        compare_methods, CompareDashboard: several methods on one prompt, side by side (08)
    stored.py         drop dead widget views from stored notebooks (`make strip-notebooks`)
    trace_reading.py  provenance, instructive_step, forward_sizes: reading stored traces and records
    lookup_ceiling.py lookup_ceiling, ceiling_by_method: how often a text continues its own n-grams (what
                      prompt lookup could accept on it; greedy against sampled answers, notebook 11)
    teaching.py       a notebook as reveal.js slides (`make slides`)
    getting_started.py the sentences of notebook 00 read from its runs (split of a run, categories by bootstrap)
    kernel_groups.py  setups that run the same kernels at a size, compared as one (notebook 12's t(1) verdicts)
    batch_levers.py   faster / slower / within a no-effect control's band, for batch lever runs (notebook 13)
Headless studies, each a CLI writing one results file under data/bench/ (`python -m specdec_lab.lab.<name>`):
    alpha_temperature.py     α of the draft against the sampling temperature (notebook 02)
    accepted_temperature.py  mean accepted per step against temperature, per method and rule (notebook 11)
    typical_sweep.py         typical acceptance's speed against its fidelity as ε sweeps (notebook 11)
    drafter_accuracy.py      accuracy per draft position of the draft model, Medusa and EAGLE (notebook 10)

Layering: `lab` sits above `viz` (figure functions, which never import `lab`) and above the decoding
core (which never imports either); tests/test_layers.py checks it.
"""
