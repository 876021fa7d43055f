"""Docs are tested: README commands, CLI help, examples, and lint."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from ghs.cli import main
from ghs.hostfile import load_hosts

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _setup_commands():
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block, "README must open with a sh block of set-up commands"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_two_setup_commands_and_ci_runs_the_test_one():
    commands = _setup_commands()
    assert len(commands) == 2
    assert README.index("```sh") < 300, "the set-up commands come first"
    install_and_run, install_and_test = commands
    assert install_and_run.startswith("pip install .") and "ghs " in install_and_run
    assert "pytest" in install_and_test
    ci = (ROOT / ".ci" / "run").read_text()
    assert install_and_test in ci.splitlines()


def test_the_readme_test_line_runs_the_slow_tier_too():
    # the slow marker only splits the suite: nothing deselects it unless asked with -m
    install_and_test = _setup_commands()[1]
    assert " -m " not in install_and_test.split("pytest", 1)[1]
    options = re.search(r'addopts = "([^"]*)"', (ROOT / "pyproject.toml").read_text())
    assert options and "-m" not in options.group(1).split()
    assert '-m "not slow"' in README


def _commands(group, prefix="ghs"):
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix} {name}")


def test_every_command_has_help_and_is_in_the_readme():
    found = list(_commands(main))
    assert len(found) >= 5
    for path, command in found:
        assert command.help and command.help.strip(), f"{path} has no help text"
        assert f"`{path}" in README, f"{path} is not documented in README.md"


@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_every_python_example_runs(script):
    completed = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                               timeout=300, cwd=ROOT)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip()


def test_example_host_file_is_a_realistic_consistent_lab():
    lab = load_hosts(ROOT / "examples" / "hosts.json")
    assert 10 <= len(lab.hosts) <= 16 and not lab.excluded
    assert len({h.cores for h in lab.hosts}) >= 3 and len({h.tau for h in lab.hosts}) >= 4
    for host in lab.hosts:
        assert host.rho == pytest.approx(host.lam / (host.cores * host.mu), rel=1e-3)


def test_readme_examples_parse_as_real_commands():
    """Every `ghs ...` line of the README's sh blocks parses strictly: a misspelt flag, a
    value of the wrong type or a missing argument fails here."""
    import shlex

    blocks = "\n".join(re.findall(r"```sh\n(.*?)```", README, re.S))
    blocks = re.sub(r"\\\n\s*", " ", blocks)  # join continued lines
    lines = re.findall(r"^(?:[A-Z_]+=\S+ +)*(ghs [^\n]+)", blocks, re.M)
    assert len(lines) >= 5
    for line in lines:
        args = shlex.split(line, comments=True)[1:]
        if args[0].startswith("-"):  # group options such as --config
            args = args[2:]
        name = args[0]
        command = main.get_command(click.Context(main), name)
        assert command is not None, line
        if isinstance(command, click.Group):
            sub = command.get_command(click.Context(command), args[1])
            assert sub is not None, line
            command, name, args = sub, args[1], args[1:]
        with command.make_context(name, args[1:]) as context:
            assert context.params is not None, line


def _heading_anchors(markdown):
    """The anchors GitHub gives a file's headings: lower case, punctuation but hyphens and
    underscores dropped, spaces made hyphens (code fences' comment lines are not headings)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
            for title in re.findall(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("doc", ["README.md", "docs/measurement-log.md"])
def test_the_docs_links_lead_somewhere(doc):
    """Every relative link of the README and the measurement log names a file that exists
    and, with a #fragment, one of that file's headings: history moved out of the README
    must stay one click away."""
    source = ROOT / doc
    links = re.findall(r"\]\(([^)\s]+)\)", source.read_text())
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert doc != "README.md" or len(local) >= 5
    for link in local:
        path, _, fragment = link.partition("#")
        target = (source.parent / path) if path else source
        assert target.is_file(), f"{doc}: {link} names no file"
        if fragment:
            assert fragment in _heading_anchors(target.read_text()), \
                f"{doc}: {link} names no heading of {target.name}"


def test_the_measurement_log_keeps_what_left_the_readme():
    """The README's history lives on in the log: the speed history, the search's, and the
    probes behind the calibration figures."""
    log = (ROOT / "docs" / "measurement-log.md").read_text()
    for heading in ("Speed: how the figures came about", "The mean error: what was tried",
                    "Choosing the machines: how the calibrated search came about"):
        assert f"## {heading}" in log
    assert "### How the speed figures came about" not in README


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is in the test extra")
def test_ruff_is_clean():
    completed = subprocess.run(["ruff", "check", "."], capture_output=True, text=True,
                               cwd=ROOT, timeout=120)
    assert completed.returncode == 0, completed.stdout[-3000:]


@pytest.mark.slow
def test_mypy_is_clean_on_scheduler_and_protocol():
    pytest.importorskip("mypy", reason="mypy is in the test extra")
    completed = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True,
                               cwd=ROOT, timeout=600)
    assert completed.returncode == 0, completed.stdout[-3000:]


@pytest.mark.parametrize("unit", sorted((ROOT / "examples").glob("*.service")),
                         ids=lambda p: p.name)
def test_systemd_units_run_real_commands_with_real_settings(unit):
    import configparser

    from ghs.config import load_config

    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string("\n".join(line for line in unit.read_text().splitlines()
                                 if not line.startswith("#")))
    assert {"Unit", "Service", "Install"} <= set(parser.sections())
    command = parser["Service"]["ExecStart"].split()
    assert command[0].endswith("/ghs") and command[1] in ("manager", "agent")
    cli = main.get_command(click.Context(main), command[1])
    cli.make_context(command[1], command[2:], resilient_parsing=False)
    env = {}
    for line in unit.read_text().splitlines():
        if line.startswith("Environment="):
            key, value = line.split("=", 1)[1].split("=", 1)
            env[key] = value
    # every GHS_* setting the unit sets is a real, valid config entry
    config = load_config(env={k: v for k, v in env.items() if k != "GHS_MANAGER"})
    assert config is not None
