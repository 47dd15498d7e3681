"""How every loopwatch command connects to Kafka: TLS and SASL, in the Kafka clients' own vocabulary.

One frozen value, :class:`KafkaSecurity`, is built from three sources, highest precedence first:

1. non-secret command-line flags (:func:`add_security_arguments`): ``--security-protocol``,
   ``--sasl-mechanism``, ``--sasl-username``, ``--ssl-cafile``, ``--ssl-certfile``, ``--ssl-keyfile``,
   ``--no-ssl-check-hostname``, ``--kafka-config FILE``;
2. environment variables ``LOOPWATCH_KAFKA_<PROPERTY>`` (the property name upper-cased, dots as underscores,
   e.g. ``LOOPWATCH_KAFKA_SASL_MECHANISM``), plus ``…_PASSWORD_FILE`` variants for the two secrets;
3. a Java-properties file (``--kafka-config`` / ``LOOPWATCH_KAFKA_CONFIG``) with ``security.protocol=SASL_SSL``
   style lines, like a Kafka ``client.properties``.

Property names follow librdkafka (``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
``ssl.key.password``, ``ssl.endpoint.identification.algorithm``, ``sasl.mechanism``, ``sasl.username``,
``sasl.password``); the Java client's ``sasl.mechanisms`` spelling and ``sasl.jaas.config`` (PlainLoginModule /
ScramLoginModule with ``username="…" password="…"``) are accepted in the file.

Secrets (``sasl.password``, ``ssl.key.password``) come only from the environment or a file, never from a flag
(command lines are visible in process listings). They are excluded from ``repr``; :meth:`KafkaSecurity.redact`
scrubs them from any text before it is printed. This module is pure: no network, no Kafka client import.
"""

from __future__ import annotations

import argparse
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = [
    "ENV_PREFIX",
    "FILE_VARIABLES",
    "PLAINTEXT",
    "PROTOCOLS",
    "SASL_MECHANISMS",
    "SECURITY_FLAGS",
    "KafkaSecurity",
    "KafkaSecurityError",
    "add_security_arguments",
    "client_files",
    "load_properties",
    "security_from_args",
    "security_from_sources",
]

ENV_PREFIX: Final = "LOOPWATCH_KAFKA_"
CONFIG_ENV: Final = "LOOPWATCH_KAFKA_CONFIG"
PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
REDACTED: Final = "[redacted]"

