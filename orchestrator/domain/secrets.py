"""Secret names, masking and secret references (pure; docs/security.md).

* A *secret name* is an environment-variable name matching one of the configured globs
  (``security.secret_patterns``, case-insensitive; default
  :data:`orchestrator.settings.DEFAULT_SECRET_PATTERNS`). Its value is replaced by
  :data:`MASK` wherever it is shown: API responses, pages, CLI output, reports and run
  provenance. The ledger keeps what the submitter sent (the run needs it), nobody reads
  it back.
* A *secret reference* is an env value ``secret://NAME``: the run gets the value of the
  server-side variable ``NAME`` at launch, on the allocation; only the reference is
  stored. ``NAME`` must be listed in ``security.secret_refs``.
* :func:`strip_control` removes terminal control characters from text printed on a
  terminal (titles, reasons, errors).

The patterns in effect are process-wide (:func:`configure_masking`, called once by each
entry point with its settings), so every ``*Public`` model masks the same way.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.settings import DEFAULT_SECRET_PATTERNS

__all__ = [
    "MASK",
    "SECRET_REF_PREFIX",
    "active_patterns",
    "configure_masking",
    "is_secret_name",
    "mask_env",
    "SECRET_QUERY_WORDS",
    "mask_override",
    "mask_text",
    "mask_url",
    "mask_urls_deep",
    "parse_secret_ref",
    "secret_refs_of",
    "strip_control",
]

MASK = "***"
"""What a masked value reads as."""

SECRET_REF_PREFIX = "secret://"
"""Value prefix of a secret reference (``HF_TOKEN=secret://HF_TOKEN``)."""

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_active: tuple[str, ...] = tuple(DEFAULT_SECRET_PATTERNS)

# C0 controls except \t and \n, DEL, C1 controls, and whole ANSI escape sequences (CSI,
# OSC, and two-character ESC sequences) so that no fragment of one is left behind.
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"            # CSI ... final byte
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"      # DCS/SOS/PM/APC ... ST
    r"|\x1b[@-Z\\-_]"                      # other two-character escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"              # 8-bit CSI
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def configure_masking(patterns: Iterable[str]) -> None:
    """Set the process-wide secret-name patterns (shell globs, case-insensitive).

    Args:
        patterns: E.g. ``settings.security.secret_patterns``. The built-in defaults are
            always included, so a configuration can add names but never unmask one.
    """
    global _active
    _active = tuple(dict.fromkeys([*DEFAULT_SECRET_PATTERNS, *patterns]))


def active_patterns() -> tuple[str, ...]:
    """The secret-name patterns in effect."""
    return _active


def is_secret_name(name: str, patterns: Iterable[str] | None = None) -> bool:
    """True when ``name`` matches a secret pattern (case-insensitive)."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, p.upper()) for p in (patterns or _active))


def mask_env(env: Mapping[str, Any] | None, patterns: Iterable[str] | None = None) -> dict[str, Any]:
    """Return a copy of ``env`` with the values of secret names replaced by :data:`MASK`.

    Secret references (``secret://NAME``) are kept: they name a variable, not a value.
    """
    pats = tuple(patterns or _active)
    out: dict[str, Any] = {}
    for name, value in (env or {}).items():
        is_ref = isinstance(value, str) and value.startswith(SECRET_REF_PREFIX)
        out[name] = MASK if is_secret_name(str(name), pats) and not is_ref else value
    return out


def mask_override(item: str) -> str:
    """Mask one ``NAME=value`` item when ``NAME`` is a secret name."""
    name, sep, value = item.partition("=")
    if sep and is_secret_name(name) and not value.startswith(SECRET_REF_PREFIX):
        return f"{name}={MASK}"
    return item


SECRET_QUERY_WORDS = ("token", "key", "secret", "password", "passwd", "pwd", "pass", "sig",
                      "signature", "auth", "credential", "session", "jwt", "otp")
"""A URL query (or fragment) parameter whose name contains one of these (case-insensitive;
``access_token``, ``api_key``, ``X-Amz-Signature``, ``sig`` of an Azure SAS URL) has its
value masked."""

_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s\"'<>`]+")
_PARAM_RE = re.compile(r"(?P<name>[^&;=#?]+)=(?P<value>[^&;#]*)")


def _mask_params(part: str) -> str:
    """Mask the values of secret-named ``name=value`` pairs of a query or fragment."""
    def one(match: re.Match[str]) -> str:
        name = match["name"].lower()
        if match["value"] and any(word in name for word in SECRET_QUERY_WORDS):
            return f"{match['name']}={MASK}"
        return match[0]
    return _PARAM_RE.sub(one, part)


def mask_url(url: str) -> str:
    """Mask the credentials of a URL: the password of its userinfo
    (``https://user:***@host/...``; a lone long userinfo, a token, becomes ``***``) and the
    values of query or fragment parameters with secret-looking names
    (:data:`SECRET_QUERY_WORDS`: ``?token=***``). Anything that is not a URL is returned as is.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, host = authority.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        masked = f"{user}:{MASK}" if colon else (MASK if _looks_like_token(user) else user)
        authority = f"{masked}@{host}"
    path, qmark, query = tail.partition("?")
    if not qmark:
        path, hash_, fragment = tail.partition("#")
        return f"{scheme}://{authority}{path}{hash_}{_mask_params(fragment)}"
    return f"{scheme}://{authority}{path}?{_mask_params(query)}"


def mask_text(text: str) -> str:
    """``text`` with every URL in it masked (:func:`mask_url`): error messages, commands,
    titles, provenance values. Text without ``://`` is returned unchanged (the same object)."""
    if "://" not in text:
        return text
    return _URL_RE.sub(lambda m: mask_url(m[0]), text)


def mask_urls_deep(value: Any) -> Any:
    """``value`` with :func:`mask_text` applied to every string in it, through dicts (keys
    and values), lists and tuples. Containers with nothing to mask are returned as is
    (the same object), so a large series costs one pass and no copy."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, dict):
        items = [(mask_urls_deep(k), mask_urls_deep(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        masked = [mask_urls_deep(v) for v in value]
        if all(m is v for m, v in zip(masked, value, strict=True)):
            return value
        return masked if isinstance(value, list) else tuple(masked)
    return value


def _looks_like_token(user: str) -> bool:
    """A userinfo without ':' that is long enough to be a token (``https://ghp_...@host``)."""
    return len(user) >= 20


def parse_secret_ref(value: str) -> str | None:
    """Return ``NAME`` of a ``secret://NAME`` value, ``None`` for a plain value.

    Raises:
        ValueError: The value starts with ``secret://`` but ``NAME`` is not a variable name.
    """
    if not value.startswith(SECRET_REF_PREFIX):
        return None
    name = value[len(SECRET_REF_PREFIX):]
    if not _NAME_RE.match(name):
        raise ValueError(f"{value!r}: a secret reference is secret://NAME with NAME a variable name")
    return name


def secret_refs_of(env: Mapping[str, str] | None) -> dict[str, str]:
    """``{run variable: server variable}`` of every secret reference in ``env``."""
    refs = {}
    for key, value in (env or {}).items():
        name = parse_secret_ref(value) if isinstance(value, str) else None
        if name is not None:
            refs[key] = name
    return refs


def strip_control(text: Any) -> str:
    """``text`` as a string without terminal control characters.

    Removes ANSI escape sequences, C0 controls other than tab and newline (CR too: it
    could overwrite what a line showed), DEL and C1 controls.
    """
    return _CONTROL_RE.sub("", _ANSI_RE.sub("", str(text)))
