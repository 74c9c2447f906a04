"""The oracle's answers (scripts/icechunk_oracle.py) about a repository zsarchive wrote, made comparable
with its answers about the original: what a restore does not reproduce is left out, each for a reason."""

from __future__ import annotations

import copy


def answers_without_file_details(answers: dict, keep: set[str] | None = None) -> dict:
    """icechunk's answers less what a restore does not reproduce, each for a documented reason: the
    implementation name in file headers and a manifest's decompressed size and location compression
    (archives of format 5 and older keep none of them: their manifests are laid out with plain
    locations; format 6 gives the manifests back byte for byte), how the ops log is
    split over ``repo`` and ``overwritten/`` files (the restored one holds it whole: ``ops_log`` is
    compared), and the order of feature flags (icechunk lists them from a hash map). ``keep``: only these snapshots (those the archive holds) and
    the manifests they name."""
    out = copy.deepcopy(answers)
    for kind in ("snapshots", "manifests", "transaction_logs"):
        for entry in out.get(kind, {}).values():
            if isinstance(entry, dict):
                entry.pop("header", None)
    for entry in out.get("manifests", {}).values():
        entry.pop("size_bytes", None)
        entry.pop("compression", None)
    info = out.get("repo_info", {})
    info.pop("header", None)
    info.pop("latest_updates", None)
    info.pop("repo_before_updates", None)
    if "feature_flags" in out:
        out["feature_flags"] = sorted(out["feature_flags"], key=lambda f: f["id"])
    if keep is not None:
        for kind in ("snapshots", "trees", "transaction_logs"):
            if kind in out:
                out[kind] = {sid: v for sid, v in out[kind].items() if sid in keep}
        out["diffs"] = [d for d in out.get("diffs", []) if d["from"] in keep and d["to"] in keep]
        if "manifests" in out:  # a stray snapshot's manifests (which garbage collection may have removed) go too
            named = {m["id"] for snap in out["snapshots"].values() for m in snap.get("manifests", [])}
            out["manifests"] = {mid: v for mid, v in out["manifests"].items() if mid in named}
    return out
