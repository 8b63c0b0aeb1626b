"""The project's packaging: namespaced imports and the console script."""

import shutil
import subprocess


def test_namespaced_imports() -> None:
    import percolator.server.storage.cells as cells
    import percolator.server.txn as txn

    assert cells.CellKey("t", b"r", "c") < cells.CellKey("t", b"s", "a")
    assert txn.__name__ == "percolator.server.txn"


def test_console_script_is_installed() -> None:
    exe = shutil.which("percolator")
    assert exe is not None
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage" in out.stdout.lower()
