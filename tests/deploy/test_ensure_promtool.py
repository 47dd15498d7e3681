"""deploy/scripts/ensure-promtool.sh: prints promtool's path; installs Debian's `prometheus` package
only when promtool is not on PATH (apt-get is faked here)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.tools import ENSURE_PROMTOOL

BASH = shutil.which("bash") or "/bin/bash"


def _fake_bin(tmp_path: Path, *, with_promtool: bool) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    # A fake apt-get that logs its arguments and, on install, "installs" promtool.
    (bin_dir / "apt-get").write_text(
        "#!" + BASH + "\n"
        f'echo "$*" >> {log}\n'
        f'if [[ " $* " == *" install "* ]]; then printf "#!{BASH}\\necho fake\\n" > {bin_dir}/promtool; '
        f"{shutil.which('chmod')} +x {bin_dir}/promtool; fi\n",
        encoding="utf-8",
    )
    (bin_dir / "apt-get").chmod(0o755)
    id_binary = shutil.which("id")
    assert id_binary
    (bin_dir / "id").symlink_to(id_binary)
    flock = shutil.which("flock")
    if flock:
        (bin_dir / "flock").symlink_to(flock)
    if with_promtool:
        (bin_dir / "promtool").write_text(f"#!{BASH}\necho fake\n", encoding="utf-8")
        (bin_dir / "promtool").chmod(0o755)
    return bin_dir


def _run(bin_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, str(ENSURE_PROMTOOL)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={"PATH": str(bin_dir), **env},
    )


def test_promtool_on_path_is_used_without_installing(tmp_path: Path) -> None:
    bin_dir = _fake_bin(tmp_path, with_promtool=True)
    proc = _run(bin_dir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{bin_dir / 'promtool'}\n"
    assert not (tmp_path / "apt.log").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the script installs with apt-get directly only as root")
def test_missing_promtool_is_installed_from_debian(tmp_path: Path) -> None:
    bin_dir = _fake_bin(tmp_path, with_promtool=False)
    proc = _run(bin_dir, TMPDIR=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{bin_dir / 'promtool'}\n"
    calls = (tmp_path / "apt.log").read_text(encoding="utf-8").splitlines()
    wait = "-o DPkg::Lock::Timeout=600"  # another apt run (the suite's other process) is waited for, not failed on
    assert calls == [f"{wait} update", f"{wait} install -y --no-install-recommends prometheus"]
    if shutil.which("flock"):  # and our own installers take turns
        assert (tmp_path / "loopwatch-apt.lock").exists()


def test_promtool_override(tmp_path: Path) -> None:
    bin_dir = _fake_bin(tmp_path, with_promtool=False)
    custom = tmp_path / "custom-promtool"
    custom.write_text(f"#!{BASH}\n", encoding="utf-8")
    custom.chmod(0o755)
    assert _run(bin_dir, PROMTOOL=str(custom)).stdout == f"{custom}\n"
    bad = _run(bin_dir, PROMTOOL=str(tmp_path / "missing"))
    assert bad.returncode != 0 and bad.stdout == ""
    assert not (tmp_path / "apt.log").exists()
