"""tests/support/apicurio.py's choice of Java: Apicurio Registry 3.3 needs 21 or later while
the suite's default is 17, so the override is checked, JAVA_HOME is taken only when new
enough, and finding none says how to get one."""

from __future__ import annotations

import os
import stat

import pytest

from tests.support import apicurio


def fake_jdk(root, major: int) -> str:
    """A JDK folder whose ``release`` file names ``major`` (its java is never run)."""
    home = root / f"jdk-{major}"
    (home / "bin").mkdir(parents=True)
    (home / "release").write_text(f'JAVA_VERSION="{major}.0.2"\n')
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\nexit 1\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return str(home)


@pytest.fixture
def no_java_settings(monkeypatch):
    monkeypatch.delenv(apicurio.JAVA_OVERRIDE, raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)


def test_the_override_names_a_jdk_folder_or_its_java(tmp_path, monkeypatch, no_java_settings):
    home = fake_jdk(tmp_path, 25)
    monkeypatch.setenv(apicurio.JAVA_OVERRIDE, home)
    assert apicurio.java_executable() == os.path.join(home, "bin", "java")
    monkeypatch.setenv(apicurio.JAVA_OVERRIDE, os.path.join(home, "bin", "java"))
    assert apicurio.java_executable() == os.path.join(home, "bin", "java")


def test_an_override_older_than_21_is_refused_by_name(tmp_path, monkeypatch, no_java_settings):
    monkeypatch.setenv(apicurio.JAVA_OVERRIDE, fake_jdk(tmp_path, 17))
    with pytest.raises(apicurio.RegistryStartError, match="needs Java 21 or later, found 17"):
        apicurio.java_executable()


def test_java_home_17_is_passed_over_for_a_newer_jdk(tmp_path, monkeypatch, no_java_settings):
    monkeypatch.setenv("JAVA_HOME", fake_jdk(tmp_path, 17))
    newer = os.path.join(fake_jdk(tmp_path, 21), "bin", "java")
    monkeypatch.setattr(apicurio.glob, "glob", lambda pattern: [newer])
    assert apicurio.java_executable() == newer


def test_no_java_21_says_how_to_get_one(tmp_path, monkeypatch, no_java_settings):
    monkeypatch.setenv("JAVA_HOME", fake_jdk(tmp_path, 17))
    monkeypatch.setattr(apicurio.glob, "glob", lambda pattern: [])
    with pytest.raises(apicurio.RegistryStartError) as caught:
        apicurio.java_executable()
    text = str(caught.value)
    assert "needs Java 21 or later" in text and apicurio.JAVA_OVERRIDE in text, text
    assert "jdk-17" in text, text  # what was looked at
