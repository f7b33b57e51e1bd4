"""Refresh the viewer's vendored Chart.js from the npm registry (run by a maintainer, not at
install time: the wheel ships the file, so installing needs neither npm nor the network).

``python scripts/vendor_chartjs.py`` runs ``npm pack chart.js@VERSION``, checks the tarball
against the pinned integrity (the registry's ``dist.integrity``), and writes
``dist/chart.umd.min.js`` and ``LICENSE.md`` into ``dsh_workflow/_ui/static/vendor/``, then
records their SHA-256 in ``PINNED.json`` (which a test checks). To move to another version,
change VERSION and INTEGRITY (``npm view chart.js@X dist.integrity``) and run it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pathlib
import subprocess
import tarfile
import tempfile

VERSION = "4.6.1"
INTEGRITY = ("sha512-hJyniucsFmq//EvXYvJ6c6mahPoI3kaxdjVH8awTaJ/fDNWeSqqqArixMJWkWNN6fcYvPU3Hne"
             "SANFNYtRi61g==")
FILES = {"package/dist/chart.umd.min.js": "chart.umd.min.js",
         "package/LICENSE.md": "chart.js-LICENSE.md"}
TARGET = pathlib.Path(__file__).resolve().parent.parent / "dsh_workflow" / "_ui" / "static" / "vendor"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["npm", "pack", f"chart.js@{VERSION}", "--silent"], cwd=folder,
                       check=True, stdout=subprocess.DEVNULL)
        tarball = pathlib.Path(folder) / f"chart.js-{VERSION}.tgz"
        digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
        if f"sha512-{digest}" != INTEGRITY:
            raise SystemExit(f"chart.js {VERSION}: the tarball does not match the pinned integrity")
        pinned = {"package": "chart.js", "version": VERSION, "integrity": INTEGRITY, "files": {}}
        with tarfile.open(tarball) as archive:
            for member, name in FILES.items():
                extracted = archive.extractfile(member)
                assert extracted is not None, member
                data = extracted.read()
                (TARGET / name).write_bytes(data)
                pinned["files"][name] = hashlib.sha256(data).hexdigest()
    (TARGET / "PINNED.json").write_text(json.dumps(pinned, indent=2) + "\n", encoding="utf-8")
    print(f"vendored chart.js {VERSION} into {TARGET}")


if __name__ == "__main__":
    main()
