"""Sign-in for real on one machine: npm's `oidc-provider` (tests/oidc_provider.mjs) as the team's
OpenID Connect provider, `loopledger dashboard --secrets FILE` behind it, and the browser steps
of signing in through the provider's own pages."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.real_clients import OIDC_PROVIDER, npm_package
from tests.team_support import free_port, wait_http

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).with_name("loopledger")
CLIENT_ID = "loopledger-dashboard"


def secrets_toml(provider_port: int, dashboard_port: int, client_secret: str, allow: list[str],
                 default_role: str = "viewer") -> str:
    """The dashboard's secrets.toml for this provider (what docs/team.md shows)."""
    allow_list = ", ".join(f'"{a}"' for a in allow)
    return (f'[auth]\nredirect_uri = "http://127.0.0.1:{dashboard_port}/oauth2callback"\n'
            f'cookie_secret = "{secrets.token_urlsafe(32)}"\nclient_id = "{CLIENT_ID}"\n'
            f'client_secret = "{client_secret}"\n'
            f'server_metadata_url = "http://127.0.0.1:{provider_port}/.well-known/openid-configuration"\n'
            # The development provider offers no account picker (select_account, Streamlit's default).
            'client_kwargs = { prompt = "login" }\n\n'
            f'[loopledger]\nallow = [{allow_list}]\ndefault_role = "{default_role}"\n')


@contextmanager
def provider(port: int, dashboard_port: int, client_secret: str, log: Path):
    """The OpenID Connect provider on 127.0.0.1:port, for a dashboard on dashboard_port."""
    if shutil.which("node") is None:
        pytest.skip("node is needed to run the OpenID Connect provider (not on PATH)")
    pkg = npm_package(*OIDC_PROVIDER)
    with log.open("w") as out:
        proc = subprocess.Popen(["node", str(HERE / "oidc_provider.mjs"), str(pkg), str(port), CLIENT_ID, client_secret,
                                 f"http://127.0.0.1:{dashboard_port}/oauth2callback"], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/.well-known/openid-configuration", proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def dashboard(ledger: str, port: int, secrets_file: Path, log: Path):
    """`loopledger dashboard --secrets FILE` on 127.0.0.1:port, once it answers its health check."""
    env = dict(os.environ)
    env.pop("LOOPLEDGER_DATABASE_URL", None)
    with log.open("w") as out:
        proc = subprocess.Popen([str(BIN), "dashboard", "--db", ledger, "--port", str(port), "--secrets",
                                 str(secrets_file)], stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/_stcore/health", proc, log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def sign_in(page, base: str, email: str, path: str = "/") -> None:
    """Through the provider's own pages: the dashboard's Sign in, the login form, the consent."""
    page.goto(base + path)
    page.get_by_role("button", name="Sign in").click(timeout=60_000)
    page.locator("input[name=login]").fill(email, timeout=60_000)
    page.locator("input[name=password]").fill("any password: the development provider takes it")
    page.get_by_role("button", name="Sign-in").click()
    consent = page.get_by_role("button", name="Continue")
    try:
        consent.click(timeout=10_000)  # the first sign-in of an account asks for consent
    except Exception:  # noqa: BLE001 (already granted: straight back to the dashboard)
        pass
    page.wait_for_url(f"{base}/**", timeout=60_000)


def ports() -> tuple[int, int]:
    a = free_port()
    b = free_port()
    while b == a:
        time.sleep(0.01)
        b = free_port()
    return a, b
