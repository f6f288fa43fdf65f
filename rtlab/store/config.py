"""Where results go: the store configuration.

Sources, lowest priority first, merged key by key:

1. defaults (database ``rtlab``, precision ``s``, batches of 5,000 points);
2. ``~/.config/rtlab/store.yaml`` (``$XDG_CONFIG_HOME/rtlab/store.yaml``);
3. environment: ``RTLAB_INFLUX_URL``, ``RTLAB_INFLUX_DB``, ``RTLAB_INFLUX_RP``,
   ``RTLAB_INFLUX_USER``, ``RTLAB_INFLUX_PASSWORD``, ``RTLAB_INFLUX_TOKEN``,
   ``RTLAB_INFLUX_ORG``, ``RTLAB_INFLUX_BUCKET``;
4. ``--store-config FILE`` (given explicitly, so it wins).

String values in a YAML file may say ``${VAR}`` to read the environment, so
a file checked into a repository never needs to hold a secret.

No URL at all means "nothing configured": :func:`rtlab.store.publish.open_store`
then starts the local influxd (:class:`rtlab.store.local.LocalInfluxd`).

Secrets (password, token, credentials inside the URL) are kept out of every
``repr``/``str``/description of this object; :meth:`StoreConfig.redact`
scrubs them out of any text (error messages) before it is shown or logged.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import InputError

ENV = {
    "url": "RTLAB_INFLUX_URL",
    "database": "RTLAB_INFLUX_DB",
    "retention_policy": "RTLAB_INFLUX_RP",
    "user": "RTLAB_INFLUX_USER",
    "password": "RTLAB_INFLUX_PASSWORD",
    "token": "RTLAB_INFLUX_TOKEN",
    "org": "RTLAB_INFLUX_ORG",
    "bucket": "RTLAB_INFLUX_BUCKET",
}

#: accepted spellings in store.yaml
ALIASES = {
    "db": "database", "rp": "retention_policy", "username": "user",
    "timeout": "timeout_s", "batch": "batch_size",
}


def state_dir() -> Path:
    """rtlab's state directory: ``$RTLAB_STATE_DIR``, else
    ``$XDG_STATE_HOME/rtlab``, else ``~/.local/state/rtlab``."""
    if os.environ.get("RTLAB_STATE_DIR"):
        return Path(os.environ["RTLAB_STATE_DIR"]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "rtlab"


def default_config_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "rtlab" / "store.yaml"


@dataclass
class StoreConfig:
    url: Optional[str] = None
    #: "v1" (/write, /query: InfluxDB 1.x, 1.8+, 2.x v1-compat, 3.x) or "v2"
    #: (/api/v2/write with token/org/bucket); None = v2 when a bucket or org
    #: is set, else v1
    api: Optional[str] = None
    database: str = "rtlab"
    retention_policy: Optional[str] = None
    user: Optional[str] = field(default=None, repr=False)
    password: Optional[str] = field(default=None, repr=False)
    token: Optional[str] = field(default=None, repr=False)
    org: Optional[str] = None
    bucket: Optional[str] = None
    precision: str = "s"
    batch_size: int = 5000
    timeout_s: float = 30.0
    #: CREATE DATABASE before writing (v1 only; a 403 is tolerated)
    create_database: bool = True
    #: where points go when the server is down; default <state>/spool
    spool_dir: Optional[str] = None
    #: which sources were used, for messages (never values)
    sources: list[str] = field(default_factory=list, compare=False)

    # -- building --------------------------------------------------------
    @classmethod
    def load(cls, config_file: Optional[str | Path] = None, env: Optional[dict] = None) -> "StoreConfig":
        env = dict(os.environ) if env is None else env
        values: dict[str, Any] = {}
        sources: list[str] = []
        default_file = default_config_file()
        if default_file.is_file():
            values.update(_read_yaml(default_file, env))
            sources.append(str(default_file))
        from_env = {k: env[v] for k, v in ENV.items() if env.get(v)}
        if from_env:
            values.update(from_env)
            sources.append("environment")
        if config_file is not None:
            path = Path(config_file).expanduser()
            if not path.is_file():
                raise InputError(path, "store config file not found")
            values.update(_read_yaml(path, env))
            sources.append(str(path))
        cfg = cls(**values)
        cfg.sources = sources
        return cfg.normalized()

    def normalized(self) -> "StoreConfig":
        """Credentials out of the URL, types checked, api decided."""
        cfg = replace(self)
        if cfg.url:
            bad = InputError("store config", "url must be http(s)://host[:port] (percent-encode "
                             f"special characters of a password in it), got {_strip_userinfo(cfg.url)!r}")
            try:
                parts = urlsplit(cfg.url.strip())
                parts.port  # noqa: B018 - raises on a malformed port
            except ValueError:
                raise bad from None  # the parser's message may quote part of a password
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise bad
            if parts.username is not None or parts.password is not None:
                # user:password@host: move them where they are handled as secrets
                if parts.username and not cfg.user:
                    cfg.user = unquote(parts.username)
                if parts.password and not cfg.password:
                    cfg.password = unquote(parts.password)
            host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
            netloc = host + (f":{parts.port}" if parts.port else "")
            cfg.url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        if cfg.api is None:
            cfg.api = "v2" if (cfg.bucket or cfg.org) else "v1"
        if cfg.api not in ("v1", "v2"):
            raise InputError("store config", f"api must be v1 or v2, got {cfg.api!r}")
        if cfg.precision not in ("s", "ms", "us", "ns"):
            raise InputError("store config", f"precision must be s, ms, us or ns, got {cfg.precision!r}")
        try:
            cfg.batch_size = int(cfg.batch_size)
            cfg.timeout_s = float(cfg.timeout_s)
        except (TypeError, ValueError):
            raise InputError("store config", "batch_size and timeout_s must be numbers") from None
        if not 1 <= cfg.batch_size <= 100_000:
            raise InputError("store config", f"batch_size must be 1..100000, got {cfg.batch_size}")
        if isinstance(cfg.create_database, str):
            cfg.create_database = cfg.create_database.lower() in ("1", "true", "yes", "on")
        if cfg.api == "v2" and not cfg.bucket:
            # InfluxDB 1.8+ and 3.x accept "db/rp" as the bucket
            cfg.bucket = cfg.database + (f"/{cfg.retention_policy}" if cfg.retention_policy else "")
        return cfg

    # -- secrets ---------------------------------------------------------
    def secrets(self) -> list[str]:
        return [s for s in (self.password, self.token) if s]

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for s in sorted(self.secrets(), key=len, reverse=True):
            text = text.replace(s, "***")
            # secrets also travel URL-quoted or base64'd in headers
            from urllib.parse import quote
            text = text.replace(quote(s, safe=""), "***")
        if self.user and self.password:
            import base64
            b = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            text = text.replace(b, "***")
        return text

    @property
    def configured(self) -> bool:
        return bool(self.url)

    def describe(self) -> str:
        """One line for humans: where, which database, whether auth is set."""
        if self.api == "v2":
            where = f"bucket {self.bucket}" + (f", org {self.org}" if self.org else "")
            auth = "token set" if self.token else "no token"
        else:
            where = f"database {self.database}" + (
                f", retention policy {self.retention_policy}" if self.retention_policy else "")
            auth = "credentials set" if (self.user or self.password) else "no credentials"
        return f"InfluxDB ({self.api} API) at {self.url or '(local influxd)'}, {where}, {auth}"

    def __repr__(self) -> str:  # dataclass repr would be fine too; be explicit
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.repr and f.name != "sources"}
        for k in ("user", "password", "token"):
            shown[k] = "***" if getattr(self, k) else None
        return "StoreConfig(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    __str__ = __repr__


def _strip_userinfo(url: str) -> str:
    """A URL fit to be shown: anything between ``//`` and the last ``@`` goes."""
    return re.sub(r"//.*@", "//***@", url)


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _read_yaml(path: Path, env) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        # the YAML error quotes the offending line, which may hold a secret
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(path, f"not valid YAML{where}") from None
    if isinstance(data, dict) and isinstance(data.get("store"), dict):
        data = data["store"]  # allow a top-level "store:" section
    if not isinstance(data, dict):
        raise InputError(path, "expected a mapping of store settings")
    known = {f.name for f in fields(StoreConfig)} - {"sources"}
    out: dict[str, Any] = {}
    for key, value in data.items():
        k = ALIASES.get(str(key), str(key))
        if k not in known:
            raise InputError(path, f"unknown store setting {key!r} (known: {', '.join(sorted(known))})")
        if isinstance(value, str):
            missing = [m for m in _VAR.findall(value) if m not in env]
            if missing:
                raise InputError(path, f"{key}: environment variable {missing[0]} is not set")
            value = _VAR.sub(lambda m: env[m.group(1)], value)
        out[k] = value
    return out
