"""Secret redaction: each provider's key shape is removed, ordinary text is left alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from loopledger.events import Answer, Answers, Batch, Call, Prose, SessionInfo, UserTurn, text_digest
from loopledger.redact import redact_event, redact_text, redact_value

SECRETS = [
    ("openai-key", "sk-proj-" + "Ab3_" * 12),
    ("openai-key", "sk-" + "a1B2c3D4e5" * 5),
    ("anthropic-key", "sk-ant-api03-" + "xY9-" * 20),
    ("aws-key", "AKIAIOSFODNN7EXAMPLE"),
    ("github-token", "ghp_" + "a1b2c3d4e5f6" * 3),
    ("github-token", "gho_" + "Z" * 36),
    ("github-token", "github_pat_11ABCDEFG0" + "x" * 60),
    ("google-key", "AIzaSyA" + "1" * 32),
    ("slack-token", "xoxb-123456789012-1234567890123-abcdefghijklmnop"),
    ("stripe-key", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
]


@pytest.mark.parametrize("kind,secret", SECRETS)
def test_provider_keys_are_replaced(kind, secret):
    text = f"export KEY={secret}\nnext line"
    out = redact_text(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert out.endswith("\nnext line")


def test_bearer_token_keeps_the_scheme_word():
    out = redact_text('curl -H "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"')
    assert out == 'curl -H "Authorization: Bearer [REDACTED:bearer-token]"'


def test_pem_private_key_block_is_removed_whole():
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq2s=\n-----END RSA PRIVATE KEY-----"
    out = redact_text(f"cat id_rsa\n{pem}\n$ ls")
    assert out == "cat id_rsa\n[REDACTED:private-key]\n$ ls"
    # A block cut short (e.g. a capped answer) is redacted to the end rather than leaked.
    assert redact_text("key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r") == "key:\n[REDACTED:private-key]"


def test_password_in_url_keeps_user_and_host():
    out = redact_text("DATABASE_URL=postgresql://admin:s3cr%21t@db.internal:5432/app")
    assert out == "DATABASE_URL=postgresql://admin:[REDACTED:url-password]@db.internal:5432/app"


def test_aws_secret_assignment():
    out = redact_text("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    assert out == "aws_secret_access_key = [REDACTED:aws-secret]"


@pytest.mark.parametrize("text", [
    "the risk-management plan", "task-1234567890abcdefghijklmnop", "https://example.com/a:b@c",
    "see ghp docs", "bearer of bad news", "AKIA is a prefix", "",
])
def test_innocent_text_is_untouched_and_the_same_object(text):
    assert redact_text(text) is text


@given(st.text())
def test_redaction_is_idempotent(text):
    once = redact_text(text)
    assert redact_text(once) == once


def test_events_are_redacted_everywhere_text_lives():
    key = "sk-" + "q" * 40
    batch = Batch((Call("c1", "bash", {"cmd": f"echo {key}", "n": 3, "l": [key]}), Call("c2", "ls", {})), text=key)
    out = redact_event(batch)
    assert key not in repr(out)
    assert out.calls[0].args == {"cmd": "echo [REDACTED:openai-key]", "n": 3, "l": ["[REDACTED:openai-key]"]}
    assert out.calls[1] is batch.calls[1]
    ans = redact_event(Answers((Answer("c1", f"token {key}"), Answer("c2", "clean"))))
    assert ans.answers[0].text == "token [REDACTED:openai-key]"
    # The stored digest is that of the redacted text, so a recheck from the ledger compares the same.
    assert ans.answers[0].digest == text_digest("token [REDACTED:openai-key]")
    assert ans.answers[1].digest == text_digest("clean")
    assert redact_event(UserTurn(f"use {key}")).text == "use [REDACTED:openai-key]"
    assert redact_event(Prose(f"I used {key}", ts="t", line=4)) == Prose("I used [REDACTED:openai-key]", "t", 4)
    assert redact_event(SessionInfo("k", "f", title=key)).title == "[REDACTED:openai-key]"
    clean = Batch((Call("c", "ls", {"p": "."}),))
    assert redact_event(clean) is clean


def test_malformed_string_args_are_redacted():
    call = Call("c", "bash", '{"cmd": "curl -u x:y https://u:pw123@h/', args_malformed=True)
    out = redact_event(Batch((call,))).calls[0]
    assert out.args_malformed and "pw123" not in out.args
    assert redact_value(["a", {"b": "xoxp-1234567890-abc"}]) == ["a", {"b": "[REDACTED:slack-token]"}]


_ALL_SHAPES = [s for _, s in SECRETS] + [
    "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0", "BEARER abcdefghijklmnop1234", "postgresql://u:pw@h",
    "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "-----BEGIN PRIVATE KEY-----\nabc",
    "AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'", "ASIAIOSFODNN7EXAMPLE",
    "rk_test_" + "4eC39HqLyjWDarjtT1zdp7dc", "ghs_" + "q" * 36, "ghr_" + "r" * 36, "ghu_" + "u" * 36,
]


@given(st.text(), st.sampled_from(_ALL_SHAPES), st.text())
def test_the_cheap_prefilter_never_skips_a_secret(before, secret, after):
    # The oracle is the combined pattern applied to every text, with no prefilter at all.
    from loopledger import redact

    text = before + " " + secret + " " + after
    full = redact.compiled().sub(redact._replace, text)
    assert redact_text(text) == full
    assert full != text  # the shape is a secret: something was replaced
    assert redact_value({"k": [text]}) == {"k": [full]}


@given(st.text(alphabet=st.sampled_from("abkAKISsx_-:/@eEr RpPoOuUhHgGt"), max_size=40))
def test_the_prefilter_agrees_with_the_patterns_on_marker_alphabet_text(text):
    from loopledger import redact

    full = redact.compiled().sub(redact._replace, text)
    assert redact_text(text) == full


@pytest.mark.parametrize("kind,secret", SECRETS)
def test_a_secret_right_after_a_json_escape_or_used_as_a_key_is_replaced(kind, secret):
    import json

    # A JSON text inside a string (OTLP's gen_ai.tool.call.arguments): newlines are backslash-n.
    for text in (json.dumps({"cmd": f"echo\n{secret}\tdone"}), f"a\\t{secret}", f"a\\r{secret}"):
        out = redact_text(text)
        assert secret not in out and f"[REDACTED:{kind}]" in out, text
    out = redact_value({"headers": {secret: "x"}, "n": 1})
    assert out == {"headers": {f"[REDACTED:{kind}]": "x"}, "n": 1}
    assert redact_text("C:\\new\\notes and risk-free\\ttask-list") == "C:\\new\\notes and risk-free\\ttask-list"


def _scans(text: str) -> bool:
    """The prefilter as plain scans of the lower-cased text: the oracle for its one-pass form."""
    from loopledger import redact

    low = text.lower()
    return any(gate in low and any(mk in low for mk in markers) for gate, markers in redact._GROUPS)


@given(st.text(min_size=1), st.text(alphabet=st.sampled_from("abkAKISsx_-:/@eEr RpPoOuUhHgGtzZ\\ſKİı"), max_size=60),
       st.integers(0, 600))
def test_the_one_pass_prefilter_on_long_text_says_yes_wherever_the_scans_do(filler, core, at):
    from loopledger import redact

    pad = (filler * (600 // len(filler) + 1))[:600]  # long enough for the one-pass form
    text = pad[:at] + core + pad[at:]
    assert len(text) >= redact._LONG
    if _scans(text):
        assert redact._may_hold_secret(text)


@pytest.mark.parametrize("shape", _ALL_SHAPES)
def test_a_secret_in_a_long_text_or_beside_a_lone_surrogate_is_still_found(shape):
    from loopledger import redact

    for text in ("lorem ipsum " * 60 + shape, "\ud800 " * 300 + shape, shape + " x" * 400):
        assert len(text) >= redact._LONG
        assert redact._may_hold_secret(text)
        assert shape not in redact_text(text)


def test_a_long_clean_text_is_seen_clean_by_the_one_pass_prefilter():
    from loopledger import redact

    text = "def test_ok():\n    assert parse('2024-01-01') == date(2024, 1, 1)\n" * 20
    assert len(text) >= redact._LONG and not _scans(text) and not redact._may_hold_secret(text)
