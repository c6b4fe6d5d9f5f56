"""Make the virtual environment of a peer tool (Phoenix, garak, PyRIT, aiperf, guidellm) for the side-by-side benchmarks.

Each peer gets its own venv under ``benchmarks/.venvs/<peer>/`` (git-ignored), made with the
interpreter that runs this script and filled from PyPI with the pinned requirement below, so a
peer's dependencies never meet assay's. A venv whose marker file names the same requirement is
reused as it is; ``--force`` makes it anew.

    python benchmarks/peers/venv.py phoenix        # prints the venv's python
    python benchmarks/peers/venv.py garak pyrit
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

VENVS = Path(__file__).resolve().parents[1] / ".venvs"

# the peer, the pip requirements it is installed with, and the module that must import after
PEERS: dict[str, tuple[tuple[str, ...], str]] = {
    "phoenix": (("arize-phoenix==20.26.1",), "phoenix"),
    "garak": (("garak==0.17.1",), "garak"),
    "pyrit": (("pyrit==1.1.0",), "pyrit"),
    "aiperf": (("aiperf==0.13.0", "tokenizers"), "aiperf"),
    "guidellm": (("guidellm==0.8.1", "tokenizers"), "guidellm"),
}


def venv_dir(peer: str, root: Path = VENVS) -> Path:
    """The folder of ``peer``'s venv (whether or not it exists yet)."""
    if peer not in PEERS:
        raise SystemExit(f"unknown peer {peer!r}: one of {', '.join(sorted(PEERS))}")
    return root / peer


def venv_bin(peer: str, name: str, root: Path = VENVS) -> Path:
    """The path of executable ``name`` (``python``, ``phoenix``, ``garak``) in ``peer``'s venv."""
    return venv_dir(peer, root) / "bin" / name


def marker_text(peer: str) -> str:
    """What the marker file of a finished venv holds: its requirements, one a line."""
    return "\n".join(PEERS[peer][0]) + "\n"


def is_ready(peer: str, root: Path = VENVS) -> bool:
    """True when ``peer``'s venv was finished with the requirements pinned here."""
    marker = venv_dir(peer, root) / "assay-peer.txt"
    return marker.is_file() and marker.read_text() == marker_text(peer)


def make(peer: str, root: Path = VENVS, force: bool = False, quiet: bool = True) -> Path:
    """Make (or reuse) ``peer``'s venv and return its python; the pip error ends the run."""
    where = venv_dir(peer, root)
    python = venv_bin(peer, "python", root)
    if is_ready(peer, root) and not force:
        return python
    if where.exists():
        shutil.rmtree(where)
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    requirements, module = PEERS[peer]
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", *requirements]
    if quiet:
        cmd.insert(4, "-q")
    done = subprocess.run(cmd, capture_output=quiet, text=True)
    if done.returncode:
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-5:] if quiet else []
        raise SystemExit(f"pip could not install {' '.join(requirements)} for {peer}:\n" + "\n".join(tail))
    probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True)
    if probe.returncode:
        raise SystemExit(f"{peer} installed but `import {module}` fails: {probe.stderr.strip().splitlines()[-1]}")
    (where / "assay-peer.txt").write_text(marker_text(peer))
    return python


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("peers", nargs="+", choices=sorted(PEERS))
    ap.add_argument("--force", action="store_true", help="make the venv anew")
    args = ap.parse_args()
    for peer in args.peers:
        print(make(peer, force=args.force, quiet=False))


if __name__ == "__main__":
    main()
