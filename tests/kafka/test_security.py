"""Unit tests of :mod:`streams.kafka.security`: sources, precedence, validation, redaction, and the exact
aiokafka keyword arguments and Faust credentials produced for each protocol and SASL mechanism.

SASL cannot be exercised against the embedded broker (Tansu 0.6.0 offers only SCRAM, and users can only be
created by an already authenticated client, which memory storage can never have; see docs/embedded-broker.md), so the
settings handed to aiokafka and Faust are checked here exactly, including through Faust's own
``credentials_to_aiokafka_auth`` and by constructing real aiokafka clients with them.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from streams.kafka.compat import faust_settings_for
from streams.kafka.security import (
    PLAINTEXT,
    KafkaSecurity,
    KafkaSecurityError,
    add_security_arguments,
    load_properties,
    security_from_args,
    security_from_sources,
)
from tests.support.certs import Pki, make_pki

SECRET = "s3cr3t-Pa55word-do-not-print"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_security_arguments(parser)
    return parser.parse_args(argv)


# --- sources and precedence ------------------------------------------------------------------------------


def test_default_is_plaintext() -> None:
    security = security_from_sources(env={})
    assert security == PLAINTEXT
    assert security.aiokafka_kwargs() == {"security_protocol": "PLAINTEXT"}
    assert security.faust_credentials() is None
    assert security.ssl_context() is None


def test_environment_in_kafka_vocabulary(pki: Pki) -> None:
    env = {
        "LOOPWATCH_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "LOOPWATCH_KAFKA_SASL_MECHANISM": "scram-sha-512",
        "LOOPWATCH_KAFKA_SASL_USERNAME": "loopwatch",
        "LOOPWATCH_KAFKA_SASL_PASSWORD": SECRET,
        "LOOPWATCH_KAFKA_SSL_CA_LOCATION": str(pki.ca),
        "LOOPWATCH_KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "none",
    }
    security = security_from_sources(env=env)
    assert security.security_protocol == "SASL_SSL"
    assert security.sasl_mechanism == "SCRAM-SHA-512"
    assert security.sasl_username == "loopwatch"
    assert security.sasl_password == SECRET
    assert security.ssl_cafile == str(pki.ca)
    assert security.ssl_check_hostname is False


def test_password_files(tmp_path: Path, pki: Pki) -> None:
    sasl = tmp_path / "sasl-password"
    sasl.write_text(SECRET + "\n", encoding="utf-8")
    key = tmp_path / "key-password"
    key.write_text(pki.client_key_password + "\n", encoding="utf-8")
    env = {
        "LOOPWATCH_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "LOOPWATCH_KAFKA_SASL_MECHANISM": "PLAIN",
        "LOOPWATCH_KAFKA_SASL_USERNAME": "u",
        "LOOPWATCH_KAFKA_SASL_PASSWORD_FILE": str(sasl),
        "LOOPWATCH_KAFKA_SSL_CA_LOCATION": str(pki.ca),
        "LOOPWATCH_KAFKA_SSL_CERTIFICATE_LOCATION": str(pki.client_cert),
        "LOOPWATCH_KAFKA_SSL_KEY_LOCATION": str(pki.client_key),
        "LOOPWATCH_KAFKA_SSL_KEY_PASSWORD_FILE": str(key),
    }
    security = security_from_sources(env=env)
    assert security.sasl_password == SECRET  # trailing newline dropped
    assert security.ssl_key_password == pki.client_key_password
    with pytest.raises(KafkaSecurityError, match="not both"):
        security_from_sources(env={**env, "LOOPWATCH_KAFKA_SASL_PASSWORD": SECRET})


def test_properties_file_like_client_properties(tmp_path: Path, pki: Pki) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# a Kafka client.properties\n"
        "bootstrap.servers=kafka:9093\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanisms: SCRAM-SHA-256\n"
        f"ssl.ca.location={pki.ca}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="svc-loopwatch" password="{SECRET}";\n',
        encoding="utf-8",
    )
    assert load_properties(path)["sasl.mechanism"] == "SCRAM-SHA-256"
    security = security_from_sources(env={}, config_file=path)
    assert (security.security_protocol, security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-256")
    assert (security.sasl_username, security.sasl_password) == ("svc-loopwatch", SECRET)
    # the same file through LOOPWATCH_KAFKA_CONFIG
    assert security_from_sources(env={"LOOPWATCH_KAFKA_CONFIG": str(path)}) == security


def test_unknown_security_property_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(f"ssl.truststore.password={SECRET}\n", encoding="utf-8")
    with pytest.raises(KafkaSecurityError, match=r"unsupported property 'ssl\.truststore\.password'") as info:
        load_properties(path)
    assert SECRET not in str(info.value)


def test_an_unreadable_client_config_is_named_as_every_file_is(tmp_path: Path) -> None:
    """The path in parentheses, as the CLI's other file errors write it (it was in quotes)."""
    missing = tmp_path / "missing.properties"
    with pytest.raises(KafkaSecurityError) as info:
        load_properties(missing)
    assert str(info.value) == f"cannot read the Kafka client config ({missing}): No such file or directory"
    missing.write_bytes(b"\xff\xfe")
    with pytest.raises(KafkaSecurityError, match=r"\(.*missing\.properties\): it is not UTF-8 text$"):
        load_properties(missing)


