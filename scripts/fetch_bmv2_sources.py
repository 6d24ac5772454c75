"""The sources `make bmv2` builds, fetched from the projects' own public archives when there is no
../shared/oracle (docs/bmv2.md, "Without ../shared/oracle").

    python3 scripts/fetch_bmv2_sources.py OUT_DIR      (scripts/build-bmv2.sh runs it)
    python3 scripts/fetch_bmv2_sources.py --digest TARBALL [--under PATH]

Each pinned commit (the same as the oracle's snapshots: p4lang/behavioral-model, p4lang/PI and
the four submodules PI's build needs) is downloaded as GitHub serves it
(`$BMV2_ARCHIVES/<owner>/<repo>/tar.gz/<commit>`, BMV2_ARCHIVES defaulting to
https://codeload.github.com) and verified against the SHA-256 recorded below before anything is
unpacked. Then PI's submodules are put in their places and OUT_DIR gets the two tarballs the
build unpacks, named and laid out as the oracle's: behavioral-model-<commit>.tar.gz and
PI-<commit>.tar.gz. A download that does not verify is deleted and the run fails saying which.

What is recorded is a digest of an archive's content, not of its bytes: the SHA-256 of one line
per file (its path under the archive's top directory, whether it is executable, the SHA-256 of its
bytes; a symbolic link's target), sorted by path. GitHub builds its archives on request, and
their compressed bytes (and the top directory's name) are not promised to stay the same; their
content is the commit's tree. The digests were computed from the oracle's snapshots, which hold
those trees (PI's with the submodules filled in, so each submodule's files are hashed apart and
PI's without them). Standard library only: it runs before `make setup` has made a venv.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ARCHIVES_ENV = "BMV2_ARCHIVES"
DEFAULT_ARCHIVES = "https://codeload.github.com"
DOWNLOAD_TIMEOUT_S = 120


@dataclass(frozen=True)
class Archive:
    repo: str  # owner/name on GitHub
    commit: str
    into: str  # where its tree goes: a top directory of its own, or a path inside PI's
    content_sha256: str

    @property
    def name(self) -> str:
        return self.repo.split("/")[1]

    def url(self, base: str) -> str:
        return f"{base.rstrip('/')}/{self.repo}/tar.gz/{self.commit}"


# The oracle's commits (../shared/oracle/README.md); PI's submodules as PI f96af95e pins them.
BMV2 = Archive(
    "p4lang/behavioral-model",
    "9674187f610c81878e3586f9a1746dcc7f903114",
    "behavioral-model",
    "6c74865141849e6a2f3de5d84e95395500316f7c26d545f1efd21f493052b55c",
)
PI = Archive(
    "p4lang/PI",
    "f96af95e090619491e3abf2df69df340c2c9cb46",
    "PI",
    "449102f30928390e44b0cf25acd6dee05a8afbae922294cab15ba7fcfc94b537",
)
PI_SUBMODULES = (
    Archive(
        "p4lang/p4runtime",
        "ec4eb5ef70dbcbcbf2f8357a4b2b8c2f218845a5",
        "PI/proto/p4runtime",
        "99bfd0c4a9f3bb2976749b6ea0a02265aa2c1154579fd2111aac22321b150a3f",
    ),
    Archive(
        "openconfig/gnmi",
        "9c8d9e965b3e854107ea02c12ab11b70717456f2",
        "PI/proto/openconfig/gnmi",
        "3139d60f2b82810f5d139f41d9de17e7995bb3066d861c3214eba4d7ebbfb266",
    ),
    Archive(
        "troydhanson/uthash",
        "bf15263081be6229be31addd48566df93921cb46",
        "PI/third_party/uthash",
        "2c5bf3e8ba7215ea3fd8d1dbfaf83f5ed02a3dc6c1ce9e308f46f4c874469b30",
    ),
    Archive(
        "google/googletest",
        "f5edb4f542e155c75bc4b516f227911d99ec167c",
        "PI/third_party/googletest",
        "b1d166adb04e4e40122dcdc31fe5b7cac06b6073471f22c523bde554d67e16e7",
    ),
)
ARCHIVES = (BMV2, PI, *PI_SUBMODULES)


# Exit codes: the sources are not there (a build already made may do), or one was refused.
UNREACHABLE, REFUSED = 3, 1


class Refused(Exception):
    """An archive that cannot be used: unreachable, unreadable, or not what was recorded."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


def members(tar: tarfile.TarFile) -> Iterator[tuple[PurePosixPath, tarfile.TarInfo]]:
    """Each member with its path under the archive's one top directory. A member outside it, an
    absolute or `..` path, a hard link or a device is refused: an archive of a git tree has
    none, and none may land outside the directory it is unpacked into."""
    top = None
    for member in tar:
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise Refused(f"member {member.name!r} is outside the archive's directory")
        if top is None:
            top = path.parts[0]
        if path.parts[0] != top:
            raise Refused(f"member {member.name!r} is not under the top directory {top!r}")
        if not (member.isdir() or member.isfile() or member.issym()):
            raise Refused(f"member {member.name!r} is neither a file, a directory nor a symbolic link")
        yield PurePosixPath(*path.parts[1:]), member


