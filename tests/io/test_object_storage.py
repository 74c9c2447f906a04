"""Repositories in object storage: real icechunk 2.x writes a repository straight into moto's S3 server
on loopback, ``zs export s3://...`` archives it with nothing but the standard ``AWS_*`` variables, and
every answer of the archive equals icechunk's. Plain HTTP (nginx) serves spec-V2 repositories, which
need no listing; wrong credentials, missing buckets and prefixes end in one line."""

from __future__ import annotations

import json
import os
import shutil
import time

import boto3
import moto.server as moto_server
import pytest
from moto import settings as moto_settings

from toolkit.agreement import check_archive
from toolkit.places import PEERS, ROOT, require_peer
from toolkit.oracle import fixtures, oracle, repo_path, run_oracle
from toolkit.servers import AZURITE_KEY, WRITE_REPO, azurite, faulty_server, free_port, gcs, nginx_server  # noqa: F401
from toolkit.cli import one_line_error, run_zs
from toolkit.peers import run_peer_json, run_peer_script
from zsarchive import RepoArchive
from zsarchive.archive import export
from zsarchive.archive.write import engine as engine_module
from zsarchive.archive.write.engine import ProcessPool
from zsarchive.errors import ZSError


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 server on loopback holding a repository real icechunk 2.x wrote into ``repos/one``,
    plus a local copy of the same objects (for icechunk's answers and a local export)."""
    python = require_peer(PEERS / "ic2" / "bin" / "python", "icechunk 2.x (Python 3.12)")
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key="secret",
    )
    client.create_bucket(Bucket="lab")
    commits = run_peer_json(
        python, WRITE_REPO, "s3", "lab", "repos/one", endpoint, env={**os.environ, "AWS_EC2_METADATA_DISABLED": "true"}
    )
    local = tmp_path_factory.mktemp("copy") / "one"
    for page in client.get_paginator("list_objects_v2").paginate(Bucket="lab", Prefix="repos/one/"):
        for item in page.get("Contents", []):
            target = local / item["Key"][len("repos/one/") :]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file("lab", item["Key"], str(target))
    yield {"endpoint": endpoint, "client": client, "local": local, "python": python, "commits": commits}
    server.stop()


