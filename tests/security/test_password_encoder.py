"""Kafka's PasswordEncoder format (security/password_encoder.py): round trips under
hypothesis for both ciphers and key factories, the stored fields by Kafka's names, and values
that do not decode (another secret, damage) refused with one error kind."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.security.password_encoder import (
    CIPHERS,
    KEY_FACTORIES,
    PasswordDecodeError,
    PasswordEncoder,
    parse_csv_map,
)

# the key derivation is deliberately slow: few iterations keep the property tests quick
FAST = 1024


@settings(max_examples=40, deadline=None)
@given(
    password=st.text(min_size=0, max_size=64),
    secret=st.text(min_size=1, max_size=32),
    cipher=st.sampled_from(CIPHERS),
    factory=st.sampled_from(sorted(KEY_FACTORIES)),
    key_length=st.sampled_from([128, 192, 256]),
)
def test_round_trip(password, secret, cipher, factory, key_length) -> None:
    encoder = PasswordEncoder(secret, factory, cipher, key_length, FAST)
    encoded = encoder.encode(password)
    assert encoder.decode(encoded) == password
    # parameters are read from the value: an encoder configured otherwise still decodes it
    assert PasswordEncoder(secret, iterations=4096).decode(encoded) == password


def test_the_stored_fields_are_kafkas() -> None:
    encoded = PasswordEncoder("secret").encode("hunter2")
    fields = parse_csv_map(encoded)
    assert set(fields) == {
        "keyFactoryAlgorithm",
        "cipherAlgorithm",
        "keyLength",
        "salt",
        "iterations",
        "encryptedPassword",
        "passwordLength",
        "initializationVector",
    }
    assert fields["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA512"
    assert fields["cipherAlgorithm"] == "AES/CBC/PKCS5Padding"
    assert (fields["keyLength"], fields["iterations"], fields["passwordLength"]) == (
        "128",
        "4096",
        "7",
    )
    assert len(base64.b64decode(fields["salt"])) == 256
    assert len(base64.b64decode(fields["initializationVector"])) == 16
    assert "hunter2" not in encoded
    gcm = parse_csv_map(PasswordEncoder("s", cipher_algorithm="AES/GCM/NoPadding").encode("x"))
    assert gcm["authenticationTagLength"] == "128"


def test_salt_makes_every_encoding_differ() -> None:
    encoder = PasswordEncoder("secret", iterations=FAST)
    assert encoder.encode("same") != encoder.encode("same")


@pytest.mark.parametrize("cipher", CIPHERS)
def test_another_secret_does_not_decode(cipher) -> None:
    encoded = PasswordEncoder("right", cipher_algorithm=cipher, iterations=FAST).encode("pw")
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("wrong").decode(encoded)


@pytest.mark.parametrize(
    "damaged",
    [
        "",
        "not an encoded password",
        "keyFactoryAlgorithm:PBKDF2WithHmacSHA512",
        "keyFactoryAlgorithm:MD5,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,salt:AA==,"
        "iterations:1024,encryptedPassword:AA==,passwordLength:1,initializationVector:AA==",
    ],
)
def test_damaged_values_do_not_decode(damaged) -> None:
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("secret").decode(damaged)


def test_a_flipped_byte_does_not_decode() -> None:
    encoder = PasswordEncoder("secret", cipher_algorithm="AES/GCM/NoPadding", iterations=FAST)
    fields = parse_csv_map(encoder.encode("password"))
    data = bytearray(base64.b64decode(fields["encryptedPassword"]))
    data[0] ^= 1
    fields["encryptedPassword"] = base64.b64encode(bytes(data)).decode()
    with pytest.raises(PasswordDecodeError):
        encoder.decode(",".join(f"{k}:{v}" for k, v in fields.items()))


def test_unsupported_settings_are_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match="password.encoder.cipher.algorithm"):
        PasswordEncoder("s", cipher_algorithm="DES/ECB/PKCS5Padding")
    with pytest.raises(ValueError, match="password.encoder.keyfactory.algorithm"):
        PasswordEncoder("s", key_factory_algorithm="PBKDF2WithHmacMD5")
