"""Provider settings: which chat providers exist, their order, prices and spending limits.

Kept in ``providers.json`` in the data folder (beside ``settings.json``), read and written only
through the functions here, which the CLI (``pcm providers``), the desktop and the MCP server's
``configure_llm_provider`` tool all call:

    add_provider(data_dir, config, set_as_default=False, allow_off_machine=False) -> ProviderConfig
    add_agent_provider(data_dir, config) -> ProviderConfig    (an MCP client: new entries only)
    remove_provider(data_dir, provider_id)          set_default(data_dir, provider_id)
    set_limits(data_dir, daily=..., monthly=...)    load_providers(data_dir) -> ProviderSettings

Privacy (seed 004 §9): an API key is never stored, only the *name* of the environment variable
that holds it; and nothing leaves the machine unless a provider whose endpoint is not loopback
was added with ``allow_off_machine=True`` (the CLI's ``--yes-send-off-machine``). An MCP client
never changes or redirects what the user configured (``add_agent_provider``).

Several processes may change the file (the desktop, ``pcm providers``, ``pcm mcp``): each change
re-reads it and writes it back under a file lock (``providers.json.lock``), never from a copy read
earlier.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationError, field_validator

from app.core.errors import CoreError
from app.core.ports import is_loopback
from app.locks import FileLock

PROVIDERS_FILE = "providers.json"
LOCAL_ID = "llama.cpp"  # the in-process model: the default and the fallback of last resort

ProviderKind = Literal["llama.cpp", "openai", "ollama"]
SchemaStyle = Literal["json_schema", "json_object", "none"]

# Well-known OpenAI-compatible endpoints (seed 004 §6 names these provider families).
DEFAULT_ENDPOINTS: dict[str, str] = {
    "ollama": "http://127.0.0.1:11434/v1",
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1/",
    "google": "https://generativelanguage.googleapis.com/v1beta/openai/",
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
# Keys of seed 004 §6 (configure_llm_provider) and their names here.
_ALIASES = {"endpoint": "base_url", "apiKeyEnv": "api_key_env", "maxTokens": "max_tokens",
            "provider": "kind", "type": "kind", "setAsDefault": None}
_SECRET_KEYS = {"api_key", "apiKey", "key", "token", "secret"}
AGENT_PREFIX = "mcp-"  # the id of a provider an MCP client added: mcp-<family>[-n]
T = TypeVar("T")


class ProviderSettingsError(CoreError):
    """Provider settings that cannot be saved as asked; ``str()`` is one line for the user."""


class ProviderConfig(BaseModel):
    """One chat provider as configured. ``api_key_env`` names an environment variable; the key
    itself is read from it at call time and never written anywhere."""

    id: str
    kind: ProviderKind
    name: str = ""
    base_url: str = ""  # OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 (not for llama.cpp)
    model: str = ""  # the model name the endpoint serves ("" for llama.cpp: the app's chat model)
    api_key_env: str = ""
    priority: int = 100  # lower is tried first, after the default provider
    enabled: bool = True
    price_in_per_1k: float = Field(0.0, ge=0)  # price per 1,000 prompt tokens
    price_out_per_1k: float = Field(0.0, ge=0)  # price per 1,000 completion tokens
    daily_limit: float | None = Field(None, ge=0)  # this provider's own limits (None: none)
    monthly_limit: float | None = Field(None, ge=0)
    context_size: int = Field(8192, ge=256)  # the served model's window (shown; prompts fit the local one)
    max_tokens: int | None = Field(None, ge=1)  # cap on answer tokens sent to the endpoint
    temperature: float | None = Field(None, ge=0, le=2)  # overrides the call's temperature
    timeout_s: float = Field(60.0, gt=0)  # connect and first token, and each token after, within this
    min_tokens_per_s: float = Field(2.0, gt=0)  # the whole call within timeout_s + the answer cap at this rate
    json_schema_style: SchemaStyle = "json_schema"  # json_object: llama-cpp-python's server
    off_machine_confirmed: bool = False  # the user agreed that prompts may leave the machine

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("a provider id is 1-40 letters, digits, '.', '_' or '-'")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _check_env(cls, value: str) -> str:
        if value and not _ENV_NAME.match(value):
            raise ValueError("api_key_env is the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key")
        return value

    @property
    def type(self) -> Literal["local", "external"]:
        """local: runs in this process; external: an HTTP endpoint (on this machine or not)."""
        return "local" if self.kind == LOCAL_ID else "external"

    @property
    def off_machine(self) -> bool:
        """Whether prompts sent to this provider leave this machine."""
        return self.kind != LOCAL_ID and not is_loopback(self.base_url)

    @property
    def label(self) -> str:
        return self.name or self.id

    def api_key(self) -> str:
        """The key from the named environment variable ("" when unnamed or unset)."""
        return os.environ.get(self.api_key_env, "") if self.api_key_env else ""


def local_provider() -> ProviderConfig:
    return ProviderConfig(id=LOCAL_ID, kind="llama.cpp", name="in-process llama.cpp", priority=1000)


class ProviderSettings(BaseModel):
    """Everything in ``providers.json``: the providers, the default, limits and retry policy."""

    providers: list[ProviderConfig] = Field(default_factory=lambda: [local_provider()])
    default: str = LOCAL_ID
    daily_limit: float | None = Field(None, ge=0)  # over every priced provider together
    monthly_limit: float | None = Field(None, ge=0)
    retries: int = Field(2, ge=0, le=10)  # retries of a transient error before falling back
    backoff_s: float = Field(0.25, ge=0)  # first retry's wait; doubled each time
    down_for_s: float = Field(60.0, ge=0)  # a provider that failed is skipped this long
    check_every_s: float = Field(30.0, ge=0)  # an endpoint unused this long is checked before use

    def get(self, provider_id: str) -> ProviderConfig | None:
        return next((p for p in self.providers if p.id == provider_id), None)

    def ordered(self) -> list[ProviderConfig]:
        """Enabled providers in the order they are tried: the default, then by priority (ties
        keep the file's order); the local model is always there, as the last resort."""
        enabled = [p for p in self.providers if p.enabled or p.id == LOCAL_ID]
        if self.get(LOCAL_ID) is None:
            enabled.append(local_provider())
        return sorted(enabled, key=lambda p: (p.id != self.default, p.priority))


def settings_path(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / PROVIDERS_FILE


def load_providers(data_dir: str | os.PathLike[str]) -> ProviderSettings:
    """The provider settings of ``data_dir`` (only the local model when there is no file)."""
    path = settings_path(data_dir)
    if not path.is_file():
        return ProviderSettings()
    try:
        return ProviderSettings.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise ProviderSettingsError(f"{path} is not valid provider settings ({_first_error(exc)}); "
                                    "fix or remove the file") from None


def save_providers(data_dir: str | os.PathLike[str], settings: ProviderSettings) -> Path:
    """Write ``settings`` atomically (a reader never sees half a file)."""
    path = settings_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(settings.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def _update(data_dir: str | os.PathLike[str], change: Callable[[ProviderSettings], T]) -> T:
    """Apply ``change`` to the settings as stored now and save them, under the file's lock (another
    process's change in between is kept, never overwritten)."""
    with FileLock(settings_path(data_dir).with_suffix(".json.lock"), timeout=30, what="changing the providers"):
        settings = load_providers(data_dir)
        out = change(settings)
        save_providers(data_dir, settings)
        return out


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err.get("loc", ()))
        return f"{where}: {err.get('msg', '')}" if where else str(err.get("msg", ""))
    return " ".join(str(exc).split())[:200]


def normalize_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with seed 004 §6 names (endpoint, apiKeyEnv, maxTokens, provider) mapped to
    ours, the provider family (ollama | openai | anthropic | google) mapped to a kind and a
    default endpoint, and a default id. Refuses a key given inline."""
    secret = sorted(k for k in config if k in _SECRET_KEYS)
    if secret:
        raise ProviderSettingsError(f"an API key is never stored ({secret[0]} given): put it in an environment "
                                    "variable and give that variable's name as api_key_env")
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = _ALIASES.get(key, key)
        if name is not None and value is not None:
            out[name] = value
    family = str(out.get("kind", "openai"))
    if family in ("anthropic", "google"):
        out["kind"] = "openai"
    if not out.get("base_url") and family in DEFAULT_ENDPOINTS:
        out["base_url"] = DEFAULT_ENDPOINTS[family]
    out.setdefault("id", family if family != "llama.cpp" else LOCAL_ID)
    return out


def _checked(config: dict[str, Any], allow_off_machine: bool) -> ProviderConfig:
    """``config`` as a ``ProviderConfig`` that may be saved (module doc), or one line why not."""
    values = normalize_config(config)
    try:
        provider = ProviderConfig.model_validate(values)
    except ValidationError as exc:
        raise ProviderSettingsError(f"provider not added: {_first_error(exc)}") from None
    if provider.kind == LOCAL_ID:
        if provider.id != LOCAL_ID:
            raise ProviderSettingsError(f"the in-process model has the id {LOCAL_ID!r}")
    elif not provider.base_url.startswith(("http://", "https://")):
        raise ProviderSettingsError("provider not added: base_url must be an http(s) URL, e.g. http://127.0.0.1:8080/v1")
    elif not provider.model:
        raise ProviderSettingsError("provider not added: name the model the endpoint serves (model)")
    if provider.off_machine:
        if not allow_off_machine:
            host = urlsplit(provider.base_url).hostname
            raise ProviderSettingsError(
                f"{host} is not this machine: prompts (your sessions' text) would be sent there; add it "
                "again with --yes-send-off-machine to confirm")
        provider = provider.model_copy(update={"off_machine_confirmed": True})
    return provider


def add_provider(data_dir: str | os.PathLike[str], config: dict[str, Any], set_as_default: bool = False, *,
                 allow_off_machine: bool = False) -> ProviderConfig:
    """Add (or replace, by id) a provider and save; return it as saved.

    ``config`` takes ``ProviderConfig`` fields or seed 004 §6's (``provider`` ollama | openai |
    anthropic | google, ``endpoint``, ``model``, ``apiKeyEnv``, ``maxTokens``, ``temperature``).
    An endpoint that is not loopback is refused unless ``allow_off_machine`` (the user confirmed
    that prompts may leave the machine). Raises ``ProviderSettingsError`` with one line.
    """
    provider = _checked(config, allow_off_machine)

    def change(settings: ProviderSettings) -> ProviderConfig:
        settings.providers = [p for p in settings.providers if p.id != provider.id] + [provider]
        if set_as_default:
            settings.default = provider.id
        return provider

    return _update(data_dir, change)


def add_agent_provider(data_dir: str | os.PathLike[str], config: dict[str, Any]) -> ProviderConfig:
    """A provider an MCP client configures: always a new entry (``mcp-<family>``, numbered when
    taken; the same endpoint and model again returns the entry already there), named as the
    client's, tried after every provider already configured, never the default, on this machine
    only, and never with the key variable of a provider already configured (the client cannot
    change or redirect what the user set up, nor send the user's key to an endpoint it picked)."""
    family = str(config.get("provider", "openai"))
    asked = _checked({**config, "id": f"{AGENT_PREFIX}{family}"}, allow_off_machine=False)

    def change(settings: ProviderSettings) -> ProviderConfig:
        same = next((p for p in settings.providers if p.id.startswith(AGENT_PREFIX) and p.kind == asked.kind
                     and (p.base_url, p.model, p.api_key_env) == (asked.base_url, asked.model, asked.api_key_env)),
                    None)
        if same is not None:
            return same
        keys = {p.api_key_env for p in settings.providers if p.api_key_env}
        if asked.api_key_env in keys:
            raise ProviderSettingsError(f"apiKeyEnv: ${asked.api_key_env} is the key of a provider you configured; "
                                        "an MCP client cannot send it to another endpoint")
        ids = {p.id for p in settings.providers}
        pid = next(i for i in (asked.id, *(f"{asked.id}-{n}" for n in range(2, 1000))) if i not in ids)
        last = max((p.priority for p in settings.providers if p.id != LOCAL_ID), default=100)
        provider = asked.model_copy(update={"id": pid, "name": f"{pid} (added by an MCP client)",
                                            "priority": min(last + 1, 999)})
        settings.providers.append(provider)
        return provider

    return _update(data_dir, change)


def remove_provider(data_dir: str | os.PathLike[str], provider_id: str) -> ProviderSettings:
    """Remove a provider (the in-process model stays: it is the last resort); the default
    falls back to the in-process model when it was the one removed."""
    if provider_id == LOCAL_ID:
        raise ProviderSettingsError("the in-process model is the fallback of last resort and cannot be removed")

    def change(settings: ProviderSettings) -> ProviderSettings:
        if settings.get(provider_id) is None:
            raise ProviderSettingsError(f"no provider {provider_id!r} (see pcm providers list)")
        settings.providers = [p for p in settings.providers if p.id != provider_id]
        if settings.default == provider_id:
            settings.default = LOCAL_ID
        return settings

    return _update(data_dir, change)


def set_default(data_dir: str | os.PathLike[str], provider_id: str) -> ProviderSettings:
    """Make ``provider_id`` the provider tried first."""

    def change(settings: ProviderSettings) -> ProviderSettings:
        if provider_id != LOCAL_ID and settings.get(provider_id) is None:
            raise ProviderSettingsError(f"no provider {provider_id!r} (see pcm providers list)")
        settings.default = provider_id
        return settings

    return _update(data_dir, change)


def set_limits(data_dir: str | os.PathLike[str], *, daily: float | None = None, monthly: float | None = None,
               clear: bool = False) -> ProviderSettings:
    """Set the daily and/or monthly spending limits over all priced providers (``clear``: none)."""
    for value in (daily, monthly):
        if value is not None and value < 0:
            raise ProviderSettingsError("a spending limit cannot be negative")

    def change(settings: ProviderSettings) -> ProviderSettings:
        if clear:
            settings.daily_limit = settings.monthly_limit = None
        if daily is not None:
            settings.daily_limit = daily
        if monthly is not None:
            settings.monthly_limit = monthly
        return settings

    return _update(data_dir, change)