@pytest.fixture
def aws_env(s3, monkeypatch):
    """Only the standard variables: key, secret, region, endpoint."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3["endpoint"])
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return s3


def test_export_from_s3_equals_icechunk_and_the_local_export(aws_env, tmp_path, monkeypatch):
    s3 = aws_env
    remote, spawned, local = tmp_path / "remote.zs", tmp_path / "spawned.zs", tmp_path / "local.zs"
    export("s3://lab/repos/one", remote, export_time=1, parallelism=2)  # few refs: decoded in this process
    pools = []
    monkeypatch.setattr(engine_module, "SPAWN_REFS", 0)  # worker processes started afresh read the bucket
    monkeypatch.setattr(engine_module, "ProcessPool", lambda *a: pools.append(ProcessPool(*a)) or pools[-1])
    export("s3://lab/repos/one", spawned, export_time=1, parallelism=2)
    assert len(pools) == 1
    export(s3["local"], local, export_time=1)
    assert remote.read_bytes() == local.read_bytes() == spawned.read_bytes()
    answers = run_oracle(s3["python"], s3["local"], {})
    check_archive(answers, remote, s3["local"], [], [])


def test_cli_export_and_chunk_data_from_s3(aws_env, tmp_path):
    archive = tmp_path / "a.zs"
    proc = run_zs("export", "s3://lab/repos/one", str(archive), "-j", "2")
    assert proc.returncode == 0, proc.stderr
    with RepoArchive(archive) as arc:
        chunk = arc.chunk_ref("main", "era5", (1, 1))
        assert chunk["kind"] == "native"
    data = run_zs("chunk", str(archive), "main", "era5", "1,1", "--data", "--repo", "s3://lab/repos/one", text=False)
    assert data.returncode == 0, data.stderr
    local = run_zs("chunk", str(archive), "main", "era5", "1,1", "--data", "--repo", str(aws_env["local"]), text=False)
    assert data.stdout == local.stdout and len(data.stdout) > 0
    inspect = run_zs("icechunk", "inspect", "s3://lab/repos/one", "--repo-info")
    assert inspect.returncode == 0, inspect.stderr
    assert set(json.loads(inspect.stdout)["branches"]) == {"main", "dev"}


def test_anonymous_export_from_a_public_read_bucket(s3, tmp_path, monkeypatch):
    client = s3["client"]
    client.create_bucket(Bucket="public")
    for path in sorted(p for p in s3["local"].rglob("*") if p.is_file()):
        client.upload_file(str(path), "public", f"one/{path.relative_to(s3['local'])}")
    client.put_bucket_policy(
        Bucket="public",
        Policy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": "*",
                        "Action": ["s3:GetObject", "s3:ListBucket"],
                        "Resource": ["arn:aws:s3:::public", "arn:aws:s3:::public/*"],
                    }
                ],
            }
        ),
    )
    env = {k: None for k in os.environ if k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=s3["endpoint"], AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    proc = run_zs("export", "--anon", "s3://public/one", str(tmp_path / "p.zs"), env=env)
    assert proc.returncode == 0, proc.stderr
    with RepoArchive(tmp_path / "p.zs") as arc:
        assert {r["name"] for r in arc.refs()} >= {"main", "dev", "v1"}


@pytest.mark.parametrize(
    "url, message",
    [
        ("s3://no-such-bucket/repos/one", "s3://no-such-bucket/repos/one/repo: no such bucket or container"),
        ("s3://lab/repos/nothing-here", "s3://lab/repos/nothing-here: not an Icechunk repository"),
    ],
)
def test_missing_bucket_or_prefix_is_one_line(aws_env, tmp_path, url, message):
    one_line_error(run_zs("export", url, str(tmp_path / "x.zs")), message)
    assert not (tmp_path / "x.zs").exists()


def test_unknown_storage_option_is_one_line(aws_env, tmp_path):
    proc = run_zs("export", "s3://lab/repos/one", str(tmp_path / "x.zs"), "--storage-option", "bogus_key=1")
    one_line_error(proc, "bad storage configuration")
    bad = run_zs("export", "s3://lab/repos/one", str(tmp_path / "x.zs"), "--storage-option", "novalue")
    assert bad.returncode == 2


def test_wrong_secret_is_refused_when_signatures_count(aws_env, tmp_path, monkeypatch):
    iam = boto3.client(
        "iam",
        endpoint_url=aws_env["endpoint"],
        region_name="us-east-1",
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key="secret",
    )
    iam.create_user(UserName="reader")
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    try:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        with pytest.raises(ZSError) as err:
            export("s3://lab/repos/one", tmp_path / "x.zs")
        assert "access denied" in str(err.value) and "\n" not in str(err.value)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDNOBODYKNOWS")
        with pytest.raises(ZSError) as err:
            export("s3://lab/repos/one", tmp_path / "x.zs")
        assert "access denied" in str(err.value)
    finally:
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
    assert not (tmp_path / "x.zs").exists()


def test_v2_repository_exports_from_plain_http(s3, nginx_server, tmp_path):
    served = nginx_server.root / "repo"
    shutil.copytree(s3["local"], served)
    remote, local = tmp_path / "http.zs", tmp_path / "local.zs"
    export(nginx_server.url("repo"), remote, export_time=1)
    export(s3["local"], local, export_time=1)
    assert remote.read_bytes() == local.read_bytes()


def test_v1_repository_over_plain_http_says_it_needs_listing(nginx_server, tmp_path):
    shutil.copytree(ROOT / "testdata" / "icechunk" / "v1", nginx_server.root / "v1")
    proc = run_zs("export", nginx_server.url("v1"), str(tmp_path / "x.zs"))
    one_line_error(proc, "spec-V1 repository needs a store that can list")


def test_export_from_azure_equals_icechunk(azurite, tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith("AZURE"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite["connection"])
    archive = tmp_path / "az.zs"
    proc = run_zs("export", "az://lab/repos/one", str(archive), "-j", "1")
    assert proc.returncode == 0, proc.stderr
    with RepoArchive(archive) as arc:
        assert {r["name"] for r in arc.refs()} >= {"main", "dev", "v1"}
        chunk = arc.chunk_ref("main", "era5", (1, 1))
    data = run_zs("chunk", str(archive), "main", "era5", "1,1", "--data", "--repo", "az://lab/repos/one", text=False)
    assert data.returncode == 0 and len(data.stdout) == chunk["length"], data.stderr
    one_line_error(run_zs("export", "az://nothere/repos/one", str(tmp_path / "x.zs")), "no such bucket or container")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite["connection"].replace(AZURITE_KEY[:8], "AAAAAAAA"))
    one_line_error(run_zs("export", "az://lab/repos/one", str(tmp_path / "x.zs")), "access denied")


@pytest.mark.parametrize("version", [1, 2])
def test_export_from_gcs_equals_icechunk(gcs, version, request, tmp_path):
    """``gs://`` read through obstore's GCS store (V1 lists the bucket; V2 needs no listing); every answer
    of the archive equals icechunk's about the same repository, and chunk bytes come from the bucket."""
    python = request.getfixturevalue(f"icechunk{version}_python")
    archive = tmp_path / "gs.zs"
    proc = run_zs(
        "export", f"gs://lab/repos/v{version}", str(archive), "--anon", "--storage-option", f"base_url={gcs}", "-j", "1"
    )
    assert proc.returncode == 0, proc.stderr
    check_archive(
        oracle(version, python),
        archive,
        repo_path(version),
        fixtures()[f"v{version}"]["deleted_tags"],
        [fixtures()["virtual"]["prefix"]],
    )
    with RepoArchive(archive) as arc:
        path = next(
            n["path"]
            for n in arc.ls("main")
            if n["node_type"] == "array" and any(c["kind"] == "native" for c in arc.chunk_refs("main", n["path"]))
        )
        chunk = next(c for c in arc.chunk_refs("main", path) if c["kind"] == "native")
    coords = ",".join(map(str, chunk["coords"]))
    data = run_zs(
        "chunk",
        str(archive),
        "main",
        path,
        coords,
        "--data",
        "--anon",
        "--storage-option",
        f"base_url={gcs}",
        "--repo",
        f"gs://lab/repos/v{version}",
        text=False,
    )
    assert data.returncode == 0, data.stderr
    expected = (repo_path(version) / "chunks" / chunk["chunk_id"]).read_bytes()
    assert data.stdout == expected[chunk["offset"] : chunk["offset"] + chunk["length"]]
    missing = run_zs(
        "export", "gs://nothere/repos/v2", str(tmp_path / "x.zs"), "--anon", "--storage-option", f"base_url={gcs}"
    )
    one_line_error(missing, "gs://nothere/repos/v2")


