"""Chart builders are pure: assert on the Vega-Lite spec and the data they embed."""

from __future__ import annotations

import pandas as pd
from loopledger import vocab
from loopledger.app import charts


def _data(spec: dict) -> list[dict]:
    return [r for rows in spec["datasets"].values() for r in rows]


def _units(spec: dict) -> list[dict]:
    """The single-view specs inside a (possibly concatenated) chart."""
    return spec["vconcat"] if "vconcat" in spec else [spec]


def _top() -> pd.DataFrame:
    return pd.DataFrame([
        {"id": 7, "title": "Fix <b>bold</b> test", "runs": 2, "strikes": 3, "warnings": 1, "blocks": 0, "halts": 4, "saved": 9, "others": 0},
        {"id": 3, "title": "x" * 200, "runs": 1, "strikes": 0, "warnings": 0, "blocks": 0, "halts": 1, "saved": 2, "others": 0},
        {"id": None, "title": "12 other sessions", "runs": 30, "strikes": 5, "warnings": 2, "blocks": 1, "halts": 0, "saved": 0, "others": 12},
    ])


def test_sessions_bar_links_each_session_and_not_the_summary():
    spec = charts.sessions_bar(_top()).to_dict()
    top, rest = _units(spec)
    for unit in (top, rest):
        assert unit["mark"]["type"] == "bar"
        assert unit["encoding"]["href"]["field"] == "link"
        assert unit["encoding"]["color"]["field"] == "measure"
        assert unit["height"] == {"step": 24}
    # The summary sits on its own x scale so it cannot dwarf the sessions' bars.
    assert spec["resolve"] == {"scale": {"x": "independent"}}
    rows = _data(spec)
    links = {r["session"]: r["link"] for r in rows}
    assert links["#7 Fix <b>bold</b> test"] == "./session?session=7"
    assert links["12 other sessions"] is None
    # Zero counts draw nothing; every stacked piece is a positive count of one measure.
    assert all(r["value"] > 0 for r in rows)
    assert {r["measure"] for r in rows if r["session"].startswith("#7")} == {"runs", "strikes", "warnings", "halts"}
    # Long titles are cut so the axis stays readable.
    assert max(len(r["session"]) for r in rows) <= 45


def test_sessions_bar_without_others_is_one_view():
    spec = charts.sessions_bar(_top().iloc[:2]).to_dict()
    assert "vconcat" not in spec and spec["encoding"]["href"]["field"] == "link"
    assert {r["session"] for r in _data(spec)} == {"#7 Fix <b>bold</b> test", "#3 " + "x" * 39 + "…"}


def test_sessions_bar_keeps_the_given_order():
    spec = charts.sessions_bar(_top()).to_dict()
    sort = _units(spec)[0]["encoding"]["y"]["sort"]
    assert sort == {"field": "order", "op": "min"}
    order = {r["session"]: r["order"] for r in _data(spec)}
    assert order["12 other sessions"] == 2 and order["#7 Fix <b>bold</b> test"] == 0


def test_session_link_encodes_query():
    assert charts.session_link(5) == "./session?session=5"
    assert charts.session_link(5, run=2) == "./session?session=5&run=2"


def _timeline_df() -> pd.DataFrame:
    rows = []
    for seq, verdict_a, verdict_b in [(1, vocab.ALLOW, vocab.ALLOW), (3, vocab.WARN, vocab.ALLOW),
                                      (5, vocab.HALT, vocab.BLOCK), (7, vocab.AFTER_HALT, vocab.HALT)]:
        for pol, v in (("ladder", verdict_a), ("window", verdict_b)):
            rows.append({"seq": seq, "idx": 0, "run_idx": 0, "tool": "Bash", "args": '{"cmd":"' + "y" * 500 + '"}',
                         "policy": pol, "verdict": v, "count": seq, "reason": None})
    return pd.DataFrame(rows)


def test_timeline_lanes_per_policy_with_rules_for_blocks_and_halts():
    spec = charts.timeline(_timeline_df()).to_dict()
    assert spec["facet"]["row"]["field"] == "policy"
    points, rules = spec["spec"]["layer"]
    assert points["mark"]["type"] == "point"
    assert points["encoding"]["x"]["field"] == "seq" and points["encoding"]["y"]["field"] == "tool"
    assert points["encoding"]["color"]["field"] == "verdict"
    assert points["encoding"]["color"]["scale"]["domain"] == list(charts.VERDICT_COLORS)
    assert rules["mark"]["type"] == "rule"
    assert rules["transform"] == [{"filter": {"field": "verdict", "oneOf": [vocab.BLOCK, vocab.HALT]}}]
    tips = {t["field"] for t in points["encoding"]["tooltip"]}
    assert {"args", "verdict", "tool", "seq"} <= tips
    rows = _data(spec)
    assert len(rows) == 8
    assert max(len(r["args"]) for r in rows) <= 160


def test_timeline_prose_checks_have_no_arguments():
    df = _timeline_df()
    df.loc[0, ["tool", "args", "idx"]] = ["(prose)", None, -1]
    rows = _data(charts.timeline(df).to_dict())
    assert rows[0]["tool"] == "(prose)" and rows[0]["args"] == ""


def test_source_status_counts():
    spec = charts.source_status({"ok": 9, "quarantined": 2}).to_dict()
    assert {(r["status"], r["sources"]) for r in _data(spec)} == {("ok", 9), ("quarantined", 2)}
    assert spec["encoding"]["x"]["field"] == "sources"