def test_precedence_flag_over_env_over_file(tmp_path: Path, pki: Pki) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=from-file\nsasl.password={SECRET}\n"
        f"ssl.ca.location={pki.other_ca}\n",
        encoding="utf-8",
    )
    env = {"LOOPWATCH_KAFKA_SASL_USERNAME": "from-env", "LOOPWATCH_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256"}
    args = parse(["--kafka-config", str(path), "--sasl-mechanism", "scram-sha-512", "--ssl-cafile", str(pki.ca)])
    security = security_from_args(args, env=env)
    assert security.sasl_mechanism == "SCRAM-SHA-512"  # flag beats env and file
    assert security.sasl_username == "from-env"  # env beats file
    assert security.sasl_password == SECRET  # only in the file
    assert security.ssl_cafile == str(pki.ca)
    assert security.ssl_check_hostname is True
    assert (
        security_from_args(parse(["--kafka-config", str(path), "--no-ssl-check-hostname"]), env={}).ssl_check_hostname
        is False
    )


def test_no_flag_takes_a_secret() -> None:
    parser = argparse.ArgumentParser()
    add_security_arguments(parser)
    options = {option for action in parser._actions for option in action.option_strings}
    assert not any("password" in option for option in options), options
    with pytest.raises(KafkaSecurityError, match="cannot be given on the command line"):
        security_from_sources(flags={"sasl.password": SECRET}, env={})


def test_every_kafka_command_has_the_flags() -> None:
    from streams.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("worker", "publish", "tail", "replay", "simulate", "whatif", "broker"):
        sub = subparsers.choices[name]
        options = {option for action in sub._actions for option in action.option_strings}
        assert {"--security-protocol", "--sasl-mechanism", "--ssl-cafile", "--kafka-config"} <= options, name
        assert not any("password" in option for option in options), name


# --- validation ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"security_protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": SECRET}, "needs sasl.mechanism"),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "GSSAPI",
                "sasl_username": "u",
                "sasl_password": SECRET,
            },
            "sasl.mechanism must be one of",
        ),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_password": SECRET},
            "needs sasl.username",
        ),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "u"}, "needs sasl.password"),
        ({"security_protocol": "SSL", "sasl_username": "u", "sasl_password": SECRET}, "security.protocol is SSL"),
        ({"security_protocol": "PLAINTEXT", "ssl_cafile": "/etc/hostname"}, "use SSL or SASL_SSL"),
        ({"security_protocol": "TLS"}, "security.protocol must be one of"),
        ({"security_protocol": "SSL", "ssl_cafile": "/nonexistent/ca.pem"}, "is not a readable file"),
    ],
)
def test_invalid_settings_are_refused_without_echoing_secrets(values: dict[str, Any], message: str) -> None:
    with pytest.raises(KafkaSecurityError, match=message) as info:
        KafkaSecurity(**values)
    assert SECRET not in str(info.value)


def test_client_key_without_certificate(pki: Pki) -> None:
    with pytest.raises(KafkaSecurityError, match=r"needs ssl\.certificate\.location"):
        KafkaSecurity(security_protocol="SSL", ssl_keyfile=str(pki.client_key))


def test_wrong_key_password_fails_early_and_quietly(pki: Pki) -> None:
    env = {
        "LOOPWATCH_KAFKA_SECURITY_PROTOCOL": "SSL",
        "LOOPWATCH_KAFKA_SSL_CA_LOCATION": str(pki.ca),
        "LOOPWATCH_KAFKA_SSL_CERTIFICATE_LOCATION": str(pki.client_cert),
        "LOOPWATCH_KAFKA_SSL_KEY_LOCATION": str(pki.client_key),
        "LOOPWATCH_KAFKA_SSL_KEY_PASSWORD": SECRET,  # not the key's password
    }
    with pytest.raises(KafkaSecurityError, match="cannot load TLS files") as info:
        security_from_sources(env=env)
    assert SECRET not in str(info.value)


