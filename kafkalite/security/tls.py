"""TLS for listeners and for the broker's own client: Kafka's PEM settings (KIP-651).

Settings are read through a ``get(key) -> str | None`` callable, so that a listener's
``listener.name.<name>.ssl.*`` override wins over the broker-wide ``ssl.*`` (the caller does
that lookup). Supported:

- ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (a PEM file holding the private key
  and the certificate chain) or inline ``ssl.keystore.certificate.chain`` +
  ``ssl.keystore.key``; ``ssl.key.password`` decrypts an encrypted key;
- ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``;
- ``ssl.client.auth=none|requested|required``; ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3);
  ``ssl.cipher.suites`` (OpenSSL or IANA names, TLS 1.2 only: Python cannot choose TLS 1.3
  suites); ``ssl.endpoint.identification.algorithm`` (``https`` checks the host name, empty
  does not) on the client side.

A bad setting raises ``TlsConfigError(key, message)`` naming the key. JKS and PKCS12 key
stores are refused with a message (convert them to PEM).

The principal of an mTLS client is its certificate's subject as an RFC 2253 distinguished name
(``CN=alice,OU=eng,O=acme``, Java's X500Principal.getName()), mapped by
``ssl.principal.mapping.rules`` (Kafka's SslPrincipalMapper: ``RULE:pattern/replacement/[LU]``
entries and ``DEFAULT``, first match wins).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

Getter = Callable[[str], "str | None"]

PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _pem_store_type(get: Getter, key: str) -> None:
    kind = (get(key) or "PEM").upper()
    if kind != "PEM":
        raise TlsConfigError(
            key, f"invalid value for {key}: {kind}: only PEM is supported (convert the store)"
        )


def _load_key_pair(ctx: ssl.SSLContext, get: Getter, *, required: bool) -> bool:
    _pem_store_type(get, "ssl.keystore.type")
    location = get("ssl.keystore.location")
    chain = get("ssl.keystore.certificate.chain")
    key = get("ssl.keystore.key")
    password = get("ssl.key.password")
    if location and (chain or key):
        raise TlsConfigError(
            "ssl.keystore.location",
            "ssl.keystore.location: give either the location or the inline "
            "ssl.keystore.certificate.chain and ssl.keystore.key, not both",
        )
    if not location and not (chain and key):
        if chain or key:
            missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
            raise TlsConfigError(missing, f"{missing} is required with the other inline setting")
        if required:
            raise TlsConfigError(
                "ssl.keystore.location",
                "ssl.keystore.location (or ssl.keystore.certificate.chain and "
                "ssl.keystore.key) is required for a TLS listener",
            )
        return False
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        else:
            # ssl wants files: write the inline PEM to a private temporary file, load, delete
            fd, path = tempfile.mkstemp(prefix="kafkalite-key-", suffix=".pem")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(_pem(key or "") + "\n" + _pem(chain or "") + "\n")
                ctx.load_cert_chain(path, password=password)
            finally:
                os.unlink(path)
    except FileNotFoundError as e:
        raise TlsConfigError(
            "ssl.keystore.location", f"ssl.keystore.location: {e.filename}: no such file"
        ) from None
    except (ssl.SSLError, OSError, ValueError) as e:
        which = "ssl.keystore.location" if location else "ssl.keystore.key"
        raise TlsConfigError(which, f"{which}: cannot load the key and certificate: {e}") from None
    return True


def _pem(text: str) -> str:
    """Inline PEM values may come on one line (properties files): restore the line breaks."""
    text = text.strip().replace("\\n", "\n")
    if "\n" not in text:
        text = re.sub(r"(-----BEGIN [A-Z ]+-----)\s*", r"\1\n", text)
        text = re.sub(r"\s*(-----END [A-Z ]+-----)", r"\n\1", text)
        text = re.sub(r"(-----END [A-Z ]+-----)\s*(-----BEGIN)", r"\1\n\2", text)
    return text


def _load_trust(ctx: ssl.SSLContext, get: Getter) -> bool:
    _pem_store_type(get, "ssl.truststore.type")
    location = get("ssl.truststore.location")
    certificates = get("ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
            return True
        if certificates:
            ctx.load_verify_locations(cadata=_pem(certificates))
            return True
    except FileNotFoundError:
        raise TlsConfigError(
            "ssl.truststore.location", f"ssl.truststore.location: {location}: no such file"
        ) from None
    except (ssl.SSLError, OSError, ValueError) as e:
        key = "ssl.truststore.location" if location else "ssl.truststore.certificates"
        raise TlsConfigError(key, f"{key}: cannot load the certificates: {e}") from None
    return False


def _protocols(ctx: ssl.SSLContext, get: Getter) -> None:
    raw = get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
    names = [p.strip() for p in raw.split(",") if p.strip()]
    unknown = [n for n in names if n not in PROTOCOLS]
    if not names or unknown:
        raise TlsConfigError(
            "ssl.enabled.protocols",
            f"invalid value for ssl.enabled.protocols: {raw!r}: supported are TLSv1.2, TLSv1.3",
        )
    versions = sorted(PROTOCOLS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    suites = get("ssl.cipher.suites")
    if suites:
        try:
            ctx.set_ciphers(":".join(s.strip() for s in suites.split(",") if s.strip()))
        except ssl.SSLError:
            raise TlsConfigError(
                "ssl.cipher.suites", f"invalid value for ssl.cipher.suites: {suites!r}"
            ) from None


def server_context(get: Getter) -> ssl.SSLContext:
    """The SSLContext of a TLS listener (see the module docstring)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, get)
    _load_key_pair(ctx, get, required=True)
    auth = (get("ssl.client.auth") or "none").lower()
    if auth not in ("none", "requested", "required"):
        raise TlsConfigError(
            "ssl.client.auth",
            f"invalid value for ssl.client.auth: {auth!r}: expected none, requested or required",
        )
    has_trust = _load_trust(ctx, get)
    if auth != "none" and not has_trust:
        raise TlsConfigError(
            "ssl.truststore.location",
            f"ssl.client.auth={auth} needs ssl.truststore.location or "
            "ssl.truststore.certificates to check client certificates",
        )
    ctx.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[auth]
    return ctx