def test_cloud_urls_name_bucket_prefix_and_options():
    from zsarchive.io.location import parse_location
    from zsarchive.io.objects import object_store

    location = parse_location("gs://bucket/some/prefix", {"base_url": "http://127.0.0.1:9"}, anon=True)
    assert (location.kind, location.anon) == ("gs", True)
    store = object_store(location)
    assert type(store).__name__ == "GCSStore"
    assert store.prefix == "some/prefix" and store.config["bucket"] == "bucket"
    for url, kind in (("gcs://b/p", "gs"), ("abfs://c@acct.dfs.core.windows.net/p", "az"), ("s3a://b/p", "s3")):
        assert parse_location(url).kind == kind
    az = object_store(parse_location("abfs://cont@acct.dfs.core.windows.net/p/q", {"account_key": "a2V5"}))
    assert az.config["account_name"] == "acct" and az.config["container_name"] == "cont" and az.prefix == "p/q"


VIRTUAL_REPO = r"""
import sys, datetime, zarr, icechunk as ic
out, etag = sys.argv[1:3]
repo = ic.Repository.create(ic.local_filesystem_storage(out))
s = repo.writable_session("main")
zarr.group(store=s.store).create_array("v", shape=(4, 250), chunks=(1, 250), dtype="f4", compressors=None)
old = datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)
s.store.set_virtual_refs("v", [
    ic.VirtualChunkSpec(index=[0, 0], location="s3://lab/granules/g.bin", offset=0, length=1000, etag_checksum=etag),
    ic.VirtualChunkSpec(index=[1, 0], location="s3://lab/granules/g.bin", offset=1000, length=1000,
                        etag_checksum='"0123456789abcdef0123456789abcdef"'),
    ic.VirtualChunkSpec(index=[2, 0], location="s3://lab/granules/g.bin", offset=2000, length=1000,
                        last_updated_at_checksum=old),
    ic.VirtualChunkSpec(index=[3, 0], location="s3://lab/granules/g.bin", offset=3000, length=1000),
], validate_containers=False)
s.commit("virtual refs into S3")
"""