# --- redaction -----------------------------------------------------------------------------------------


def test_repr_and_describe_hide_secrets(pki: Pki) -> None:
    security = KafkaSecurity(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="u",
        sasl_password=SECRET,
        ssl_cafile=str(pki.ca),
    )
    for text in (repr(security), str(security), security.describe(), repr(security.faust_credentials())):
        assert SECRET not in text
    assert security.redact(f"boom: {SECRET}!") == "boom: [redacted]!"


# --- what clients get ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_settings_for_aiokafka_and_faust(protocol: str, mechanism: str, pki: Pki) -> None:
    tls = protocol == "SASL_SSL"
    security = KafkaSecurity(
        security_protocol=protocol,
        sasl_mechanism=mechanism,
        sasl_username="svc",
        sasl_password=SECRET,
        ssl_cafile=str(pki.ca) if tls else None,
    )
    kwargs = security.aiokafka_kwargs()
    assert {k: v for k, v in kwargs.items() if k != "ssl_context"} == {
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "svc",
        "sasl_plain_password": SECRET,
    }
    assert isinstance(kwargs.get("ssl_context"), ssl.SSLContext) is tls
    credentials = security.faust_credentials()
    assert isinstance(credentials, faust.SASLCredentials)
    # exactly what Faust hands to every aiokafka client it makes (consumer, producer, end-offset probe)
    via_faust = dict(credentials_to_aiokafka_auth(credentials, None))
    assert isinstance(via_faust.pop("ssl_context"), ssl.SSLContext) is tls
    assert via_faust == {k: v for k, v in kwargs.items() if k != "ssl_context"}
    settings = faust_settings_for("127.0.0.1:9093", embedded=False, security=security)
    assert settings["broker_credentials"] is not None
    _construct_aiokafka_clients(kwargs)


def test_ssl_settings_for_aiokafka_and_faust(pki: Pki) -> None:
    security = KafkaSecurity(
        security_protocol="SSL",
        ssl_cafile=str(pki.ca),
        ssl_certfile=str(pki.client_cert),
        ssl_keyfile=str(pki.client_key),
        ssl_key_password=pki.client_key_password,
        ssl_check_hostname=False,
    )
    kwargs = security.aiokafka_kwargs()
    assert set(kwargs) == {"security_protocol", "ssl_context"}
    context = kwargs["ssl_context"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname is False
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    credentials = security.faust_credentials()
    assert isinstance(credentials, faust.SSLCredentials)
    assert credentials_to_aiokafka_auth(credentials, None)["security_protocol"] == "SSL"
    assert "broker_credentials" not in faust_settings_for("127.0.0.1:9092", embedded=True)
    _construct_aiokafka_clients(kwargs)


def _construct_aiokafka_clients(kwargs: dict[str, Any]) -> None:
    """aiokafka validates security settings in its constructors: build (never start) each client kind."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient

    async def build() -> None:
        AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", **kwargs)
        producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", **kwargs)
        await producer.stop()
        AIOKafkaAdminClient(bootstrap_servers="127.0.0.1:1", **kwargs)

    asyncio.run(build())


def test_end_offset_probe_of_the_worker_gets_the_credentials(pki: Pki) -> None:
    """The kafka_compat probe consumer is built from the Faust app's broker_credentials (as Faust's own are)."""
    from types import SimpleNamespace

    from yarl import URL

    from streams.kafka.compat import CompatConsumerThread

    security = KafkaSecurity(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="svc",
        sasl_password=SECRET,
        ssl_cafile=str(pki.ca),
    )
    settings = faust_settings_for("127.0.0.1:9093", embedded=False, security=security)
    conf = SimpleNamespace(
        broker_credentials=settings["broker_credentials"], ssl_context=None, broker_request_timeout=5.0
    )
    fake = SimpleNamespace(
        app=SimpleNamespace(conf=conf),
        transport=SimpleNamespace(url=[URL("kafka://127.0.0.1:9093")], default_port=9092),
    )

    async def build() -> Any:
        return CompatConsumerThread._new_probe(fake)  # type: ignore[arg-type]

    probe = asyncio.run(build())
    client = probe._client
    assert client._security_protocol == "SASL_SSL"
    assert client._sasl_mechanism == "SCRAM-SHA-256"
    assert client._sasl_plain_username == "svc" and client._sasl_plain_password == SECRET
    assert isinstance(client._ssl_context, ssl.SSLContext)
