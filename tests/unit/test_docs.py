"""The docs: the generated parts (option tables, the errors page) match the code, the errors
page names every exception class, the site builds in strict mode (a broken link or anchor
fails it), and the README stays a front door."""

import importlib.util
import inspect
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def generate_module():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_docs_are_up_to_date():
    assert generate_module().main(["--check"]) == 0, "run python docs/generate.py"


def test_generation_rewrites_a_stale_table(tmp_path, capsys):
    for name in ("options.md", "security.md", "errors.md"):
        shutil.copy(DOCS / name, tmp_path / name)
    options = (tmp_path / "options.md").read_text()
    stale = options.replace("| `kafka.acks` | write | `all` |", "| `kafka.acks` | write | `1` |")
    assert stale != options
    (tmp_path / "options.md").write_text(stale)
    generate = generate_module()
    assert generate.main(["--check", "--docs", str(tmp_path)]) == 1
    assert generate.main(["--docs", str(tmp_path)]) == 0
    assert (tmp_path / "options.md").read_text() == options
    assert "options.md: updated" in capsys.readouterr().out


def test_option_tables_name_every_declared_option():
    from kafka_ds.options.registry import FORBIDDEN, OPTIONS
    from kafka_ds.options.security_declarations import SECURITY_OPTIONS

    options, security = (DOCS / "options.md").read_text(), (DOCS / "security.md").read_text()
    for option in OPTIONS:
        assert f"| `{option.name}` |" in options
    for forbidden in FORBIDDEN:
        assert f"| `{forbidden.name}` |" in options
    for option in SECURITY_OPTIONS:
        assert f"| `{option.name}` |" in security


def test_errors_page_names_every_exception_class():
    """Found here from the modules themselves, not from the generator's list: a class the
    generator leaves out fails this test."""
    import kafka_ds.errors
    import kafka_ds.registry.errors
    from kafka_ds.client import transactions

    page = (DOCS / "errors.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", page, re.M))
    for module in (kafka_ds.errors, kafka_ds.registry.errors, transactions):
        for name, cls in vars(module).items():
            if (
                inspect.isclass(cls)
                and issubclass(cls, Exception)
                and cls.__module__ == module.__name__
            ):
                assert name in rows, f"docs/errors.md has no row for {name}"
                for base in cls.__bases__:
                    assert f"`{base.__name__}`" in rows[name], (name, base)
    assert "| 6 | `NotLeaderOrFollower` | yes | yes |" in page


def mkdocs(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_site_builds_in_strict_mode(tmp_path):
    built = mkdocs("--site-dir", str(tmp_path / "site"), cwd=ROOT)
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "errors" / "index.html").exists()


def test_a_broken_link_fails_the_site(tmp_path):
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + "\n[gone](streaming.md#no-such-section)\n")
    built = mkdocs("--site-dir", str(tmp_path / "site"), cwd=tmp_path)
    assert built.returncode != 0
    assert "no-such-section" in built.stdout + built.stderr


def test_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv")]
    assert commands[0].endswith("-m kafka_ds.demo") and "'.[demo]'" in commands[0]
    assert re.match(r"python3 -m venv .* -m pytest", commands[1])  # what .ci/run runs
    for page in re.findall(r"\]\((docs/[\w./-]+\.md)\)", readme):
        assert (ROOT / page).exists(), page
