"""The report's data-repetition warning and its line of final-eval standard errors."""

from ladder.analysis.repetition import standard_errors, warnings


def _rung(name, prose, code, se=None):
    return {"name": name, "epochs_by_domain": {"prose": prose, "code": code}, "final_eval_loss_se": se}


def test_warns_only_when_a_rung_repeats_text_the_others_see_far_less():
    fresh = [_rung("r1", 0.1, 0.2), _rung("r2", 0.4, 0.5), _rung("r3", 0.9, 0.95)]
    assert warnings(fresh) == []  # every window at most once: nothing repeats
    even = [_rung("r1", 1.5, 0.2), _rung("r2", 2.0, 0.3), _rung("r3", 2.9, 0.4)]
    assert warnings(even) == []  # all repeat, within 2x of each other
    skewed = [_rung("r1", 0.3, 0.2), _rung("r2", 1.2, 0.3), _rung("r3", 4.0, 0.4)]
    lines = warnings(skewed)
    assert len(lines) == 1 and "prose is seen 0.3 times by r1 but 4 times by r3" in lines[0]


def test_standard_errors_line():
    assert standard_errors([_rung("r1", 0, 0)]) is None
    line = standard_errors([_rung("r1", 0, 0, 0.0123), _rung("r2", 0, 0, 0.004)])
    assert line == "final eval standard error (over its windows): r1 ±0.0123, r2 ±0.004"