def content_digest(tarball: Path, leave_out: tuple[str, ...] = (), under: str = "") -> str:
    """The SHA-256 of the archive's content (see the module's docstring): only what lies `under`
    that path (relative to it), without what lies in `leave_out`."""
    lines: dict[str, str] = {}
    prefix = PurePosixPath(under) if under else None
    skip = [PurePosixPath(p) for p in leave_out]
    with tarfile.open(tarball, "r:gz") as tar:
        for path, member in members(tar):
            if member.isdir() or any(path == s or s in path.parents for s in skip):
                continue
            if prefix is not None:
                if prefix not in path.parents:
                    continue
                path = path.relative_to(prefix)
            if member.issym():
                lines[str(path)] = f"L {path} {member.linkname}"
                continue
            data = tar.extractfile(member)
            assert data is not None
            executable = "x" if member.mode & 0o111 else "-"
            lines[str(path)] = f"F {executable} {path} {hashlib.sha256(data.read()).hexdigest()}"
    return hashlib.sha256("\n".join(lines[p] for p in sorted(lines)).encode()).hexdigest()


def submodule_paths() -> tuple[str, ...]:
    """The submodules' places inside PI's tree."""
    return tuple(str(PurePosixPath(a.into).relative_to(PI.into)) for a in PI_SUBMODULES)


def recorded_digest(archive: Archive) -> tuple[str, tuple[str, ...]]:
    """What `archive`'s content digest must be, and what its digest leaves out (PI's own archive
    has its submodules' places empty: they are other repositories)."""
    return archive.content_sha256, submodule_paths() if archive is PI else ()


def download(archive: Archive, base: str, into: Path) -> Path:
    """`archive` from `base`, verified; its path in `into`. Refused (and deleted) otherwise."""
    url = archive.url(base)
    target = into / f"{archive.name}-{archive.commit}.tar.gz"
    print(f"[bmv2] fetching {url}", flush=True)
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as reply, target.open("wb") as out:
            shutil.copyfileobj(reply, out)
    except (urllib.error.URLError, OSError) as error:
        target.unlink(missing_ok=True)
        raise Refused(f"{url}: cannot download it: {error}", unreachable=True) from None
    want, leave_out = recorded_digest(archive)
    try:
        got = content_digest(target, leave_out)
    except (tarfile.TarError, EOFError, OSError, Refused) as error:
        target.unlink(missing_ok=True)
        raise Refused(
            f"{url}: not a readable tar.gz archive: {error}; refused, nothing is built from it"
        ) from None
    if got != want:
        target.unlink(missing_ok=True)
        raise Refused(
            f"{url}: its content's SHA-256 is {got}, not the {want} recorded for {archive.repo}"
            f" {archive.commit} (scripts/fetch_bmv2_sources.py); refused, nothing is built from it"
        )
    print(f"[bmv2] verified {archive.repo} {archive.commit[:12]} (content SHA-256 {want[:16]}…)", flush=True)
    return target


def assemble(downloaded: dict[Archive, Path], out: Path) -> list[Path]:
    """The oracle's two tarballs from the verified archives: behavioral-model/ alone, and PI/
    with each submodule's tree in its place."""
    made = []
    for top, parts in ((BMV2, [BMV2]), (PI, [PI, *PI_SUBMODULES])):
        name = f"{top.name}-{top.commit[:12]}.tar.gz"
        partial = out / f".{name}.part"
        with tarfile.open(partial, "w:gz") as result:
            for archive in parts:
                with tarfile.open(downloaded[archive], "r:gz") as tar:
                    for path, member in members(tar):
                        if archive is PI and any(
                            PurePosixPath(s) in path.parents for s in submodule_paths()
                        ):
                            continue  # an empty submodule directory some archives carry
                        data = tar.extractfile(member) if member.isfile() else None
                        place = str(PurePosixPath(archive.into, path)) if path.parts else archive.into
                        result.addfile(renamed(member, place), io.BytesIO(data.read()) if data else None)
        partial.replace(out / name)
        made.append(out / name)
    return made


def renamed(member: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    """A copy of `member` called `name` (a new header: the old one's pax records would keep its
    long name)."""
    copy = tarfile.TarInfo(name)
    copy.type, copy.mode, copy.mtime, copy.size = member.type, member.mode, member.mtime, member.size
    copy.linkname = member.linkname
    return copy


def fetch(out: Path, base: str) -> list[Path]:
    """Every archive downloaded and verified, then the two tarballs made in `out`. Nothing is
    written to `out` unless all of them verify."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".download-") as scratch:
        downloaded = {archive: download(archive, base, Path(scratch)) for archive in ARCHIVES}
        return assemble(downloaded, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("out", nargs="?", type=Path, help="where the two tarballs go")
    parser.add_argument("--digest", type=Path, help="print this tarball's content digest and exit")
    parser.add_argument("--under", default="", help="with --digest: only what lies under this path")
    parser.add_argument("--leave-out", action="append", default=[], help="with --digest: a path to leave out")
    args = parser.parse_args(argv)
    if args.digest:
        print(content_digest(args.digest, tuple(args.leave_out), args.under))
        return 0
    if args.out is None:
        parser.error("give OUT_DIR (or --digest TARBALL)")
    base = os.environ.get(ARCHIVES_ENV) or DEFAULT_ARCHIVES
    try:
        for path in fetch(args.out, base):
            print(f"[bmv2] source: {path}", flush=True)
    except Refused as error:
        print(f"bmv2: {error}", file=sys.stderr)
        return UNREACHABLE if error.unreachable else REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main())
