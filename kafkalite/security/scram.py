"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks and stores them.

Pure: no I/O. Kafka's pieces, by name:

- ``ScramFormatter``: SaltedPassword = Hi(password, salt, i) (PBKDF2-HMAC), ClientKey =
  HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey), ServerKey =
  HMAC(SaltedPassword, "Server Key"); proofs and signatures over the AuthMessage
  ``client-first-bare "," server-first "," client-final-without-proof``.
- ``ScramCredentialUtils``: a credential as stored in ZooKeeper under ``/config/users/<user>``
  (``{"version":1,"config":{"SCRAM-SHA-256":"salt=..,stored_key=..,server_key=..,iterations=N"}}``),
  the four values base64 (salt and keys) and decimal (iterations).
- ``ScramSaslServer``: the server side of the exchange (client-first -> server-first,
  client-final -> server-final), ``ScramClient`` the client side (the broker's own client).

Kafka's limits: iterations 4096..16384 (ScramMechanism.minIterations / maxIterations); user names
in the messages escape ``=`` and ``,`` as ``=3D`` and ``=2C`` (saslname).

An unknown user is not told apart from a known one (``fake_credential``): the server-first
message carries a salt derived from the user name and a server secret (HMAC), the same at every
attempt, and the default iteration count, 4096; the exchange then fails at the proof like a
wrong password. No key derivation (PBKDF2) runs on the server during an exchange: the stored
keys are compared, and the fake credential is HMACs only. A client message out of turn or
malformed is a ScramError (the authentication fails), never an assertion.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
"""org.apache.kafka.clients.admin.ScramMechanism type codes (DescribeUserScramCredentials)."""
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramError(ValueError):
    """A malformed SCRAM message or failed authentication (the text goes back to the client)."""


FAKE_CREDENTIAL_SECRET = os.urandom(32)
"""The default secret of ``fake_credential``: random, and fixed for the life of the process."""


def fake_credential(
    mechanism: str, username: str, secret: bytes = FAKE_CREDENTIAL_SECRET
) -> ScramCredential:
    """What an unknown user's exchange shows: a salt derived from the user name (stable, so two
    attempts cannot tell an unknown user from a real one, whose salt is fixed), the default
    iterations, and keys no password gives. HMACs only: an unknown user costs no PBKDF2."""
    digest = _hash(mechanism)
    name = f"{mechanism}\0{username}".encode()
    salt = hmac_(digest, secret, b"salt\0" + name)[:32]
    return ScramCredential(
        salt,
        hmac_(digest, secret, b"stored_key\0" + name),
        hmac_(digest, secret, b"server_key\0" + name),
        DEFAULT_ITERATIONS,
    )


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        """ScramCredentialUtils.credentialToString."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        """ScramCredentialUtils.credentialFromString; ScramError if a field is missing."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(
                base64.b64decode(fields["salt"]),
                base64.b64decode(fields["stored_key"]),
                base64.b64decode(fields["server_key"]),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as e:
            raise ScramError(f"invalid SCRAM credential: {e}") from None


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ScramError(f"unsupported SCRAM mechanism {mechanism!r}") from None


def hmac_(digest: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, digest).digest()


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), password, salt, iterations)


def make_credential(
    mechanism: str,
    password: str | bytes,
    *,
    salt: bytes | None = None,
    iterations: int = DEFAULT_ITERATIONS,
) -> ScramCredential:
    """ScramFormatter.generateCredential (a random 32-byte salt unless one is given)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(
            f"iterations {iterations} not in {MIN_ITERATIONS}..{MAX_ITERATIONS} for {mechanism}"
        )
    if isinstance(password, str):
        password = password.encode()
    salt = os.urandom(32) if salt is None else salt
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def credential_from_salted(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential from a SaltedPassword (AlterUserScramCredentials sends that, KIP-554)."""
    digest = _hash(mechanism)
    client_key = hmac_(digest, salted, b"Client Key")
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac_(digest, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(name: str) -> str:
    if re.search(r"=(?!3D|2C)", name):
        raise ScramError("invalid username: '=' not followed by 3D or 2C")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"invalid SCRAM attribute {part[:20]!r}")
        out.setdefault(part[0], part[2:])
    return out


_PRINTABLE_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")


@dataclass(slots=True)
class ClientFirst:
    username: str
    nonce: str
    bare: str
    gs2_header: str
    authzid: str
    extensions: dict[str, str]