def test_virtual_chunks_in_s3_are_read_under_an_authorized_prefix_with_checksums(aws_env, tmp_path):
    granule = os.urandom(4000)
    etag = aws_env["client"].put_object(Bucket="lab", Key="granules/g.bin", Body=granule)["ETag"]
    repo = tmp_path / "virtual"
    run_peer_script(aws_env["python"], VIRTUAL_REPO, str(repo), etag)
    archive = tmp_path / "v.zs"
    export(repo, archive)
    allow = ["--authorize", "s3://lab/granules/"]
    for index in (0, 3):
        proc = run_zs("chunk", str(archive), "main", "v", f"{index},0", "--data", *allow, text=False)
        assert proc.returncode == 0 and proc.stdout == granule[1000 * index : 1000 * (index + 1)], proc.stderr
    for index, what in ((1, "ETag"), (2, "modified by 2001-01-01")):
        proc = run_zs("chunk", str(archive), "main", "v", f"{index},0", "--data", *allow)
        one_line_error(proc, f"chunk {index},0 of '/v'", "changed since the virtual ref was written", what)
    denied = run_zs("chunk", str(archive), "main", "v", "0,0", "--data", "--authorize", "s3://lab/other/")
    one_line_error(denied, "not under an authorized prefix")
    with RepoArchive(archive, authorize={"s3://lab/granules/": {"region": "us-east-1"}}) as arc:
        assert arc.chunk_data("main", "v", (3, 0)) == granule[3000:]


def test_transient_faults_are_retried_and_persistent_ones_end_in_one_line(faulty_server, tmp_path):
    source = ROOT / "testdata" / "icechunk" / "v2"
    for path in source.rglob("*"):
        if path.is_file():
            faulty_server.files[f"repo/{path.relative_to(source)}"] = path.read_bytes()
    faulty_server.faults.extend(["503", "drop", "503", None, "503"])
    export(faulty_server.url("repo"), tmp_path / "retried.zs", export_time=1)
    export(source, tmp_path / "local.zs", export_time=1)
    assert (tmp_path / "retried.zs").read_bytes() == (tmp_path / "local.zs").read_bytes()
    faulty_server.faults.extend(["503"] * 100)
    started = time.monotonic()
    one_line_error(run_zs("export", faulty_server.url("repo"), str(tmp_path / "failed.zs")), "the server kept failing")
    assert time.monotonic() - started < 90 and not (tmp_path / "failed.zs").exists()
