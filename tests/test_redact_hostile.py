"""Issue 27, point 1 and 3 at the redaction point itself: linear time by construction (every
pattern is an RE2 automaton), an adversarial corpus aimed at each pattern's worst case with the
outcome each must give, and every kind of secret in every form it travels in.

No timing is asserted: a pattern that backtracks is caught structurally (RE2 refuses to compile
one that could), and a text that would take minutes on a backtracking engine is killed by the
test timeout, never compared against a clock."""

from __future__ import annotations

import pytest
from loopledger import redact
from loopledger.redact import redact_text, redact_value

from bench.gen_hostile import SECRETS, adversarial, every_form, leaks, plain

N = 200_000  # characters: a 200 KB web page, the size of issue 27's reproduction


def test_every_pattern_is_compiled_by_re2_and_nothing_else():
    import re2

    combined = redact.compiled()
    assert type(combined) is type(re2.compile("x")) and type(combined).__module__ == "re2"
    for kind, pattern in redact._PATTERNS:
        re2.compile(pattern)  # each alone too: no look-around, no back-reference (RE2 has none)
        assert kind in redact._KINDS
    # One automaton of bounded size: RE2's program for all patterns together.
    assert 0 < combined.programsize < 20_000
    # The module holds no backtracking engine to fall back on.
    assert "import re\n" not in open(redact.__file__, encoding="utf-8").read()


# What each adversarial text must become: unchanged (None), or exactly this text.
EXPECTED = {
    "key-prefixes": lambda text: "[REDACTED:openai-key]",  # `sk-sk-sk-…` is one long key-shaped run
    "short-keys": lambda text: "[REDACTED:openai-key] " * text.count("sk-ant-"),  # 19 chars: not
    # Anthropic's 20, but `sk-` + `ant-aaa…` is OpenAI's shape
    "pem-unterminated": lambda text: "[REDACTED:private-key]",  # a block cut short: redacted to the end
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(adversarial(10)))
def test_an_adversarial_text_gets_its_outcome_and_a_secret_after_it_is_still_found(name):
    text = adversarial(N)[name]
    expected = EXPECTED[name](text) if name in EXPECTED else text
    assert redact_text(text) == expected
    assert redact_value({"result": text}) == {"result": expected}
    # The same text followed by a secret of each kind: the automaton is still matching after the run
    # (after a word that ends a token: `bearer` then a newline then a label is a bearer token).
    for kind, secret in SECRETS.items():
        out = redact_text(text + " \nnext: " + plain(kind, secret))
        assert not any(frag in out for frag in leaks(secret)), (name, kind)
        # (an unterminated PEM block is redacted to the end of the text, the secret with it)
        assert f"[REDACTED:{'private-key' if name == 'pem-unterminated' else kind}]" in out, (name, kind)


@pytest.mark.parametrize("kind,form,secret,text", every_form(), ids=[f"{k}-{f}" for k, f, _, _ in every_form()])
def test_every_kind_of_secret_in_every_form_is_replaced(kind, form, secret, text):
    out = redact_text(text)
    assert not any(frag in out for frag in leaks(secret)), out
    assert f"[REDACTED:{kind}]" in out
    assert redact_text(out) == out
    nested = redact_value({"args": {"body": text, "list": [text]}})
    assert not any(frag in repr(nested) for frag in leaks(secret))


@pytest.mark.parametrize("text", [
    # issue 27's reproductions: the hook's `printf` / `echo` commands and the span's arguments
    '{"command": "printf {\\"aws_secret_access_key\\":\\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\\"}"}',
    '{"command": "echo {\\"k\\":\\"\\u003csk-ant-api03-' + "xY9-" * 20 + '\\"}"}',
    '{"body": "{\\"aws_secret_access_key\\": \\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\\", '
    '\\"note\\": \\"\\\\u00a0sk-ant-api03-' + "xY9-" * 20 + '\\"}"}',
    "curl -H 'Authorization: bEaReR eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0'",
])
def test_issue_27_escaped_and_odd_case_reproductions_leave_no_secret(text):
    out = redact_text(text)
    for secret in ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "xY9-xY9-xY9-", "eyJhbGciOiJIUzI1NiJ9"):
        assert secret not in out, out
    assert "[REDACTED:" in out


@pytest.mark.parametrize("text", [
    "the risk-management plan; ask-me-anything", "mailto:dev@example.com and https://example.com/a@b",
    "C:\\new\\notes and risk-free\\ttask-list", "a bearer of bad news", "Bearer token auth is used",
    "path\\u0041sk-short", "%20Bearer%20x", "AWS_SECRET_ACCESS_KEY is not set",
])
def test_innocent_text_near_the_new_forms_is_left_alone(text):
    assert redact_text(text) is text
