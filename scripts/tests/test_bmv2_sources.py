"""`make bmv2` for a user without ../shared/oracle (scripts/build-bmv2.sh,
scripts/fetch_bmv2_sources.py): the pinned commits come from the projects' public archives and
are verified before anything is built from them.

These machines cannot reach GitHub, so a server on 127.0.0.1 plays codeload.github.com
(BMV2_ARCHIVES points the download at it): it serves BMv2's tarball from ../shared/oracle as it
is, and PI and the four submodules PI pins cut out of the oracle's PI tarball, each laid out as
GitHub lays out an archive (`<repo>-<commit>/`, git's pax comment naming the commit, a
submodule's place an empty directory). The build script runs from a copy of the scripts in a
temporary tree that has no ../shared beside it, and stops after fetching and verifying
(--sources-only): building BMv2 takes ten minutes.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[2]
ORACLE = REPO.parent / "shared" / "oracle"
sys.path.insert(0, str(REPO / "scripts"))

import fetch_bmv2_sources as sources  # noqa: E402  (a script, not a package)

pytestmark = pytest.mark.skipif(
    not (ORACLE / "README.md").exists(), reason="needs ../shared/oracle's snapshots to serve"
)


def oracle_tarball(name: str) -> Path:
    found = sorted(ORACLE.glob(f"{name}-*.tar.gz"))
    assert found, f"no {name}-*.tar.gz in {ORACLE}"
    return found[0]


def github_archive(archive: sources.Archive, change: Callable[[str, bytes], bytes] | None = None) -> bytes:
    """`archive` as GitHub would serve it, cut from the oracle's snapshot (`change` may alter a
    file's bytes, by its path in the archive)."""
    top = f"{archive.name}-{archive.commit}"
    buffer = io.BytesIO()
    whole = archive in (sources.BMV2, sources.PI)
    inside = PurePosixPath(archive.into).relative_to(sources.PI.into) if not whole else None
    leave_out = [PurePosixPath(p) for p in sources.submodule_paths()] if archive is sources.PI else []
    snapshot = oracle_tarball("behavioral-model" if archive is sources.BMV2 else "PI")
    with (
        tarfile.open(snapshot, "r:gz") as tar,
        tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT,
                     pax_headers={"comment": archive.commit}) as out,  # fmt: skip
    ):
        for member in tar:
            path = PurePosixPath(*PurePosixPath(member.name).parts[1:])
            if inside is not None:
                if path != inside and inside not in path.parents:
                    continue
                path = path.relative_to(inside)
            elif any(s in path.parents for s in leave_out):
                continue  # a submodule's files: its place stays an empty directory
            data = tar.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if data is not None and change is not None:
                data = change(str(path), data)
                member.size = len(data)  # the copy's size
            name = str(PurePosixPath(top, path)) if path.parts else top
            out.addfile(sources.renamed(member, name), io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


class Archives:
    """The stand-in for codeload.github.com: URL path → bytes, and the paths asked for."""

    def __init__(self, served: dict[str, bytes]) -> None:
        self.served, self.asked = served, []
        archives = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                archives.asked.append(self.path)
                data = archives.served.get(self.path)
                self.send_response(200 if data is not None else 404)
                self.send_header("Content-Length", str(len(data or b"")))
                self.end_headers()
                self.wfile.write(data or b"")

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def github() -> dict[str, bytes]:
    """Each pinned archive's URL path and the bytes GitHub would serve (BMv2's: the oracle's own)."""
    served = {}
    for archive in sources.ARCHIVES:
        path = archive.url("")
        served[path] = oracle_tarball("behavioral-model").read_bytes() if archive is sources.BMV2 else (
            github_archive(archive))  # fmt: skip
    return served


@pytest.fixture
def archives(github: dict[str, bytes]) -> Iterator[Archives]:
    server = Archives(dict(github))
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the build script in a tree with no ../shared beside it, as a user's clone."""
    repo = tmp_path / "clone"
    (repo / "scripts").mkdir(parents=True)
    for name in ("build-bmv2.sh", "debian-packages.sh", "fetch_bmv2_sources.py"):
        shutil.copy(REPO / "scripts" / name, repo / "scripts" / name)
    return repo


def make_bmv2(tree: Path, url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "ORACLE"} | {"BMV2_ARCHIVES": url, **env}
    process = subprocess.Popen(
        ["bash", "scripts/build-bmv2.sh", *args], cwd=tree, env=environment, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # it went on to build: the test has failed
        out, err = process.communicate()
        pytest.fail(f"build-bmv2.sh did not stop within 120 s:\n{out}\n{err}")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_the_recorded_digests_are_those_of_the_oracles_snapshots() -> None:
    pi = oracle_tarball("PI")
    assert sources.content_digest(oracle_tarball("behavioral-model")) == sources.BMV2.content_sha256
    assert sources.content_digest(pi, sources.submodule_paths()) == sources.PI.content_sha256
    for archive in sources.PI_SUBMODULES:
        under = str(PurePosixPath(archive.into).relative_to(sources.PI.into))
        assert sources.content_digest(pi, under=under) == archive.content_sha256, archive.repo


def test_without_shared_oracle_the_pinned_archives_are_fetched_verified_and_laid_out_as_the_oracles(
    tree: Path, archives: Archives
) -> None:
    done = make_bmv2(tree, archives.url, "--sources-only")
    assert done.returncode == 0, done.stderr
    assert sorted(archives.asked) == sorted(a.url("") for a in sources.ARCHIVES)
    for archive in sources.ARCHIVES:
        assert f"[bmv2] verified {archive.repo} {archive.commit[:12]}" in done.stdout
    made = tree / "build" / "oracle" / "archives"
    assert sorted(p.name for p in made.iterdir()) == sorted(
        [oracle_tarball("behavioral-model").name, oracle_tarball("PI").name]
    )
    # The same files as the oracle's two snapshots: PI with its submodules in their places.
    for name in ("behavioral-model", "PI"):
        assert sources.content_digest(made / oracle_tarball(name).name) == sources.content_digest(
            oracle_tarball(name)
        ), name
    assert f"[bmv2] sources: {made}/behavioral-model-" in done.stdout
    assert not (tree / "build" / "oracle" / "src").exists()  # fetched, nothing built
    # A second run finds them and fetches nothing.
    archives.asked.clear()
    again = make_bmv2(tree, archives.url, "--sources-only")
    assert again.returncode == 0 and archives.asked == [], again.stderr


def a_byte_changed(path: str, data: bytes) -> bytes:
    return data + b"\n" if path == "googletest/include/gtest/gtest.h" else data


@pytest.mark.parametrize("sources_only", [True, False])
def test_an_archive_whose_content_is_not_the_recorded_one_is_refused_and_nothing_is_built(
    tree: Path, archives: Archives, sources_only: bool
) -> None:
    googletest = sources.PI_SUBMODULES[-1]
    archives.served[googletest.url("")] = github_archive(googletest, a_byte_changed)
    done = make_bmv2(tree, archives.url, *(["--sources-only"] if sources_only else []))
    assert done.returncode == 1
    url = f"{archives.url}/google/googletest/tar.gz/{googletest.commit}"
    assert f"{url}: its content's SHA-256 is" in done.stderr
    assert f"not the {googletest.content_sha256} recorded" in done.stderr
    assert "refused, nothing is built from it" in done.stderr
    oracle = tree / "build" / "oracle"
    assert list((oracle / "archives").iterdir()) == []  # no tarball, no download left
    for built in ("src", "prefix", "bin", ".built"):
        assert not (oracle / built).exists(), built


def test_a_download_that_is_not_an_archive_is_refused(tree: Path, archives: Archives) -> None:
    archives.served[sources.BMV2.url("")] = b"<html>rate limited</html>"
    done = make_bmv2(tree, archives.url, "--sources-only")
    assert done.returncode == 1
    assert "p4lang/behavioral-model/tar.gz/" in done.stderr and "not a readable tar.gz archive" in done.stderr


def test_oracle_dir_and_then_shared_oracle_come_before_any_download(tree: Path, archives: Archives) -> None:
    mine = tree.parent / "mine"
    mine.mkdir()
    for name in ("behavioral-model", "PI"):
        (mine / oracle_tarball(name).name).symlink_to(oracle_tarball(name))
    done = make_bmv2(tree, archives.url, "--sources-only", ORACLE=str(mine))
    assert done.returncode == 0 and f"[bmv2] sources: {mine}/behavioral-model-" in done.stdout, done.stderr
    (tree.parent / "shared").mkdir()
    (tree.parent / "shared" / "oracle").symlink_to(ORACLE)
    done = make_bmv2(tree, archives.url, "--sources-only")
    shared = tree.parent / "shared" / "oracle"
    assert done.returncode == 0 and f"[bmv2] sources: {shared}/" in done.stdout, done.stderr
    assert archives.asked == []


def test_an_archive_with_a_path_outside_its_directory_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        for name in ("repo-1/README", "repo-1/../../escape"):
            member = tarfile.TarInfo(name)
            tar.addfile(member, io.BytesIO(b""))
    with pytest.raises(sources.Refused, match="outside the archive's directory"):
        sources.content_digest(bad)


def test_a_build_already_made_is_kept_when_the_archives_are_unreachable_not_when_one_is_refused(
    tree: Path, archives: Archives
) -> None:
    oracle = tree / "build" / "oracle"
    (oracle / "bin").mkdir(parents=True)
    (oracle / "bin" / "simple_switch_grpc").write_text("#!/bin/sh\n")
    (oracle / "bin" / "simple_switch_grpc").chmod(0o755)
    (oracle / ".built").write_text("behavioral-model-9674187f610c.tar.gz PI-f96af95e0906.tar.gz --with-pi\n")
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    nobody = f"http://127.0.0.1:{closed.server_address[1]}"
    closed.server_close()  # nothing listens there now
    done = make_bmv2(tree, nobody)
    assert done.returncode == 0, done.stderr
    assert "cannot download it" in done.stderr and "keeping the build" in done.stdout
    googletest = sources.PI_SUBMODULES[-1]
    archives.served[googletest.url("")] = github_archive(googletest, a_byte_changed)
    done = make_bmv2(tree, archives.url)
    assert done.returncode == 1 and "refused, nothing is built from it" in done.stderr
    assert "keeping the build" not in done.stdout
