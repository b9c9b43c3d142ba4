"""`lab.recycle`: the table and the sentence of notebook 07 §7 follow the numbers, reversed and tied included."""

from specdec_lab.lab.recycle import recycle_frame, recycle_sentence


def record(recycle_speed, lookup_speed, recycle_tokens_per_step, lookup_tokens_per_step, prompts=6):
    """A made-up bench file: per prompt 60 tokens; speed and tokens per step as given (a little spread)."""
    rows, summary = [], {}
    for m, speed, tps, sign in [("autoregressive", 1.0, 1.0, 1), ("recycle", recycle_speed, recycle_tokens_per_step, 1),
                                ("prompt_lookup", lookup_speed, lookup_tokens_per_step, -1)]:  # fmt: skip
        for q in range(prompts):
            wobble = 1 + sign * 0.04 * (q - prompts / 2)  # the two methods' prompts move apart: a paired spread
            rows.append({"method": m, "question_id": q, "category": "qa" if q % 2 else "coding", "new_tokens": 60,
                         "seconds": 6.0 / (speed * wobble), "forwards": 60 / (tps * wobble)})  # fmt: skip
        by_cat = {c: {"speedup": speed, "mean_accepted": tps} for c in ("coding", "qa")}
        summary[m] = {"speedup": speed, "speedup_95": [speed * 0.97, speed * 1.03], "mean_accepted": tps,
                      "by_category": by_cat}  # fmt: skip
    return {"rows": rows, "summary": summary, "prompts_done": prompts}


def test_sentence_follows_the_numbers_both_ways_and_ties():
    assert "is **slower** than `prompt_lookup`" in recycle_sentence(record(1.1, 1.4, 1.2, 1.5))
    assert "**fewer** tokens per step" in recycle_sentence(record(1.1, 1.4, 1.2, 1.5))
    reversed_ = recycle_sentence(record(1.4, 1.1, 1.5, 1.2))
    assert "is **faster** than" in reversed_ and "**more** tokens per step" in reversed_
    tied = recycle_sentence(record(1.2, 1.2, 1.3, 1.3))
    assert "cannot be told apart" in tied and "within noise" in tied


def test_frame_has_every_category_and_all():
    frame = recycle_frame(record(1.1, 1.4, 1.2, 1.5))
    assert list(frame.index) == ["coding", "qa", "all"]
    assert frame.loc["all", ("recycle", "mean accepted")] == 1.2
    assert frame.loc["all", ("prompt_lookup", "speed-up")] == 1.4
