"""The published-results table: it loads, every row says where it was checked, numbers are sane, bad files fail."""

import math

import pandas as pd
import pytest

from specdec_lab.bench.literature import COLUMNS, METRICS, NUMERIC, PUBLISHED_FILE, published, summary_table

PAPERS = (
    "Leviathan et al. 2023",
    "Chen et al. 2023",
    "Cai et al. 2024",
    "Li et al. 2024 (EAGLE)",
    "Li et al. 2024 (EAGLE-2)",
    "Li et al. 2025 (EAGLE-3)",
    "Fu et al. 2024",
    "Xia et al. 2024 (Spec-Bench leaderboard)",
)


@pytest.fixture(scope="module")
def df():
    return published()


def test_file_loads_with_every_column(df):
    assert list(df.columns) == list(COLUMNS)
    assert len(df) >= 20
    for col in NUMERIC:
        assert df[col].dtype == float


def test_every_row_has_a_source_url_and_what_was_read(df):
    assert df["source"].str.match(r"https?://").all()
    assert (df["checked"].str.len() > 20).all()  # a quote of what was read, not a placeholder


def test_the_papers_the_issue_names_are_covered(df):
    for paper in PAPERS:
        assert (df["paper"] == paper).any(), paper
    assert {"speculative_sampling", "medusa", "eagle", "eagle2", "eagle3", "lookahead", "prompt_lookup"} <= set(
        df["method"]
    )


def test_numbers_are_positive_and_in_range(df):
    for col in ("params_b", "draft_len", "cost_c", "value", "speedup"):
        x = df[col].dropna()
        assert (x > 0).all(), col
    assert (df["temperature"].dropna() >= 0).all()
    alpha = df.loc[df["metric"] == "alpha", "value"]
    assert ((alpha > 0) & (alpha < 1)).all()  # an acceptance rate
    tau = df.loc[df["metric"].isin(["tau", "mean accepted"]), "value"]
    assert (tau >= 1).all()  # tokens per step with the bonus token counted: vanilla decoding is 1
    assert df["metric"].isin(METRICS).all()


def test_a_value_has_a_metric_and_none_has_no_value(df):
    none = df["metric"] == "none"
    assert df.loc[none, "value"].isna().all()
    assert df.loc[~none, "value"].notna().all()


def test_summary_table_is_compact_and_complete(df):
    table = summary_table(df)
    assert len(table) == len(df)
    assert list(table.columns) == ["method", "paper", "model", "draft", "hardware", "task", "α/τ", "speedup", "source"]
    row = table[(table["paper"] == "Leviathan et al. 2023") & table["α/τ"].str.startswith("α")].iloc[0]
    assert row["source"].startswith("arXiv 2211.17192 Table")
    assert not table["source"].str.contains("https://").any()  # short link texts
    assert table.loc[df["verified"] == "transcription", "source"].str.endswith("(transcription)").all()


def _write(tmp_path, df):
    path = tmp_path / "published.csv"
    df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "edit, message, per_row",
    [
        (lambda d: d.drop(columns=["speedup"]), "columns missing ['speedup']", False),
        (lambda d: d.assign(extra="x"), "unknown ['extra']", False),
        (lambda d: d.assign(speedup=["fast"] + list(d["speedup"].iloc[1:])), "'speedup' is 'fast', not a number", True),
        (lambda d: d.assign(value=["-0.5"] + list(d["value"].iloc[1:])), "it must be positive", True),
        (lambda d: d.assign(source=["arXiv Table 2"] + list(d["source"].iloc[1:])), "is not a URL", True),
        (lambda d: d.assign(checked=[""] + list(d["checked"].iloc[1:])), "column 'checked' is empty", True),
        (
            lambda d: d.assign(metric=["acceptance"] + list(d["metric"].iloc[1:])),
            "metric 'acceptance' is not one of",
            True,
        ),
        (lambda d: d.assign(metric=["none"] + list(d["metric"].iloc[1:])), "a value needs a metric", True),
    ],
)
def test_malformed_csv_gives_a_clear_error(tmp_path, edit, message, per_row):
    raw = pd.read_csv(PUBLISHED_FILE, dtype=str, keep_default_na=False)
    assert raw.loc[0, "value"] != ""  # the edits above act on a row that has a value
    path = _write(tmp_path, edit(raw))
    with pytest.raises(ValueError) as err:
        published(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)
    if per_row:
        assert "line 2 (Leviathan et al. 2023, T5-XXL 11B)" in str(err.value)  # the first data row, by line and name


def test_empty_numbers_are_nan_not_zero(tmp_path):
    raw = pd.read_csv(PUBLISHED_FILE, dtype=str, keep_default_na=False)
    raw.loc[0, "speedup"] = ""
    out = published(_write(tmp_path, raw))
    assert math.isnan(out.loc[0, "speedup"])