#: Kafka property -> KafkaSecurity field. Secrets are marked with ``True``.
_PROPERTIES: Final[dict[str, tuple[str, bool]]] = {
    "security.protocol": ("security_protocol", False),
    "ssl.ca.location": ("ssl_cafile", False),
    "ssl.certificate.location": ("ssl_certfile", False),
    "ssl.key.location": ("ssl_keyfile", False),
    "ssl.key.password": ("ssl_key_password", True),
    "ssl.endpoint.identification.algorithm": ("ssl_check_hostname", False),
    "sasl.mechanism": ("sasl_mechanism", False),
    "sasl.username": ("sasl_username", False),
    "sasl.password": ("sasl_password", True),
}
_ALIASES: Final = {"sasl.mechanisms": "sasl.mechanism"}
_JAAS = re.compile(r"""\b(username|password)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")


class KafkaSecurityError(ValueError):
    """Unusable connection-security settings. The message never contains a secret value."""


def _env_name(prop: str) -> str:
    return ENV_PREFIX + prop.upper().replace(".", "_")


def _secret_file_variable(prop: str) -> str:
    """The variable naming a file that holds the secret ``prop`` (``LOOPWATCH_KAFKA_SASL_PASSWORD_FILE``)."""
    return _env_name(prop) + "_FILE"


def _refuse_unused(protocol: str, hint: str, *settings: tuple[str, str | None]) -> None:
    """Settings the protocol would silently ignore are an error: the user meant something else."""
    given = [prop for prop, value in settings if value]
    if given:
        raise KafkaSecurityError(f"{', '.join(given)} given but security.protocol is {protocol}; {hint}")


@dataclass(frozen=True)
class KafkaSecurity:
    """Connection security for Kafka clients; the default is PLAINTEXT (no TLS, no SASL)."""

    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        protocol = self.security_protocol.strip().upper()
        if protocol not in PROTOCOLS:
            raise KafkaSecurityError(f"security.protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
        object.__setattr__(self, "security_protocol", protocol)
        if self.sasl_mechanism is not None:
            object.__setattr__(self, "sasl_mechanism", self.sasl_mechanism.strip().upper())
        if self.uses_sasl:
            if not self.sasl_mechanism:
                raise KafkaSecurityError(
                    f"security.protocol {protocol} needs sasl.mechanism ({', '.join(SASL_MECHANISMS)})"
                )
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise KafkaSecurityError(
                    f"sasl.mechanism must be one of {', '.join(SASL_MECHANISMS)}, not {self.sasl_mechanism!r}"
                )
            if not self.sasl_username:
                raise KafkaSecurityError(f"security.protocol {protocol} needs sasl.username")
            if not self.sasl_password:
                raise KafkaSecurityError(
                    f"security.protocol {protocol} needs sasl.password (from {_env_name('sasl.password')}, "
                    f"{_env_name('sasl.password')}_FILE or the --kafka-config file; never a flag)"
                )
        else:
            _refuse_unused(
                protocol,
                "use SASL_SSL (or SASL_PLAINTEXT) so the credentials are used",
                ("sasl.mechanism", self.sasl_mechanism),
                ("sasl.username", self.sasl_username),
                ("sasl.password", self.sasl_password),
            )
        if not self.uses_tls:
            _refuse_unused(
                protocol,
                "use SSL or SASL_SSL",
                ("ssl.ca.location", self.ssl_cafile),
                ("ssl.certificate.location", self.ssl_certfile),
                ("ssl.key.location", self.ssl_keyfile),
                ("ssl.key.password", self.ssl_key_password),
            )
        if self.ssl_keyfile and not self.ssl_certfile:
            raise KafkaSecurityError("ssl.key.location needs ssl.certificate.location (the client certificate)")
        if self.ssl_key_password and not self.ssl_certfile:
            raise KafkaSecurityError("ssl.key.password needs ssl.certificate.location")
        for prop, path in (
            ("ssl.ca.location", self.ssl_cafile),
            ("ssl.certificate.location", self.ssl_certfile),
            ("ssl.key.location", self.ssl_keyfile),
        ):
            if path is not None and not (os.path.isfile(path) and os.access(path, os.R_OK)):
                raise KafkaSecurityError(f"{prop} {path!r} is not a readable file")

    # --- what it is ---------------------------------------------------------------------------------

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def is_plaintext(self) -> bool:
        return self.security_protocol == "PLAINTEXT"

    def describe(self) -> str:
        """A one-line summary without secrets, for banners and logs."""
        parts = [self.security_protocol]
        if self.uses_sasl:
            parts.append(f"{self.sasl_mechanism} as {self.sasl_username!r}")
        if self.uses_tls:
            parts.append(f"CA {self.ssl_cafile}" if self.ssl_cafile else "system CAs")
            if self.ssl_certfile:
                parts.append(f"client certificate {self.ssl_certfile}")
            if not self.ssl_check_hostname:
                parts.append("no hostname check")
        return ", ".join(parts)

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.sasl_password, self.ssl_key_password) if s)

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced (use on any message that may echo configuration)."""
        for secret in sorted(self.secrets(), key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text

    # --- what clients get ---------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context (TLS 1.2+, certificate verification always on), or None without TLS."""
        if not self.uses_tls:
            return None
        try:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ssl_cafile)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            # Like Python 3.13's default: a certificate in the trust store is an anchor even if not self-signed.
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
            context.check_hostname = self.ssl_check_hostname
            context.verify_mode = ssl.CERT_REQUIRED
            if self.ssl_certfile:
                context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, password=self.ssl_key_password)
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or type(exc).__name__
            raise KafkaSecurityError(f"cannot load TLS files ({self.describe()}): {self.redact(str(reason))}") from None
        return context

    def aiokafka_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for AIOKafkaProducer/Consumer/AdminClient (and kafka_compat.end_offsets)."""
        kwargs: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.uses_tls:
            kwargs["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password
        return kwargs

    def faust_credentials(self) -> Any:
        """``broker_credentials`` for ``faust.App``: SASLCredentials, SSLCredentials, or None for PLAINTEXT.

        Faust (``credentials_to_aiokafka_auth``) turns SASLCredentials into SASL_SSL when it carries an SSL
        context and SASL_PLAINTEXT otherwise, and passes the mechanism (SCRAM included) to aiokafka as is.
        """
        import faust

        if self.uses_sasl:
            return faust.SASLCredentials(
                username=self.sasl_username,
                password=self.sasl_password,
                ssl_context=self.ssl_context(),
                mechanism=self.sasl_mechanism,
            )
        if self.uses_tls:
            return faust.SSLCredentials(self.ssl_context())
        return None


# --- sources ------------------------------------------------------------------------------------------


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """The security properties of a Java-properties file (``key=value`` / ``key: value``, ``#``/``!`` comments).

    Unknown ``security.*``, ``ssl.*`` and ``sasl.*`` keys are errors (a silently ignored security setting is
    worse than a refusal); other keys (``bootstrap.servers``, ``client.id``…) are ignored. Values are never
    echoed in errors.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise KafkaSecurityError(f"cannot read the Kafka client config ({path}): {exc.strerror}") from None
    except UnicodeDecodeError:
        raise KafkaSecurityError(f"cannot read the Kafka client config ({path}): it is not UTF-8 text") from None
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if match is None:
            raise KafkaSecurityError(f"{path}:{number}: expected key=value")
        key, value = match.group(1).strip(), match.group(2).strip()
        key = _ALIASES.get(key, key)
        if key == "sasl.jaas.config":
            for name, quoted, single, bare in _JAAS.findall(value):
                found.setdefault(f"sasl.{name}", quoted or single or bare)
            continue
        if key in _PROPERTIES:
            found[key] = value
        elif key.split(".", 1)[0] in ("security", "ssl", "sasl"):
            raise KafkaSecurityError(f"{path}:{number}: unsupported property {key!r}")
    return found


def _read_secret_file(variable: str, path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        raise KafkaSecurityError(f"{variable}: cannot read {path!r}") from None


def _from_env(env: Mapping[str, str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for prop, (_, secret) in _PROPERTIES.items():
        name = _env_name(prop)
        value = env.get(name, "")
        if secret:
            file_name = _secret_file_variable(prop)
            path = env.get(file_name, "")
            if value and path:
                raise KafkaSecurityError(f"set {name} or {file_name}, not both")
            if path:
                value = _read_secret_file(file_name, path)
        if value:
            found[prop] = value
    return found


def _check_hostname(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered == "https":
        return True
    if lowered in ("", "none"):
        return False
    raise KafkaSecurityError(f"ssl.endpoint.identification.algorithm must be https or none, not {value!r}")


def security_from_sources(
    *,
    flags: Mapping[str, str | bool | None] | None = None,
    env: Mapping[str, str] | None = None,
    config_file: str | os.PathLike[str] | None = None,
) -> KafkaSecurity:
    """Merge flags (Kafka property -> value) > environment > properties file into a validated value.

    ``config_file`` defaults to ``$LOOPWATCH_KAFKA_CONFIG``. Secrets in ``flags`` are refused.
    """
    env = os.environ if env is None else env
    if config_file is None:
        config_file = env.get(CONFIG_ENV) or None
    merged: dict[str, str] = dict(load_properties(config_file)) if config_file else {}
    merged.update(_from_env(env))
    for prop, value in (flags or {}).items():
        if prop not in _PROPERTIES:
            raise KafkaSecurityError(f"unknown Kafka security property {prop!r}")
        if _PROPERTIES[prop][1]:
            raise KafkaSecurityError(f"{prop} cannot be given on the command line; use the environment or a file")
        if value is None:
            continue
        if isinstance(value, bool):
            value = "https" if value else "none"
        merged[prop] = value
    values: dict[str, Any] = {}
    for prop, value in merged.items():
        name = _PROPERTIES[prop][0]
        values[name] = _check_hostname(value) if name == "ssl_check_hostname" else value
    security = KafkaSecurity(**values)
    security.ssl_context()  # load the TLS files now: a bad file or key password fails before any connection
    return security


def add_security_arguments(parser: argparse.ArgumentParser) -> tuple[tuple[str, str], ...]:
    """Register the shared connection-security flags on a Kafka command's parser (no secrets among them);
    returns their (flag, attribute) pairs, :data:`SECURITY_FLAGS`. Each value is None unless the flag is given."""
    group = parser.add_argument_group(
        "Kafka connection security",
        "Flags override LOOPWATCH_KAFKA_* variables, which override the --kafka-config file. Passwords only "
        "from LOOPWATCH_KAFKA_SASL_PASSWORD[_FILE] / LOOPWATCH_KAFKA_SSL_KEY_PASSWORD[_FILE] or the file.",
    )
    added: list[argparse.Action] = []

    def add(*names: str, **kwargs: Any) -> None:
        added.append(group.add_argument(*names, **kwargs))

    add(
        "--kafka-config",
        metavar="FILE",
        default=None,
        help="Kafka client properties file: security.protocol=…, sasl.password=… (LOOPWATCH_KAFKA_CONFIG)",
    )
    add(
        "--security-protocol",
        type=str.upper,
        choices=PROTOCOLS,
        default=None,
        help="security.protocol (LOOPWATCH_KAFKA_SECURITY_PROTOCOL; default PLAINTEXT)",
    )
    add(
        "--sasl-mechanism",
        type=str.upper,
        choices=SASL_MECHANISMS,
        default=None,
        help="sasl.mechanism (LOOPWATCH_KAFKA_SASL_MECHANISM)",
    )
    add("--sasl-username", default=None, help="sasl.username (LOOPWATCH_KAFKA_SASL_USERNAME)")
    add("--ssl-cafile", metavar="FILE", default=None, help="ssl.ca.location, PEM (LOOPWATCH_KAFKA_SSL_CA_LOCATION)")
    add(
        "--ssl-certfile",
        metavar="FILE",
        default=None,
        help="ssl.certificate.location: client certificate, PEM (LOOPWATCH_KAFKA_SSL_CERTIFICATE_LOCATION)",
    )
    add(
        "--ssl-keyfile",
        metavar="FILE",
        default=None,
        help="ssl.key.location: client key, PEM (LOOPWATCH_KAFKA_SSL_KEY_LOCATION)",
    )
    add(
        "--no-ssl-check-hostname",
        dest="ssl_check_hostname",
        action="store_const",
        const=False,
        default=None,
        help="ssl.endpoint.identification.algorithm=none: still verify the chain, not the host name",
    )
    return tuple((action.option_strings[0], action.dest) for action in added)


#: (flag, attribute) of every connection-security flag, for a command that must refuse them where it reads no
#: topic (``replay --events``).
SECURITY_FLAGS: Final = add_security_arguments(argparse.ArgumentParser(add_help=False))


#: The TLS files' flags and properties.
_TLS_FILES: Final = {
    "--ssl-cafile": "ssl.ca.location",
    "--ssl-certfile": "ssl.certificate.location",
    "--ssl-keyfile": "ssl.key.location",
}
#: The flags whose value is a file the Kafka client reads, and the variable each falls back to.
FILE_VARIABLES: Final = {"--kafka-config": CONFIG_ENV, **{flag: _env_name(prop) for flag, prop in _TLS_FILES.items()}}


def client_files(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """(where, path) of each file the connection settings name: a flag's value, else its variable's (then named
    ``--flag via VARIABLE``), the secrets' ``*_FILE`` variables, and the TLS files the properties file names.
    What a command's own output must not overwrite."""
    files = []
    attribute = dict(SECURITY_FLAGS)
    for flag, variable in FILE_VARIABLES.items():
        value = getattr(args, attribute[flag], None)
        if value:
            files.append((flag, str(value)))
        elif env.get(variable):
            files.append((f"{flag} via {variable}", env[variable]))
    for prop, (_, secret) in _PROPERTIES.items():
        variable = _secret_file_variable(prop)
        if secret and env.get(variable):
            files.append((variable, env[variable]))
    config_file = getattr(args, "kafka_config", None) or env.get(CONFIG_ENV)
    try:
        named = load_properties(config_file) if config_file else {}
    except KafkaSecurityError:  # reported as such when the connection is set up
        named = {}
    for prop in _TLS_FILES.values():
        if named.get(prop):
            files.append((f"{prop} in the Kafka client properties file", named[prop]))
    return tuple(files)


def security_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> KafkaSecurity:
    """The :class:`KafkaSecurity` of a command whose parser got :func:`add_security_arguments`."""
    flags: dict[str, str | bool | None] = {
        "security.protocol": getattr(args, "security_protocol", None),
        "sasl.mechanism": getattr(args, "sasl_mechanism", None),
        "sasl.username": getattr(args, "sasl_username", None),
        "ssl.ca.location": getattr(args, "ssl_cafile", None),
        "ssl.certificate.location": getattr(args, "ssl_certfile", None),
        "ssl.key.location": getattr(args, "ssl_keyfile", None),
        "ssl.endpoint.identification.algorithm": getattr(args, "ssl_check_hostname", None),
    }
    return security_from_sources(flags=flags, env=env, config_file=getattr(args, "kafka_config", None))


#: The default: no TLS, no SASL.
PLAINTEXT: Final = KafkaSecurity()
