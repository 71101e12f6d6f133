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


def test_sessions_bar_is_small_multiples_one_unit_per_panel_ranking_measure_first():
    spec = charts.sessions_bar(_top(), by="halts").to_dict()
    panels = spec["hconcat"]
    titles = [p["encoding"]["x"]["title"] for p in panels]
    # The ranking measure first, then every other measure that is not 0 on every session drawn
    # ("blocks" is 0 on both: no panel of zeros): units never share an axis.
    assert titles == ["halts", "runs", "strikes", "warnings"]
    assert spec["resolve"] == {"scale": {"x": "independent"}}
    for p in panels:
        assert p["mark"]["type"] == "bar"
        assert p["encoding"]["href"]["field"] == "link"
        assert p["encoding"]["x"]["field"] == p["encoding"]["x"]["title"]  # bar length = that measure only
        assert p["height"] == {"step": 22}
        # Every panel lists the sessions in the one shared order.
        assert p["encoding"]["y"]["sort"] == {"field": "order", "op": "min"}
    # Only the first panel writes the session names; the others line up with it.
    assert panels[0]["encoding"]["y"]["axis"]["labelLimit"] == 280
    # Five panels and their labels fit the page at 1400 px beside the sidebar.
    assert 280 + 140 + 110 * 4 + 8 * 4 <= 900
    assert all(p["encoding"]["y"]["axis"] is None for p in panels[1:])
    assert charts.sessions_bar(_top(), by="strikes").to_dict()["hconcat"][0]["encoding"]["x"]["title"] == "strikes"


def test_sessions_bar_leaves_out_the_summary_row_and_links_each_session():
    spec = charts.sessions_bar(_top()).to_dict()
    rows = _data(spec)
    assert {r["session"] for r in rows} == {"#7 Fix <b>bold</b> test", "#3 " + "x" * 39 + "…"}
    assert {r["link"] for r in rows} == {"./session?session=7", "./session?session=3"}
    assert {r["session"]: r["order"] for r in rows} == {"#7 Fix <b>bold</b> test": 0, "#3 " + "x" * 39 + "…": 1}
    assert max(len(r["session"]) for r in rows) <= 45


def test_sessions_bar_draws_neither_columns_of_zeros_nor_sessions_the_ranking_measure_does_not_count():
    """Issue 37, friction 9: "strikes" and "blocks" columns of zeros; rows of sessions with no halt."""
    top = pd.DataFrame([
        {"id": 1, "title": "a", "runs": 3, "strikes": 0, "warnings": 2, "blocks": 0, "halts": 2, "saved": 4},
        {"id": 2, "title": "b", "runs": 5, "strikes": 0, "warnings": 1, "blocks": 0, "halts": 0, "saved": 0},
        {"id": 3, "title": "c", "runs": 1, "strikes": 0, "warnings": 0, "blocks": 0, "halts": 0, "saved": 0},
    ])
    spec = charts.sessions_bar(top, by="halts").to_dict()
    assert [p["encoding"]["x"]["title"] for p in spec["hconcat"]] == ["halts", "runs", "warnings"]
    assert [r["session"] for r in _data(spec)] == ["#1 a"]
    # Asked for, the sessions without a halt are drawn too, after it.
    spec = charts.sessions_bar(top, by="halts", with_zero=True).to_dict()
    assert [r["session"] for r in _data(spec)] == ["#1 a", "#2 b", "#3 c"]
    assert [p["encoding"]["x"]["title"] for p in spec["hconcat"]] == ["halts", "runs", "warnings"]
    assert list(charts.chart_rows(top, "warnings")["id"]) == [1, 2]


def test_claude_code_sessions_of_one_first_prompt_are_told_apart_by_day_and_project():
    home = "/home/ana/.claude/projects"
    names = [charts.session_name(i, "load claude.md", when, f"{home}/{folder}/{i}.jsonl")
             for i, when, folder in ((4, "2026-03-02T09:00:00Z", "-home-ana-ledger"),
                                     (9, "2026-03-02T15:00:00Z", "-home-ana-my-site"),
                                     (12, "2026-03-07T08:00:00Z", "-home-ana-ledger"))]
    assert names == ["#4 Mar 2 ledger · load claude.md", "#9 Mar 2 my-site · load claude.md",
                     "#12 Mar 7 ledger · load claude.md"]
    # Another source: its day alone; no time known: the title alone.
    assert charts.session_name(5, "fix it", "2025-08-14T16:02:00Z", "/data/codex/rollout.jsonl") == "#5 Aug 14 · fix it"
    assert charts.session_name(5, "fix it") == "#5 fix it"
    assert charts.project_of("/Users/bo/.claude/projects/-Users-bo-api/x/subagents/agent-1.jsonl") == "api"


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


def test_timeline_zooms_to_the_run_and_its_marks_are_clickable():
    spec = charts.timeline(_timeline_df(), domain=(3, 7)).to_dict()
    points, rules = spec["spec"]["layer"]
    # The x scale spans the chosen run only (no zero baseline squeezing it to the right edge).
    assert points["encoding"]["x"]["scale"] == {"domain": [3, 7], "zero": False, "nice": False}
    assert rules["encoding"]["x"]["scale"]["domain"] == [3, 7]
    assert points["encoding"]["x"]["axis"]["format"] == "d"  # whole steps, never 101.5
    # A click on a mark is a selection the page reads (its step and run).
    (param,) = [p for p in spec.get("params", []) if p["name"] == "mark_pick"]
    assert param["select"]["fields"] == ["seq", "run_idx"] and param["select"]["on"] == "click"
    assert "why" in {t["field"] for t in points["encoding"]["tooltip"]}
    assert charts.timeline(_timeline_df()).to_dict()["spec"]["layer"][0]["encoding"]["x"]["scale"] == {"zero": False}


def test_timeline_prose_checks_have_no_arguments():
    df = _timeline_df()
    df.loc[0, ["tool", "args", "idx"]] = ["(prose)", None, -1]
    rows = _data(charts.timeline(df).to_dict())
    assert rows[0]["tool"] == "(prose)" and rows[0]["args"] == ""


def test_source_status_counts():
    spec = charts.source_status({"ok": 9, "quarantined": 2}).to_dict()
    assert {(r["status"], r["sources"]) for r in _data(spec)} == {("ok", 9), ("quarantined", 2)}
    bars, text = spec["layer"]
    assert bars["encoding"]["x"]["field"] == "sources" and text["encoding"]["text"]["field"] == "sources"
    # A fixed band per status (one status is a bar, not a thin line) and labels never cut.
    assert spec["height"] == {"step": 34} and spec["width"] == 420
    assert bars["encoding"]["y"]["axis"]["labelLimit"] >= 200
