"""Profiles, where ``api`` requests go, and the rule that no secret is ever written in an agent file.

A secret header or query value (by its name, `sensitive_name`, or by its shape, a bearer token or a known key
prefix) must come from an environment variable a profile names, as ``{"env": "VARIABLE"}``, whose name starts with
the profile's own prefix (`variable_prefix`); an ``api`` command may not carry one at all, nor a header that routes
the request elsewhere (`agl_notebook.functions.spec.ROUTING_HEADERS`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ...payloads import JsonValue
from ..spec import ROUTING_HEADERS, EnvValue, Profile, Template, header_text_problem
from .checker import Checker
from .reading import key_path, kind_of, pairs_of, plain_json

_PROFILE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_SECRET_WORDS = frozenset(
    {
        "authorization",
        "auth",
        "token",
        "secret",
        "password",
        "passwd",
        "cookie",
        "credential",
        "credentials",
        "signature",
        "apikey",
        "sessionid",
    }
)
_SECRET_JOINED = ("apikey", "accesstoken", "accesskey", "privatekey", "clientsecret")
_SECRET_SHAPE = re.compile(r"^(Bearer|Basic|Token)\s+\S+|^sk-|^ghp_|^xox[abp]-|^AKIA[0-9A-Z]{12}", re.IGNORECASE)


# Variables no profile reads, whatever its name: agl_notebook's own settings and the model providers' keys.
_RESERVED_VARIABLES = ("AGL_NOTEBOOK_", "ANTHROPIC_", "CLAUDE_", "OPENAI_", "AWS_", "GOOGLE_", "AZURE_")
_ROUTING_PROBLEM = (
    "this header routes or frames the request (Host, Forwarded, X-Forwarded-*, Connection, Transfer-Encoding, "
    "Content-Length ...), which only the profile's baseUrl and the HTTP client decide: remove it."
)


def variable_prefix(profile: str) -> str:
    """What the environment variables a profile reads start with: its name in capitals, ``-`` as ``_``, then ``_``.

    ``orders`` reads ``ORDERS_TOKEN``, ``billing-eu`` reads ``BILLING_EU_KEY``: never ``GITHUB_TOKEN`` or another
    tool's secret, which an agent file could otherwise send to any server it names.
    """
    return profile.upper().replace("-", "_") + "_"


class ProfileChecks(Checker):
    """The checks of profiles, and of the secrets that request values may not hold."""

    def profiles(
        self, raw: Any, overrides: Mapping[str, Any] | None
    ) -> tuple[dict[str, Profile], dict[str, JsonValue]]:
        """The agent's profiles with ``overrides`` merged in, and each as plain JSON (for fingerprints)."""
        items: list[tuple[str, Any]] = []
        if raw is not None:
            if not isinstance(raw, Mapping):
                self.problem("profiles", f"must be an object of profile name → profile, not {kind_of(raw)}.")
            else:
                items = self.unique_pairs(raw, "profiles", "profile")
        merged: dict[str, Any] = dict(items)
        for name, override in (overrides or {}).items():
            base = merged.get(name)
            if isinstance(base, Mapping) and isinstance(override, Mapping):
                merged[name] = {**dict(pairs_of(base)), **dict(override)}
            else:
                merged[name] = override
        profiles: dict[str, Profile] = {}
        for name, value in merged.items():
            self.profile_names.add(name)
            profile = self.profile(name, value, key_path("profiles", name))
            if profile is not None:
                profiles[name] = profile
        return profiles, {k: plain_json(v) for k, v in merged.items()}

    def profile(self, name: str, raw: Any, path: str) -> Profile | None:
        """One profile, or None if it has problems."""
        if not _PROFILE_NAME.fullmatch(name):
            self.problem(path, "a profile name starts with a letter and has only letters, digits, '_' and '-'.")
        if not isinstance(raw, Mapping):
            self.problem(
                path, f"a profile is an object with baseUrl (and headers, query, timeout), not {kind_of(raw)}."
            )
            return None
        f = self.fields(raw, path, ("baseUrl", "headers", "query", "timeout", "maxResponseBytes"), "a profile")
        before = len(self.problems)
        base_url = f.get("baseUrl")
        if not isinstance(base_url, str):
            self.problem(
                key_path(path, "baseUrl"),
                "a profile needs baseUrl, the absolute http(s) URL its paths are relative to.",
            )
            base_url = ""
        else:
            self.base_url(base_url, key_path(path, "baseUrl"))
        headers = self.secret_map(f.get("headers"), key_path(path, "headers"), header=True, profile=name)
        query = self.secret_map(f.get("query"), key_path(path, "query"), header=False, profile=name)
        timeout = f.get("timeout", 30.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
            self.problem(key_path(path, "timeout"), "the timeout is a number of seconds above 0, at most 600.")
            timeout = 30.0
        max_bytes = f.get("maxResponseBytes", 4_000_000)
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or not 0 < max_bytes <= 100_000_000:
            self.problem(
                key_path(path, "maxResponseBytes"), "maxResponseBytes is a whole number above 0, at most 100000000."
            )
            max_bytes = 4_000_000
        if len(self.problems) > before:
            return None
        return Profile(name, base_url, headers, query, float(timeout), max_bytes)

    def base_url(self, url: str, path: str) -> None:
        """A profile's base URL: absolute http(s), no credentials, no query or fragment."""
        try:
            parts = urlsplit(url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            self.problem(path, f"{url!r} is not an absolute http(s) URL such as 'https://api.example.com/v1'.")
            return
        if parts.username is not None or parts.password is not None:
            self.problem(
                path,
                "the URL holds credentials; never write secrets in an agent file: read them from an "
                'environment variable in headers, as {"env": "VARIABLE"}.',
            )
        if parts.query or parts.fragment:
            self.problem(
                path, "the base URL may not have a query or fragment; put query values in the profile's query."
            )

    def secret_map(self, raw: Any, path: str, *, header: bool, profile: str) -> tuple[tuple[str, str | EnvValue], ...]:
        """A profile's headers or query values: a secret only as ``{"env": "VARIABLE"}``, never written out.

        The variable's name starts with the profile's own prefix (`variable_prefix`).
        """
        if raw is None:
            return ()
        what = "header" if header else "query parameter"
        if not isinstance(raw, Mapping):
            self.problem(path, f'must be an object of {what} name → value or {{"env": "VARIABLE"}}.')
            return ()
        out: list[tuple[str, str | EnvValue]] = []
        for name, value in self.unique_pairs(raw, path, what):
            where = key_path(path, name)
            if header and not _HEADER_NAME.fullmatch(name):
                self.problem(where, f"{name!r} is not a valid HTTP header name.")
                continue
            if header and name.lower() in ROUTING_HEADERS:
                self.problem(where, _ROUTING_PROBLEM)
                continue
            if isinstance(value, str):
                problem = header_text_problem(value) if header else ""
                if problem:
                    self.problem(where, f"a header's value {problem}.")
                    continue
                if sensitive_name(name, header=header) or _SECRET_SHAPE.search(value):
                    self.problem(
                        where,
                        f"this {what} looks like it carries a secret, and secrets are never written "
                        f'in an agent file: write {{"env": "VARIABLE"}} (optionally with '
                        f'"prefix": "Bearer ") and set the environment variable.',
                    )
                    continue
                out.append((name, value))
            elif isinstance(value, Mapping):
                f = self.fields(value, where, ("env", "prefix"), "an environment value")
                variable, prefix = f.get("env"), f.get("prefix", "")
                if not isinstance(variable, str) or not _ENV_NAME.fullmatch(variable):
                    self.problem(
                        key_path(where, "env"),
                        'name the environment variable that holds the value, such as "ORDERS_TOKEN".',
                    )
                    continue
                if not isinstance(prefix, str):
                    self.problem(key_path(where, "prefix"), 'the prefix is a string, such as "Bearer ".')
                    continue
                allowed = variable_prefix(profile)
                if not variable.startswith(allowed) or variable.startswith(_RESERVED_VARIABLES):
                    self.problem(
                        key_path(where, "env"),
                        f"the profile {profile!r} may read only environment variables whose names start with "
                        f"{allowed} (such as {allowed}TOKEN), and none of agl_notebook's or a model provider's "
                        f"({', '.join(p + '*' for p in _RESERVED_VARIABLES)}): an agent file chooses where a "
                        "profile sends what it reads, so it cannot name any secret of the environment.",
                    )
                    continue
                out.append((name, EnvValue(variable, prefix)))
            else:
                self.problem(where, f'a {what} value is a string or {{"env": "VARIABLE"}}, not {kind_of(value)}.')
        return tuple(out)

    def request_values(self, raw: Mapping[str, Any], path: str, *, header: bool) -> list[tuple[str, Template]]:
        """An ``api`` command's own headers or query values: no secret, which only a profile may hold."""
        out: list[tuple[str, Template]] = []
        what = "header" if header else "query parameter"
        for name, value in self.unique_pairs(raw, path, what):
            where = key_path(path, name)
            if header and not _HEADER_NAME.fullmatch(name):
                self.problem(where, f"{name!r} is not a valid HTTP header name.")
                continue
            if header and name.lower() in ROUTING_HEADERS:
                self.problem(where, _ROUTING_PROBLEM)
                continue
            if sensitive_name(name, header=header) or (isinstance(value, str) and _SECRET_SHAPE.search(value)):
                self.problem(
                    where,
                    f"this {what} carries a secret; secrets come only from environment variables "
                    f"named in a profile: move it to the profile's {'headers' if header else 'query'}"
                    f' as {{"env": "VARIABLE"}}.',
                )
                continue
            out.append((name, self.template(value, where)))
        return out


def sensitive_name(name: str, *, header: bool) -> bool:
    """Whether a header or query parameter of this name carries a secret, so its value must come from the environment.

    ``Authorization``, ``X-Api-Key``, ``X-Auth-Token``, ``access_token``; for a query also ``key`` and ``sig``. Not
    ``X-Author`` or ``Idempotency-Key``.
    """
    words = [w for w in re.split(r"[-_.\s]+", name.lower()) if w]
    joined = "".join(words)
    if any(w in _SECRET_WORDS for w in words) or any(s in joined for s in _SECRET_JOINED):
        return True
    return not header and any(w in ("key", "sig") for w in words)