def parse_client_first(data: bytes) -> ClientFirst:
    """RFC 5802 client-first-message: gs2-header client-first-bare (Kafka's
    ClientFirstMessage: channel binding 'n' or 'y' only, extensions such as tokenauth kept)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("client-first-message is not UTF-8") from None
    m = re.fullmatch(r"([ny]),(a=[^,]*)?,(.*)", text, re.S)
    if m is None:
        raise ScramError("invalid client-first-message: bad gs2 header")
    gs2_header = text[: len(text) - len(m.group(3))]
    bare = m.group(3)
    attrs = bare.split(",")
    if len(attrs) < 2 or not attrs[0].startswith("n=") or not attrs[1].startswith("r="):
        raise ScramError("invalid client-first-message: expected n=user,r=nonce")
    username = unescape_name(attrs[0][2:])
    nonce = attrs[1][2:]
    if not username or not nonce or not _PRINTABLE_NONCE.fullmatch(nonce):
        raise ScramError("invalid client-first-message: empty user or bad nonce")
    extensions = {}
    for attr in attrs[2:]:
        key, sep, value = attr.partition("=")
        if not sep:
            raise ScramError("invalid client-first-message extension")
        extensions[key] = value
    authzid = m.group(2)[2:] if m.group(2) else ""
    return ClientFirst(username, nonce, bare, gs2_header, authzid, extensions)


class ScramSaslServer:
    """One server-side exchange. ``first()`` answers the client-first-message once the
    caller has looked up the user's credential (None: unknown user; the exchange then fails at
    the proof, as Kafka's does, so an unknown user cannot be told from a bad password);
    ``final()`` checks the client proof and returns the server-final-message."""

    def __init__(self, mechanism: str, fake_secret: bytes = FAKE_CREDENTIAL_SECRET) -> None:
        self.mechanism = mechanism
        self.digest = _hash(mechanism)
        self._fake_secret = fake_secret
        self.client_first: ClientFirst | None = None
        self.credential: ScramCredential | None = None
        self._server_first = ""
        self._nonce = ""
        self.complete = False

    def first(self, client_first: ClientFirst, credential: ScramCredential | None) -> bytes:
        self.client_first = client_first
        if client_first.extensions.get("tokenauth", "false").lower() == "true":
            raise ScramError("delegation tokens are not supported")
        if credential is None:
            # so the salt, iterations, timing and messages are those of a wrong password
            credential = fake_credential(self.mechanism, client_first.username, self._fake_secret)
            self.credential = None
        else:
            self.credential = credential
        self._fake = credential
        server_nonce = base64.b64encode(os.urandom(24)).decode()
        self._nonce = client_first.nonce + server_nonce
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
            f"i={credential.iterations}"
        )
        return self._server_first.encode()

    def final(self, data: bytes) -> bytes:
        if self.client_first is None or self.complete:
            # a client-final before the server-first was sent (pipelined), or a second one
            raise ScramError("Authentication failed: unexpected client-final-message")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("client-final-message is not UTF-8") from None
        proof_at = text.rfind(",p=")
        if proof_at < 0:
            raise ScramError("invalid client-final-message: no proof")
        without_proof = text[:proof_at]
        attrs = _attributes(without_proof)
        expected_binding = base64.b64encode(self.client_first.gs2_header.encode()).decode()
        if attrs.get("c") != expected_binding:
            raise ScramError("invalid client-final-message: channel binding mismatch")
        # Kafka checks endsWith, not equality: some librdkafka versions (Debian's kcat) send
        # their client nonce in front of the whole combined nonce, and Kafka accepts that
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("Invalid client nonce in the final client message.")
        try:
            proof = base64.b64decode(text[proof_at + 3 :], validate=True)
        except ValueError:
            raise ScramError("invalid client-final-message: proof is not base64") from None
        auth_message = f"{self.client_first.bare},{self._server_first},{without_proof}".encode()
        credential = self._fake
        signature = hmac_(self.digest, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("Authentication failed: Invalid user credentials")
        client_key = _xor(proof, signature)
        ok = hmac.compare_digest(
            hashlib.new(self.digest, client_key).digest(), credential.stored_key
        )
        if not ok or self.credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self.complete = True
        server_signature = hmac_(self.digest, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side (ScramSaslClient): ``first()``, ``final(server_first)``,
    ``verify(server_final)``; raises ScramError on a bad server answer."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self.digest = _hash(mechanism)
        self.username = username
        self.password = password.encode()
        self.nonce = base64.b64encode(os.urandom(24)).decode().rstrip("=")
        self._bare = f"n={escape_name(username)},r={self.nonce}"
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attributes(text)
        if "e" in attrs:
            raise ScramError(f"server error: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i")
        if not nonce.startswith(self.nonce) or salt is None or iterations is None:
            raise ScramError("invalid server-first-message")
        self._salted = salted_password(
            self.mechanism, self.password, base64.b64decode(salt), int(iterations)
        )
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = hmac_(self.digest, self._salted, b"Client Key")
        stored_key = hashlib.new(self.digest, client_key).digest()
        proof = _xor(client_key, hmac_(self.digest, stored_key, self._auth_message))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode())
        if "e" in attrs:
            raise ScramError(f"server error: {attrs['e']}")
        server_key = hmac_(self.digest, self._salted, b"Server Key")
        expected = hmac_(self.digest, server_key, self._auth_message)
        if base64.b64decode(attrs.get("v", "")) != expected:
            raise ScramError("invalid server signature")


class CredentialCache:
    """The broker's SCRAM credentials (Kafka's CredentialCache): each (user, mechanism) is read
    from the coordination store once, then answered from memory until ``invalidate(user)`` (a
    ``/config/changes`` notification for ``users/<user>``) or ``clear()`` (the notification
    watcher (re)started, so changes may have been missed). A user without a credential is
    remembered too, so unknown names do not cost a store read per handshake; the cache is
    emptied when it reaches ``max_entries``. A read that overlaps an invalidation of its user
    is not kept (it may have read the old value)."""

    def __init__(
        self,
        load: Callable[[str, str], Awaitable[ScramCredential | None]],
        max_entries: int = 10_000,
    ) -> None:
        self._load = load
        self._max = max_entries
        self._entries: dict[tuple[str, str], ScramCredential | None] = {}
        self._generations: dict[str, int] = {}
        self._epoch = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, user: str, mechanism: str) -> ScramCredential | None:
        key = (user, mechanism)
        if key in self._entries:
            return self._entries[key]
        before = (self._epoch, self._generations.get(user, 0))
        credential = await self._load(user, mechanism)
        if before == (self._epoch, self._generations.get(user, 0)):
            if len(self._entries) >= self._max:
                self._entries.clear()
            self._entries[key] = credential
        return credential

    def invalidate(self, user: str) -> None:
        self._generations[user] = self._generations.get(user, 0) + 1
        for key in [k for k in self._entries if k[0] == user]:
            del self._entries[key]

    def clear(self) -> None:
        self._epoch += 1
        self._entries.clear()
        self._generations.clear()
