"""Kafka's PasswordEncoder for password-type dynamic broker configs (EncryptingPasswordEncoder).

A password stored in ``/config/brokers/<id>`` is never the plain text: it is encrypted with a
key derived from ``password.encoder.secret`` and written as Kafka writes it, a comma-separated
``name:value`` list that carries everything needed to decrypt it except the secret::

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,
    salt:<base64, 256 random bytes>,iterations:4096,encryptedPassword:<base64>,
    passwordLength:<characters>,initializationVector:<base64>

(AES/GCM/NoPadding adds ``authenticationTagLength`` beside the initialization vector.) The
parameters are read back from the stored value, so a change of ``password.encoder.cipher.*``
settings does not stop older values decoding. Base64 is the standard alphabet with padding
(Java's Base64.getEncoder). The key is PBKDF2 over the secret's UTF-8 bytes (Java's
PBEKeySpec), ``keyLength`` bits.

`decode` raises `PasswordDecodeError` for a value it cannot decrypt (wrong secret, damaged or
foreign text); callers ignore such a config with a log line, as Kafka does. Layer 0: no I/O.
"""

from __future__ import annotations

import base64
import os

# cryptography (10 ms to import) is imported by the first encode or decode, not by every
# broker's start through server/dynamic_config.py (decision 0061): the algorithms are named
# here and looked up in it when used.

DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"
DEFAULT_CIPHER = "AES/CBC/PKCS5Padding"
DEFAULT_KEY_LENGTH = 128
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 256
GCM_TAG_BITS = 128

# the key factory -> the name of its hash in cryptography.hazmat.primitives.hashes
KEY_FACTORIES = {"PBKDF2WithHmacSHA512": "SHA512", "PBKDF2WithHmacSHA1": "SHA1"}
CIPHERS = ("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")


class PasswordDecodeError(ValueError):
    """A stored password that cannot be decrypted with this secret."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def parse_csv_map(text: str) -> dict[str, str]:
    """Kafka's Csv.parseCsvMap: ``k:v,k:v``, each entry split at its first ':'."""
    out: dict[str, str] = {}
    for entry in text.split(","):
        key, sep, value = entry.partition(":")
        if not sep:
            raise PasswordDecodeError("not an encoded password")
        out[key.strip()] = value.strip()
    return out


class PasswordEncoder:
    """Encrypts with the configured algorithms; decrypts with those the value names."""

    def __init__(
        self,
        secret: str,
        key_factory_algorithm: str | None = None,
        cipher_algorithm: str = DEFAULT_CIPHER,
        key_length: int = DEFAULT_KEY_LENGTH,
        iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        if (key_factory_algorithm or DEFAULT_KEY_FACTORY) not in KEY_FACTORIES:
            raise ValueError(
                f"password.encoder.keyfactory.algorithm: {key_factory_algorithm!r} is not one "
                f"of {', '.join(KEY_FACTORIES)}"
            )
        if cipher_algorithm not in CIPHERS:
            raise ValueError(
                f"password.encoder.cipher.algorithm: {cipher_algorithm!r} is not one of "
                f"{', '.join(CIPHERS)}"
            )
        if key_length not in (128, 192, 256):
            raise ValueError(f"password.encoder.key.length: {key_length} is not 128, 192 or 256")
        self._secret = secret.encode("utf-8")
        self.key_factory_algorithm = key_factory_algorithm or DEFAULT_KEY_FACTORY
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations

    def _key(self, factory: str, key_length: int, salt: bytes, iterations: int) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

        hash_name = KEY_FACTORIES.get(factory)
        if hash_name is None or key_length not in (128, 192, 256) or iterations < 1:
            raise PasswordDecodeError(f"unsupported key derivation {factory}/{key_length}")
        kdf = PBKDF2HMAC(getattr(hashes, hash_name)(), key_length // 8, salt, iterations)
        return kdf.derive(self._secret)

    def encode(self, password: str, *, salt: bytes | None = None, iv: bytes | None = None) -> str:
        """The stored form of `password` (salt and IV random unless given, for tests)."""
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        salt = os.urandom(SALT_BYTES) if salt is None else salt
        key = self._key(self.key_factory_algorithm, self.key_length, salt, self.iterations)
        plain = password.encode("utf-8")
        fields = {
            "keyFactoryAlgorithm": self.key_factory_algorithm,
            "cipherAlgorithm": self.cipher_algorithm,
            "keyLength": str(self.key_length),
            "salt": _b64(salt),
            "iterations": str(self.iterations),
        }
        if self.cipher_algorithm.startswith("AES/GCM/"):
            iv = os.urandom(12) if iv is None else iv
            encryptor = Cipher(algorithms.AES(key), modes.GCM(iv)).encryptor()
            encrypted = encryptor.update(plain) + encryptor.finalize() + encryptor.tag
            params = {
                "authenticationTagLength": str(GCM_TAG_BITS),
                "initializationVector": _b64(iv),
            }
        else:
            iv = os.urandom(16) if iv is None else iv
            padder = padding.PKCS7(128).padder()
            encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = encryptor.update(padder.update(plain) + padder.finalize())
            encrypted += encryptor.finalize()
            params = {"initializationVector": _b64(iv)}
        fields["encryptedPassword"] = _b64(encrypted)
        # Java's String.length(): UTF-16 code units
        fields["passwordLength"] = str(len(password.encode("utf-16-le")) // 2)
        fields.update(params)
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password `encoded` holds; PasswordDecodeError if it cannot be decrypted."""
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        try:
            p = parse_csv_map(encoded)
            cipher = p["cipherAlgorithm"]
            key = self._key(
                p["keyFactoryAlgorithm"],
                int(p["keyLength"]),
                _unb64(p["salt"]),
                int(p["iterations"]),
            )
            data = _unb64(p["encryptedPassword"])
            iv = _unb64(p["initializationVector"])
            length = int(p["passwordLength"])
            if cipher.startswith("AES/GCM/"):
                tag_bytes = int(p.get("authenticationTagLength", GCM_TAG_BITS)) // 8
                if not 4 <= tag_bytes <= 16 or len(data) < tag_bytes:
                    raise PasswordDecodeError("bad authentication tag")
                decryptor = Cipher(
                    algorithms.AES(key), modes.GCM(iv, data[-tag_bytes:], min_tag_length=4)
                ).decryptor()
                plain = decryptor.update(data[:-tag_bytes]) + decryptor.finalize()
            elif cipher == "AES/CBC/PKCS5Padding":
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                padded = decryptor.update(data) + decryptor.finalize()
                unpadder = padding.PKCS7(128).unpadder()
                plain = unpadder.update(padded) + unpadder.finalize()
            else:
                raise PasswordDecodeError(f"unsupported cipher {cipher}")
            password = plain.decode("utf-8")
        except PasswordDecodeError:
            raise
        except Exception as e:  # any malformed field or failed decryption: one error kind
            raise PasswordDecodeError("Password could not be decoded") from e
        if len(password.encode("utf-16-le")) // 2 != length:
            raise PasswordDecodeError(
                "Password could not be decoded, sanity check of length failed"
            )
        return password
