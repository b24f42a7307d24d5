"""Is this checkout already installed with everything ``evalstop-gym[all]`` needs? (``install.sh`` asks first.)

    python tools/install_check.py [ROOT]     # exit 0: nothing to install; 1: prints what is missing

Read from ``ROOT/pyproject.toml`` (not from the installed metadata, which may be older than the file):
every requirement of the core and of the ``all`` extra, its nested extras resolved, must be installed at a
version its specifier allows, and ``evalstop-gym`` itself must be an editable install of ``ROOT`` at the
file's version with the file's scripts. Anything else (or a Python without ``tomllib``, before 3.11) means
``install.sh`` runs pip as before. Uses only the standard library and ``packaging`` (which pip itself needs).
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

NAME = "evalstop-gym"


def requirements(project: dict, extra: str = "all") -> list[str]:
    """The core requirements and those of ``extra``, with ``evalstop-gym[...]`` self-references expanded."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    extras = project.get("optional-dependencies", {})
    out, seen, todo = list(project.get("dependencies", [])), set(), [extra]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in extras.get(name, []):
            req = Requirement(text)
            if canonicalize_name(req.name) == NAME:
                todo.extend(req.extras)
            else:
                out.append(text)
    return out


def missing(root: str | Path) -> list[str]:
    """What keeps ``root`` from counting as installed (empty: nothing to do), one short phrase each."""
    try:
        import tomllib
        from packaging.requirements import Requirement
    except ModuleNotFoundError as e:
        return [f"cannot check without {e.name}"]
    root = Path(root).resolve()
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    out = []
    for text in requirements(project):
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            out.append(f"{req.name} is not installed")
            continue
        if not req.specifier.contains(have, prereleases=True):
            out.append(f"{req.name} {have} does not satisfy {req.specifier}")
    # a checkout's own egg-info (setuptools writes one beside the code) is found first when the checkout is
    # on sys.path; the install pip made is the one that recorded its source (direct_url.json)
    dists = list(metadata.distributions(name=NAME))
    if not dists:
        return [*out, f"{NAME} is not installed"]
    dist = next((d for d in dists if d.read_text("direct_url.json")), dists[0])
    url = json.loads(dist.read_text("direct_url.json") or "{}")
    if not (url.get("dir_info", {}).get("editable") and url.get("url") == root.as_uri()):
        out.append(f"{NAME} is not an editable install of {root}")
    if dist.version != project["version"]:
        out.append(f"{NAME} {dist.version} is installed, {project['version']} is here")
    scripts = {e.name: e.value for e in dist.entry_points if e.group == "console_scripts"}
    if scripts != project.get("scripts", {}):
        out.append(f"{NAME}'s installed scripts differ from pyproject.toml's")
    return out


def main(argv: list[str]) -> int:
    root = argv[0] if argv else Path(__file__).resolve().parents[1]
    gaps = missing(root)
    for gap in gaps:
        print(gap)
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
