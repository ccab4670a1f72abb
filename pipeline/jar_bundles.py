"""Pinned Java jars fetched from Maven Central at install time, never while an audit runs.

A bundle is a folder `pipeline/jars/<name>/` holding a `pom.xml` that pins its artifacts and a `jars.sha256`
lock (`sha256sum` format) of every jar Maven resolves for it. `fetch` asks Maven to copy the bundle's runtime
dependencies into the installation (`<venv>/share/produce-audit/jars/<name>`; Maven's own `~/.m2` cache keeps
the downloads between installations) and accepts the folder only when its jars are exactly the locked ones.
`installed` is what the runtime looks at: the folder, when a verified fetch completed, else None.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.etree import ElementTree

BUNDLES = Path(__file__).with_name("jars")
INSTALL_ROOT = Path(sys.prefix) / "share" / "produce-audit" / "jars"
_POM_NAMESPACE = "http://maven.apache.org/POM/4.0.0"
_VERIFIED = ".verified"  # written last, so a fetch cut short is not taken for a complete one
MAVEN_SECONDS = 1800
# The plugin is pinned too: Maven's default for the `dependency:` prefix depends on the Maven release.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Maven 3.8 colours a line or two even in batch mode
COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"


class BundleError(RuntimeError):
    """A bundle that cannot be fetched or does not match its lock; the message says which and why.

    `detail` holds what Maven printed, for a log rather than for the one line a user reads.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


def lock(name: str) -> dict[str, str]:
    """The locked jars of bundle `name`: file name -> sha256."""
    return _parse((BUNDLES / name / "jars.sha256").read_text())


def _parse(text: str) -> dict[str, str]:
    entries = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            digest, file_name = line.split(maxsplit=1)
            entries[file_name.lstrip("*")] = digest
    return entries


def digests(folder: Path) -> dict[str, str]:
    """file name -> sha256 of every jar in `folder`."""
    return {jar.name: hashlib.sha256(jar.read_bytes()).hexdigest() for jar in sorted(folder.glob("*.jar"))}


def coordinates(name: str) -> list[str]:
    """`group:artifact:version` of each dependency the bundle's pom pins, e.g. for a `--packages` hint."""
    pom = ElementTree.parse(BUNDLES / name / "pom.xml").getroot()
    spaces = {"m": _POM_NAMESPACE}
    return [
        ":".join(dependency.findtext(f"m:{part}", "", spaces) for part in ("groupId", "artifactId", "version"))
        for dependency in pom.iterfind("m:dependencies/m:dependency", spaces)
    ]


def names() -> list[str]:
    """Every bundle the project ships: the folders under pipeline/jars with a pom.xml."""
    return sorted(pom.parent.name for pom in BUNDLES.glob("*/pom.xml"))


def installed(name: str) -> Path | None:
    """The folder of bundle `name` when a verified fetch of its current lock put it in this installation.

    A folder verified against an older lock (the project was updated since) counts as missing, so the next
    `produce-audit prepare` fetches the new jars instead of the runtime using the old ones.
    """
    folder = INSTALL_ROOT / name
    try:
        return folder if _parse((folder / _VERIFIED).read_text()) == lock(name) else None
    except (OSError, ValueError):
        return None


def classpath(name: str) -> list[str]:
    """The jars of an installed bundle, sorted; empty when it is not installed."""
    folder = installed(name)
    return sorted(str(jar) for jar in folder.glob("*.jar")) if folder else []


def fetch_all() -> dict[str, BundleError]:
    """Fetch every bundle the project ships; the ones that failed, by name (a failure does not stop the rest)."""
    failed = {}
    for name in names():
        try:
            fetch(name)
        except BundleError as exc:
            failed[name] = exc
    return failed


def mismatches(expected: dict[str, str], found: dict[str, str]) -> list[str]:
    """What differs between a lock and the jars found, one phrase each; empty when they agree."""
    problems = [f"{jar} is missing" for jar in sorted(expected.keys() - found.keys())]
    problems += [f"{jar} is not in the lock" for jar in sorted(found.keys() - expected.keys())]
    problems += [
        f"{jar} has sha256 {found[jar]}, the lock says {expected[jar]}"
        for jar in sorted(expected.keys() & found.keys())
        if expected[jar] != found[jar]
    ]
    return problems


def fetch(name: str, *, update_lock: bool = False) -> Path:
    """Copy bundle `name`'s jars from Maven into the installation and verify them against the lock.

    `update_lock` rewrites the lock from what Maven resolved instead (after a deliberate version change).
    """
    if installed(name) and not update_lock:
        return INSTALL_ROOT / name
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BundleError(f"jar bundle {name!r} needs Maven (mvn) on PATH to be fetched from Maven Central")
    INSTALL_ROOT.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=INSTALL_ROOT))
    try:
        command = [
            mvn, "-B", "-q", "-C", "-Dstyle.color=never", "-f", str(BUNDLES / name / "pom.xml"), COPY_GOAL,
            "-DincludeScope=runtime", f"-DoutputDirectory={staging}",
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            raise BundleError(f"Maven did not fetch jar bundle {name!r} within {MAVEN_SECONDS} s") from None
        if done.returncode != 0:
            lines = _ANSI.sub("", done.stdout + done.stderr).strip().splitlines()
            raise BundleError(
                f"Maven could not fetch jar bundle {name!r} (exit {done.returncode}){_reason(lines)}",
                "\n".join(lines[-15:]),
            )
        found = digests(staging)
        listing = "".join(f"{digest}  {jar}\n" for jar, digest in found.items())
        if update_lock:
            (BUNDLES / name / "jars.sha256").write_text(listing)
        problems = mismatches(lock(name), found)
        if problems:
            lock_file = f"pipeline/jars/{name}/jars.sha256"
            raise BundleError(f"jar bundle {name!r} does not match {lock_file}: " + "; ".join(problems))
        (staging / _VERIFIED).write_text(listing)
        target = INSTALL_ROOT / name
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _reason(maven_lines: list[str]) -> str:
    """The end of Maven's first error, where its chain of causes names the root one (an unknown host ...)."""
    first = next((line for line in maven_lines if line.startswith("[ERROR] ")), "[ERROR] ")
    reason = first[len("[ERROR] ") :].removesuffix(" -> [Help 1]").strip()
    return "" if not reason else f": {reason}" if len(reason) <= 240 else f": ...{reason[-240:]}"