def client_context(get: Getter) -> ssl.SSLContext:
    """The SSLContext of the broker's own client (inter-broker, CLI)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, get)
    if not _load_trust(ctx, get):
        ctx.load_default_certs()
    _load_key_pair(ctx, get, required=False)
    ctx.check_hostname = (get("ssl.endpoint.identification.algorithm") or "https") != ""
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


# ---------------------------------------------------------------------- principals

_RDN_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape_dn_value(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out


def subject_dn(peercert: dict | None) -> str | None:
    """RFC 2253 form of a getpeercert() subject: last RDN first, as Java prints it."""
    if not peercert or "subject" not in peercert:
        return None
    rdns = []
    for rdn in reversed(peercert["subject"]):
        rdns.append("+".join(f"{_RDN_NAMES.get(k, k)}={_escape_dn_value(v)}" for k, v in rdn))
    return ",".join(rdns)


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str  # "", "L" or "U"


_RULE = re.compile(r"\s*RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)\s*|\s*(DEFAULT)\s*")


class PrincipalMapper:
    """Kafka's SslPrincipalMapper over ``ssl.principal.mapping.rules``."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        text = rules.strip() or "DEFAULT"
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None:
                raise TlsConfigError(
                    "ssl.principal.mapping.rules",
                    f"invalid value for ssl.principal.mapping.rules: bad rule at {text[pos:]!r}",
                )
            if m.group(4):
                self.rules.append(_Rule(None, "", ""))
            else:
                try:
                    pattern = re.compile(m.group(1))
                except re.error as e:
                    raise TlsConfigError(
                        "ssl.principal.mapping.rules",
                        f"invalid value for ssl.principal.mapping.rules: {m.group(1)!r}: {e}",
                    ) from None
                # Java's $1 back-references become Python's \g<1>
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(2))
                self.rules.append(_Rule(pattern, replacement, m.group(3)))
            pos = m.end()
            if pos < len(text):
                if text[pos] != ",":
                    raise TlsConfigError(
                        "ssl.principal.mapping.rules",
                        f"invalid value for ssl.principal.mapping.rules: expected ',' at {pos}",
                    )
                pos += 1

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule.pattern is None:
                return dn
            m = rule.pattern.fullmatch(dn)
            if m is not None:
                out = m.expand(rule.replacement)
                return out.lower() if rule.case == "L" else out.upper() if rule.case == "U" else out
        raise ValueError(f"no ssl.principal.mapping.rules rule matches {dn!r}")
