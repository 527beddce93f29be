"""The stored password format against Java's JCE, with the algorithms and layout of Kafka's
EncryptingPasswordEncoder: a value Java encrypts (PBEKeySpec over the secret, PBKDF2 with
HMAC-SHA512, AES/CBC/PKCS5Padding or AES/GCM/NoPadding, Java's Base64) decodes here, and one
encoded here decrypts in Java. The Java side is a single-file program run by `java`."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kafkalite.security.password_encoder import CIPHERS, PasswordEncoder

JAVA = r"""
import javax.crypto.*;
import javax.crypto.spec.*;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.*;

public class PasswordCodec {
    static SecretKeySpec key(String secret, String factory, int bits, byte[] salt, int rounds)
            throws Exception {
        SecretKeyFactory f = SecretKeyFactory.getInstance(factory);
        byte[] raw = f.generateSecret(new PBEKeySpec(secret.toCharArray(), salt, rounds, bits))
            .getEncoded();
        return new SecretKeySpec(raw, "AES");
    }

    public static void main(String[] args) throws Exception {
        String secret = args[1];
        Base64.Encoder b64 = Base64.getEncoder();
        Base64.Decoder unb64 = Base64.getDecoder();
        if (args[0].equals("encode")) {
            String alg = args[3];
            byte[] salt = new byte[256];
            new SecureRandom().nextBytes(salt);
            Cipher c = Cipher.getInstance(alg);
            c.init(Cipher.ENCRYPT_MODE, key(secret, "PBKDF2WithHmacSHA512", 128, salt, 4096));
            byte[] enc = c.doFinal(args[2].getBytes(StandardCharsets.UTF_8));
            StringBuilder s = new StringBuilder("keyFactoryAlgorithm:PBKDF2WithHmacSHA512");
            s.append(",cipherAlgorithm:").append(alg).append(",keyLength:128");
            s.append(",salt:").append(b64.encodeToString(salt)).append(",iterations:4096");
            s.append(",encryptedPassword:").append(b64.encodeToString(enc));
            s.append(",passwordLength:").append(args[2].length());
            if (alg.startsWith("AES/GCM/")) {
                GCMParameterSpec p = c.getParameters().getParameterSpec(GCMParameterSpec.class);
                s.append(",authenticationTagLength:").append(p.getTLen());
                s.append(",initializationVector:").append(b64.encodeToString(p.getIV()));
            } else {
                IvParameterSpec p = c.getParameters().getParameterSpec(IvParameterSpec.class);
                s.append(",initializationVector:").append(b64.encodeToString(p.getIV()));
            }
            System.out.print(s);
        } else {
            Map<String, String> m = new HashMap<>();
            for (String e : args[2].split(",")) {
                int i = e.indexOf(':');
                m.put(e.substring(0, i), e.substring(i + 1));
            }
            String alg = m.get("cipherAlgorithm");
            Cipher c = Cipher.getInstance(alg);
            SecretKeySpec k = key(secret, m.get("keyFactoryAlgorithm"),
                Integer.parseInt(m.get("keyLength")), unb64.decode(m.get("salt")),
                Integer.parseInt(m.get("iterations")));
            byte[] iv = unb64.decode(m.get("initializationVector"));
            if (alg.startsWith("AES/GCM/")) {
                int tag = Integer.parseInt(m.get("authenticationTagLength"));
                c.init(Cipher.DECRYPT_MODE, k, new GCMParameterSpec(tag, iv));
            } else {
                c.init(Cipher.DECRYPT_MODE, k, new IvParameterSpec(iv));
            }
            byte[] plain = c.doFinal(unb64.decode(m.get("encryptedPassword")));
            System.out.print(new String(plain, StandardCharsets.UTF_8));
        }
    }
}
"""

PASSWORD = "Kafka's p@ss,word:1"


@pytest.fixture(scope="module")
def java_codec(tmp_path_factory):
    java = shutil.which("java")
    assert java, "java is needed (Debian's default-jre-headless, installed by `make test`)"
    source = tmp_path_factory.mktemp("java") / "PasswordCodec.java"
    source.write_text(JAVA)

    def run(*args: str) -> str:
        done = subprocess.run(
            [java, str(source), *args], capture_output=True, text=True, timeout=120, check=True
        )
        return done.stdout

    return run


@pytest.mark.parametrize("cipher", CIPHERS)
def test_java_encoded_value_decodes_here(java_codec, cipher) -> None:
    encoded = java_codec("encode", "the-secret", PASSWORD, cipher)
    assert PASSWORD not in encoded
    assert PasswordEncoder("the-secret").decode(encoded) == PASSWORD


@pytest.mark.parametrize("cipher", CIPHERS)
def test_value_encoded_here_decrypts_in_java(java_codec, cipher) -> None:
    encoded = PasswordEncoder("the-secret", cipher_algorithm=cipher).encode(PASSWORD)
    assert java_codec("decode", "the-secret", encoded) == PASSWORD
